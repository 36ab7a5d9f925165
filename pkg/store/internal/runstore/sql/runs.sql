-- Runs: their creation, reads, counts, cancellation, termination and
-- manual retry.

-- name: RunsCreate :many
WITH v AS (
	SELECT * FROM unnest(@run_ids::uuid[], @namespaces::text[], @external_ids::text[], @queues::text[], @types::text[],
		@versions::text[], @available_ats::timestamptz[], @deadlines::timestamptz[], @retry_policies::jsonb[], @priorities::int[],
		@parent_run_ids::uuid[], @parent_step_ids::text[], @trace_contexts::text[], @schedule_ids::uuid[],
		@schedule_fire_ats::timestamptz[], @require_workers::boolean[], @inputs::bytea[],
		@concurrency_keys::text[], @rate_keys::text[])
		AS v(run_id, namespace_id, external_id, task_queue, workflow_type, version, available_at, deadline_at,
		retry_policy, priority, parent_run_id, parent_step_id, trace_context, schedule_id, schedule_fire_at, require_worker, input,
		concurrency_key, rate_key)
), chk AS (
	SELECT bool_and(kagzi.require_worker(EXISTS (SELECT 1 FROM kagzi.workers w WHERE w.status IN ('ONLINE', 'DRAINING') AND w.namespace_id = g.namespace_id AND w.task_queue = g.task_queue AND w.workflow_types @> jsonb_build_array(CASE WHEN g.version = '' THEN jsonb_build_object('type', g.workflow_type) ELSE jsonb_build_object('type', g.workflow_type, 'version', g.version) END)),
		g.namespace_id, g.task_queue, g.workflow_type, g.version)) AS ok
	FROM (SELECT DISTINCT namespace_id, task_queue, workflow_type, version FROM v WHERE require_worker) g
), r AS (
	INSERT INTO kagzi.workflow_runs AS r (run_id, namespace_id, external_id, task_queue, workflow_type, version,
		status, available_at, deadline_at, retry_policy, priority, parent_run_id, parent_step_id, trace_context,
		schedule_id, schedule_fire_at, concurrency_key, rate_key, input)
	SELECT run_id, namespace_id, external_id, task_queue, workflow_type,
		coalesce(nullif(v.version, ''), (SELECT d.version FROM kagzi.workflow_defaults d
		WHERE d.namespace_id = v.namespace_id AND d.workflow_type = v.workflow_type), ''), 'PENDING',
		coalesce(available_at, now()), deadline_at, retry_policy, priority, parent_run_id, parent_step_id, trace_context,
		schedule_id, schedule_fire_at, concurrency_key, rate_key, input
	FROM v WHERE (SELECT ok FROM chk) IS NOT FALSE
	ON CONFLICT DO NOTHING
	RETURNING r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch
)
SELECT * FROM r

