-- The claim: the statements that pick due runs and lease them to a worker,
-- and the reads that say when a queue has runs due.

-- name: RunsClaim :many
WITH c AS (
	SELECT run_id, available_at AS due_at, false AS limited FROM kagzi.workflow_runs
	WHERE namespace_id = @namespace AND task_queue = @queue AND status IN ('PENDING', 'SLEEPING') AND available_at <= now()
	  AND workflow_type = ANY(@types::text[])
	  AND (version = '' OR workflow_type || '@' || version = ANY(@type_versions::text[]))
	  AND NOT EXISTS (SELECT 1 FROM kagzi.concurrency_limits l
		WHERE l.namespace_id = @namespace AND l.task_queue = @queue AND l.workflow_type = ANY(@types::text[]))
	  AND NOT EXISTS (SELECT 1 FROM kagzi.workflow_runs k
		WHERE k.namespace_id = @namespace AND k.task_queue = @queue AND k.rate_key IS NOT NULL
		  AND k.status IN ('PENDING', 'SLEEPING') AND k.available_at <= now() AND k.workflow_type = ANY(@types::text[]))
	  AND NOT EXISTS (SELECT 1 FROM kagzi.pauses p WHERE p.namespace_id = @namespace
		AND ((p.kind = 'queue' AND p.name = @queue) OR (p.kind = 'type' AND p.name = ANY(@types::text[]))))
	ORDER BY priority DESC, (started_at IS NULL OR rate_key IS NOT NULL), available_at
	LIMIT @limit
	FOR UPDATE SKIP LOCKED
)
UPDATE kagzi.workflow_runs r SET status = 'RUNNING', locked_by = @worker_id, lease_token = r.lease_token + 1,
	lease_expires_at = now() + @lease_ms * interval '1 millisecond', available_at = NULL, waiting_on = NULL, limited = c.limited, held = false,
	attempts = greatest(r.attempts, 1), started_at = coalesce(r.started_at, now()),
	cancel_delivered = r.cancel_requested_at IS NOT NULL,
	version = CASE WHEN r.version = '' THEN (@versions::text[])[array_position(@types::text[], r.workflow_type)] ELSE r.version END
FROM c LEFT JOIN LATERAL (
	SELECT array_agg(s.step_id) AS ids, array_agg(s.status) AS statuses, array_agg(s.attempt_number) AS attempts,
		array_agg(CASE WHEN octet_length(s.output) <= @inline_bytes THEN s.output ELSE ''::bytea END) AS outputs,
		array_agg(CASE WHEN octet_length(s.output) > @inline_bytes THEN octet_length(s.output) ELSE 0 END) AS output_sizes,
		array_agg(coalesce(s.error, '')) AS errs,
		array_agg(coalesce(s.error_type, '')) AS error_types, array_agg(s.retry_at) AS retry_ats,
		array_agg(coalesce(s.run_attempt, 0)) AS run_attempts, array_agg(s.non_retryable) AS non_retryables,
		array_agg(CASE WHEN s.status = 'FAILED' THEN (SELECT count(*) FROM kagzi.step_runs x
			WHERE x.run_id = s.run_id AND x.step_id = s.step_id AND x.run_attempt = s.run_attempt) ELSE 0 END) AS tries,
		array_agg(CASE WHEN s.status = 'FAILED' THEN (SELECT x.retry_override FROM kagzi.step_runs x
			WHERE x.run_id = s.run_id AND x.step_id = s.step_id AND x.run_attempt = s.run_attempt AND x.retry_override IS NOT NULL
			ORDER BY x.attempt_number DESC LIMIT 1) END) AS overrides
	FROM (SELECT * FROM kagzi.step_runs s WHERE s.run_id = c.run_id AND s.is_latest ORDER BY s.step_id) s
) st ON true
WHERE r.run_id = c.run_id
RETURNING r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, c.due_at,
	CASE WHEN octet_length(r.input) <= @inline_bytes THEN r.input END,
	coalesce(CASE WHEN octet_length(r.input) > @inline_bytes THEN octet_length(r.input) END, 0),
	st.ids, st.statuses, st.attempts, st.outputs, st.output_sizes, st.errs, st.error_types, st.retry_ats, st.run_attempts, st.tries,
	st.non_retryables, r.event_seq, st.overrides

