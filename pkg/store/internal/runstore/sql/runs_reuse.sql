-- Starts under an id reuse policy, serialised per external id.

-- name: RunsReuseLock :exec
SELECT pg_advisory_xact_lock(@class::int, hashtext(@namespace::text || chr(10) || @external_id::text));

-- name: RunsReuseLive :one
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, r.input FROM kagzi.workflow_runs r
WHERE r.namespace_id = @namespace AND r.external_id = @external_id AND r.status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED');

-- name: RunsReuseLastEnded :one
SELECT run_id, status, finished_at FROM kagzi.workflow_runs
WHERE namespace_id = @namespace AND external_id = @external_id AND status IN ('COMPLETED', 'FAILED', 'CANCELLED')
	AND (@window::interval IS NULL OR finished_at > now() - @window::interval)
ORDER BY finished_at DESC LIMIT 1;
