-- Forks: a new run that replays an earlier run's steps up to a chosen one.

-- name: RunsFork :many
WITH v AS (
	SELECT * FROM unnest(@from_ids::uuid[], @steps::text[], @new_ids::uuid[], @versions::text[], @trace_contexts::text[])
		WITH ORDINALITY AS v(from_id, step, new_id, version, trace_context, ord)
), o AS (
	SELECT v.*, r.namespace_id, r.task_queue, r.workflow_type, r.version AS from_version, r.retry_policy, r.priority,
		r.concurrency_key, r.rate_key, r.input,
		(SELECT min(s.created_at) FROM kagzi.step_runs s WHERE s.run_id = v.from_id AND s.step_id = v.step) AS cut
	FROM v JOIN kagzi.workflow_runs r ON r.run_id = v.from_id AND r.namespace_id = @namespace AND r.cron_expr IS NULL
), ins AS (
	INSERT INTO kagzi.workflow_runs AS r (run_id, namespace_id, task_queue, workflow_type, version, status, available_at,
		retry_policy, priority, trace_context, forked_from, forked_at_step, concurrency_key, rate_key, input)
	SELECT o.new_id, o.namespace_id, o.task_queue, o.workflow_type,
		coalesce(nullif(o.version, ''), coalesce(nullif(o.from_version, ''), (SELECT d.version FROM kagzi.workflow_defaults d
		WHERE d.namespace_id = o.namespace_id AND d.workflow_type = o.workflow_type), '')),
		'PENDING', now(), o.retry_policy, o.priority, o.trace_context, o.from_id, o.step, o.concurrency_key, o.rate_key, o.input
	FROM o WHERE o.step = '' OR o.cut IS NOT NULL
	ORDER BY o.from_id, o.step
	ON CONFLICT (forked_from, forked_at_step) WHERE forked_from IS NOT NULL DO NOTHING
	RETURNING r.run_id, r.forked_from, r.forked_at_step, r.created_at
), at AS (
	-- A fork keeps the search attributes of the run it was forked from.
	INSERT INTO kagzi.run_attributes (namespace_id, run_id, name, v_text, v_int, v_float, v_bool, v_time, created_at)
	SELECT x.namespace_id, ins.run_id, x.name, x.v_text, x.v_int, x.v_float, x.v_bool, x.v_time, ins.created_at
	FROM ins JOIN kagzi.run_attributes x ON x.run_id = ins.forked_from
), st AS (
	INSERT INTO kagzi.step_runs (run_id, step_id, attempt_number, namespace_id, kind, status, is_latest, input, output,
		created_at, started_at, finished_at, child_run_id, run_attempt)
	SELECT ins.run_id, s.step_id, s.attempt_number, s.namespace_id, s.kind, s.status, true, s.input, s.output,
		s.created_at, s.started_at, s.finished_at, s.child_run_id, NULL
	FROM ins JOIN o ON o.from_id = ins.forked_from AND o.step = ins.forked_at_step
	JOIN kagzi.step_runs s ON s.run_id = ins.forked_from AND s.is_latest AND s.status = 'COMPLETED'
		AND s.step_id <> o.step AND s.created_at < o.cut
	WHERE o.step <> ''
)
SELECT v.ord, o.from_id IS NOT NULL, (o.step = '' OR o.cut IS NOT NULL) IS TRUE, ins.run_id
FROM v LEFT JOIN o USING (ord) LEFT JOIN ins ON ins.forked_from = v.from_id AND ins.forked_at_step = v.step
ORDER BY v.ord;

-- name: RunsForkFind :many
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, r.forked_from, r.forked_at_step, r.input
FROM kagzi.workflow_runs r
JOIN unnest(@from_ids::uuid[], @steps::text[]) AS v(from_id, step) ON r.forked_from = v.from_id AND r.forked_at_step = v.step
WHERE r.namespace_id = @namespace;

-- name: RunsForkSelect :many
SELECT r.run_id, CASE WHEN @from_failed THEN coalesce(fs.step_id, '') ELSE @step END,
	@step = '' OR @from_failed OR EXISTS (SELECT 1 FROM kagzi.step_runs s WHERE s.run_id = r.run_id AND s.step_id = @step)
FROM kagzi.workflow_runs r
LEFT JOIN LATERAL (
	SELECT s.step_id, coalesce(s.error_type, '') AS step_error_type FROM kagzi.step_runs s
	WHERE s.run_id = r.run_id AND s.is_latest AND s.status = 'FAILED'
	ORDER BY s.created_at DESC, s.step_id LIMIT 1
) fs ON true
WHERE r.namespace_id = @namespace AND r.status = @status AND r.cron_expr IS NULL
	AND (@type = '' OR r.workflow_type = @type)
	AND (@run_id::uuid IS NULL OR r.run_id = @run_id)
	AND (@after::timestamptz IS NULL OR r.finished_at >= @after)
	AND (@before::timestamptz IS NULL OR r.finished_at < @before)
	AND (@error_group = '' OR left(regexp_replace(regexp_replace(regexp_replace(coalesce(error, ''),
	'[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}', '<id>', 'g'), '"[^"]*"', '"…"', 'g'), '[0-9]+', '<n>', 'g'), 300) = @error_group)
	AND (@error_type = '' OR fs.step_error_type = @error_type)
ORDER BY r.finished_at DESC NULLS LAST, r.run_id DESC
LIMIT @limit;

-- name: RunsForkLinks :many
SELECT r.forked_from, coalesce(r.forked_at_step, ''), f.run_id, f.forked_at_step, f.status, f.created_at
FROM kagzi.workflow_runs r
LEFT JOIN kagzi.workflow_runs f ON f.forked_from = r.run_id AND f.namespace_id = r.namespace_id
WHERE r.namespace_id = @namespace AND r.run_id = @run_id
ORDER BY f.created_at, f.run_id;