-- name: RunsClaimLimited :many
WITH lim AS (
	SELECT t AS workflow_type, kagzi.claim_slots(@namespace, @queue, t) AS free FROM unnest(@limited_types::text[]) AS t
	WHERE NOT EXISTS (SELECT 1 FROM kagzi.pauses p WHERE p.namespace_id = @namespace
		AND ((p.kind = 'queue' AND p.name = @queue) OR (p.kind = 'type' AND p.name = ANY(@types::text[]))))
), c1 AS (
	SELECT run_id, priority, (started_at IS NULL OR rate_key IS NOT NULL) AS fresh, available_at, false AS limited FROM kagzi.workflow_runs
	WHERE namespace_id = @namespace AND task_queue = @queue AND status IN ('PENDING', 'SLEEPING') AND available_at <= now()
	  AND workflow_type = ANY(@types::text[]) AND workflow_type <> ALL (@limited_types::text[])
	  AND (version = '' OR workflow_type || '@' || version = ANY(@type_versions::text[])) AND rate_key IS NULL
	  AND NOT EXISTS (SELECT 1 FROM kagzi.pauses p WHERE p.namespace_id = @namespace
		AND ((p.kind = 'queue' AND p.name = @queue) OR (p.kind = 'type' AND p.name = ANY(@types::text[]))))
	ORDER BY priority DESC, (started_at IS NULL OR rate_key IS NOT NULL), available_at
	LIMIT @limit
	FOR UPDATE SKIP LOCKED
), c2 AS (
	SELECT x.run_id, x.priority, x.fresh, x.available_at, true AS limited FROM lim CROSS JOIN LATERAL (
		SELECT run_id, priority, (started_at IS NULL OR rate_key IS NOT NULL) AS fresh, available_at FROM kagzi.workflow_runs
		WHERE namespace_id = @namespace AND task_queue = @queue AND status IN ('PENDING', 'SLEEPING') AND available_at <= now()
		  AND workflow_type = lim.workflow_type
		  AND (version = '' OR workflow_type || '@' || version = ANY(@type_versions::text[])) AND rate_key IS NULL
		ORDER BY priority DESC, (started_at IS NULL OR rate_key IS NOT NULL), available_at
		LIMIT least(coalesce(lim.free, @limit), @limit)
		FOR UPDATE SKIP LOCKED
	) x
), c AS (
	SELECT run_id, available_at AS due_at, limited FROM (SELECT * FROM c1 UNION ALL SELECT * FROM c2) u
	ORDER BY priority DESC, fresh, available_at
	LIMIT @limit
)
UPDATE kagzi.workflow_runs r SET status = 'RUNNING', locked_by = @worker_id, lease_token = r.lease_token + 1,
	lease_expires_at = now() + @lease_ms * interval '1 millisecond', available_at = NULL, waiting_on = NULL, limited = c.limited, held = false,
	attempts = greatest(r.attempts, 1), started_at = coalesce(r.started_at, now()),
	cancel_delivered = r.cancel_requested_at IS NOT NULL,
	version = CASE WHEN r.version = '' THEN (@versions::text[])[array_position(@types::text[], r.workflow_type)] ELSE r.version END