-- name: RunsFindConflict :one
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, r.input FROM kagzi.workflow_runs r
WHERE r.namespace_id = @namespace AND (
	(@external_id::text IS NOT NULL AND r.external_id = @external_id AND r.status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED'))
	OR (@schedule_id::uuid IS NOT NULL AND r.schedule_id = @schedule_id AND r.schedule_fire_at = @schedule_fire_at)
	OR r.run_id = @run_id)
LIMIT 1

-- name: RunsGet :one
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, r.input, r.output, r.continued_as, coalesce(r.debounce_key, ''), coalesce(r.debounce_starts, 0),
	coalesce(r.concurrency_key, ''), coalesce(r.rate_key, ''), r.paused_at, coalesce(r.paused_by, ''), coalesce(r.paused_reason, '')
FROM kagzi.workflow_runs r
WHERE r.namespace_id = @namespace AND r.run_id = @run_id

-- name: RunsGetByExternalID :one
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch FROM kagzi.workflow_runs r
WHERE r.namespace_id = @namespace AND r.external_id = @external_id
ORDER BY (r.status IN ('COMPLETED', 'FAILED', 'CANCELLED')), r.created_at DESC LIMIT 1

-- name: RunsCount :many
SELECT status, count(*) FROM kagzi.workflow_runs WHERE namespace_id = @namespace GROUP BY status

-- name: RunsCancel :one
WITH RECURSIVE tree AS (
	SELECT run_id FROM kagzi.workflow_runs WHERE namespace_id = @namespace AND run_id = @run_id AND status IN ('PENDING', 'RUNNING', 'SLEEPING')
	UNION
	SELECT c.run_id FROM kagzi.workflow_runs c JOIN tree t ON c.parent_run_id = t.run_id
	WHERE coalesce(c.parent_close_policy, 'TERMINATE') <> 'ABANDON'
), x AS (
	SELECT r.run_id, r.status = 'PENDING' AND r.started_at IS NULL AS unstarted FROM kagzi.workflow_runs r
	JOIN tree USING (run_id) WHERE r.status IN ('PENDING', 'RUNNING', 'SLEEPING')
	ORDER BY r.run_id
	FOR NO KEY UPDATE OF r
), u AS (
	UPDATE kagzi.workflow_runs r SET
		cancel_requested_at = coalesce(r.cancel_requested_at, now()),
		status = CASE WHEN x.unstarted THEN 'CANCELLED' ELSE r.status END,
		finished_at = CASE WHEN x.unstarted THEN now() ELSE r.finished_at END,
		error = CASE WHEN x.unstarted THEN CASE WHEN r.run_id = @run_id THEN 'cancelled' ELSE 'parent cancelled' END ELSE r.error END,
		waiting_on = CASE WHEN x.unstarted THEN NULL ELSE r.waiting_on END,
		available_at = CASE WHEN x.unstarted THEN NULL WHEN r.status IN ('PENDING', 'SLEEPING') THEN now() ELSE r.available_at END
	FROM x WHERE r.run_id = x.run_id
	RETURNING r.*
), done AS (
	SELECT run_id, parent_run_id, parent_step_id, status, error, NULL::bytea AS output FROM u WHERE status = 'CANCELLED'
), touched AS (
	SELECT run_id FROM u
),
pstep AS (
	UPDATE kagzi.step_runs s SET
		status = CASE WHEN d.status = 'COMPLETED' THEN 'COMPLETED' ELSE 'FAILED' END,
		output = d.output,
		error = CASE WHEN d.status = 'COMPLETED' THEN NULL
			ELSE 'child run ' || d.run_id || ' ' || lower(d.status) || coalesce(': ' || d.error, '') END,
		error_type = CASE d.status WHEN 'FAILED' THEN 'ChildFailed' WHEN 'CANCELLED' THEN 'ChildCancelled' END,
		finished_at = now()
	FROM done d
	WHERE d.parent_run_id IS NOT NULL AND s.run_id = d.parent_run_id AND s.step_id = d.parent_step_id
	  AND s.is_latest AND s.kind = 'CHILD' AND s.child_run_id = d.run_id AND s.status IN ('PENDING', 'RUNNING')
	RETURNING 1
), pwake AS (
	UPDATE kagzi.workflow_runs p SET
		waiting_on = kagzi.array_minus(p.waiting_on, f.steps),
		available_at = CASE WHEN p.status = 'SLEEPING' AND p.waiting_on IS NOT NULL
			AND kagzi.array_minus(p.waiting_on, f.steps) IS NULL THEN now() ELSE p.available_at END
	FROM (SELECT parent_run_id, array_agg(parent_step_id) AS steps FROM done
		WHERE parent_run_id IS NOT NULL GROUP BY parent_run_id) f
	WHERE p.run_id = f.parent_run_id AND p.run_id NOT IN (SELECT run_id FROM touched)
	RETURNING 1
)
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch FROM u r WHERE r.run_id = @run_id

-- name: RunsTerminate :one
WITH u AS (
	UPDATE kagzi.workflow_runs r SET status = 'CANCELLED', finished_at = now(), available_at = NULL,
		lease_expires_at = NULL, waiting_on = NULL, error = @error
	WHERE r.namespace_id = @namespace AND r.run_id = @run_id AND r.status IN ('PENDING', 'RUNNING', 'SLEEPING')
	RETURNING r.*
), done AS (
	SELECT run_id, parent_run_id, parent_step_id, status, error, NULL::bytea AS output FROM u
), touched AS (
	SELECT run_id FROM u
),
pstep AS (
	UPDATE kagzi.step_runs s SET
		status = CASE WHEN d.status = 'COMPLETED' THEN 'COMPLETED' ELSE 'FAILED' END,
		output = d.output,
		error = CASE WHEN d.status = 'COMPLETED' THEN NULL
			ELSE 'child run ' || d.run_id || ' ' || lower(d.status) || coalesce(': ' || d.error, '') END,
		error_type = CASE d.status WHEN 'FAILED' THEN 'ChildFailed' WHEN 'CANCELLED' THEN 'ChildCancelled' END,
		finished_at = now()
	FROM done d
	WHERE d.parent_run_id IS NOT NULL AND s.run_id = d.parent_run_id AND s.step_id = d.parent_step_id
	  AND s.is_latest AND s.kind = 'CHILD' AND s.child_run_id = d.run_id AND s.status IN ('PENDING', 'RUNNING')
	RETURNING 1
), pwake AS (
	UPDATE kagzi.workflow_runs p SET
		waiting_on = kagzi.array_minus(p.waiting_on, f.steps),
		available_at = CASE WHEN p.status = 'SLEEPING' AND p.waiting_on IS NOT NULL
			AND kagzi.array_minus(p.waiting_on, f.steps) IS NULL THEN now() ELSE p.available_at END
	FROM (SELECT parent_run_id, array_agg(parent_step_id) AS steps FROM done
		WHERE parent_run_id IS NOT NULL GROUP BY parent_run_id) f
	WHERE p.run_id = f.parent_run_id AND p.run_id NOT IN (SELECT run_id FROM touched)
	RETURNING 1
)
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch FROM u r

-- name: RunsRetry :one
WITH u AS (
	UPDATE kagzi.workflow_runs r SET status = 'PENDING', attempts = 0, epoch = 1, error = NULL, finished_at = NULL,
		available_at = now(), locked_by = NULL, lease_expires_at = NULL, waiting_on = NULL,
		deadline_at = CASE WHEN r.deadline_at <= now() THEN NULL ELSE r.deadline_at END,
		trace_context = coalesce(r.trace_context, @trace_context)
	WHERE r.namespace_id = @namespace AND r.run_id = @run_id AND r.status = 'FAILED'
	RETURNING r.*
), epoch AS (
	UPDATE kagzi.step_runs s SET run_attempt = NULL FROM u WHERE s.run_id = u.run_id AND s.run_attempt IS NOT NULL
)
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch FROM u r

-- name: RunsQueueDepths :many
WITH d AS (
	SELECT namespace_id, task_queue, workflow_type, version, count(*) AS n, min(available_at) AS oldest FROM kagzi.workflow_runs
	WHERE status IN ('PENDING', 'SLEEPING') AND available_at <= now()
	GROUP BY namespace_id, task_queue, workflow_type, version
), q AS (
	SELECT namespace_id, task_queue, sum(n)::bigint AS due,
		coalesce(sum(n) FILTER (WHERE NOT EXISTS (SELECT 1 FROM kagzi.workers w WHERE w.status IN ('ONLINE', 'DRAINING') AND w.namespace_id = d.namespace_id AND w.task_queue = d.task_queue AND w.workflow_types @> jsonb_build_array(CASE WHEN d.version = '' THEN jsonb_build_object('type', d.workflow_type) ELSE jsonb_build_object('type', d.workflow_type, 'version', d.version) END))), 0)::bigint AS unserved,
		min(oldest) AS oldest
	FROM d GROUP BY namespace_id, task_queue
)
SELECT namespace_id, task_queue, due, unserved, oldest FROM q
UNION ALL
SELECT DISTINCT w.namespace_id, w.task_queue, 0::bigint, 0::bigint, NULL::timestamptz FROM kagzi.workers w
WHERE w.status <> 'OFFLINE'
	AND NOT EXISTS (SELECT 1 FROM q WHERE q.namespace_id = w.namespace_id AND q.task_queue = w.task_queue)
