-- Why a run waits.

-- name: RunsWaitFacts :one
-- What says why a PENDING or SLEEPING run waits: its queue and type, the
-- time a rate limit
-- held it from, the events it waits for, whether it is an open debounced
-- run, its latest step attempt, and its type's concurrency limits with
-- the runs they count now (only where a limit is set).
SELECT r.task_queue, r.workflow_type, r.version, r.status, r.available_at, r.attempts, r.rate_key, r.rate_due_at, coalesce(r.waiting_on, '{}'),
	r.debounce_key IS NOT NULL AND r.started_at IS NULL, coalesce(r.concurrency_key, ''),
	coalesce(s.kind, ''), coalesce(s.status, ''), coalesce(s.step_id, ''), s.retry_at, s.child_run_id,
	l.max_running, l.max_per_key,
	CASE WHEN l.max_running IS NOT NULL THEN (SELECT count(*) FROM kagzi.workflow_runs x
		WHERE x.namespace_id = r.namespace_id AND x.task_queue = r.task_queue AND x.workflow_type = r.workflow_type
			AND x.status = 'RUNNING') END,
	CASE WHEN l.max_per_key IS NOT NULL AND r.concurrency_key IS NOT NULL THEN (SELECT count(*) FROM kagzi.workflow_runs x
		WHERE x.namespace_id = r.namespace_id AND x.task_queue = r.task_queue AND x.workflow_type = r.workflow_type
			AND x.concurrency_key = r.concurrency_key AND x.status = 'RUNNING') END,
	r.paused_at IS NOT NULL, coalesce(r.paused_by, ''), coalesce(r.paused_reason, ''), r.paused_due_at,
	(SELECT p.kind || ' ' || p.name || coalesce(' by ' || nullif(p.paused_by, ''), '') || coalesce(': ' || nullif(p.paused_reason, ''), '')
		FROM kagzi.pauses p WHERE p.namespace_id = r.namespace_id
			AND ((p.kind = 'queue' AND p.name = r.task_queue) OR (p.kind = 'type' AND p.name = r.workflow_type))
		ORDER BY p.kind LIMIT 1)
FROM kagzi.workflow_runs r
LEFT JOIN LATERAL (
	SELECT s.kind, s.status, s.step_id, s.retry_at, s.child_run_id FROM kagzi.step_runs s
	WHERE s.run_id = r.run_id AND s.is_latest ORDER BY s.created_at DESC LIMIT 1
) s ON true
LEFT JOIN kagzi.concurrency_limits l
	ON l.namespace_id = r.namespace_id AND l.task_queue = r.task_queue AND l.workflow_type = r.workflow_type
WHERE r.namespace_id = @namespace AND r.run_id = @id AND r.cron_expr IS NULL