FROM c LEFT JOIN LATERAL (
	SELECT array_agg(s.step_id) AS ids, array_agg(s.status) AS statuses, array_agg(s.attempt_number) AS attempts,
		array_agg(CASE WHEN octet_length(s.output) <= @inline_bytes THEN s.output ELSE ''::bytea END) AS outputs,
		array_agg(CASE WHEN octet_length(s.output) > @inline_bytes THEN octet_length(s.output) ELSE 0 END) AS output_sizes,
		array_agg(coalesce(s.error, '')) AS errs,
		array_agg(coalesce(s.error_type, '')) AS error_types, array_agg(s.retry_at) AS retry_ats,
		array_agg(coalesce(s.run_attempt, 0)) AS run_attempts, array_agg(s.non_retryable) AS non_retryables,
		array_agg(CASE WHEN s.status = 'FAILED' THEN (SELECT count(*) FROM kagzi.step_runs x
			WHERE x.run_id = s.run_id AND x.step_id = s.step_id AND x.run_attempt = s.run_attempt) ELSE 0 END) AS tries,
		array_agg(CASE WHEN s.status = 'FAILED' THEN (SELECT x.retry_override FROM kagzi.step_runs x
			WHERE x.run_id = s.run_id AND x.step_id = s.step_id AND x.run_attempt = s.run_attempt AND x.retry_override IS NOT NULL
			ORDER BY x.attempt_number DESC LIMIT 1) END) AS overrides
	FROM (SELECT * FROM kagzi.step_runs s WHERE s.run_id = c.run_id AND s.is_latest ORDER BY s.step_id) s
) st ON true
WHERE r.run_id = c.run_id
RETURNING r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, c.due_at,
	CASE WHEN octet_length(r.input) <= @inline_bytes THEN r.input END,
	coalesce(CASE WHEN octet_length(r.input) > @inline_bytes THEN octet_length(r.input) END, 0),
	st.ids, st.statuses, st.attempts, st.outputs, st.output_sizes, st.errs, st.error_types, st.retry_ats, st.run_attempts, st.tries,
	st.non_retryables, r.event_seq, st.overrides

-- name: RunsClaimRoute :one
SELECT coalesce(array_agg(workflow_type), '{}'), coalesce(bool_or(max_per_key IS NOT NULL), false),
	EXISTS (SELECT 1 FROM kagzi.workflow_runs k
		WHERE k.namespace_id = @namespace AND k.task_queue = @queue AND k.rate_key IS NOT NULL
		  AND k.status IN ('PENDING', 'SLEEPING') AND k.available_at <= now() AND k.workflow_type = ANY(@types::text[])),
	EXISTS (SELECT 1 FROM kagzi.pauses p WHERE p.namespace_id = @namespace AND p.kind = 'queue' AND p.name = @queue),
	(SELECT coalesce(array_agg(p.name), '{}') FROM kagzi.pauses p
		WHERE p.namespace_id = @namespace AND p.kind = 'type' AND p.name = ANY(@types::text[]))
FROM kagzi.concurrency_limits
WHERE namespace_id = @namespace AND task_queue = @queue AND workflow_type = ANY(@types::text[])

-- name: RunsClaimFlowPick :exec
SELECT count(*) FROM kagzi.claim_flow(@namespace, @queue, @types::text[], @type_versions::text[], @limit::int)

-- name: RunsClaimFlow :many
WITH c AS (
	SELECT (e->>0)::uuid AS run_id, (e->>1)::timestamptz AS due_at, (e->>2)::boolean AS limited
	FROM json_array_elements(coalesce(nullif(current_setting('kagzi.flow_taken', true), ''), '[]')::json) e
)
UPDATE kagzi.workflow_runs r SET status = 'RUNNING', locked_by = @worker_id, lease_token = r.lease_token + 1,
	lease_expires_at = now() + @lease_ms * interval '1 millisecond', available_at = NULL, waiting_on = NULL, limited = c.limited, held = false,
	rate_due_at = NULL, attempts = greatest(r.attempts, 1), started_at = coalesce(r.started_at, now()),
	cancel_delivered = r.cancel_requested_at IS NOT NULL,
	version = CASE WHEN r.version = '' THEN (@versions::text[])[array_position(@types::text[], r.workflow_type)] ELSE r.version END
FROM c LEFT JOIN LATERAL (
	SELECT array_agg(s.step_id) AS ids, array_agg(s.status) AS statuses, array_agg(s.attempt_number) AS attempts,
		array_agg(CASE WHEN octet_length(s.output) <= @inline_bytes THEN s.output ELSE ''::bytea END) AS outputs,
		array_agg(CASE WHEN octet_length(s.output) > @inline_bytes THEN octet_length(s.output) ELSE 0 END) AS output_sizes,
		array_agg(coalesce(s.error, '')) AS errs,
		array_agg(coalesce(s.error_type, '')) AS error_types, array_agg(s.retry_at) AS retry_ats,
		array_agg(coalesce(s.run_attempt, 0)) AS run_attempts, array_agg(s.non_retryable) AS non_retryables,
		array_agg(CASE WHEN s.status = 'FAILED' THEN (SELECT count(*) FROM kagzi.step_runs x
			WHERE x.run_id = s.run_id AND x.step_id = s.step_id AND x.run_attempt = s.run_attempt) ELSE 0 END) AS tries,
		array_agg(CASE WHEN s.status = 'FAILED' THEN (SELECT x.retry_override FROM kagzi.step_runs x
			WHERE x.run_id = s.run_id AND x.step_id = s.step_id AND x.run_attempt = s.run_attempt AND x.retry_override IS NOT NULL
			ORDER BY x.attempt_number DESC LIMIT 1) END) AS overrides
	FROM (SELECT * FROM kagzi.step_runs s WHERE s.run_id = c.run_id AND s.is_latest ORDER BY s.step_id) s
) st ON true
WHERE r.run_id = c.run_id
RETURNING r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, c.due_at,
	CASE WHEN octet_length(r.input) <= @inline_bytes THEN r.input END,
	coalesce(CASE WHEN octet_length(r.input) > @inline_bytes THEN octet_length(r.input) END, 0),
	st.ids, st.statuses, st.attempts, st.outputs, st.output_sizes, st.errs, st.error_types, st.retry_ats, st.run_attempts, st.tries,
	st.non_retryables, r.event_seq, st.overrides

-- name: RunsClaimFlowStats :one
SELECT coalesce(nullif(current_setting('kagzi.flow_key_full', true), ''), '0')::int,
	coalesce(nullif(current_setting('kagzi.flow_rate_held', true), ''), '0')::int

-- name: RunsNextDue :one
WITH RECURSIVE p AS (
	(SELECT priority FROM kagzi.workflow_runs
	WHERE namespace_id = @namespace AND task_queue = @queue AND status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL
	ORDER BY priority DESC, (started_at IS NULL OR rate_key IS NOT NULL), available_at LIMIT 1)
	UNION ALL
	SELECT n.priority FROM p CROSS JOIN LATERAL (
		SELECT priority FROM kagzi.workflow_runs
		WHERE namespace_id = @namespace AND task_queue = @queue AND status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL
		  AND priority < p.priority
		ORDER BY priority DESC, (started_at IS NULL OR rate_key IS NOT NULL), available_at LIMIT 1) n
), g AS (
	SELECT p.priority, x.fresh, f.first FROM p CROSS JOIN (VALUES (false), (true)) x(fresh) CROSS JOIN LATERAL (
		SELECT available_at AS first FROM kagzi.workflow_runs
		WHERE namespace_id = @namespace AND task_queue = @queue AND status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL
		  AND priority = p.priority AND (started_at IS NULL OR rate_key IS NOT NULL) = x.fresh
		ORDER BY available_at LIMIT 1) f
)
SELECT min(CASE WHEN g.first > now() THEN g.first ELSE f.at END), coalesce(bool_or(g.first <= now()), false)
FROM g LEFT JOIN LATERAL (
	SELECT available_at AS at FROM kagzi.workflow_runs
	WHERE g.first <= now() AND namespace_id = @namespace AND task_queue = @queue AND status IN ('PENDING', 'SLEEPING')
	  AND priority = g.priority AND (started_at IS NULL OR rate_key IS NOT NULL) = g.fresh AND available_at > now()
	ORDER BY available_at LIMIT 1) f ON true
WHERE NOT EXISTS (SELECT 1 FROM kagzi.pauses p WHERE p.namespace_id = @namespace AND p.kind = 'queue' AND p.name = @queue)

-- name: RunsQueuesDue :many
SELECT namespace_id, task_queue, min(available_at) FROM kagzi.workflow_runs
WHERE status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL
GROUP BY namespace_id, task_queue

-- name: ClaimsStuckTerminate :one
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'
  AND wait_event_type = 'Client' AND wait_event = 'ClientWrite'
  AND (query LIKE '%kagzi.claim_flow(%' OR query LIKE '%kagzi.flow_taken%' OR query LIKE '%kagzi.claim_slots(%')
  AND query_start < clock_timestamp() - make_interval(secs => @after_ms::float8 / 1000)
