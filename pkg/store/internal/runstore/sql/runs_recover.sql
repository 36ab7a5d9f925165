-- Runs taken back from a holder that went away, deadlines, and the
-- heartbeats that keep leases alive.

-- name: RunsRecoverWorkerPick :many
SELECT run_id, attempts, retry_policy FROM kagzi.workflow_runs WHERE status = 'RUNNING' AND locked_by = @worker_id

-- name: RunsExpireLeasesPick :many
WITH RECURSIVE h AS (
	(SELECT locked_by, lease_expires_at AS first FROM kagzi.workflow_runs
	WHERE status = 'RUNNING' ORDER BY locked_by, lease_expires_at LIMIT 1)
	UNION ALL
	SELECT n.locked_by, n.first FROM h CROSS JOIN LATERAL (
		SELECT locked_by, lease_expires_at AS first FROM kagzi.workflow_runs
		WHERE status = 'RUNNING' AND locked_by > h.locked_by
		ORDER BY locked_by, lease_expires_at LIMIT 1) n
)
SELECT run_id, attempts, retry_policy FROM kagzi.workflow_runs
WHERE status = 'RUNNING' AND locked_by = ANY(ARRAY(SELECT locked_by FROM h WHERE first <= @now)) AND lease_expires_at <= @now

-- name: RunsRecoverWorker :many
WITH v AS (
	SELECT * FROM unnest(@run_ids::uuid[], @attempts::int[], @exhausted::boolean[], @delay_ms::float8[])
		AS v(run_id, attempts, exhausted, delay_ms)
), t AS (
	SELECT r.run_id, r.held OR r.run_id = ANY(@received::uuid[]) AS held, v.exhausted, v.delay_ms
	FROM v JOIN kagzi.workflow_runs r ON r.run_id = v.run_id AND r.attempts = v.attempts
	WHERE r.status = 'RUNNING' AND r.locked_by = @worker_id
	FOR UPDATE OF r SKIP LOCKED
), u AS (
	UPDATE kagzi.workflow_runs r0 SET
	locked_by = NULL, lease_expires_at = NULL, held = false,
	error = CASE WHEN t.held THEN @error ELSE r0.error END,
	status = CASE WHEN t.held AND t.exhausted THEN 'FAILED' ELSE 'PENDING' END,
	finished_at = CASE WHEN t.held AND t.exhausted THEN now() END,
	attempts = CASE WHEN t.held AND NOT t.exhausted THEN r0.attempts + 1 ELSE r0.attempts END,
	available_at = CASE WHEN NOT t.held THEN now() WHEN t.exhausted THEN NULL
		ELSE now() + t.delay_ms * interval '1 millisecond' END
	FROM t
	WHERE r0.run_id = t.run_id
	RETURNING r0.namespace_id, r0.run_id, r0.task_queue, r0.status, r0.available_at, r0.parent_run_id, r0.parent_step_id, r0.error,
		NOT t.held AS undelivered
), done AS (
	SELECT run_id, parent_run_id, parent_step_id, status, error, NULL::bytea AS output FROM u WHERE status = 'FAILED'
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
SELECT namespace_id, run_id, task_queue, status, available_at, undelivered FROM u

-- name: RunsExpireLeases :many
WITH v AS (
	SELECT * FROM unnest(@run_ids::uuid[], @attempts::int[], @exhausted::boolean[], @delay_ms::float8[])
		AS v(run_id, attempts, exhausted, delay_ms)
), t AS (
	SELECT r.run_id, r.held OR r.run_id = ANY(@received::uuid[]) AS held, v.exhausted, v.delay_ms
	FROM v JOIN kagzi.workflow_runs r ON r.run_id = v.run_id AND r.attempts = v.attempts
	WHERE r.status = 'RUNNING' AND r.lease_expires_at <= @now
	FOR UPDATE OF r SKIP LOCKED
), u AS (
	UPDATE kagzi.workflow_runs r0 SET
	locked_by = NULL, lease_expires_at = NULL, held = false,
	error = CASE WHEN t.held THEN @error ELSE r0.error END,
	status = CASE WHEN t.held AND t.exhausted THEN 'FAILED' ELSE 'PENDING' END,
	finished_at = CASE WHEN t.held AND t.exhausted THEN now() END,
	attempts = CASE WHEN t.held AND NOT t.exhausted THEN r0.attempts + 1 ELSE r0.attempts END,
	available_at = CASE WHEN NOT t.held THEN now() WHEN t.exhausted THEN NULL
		ELSE now() + t.delay_ms * interval '1 millisecond' END
	FROM t
	WHERE r0.run_id = t.run_id
	RETURNING r0.namespace_id, r0.run_id, r0.task_queue, r0.status, r0.available_at, r0.parent_run_id, r0.parent_step_id, r0.error,
		NOT t.held AS undelivered
), done AS (
	SELECT run_id, parent_run_id, parent_step_id, status, error, NULL::bytea AS output FROM u WHERE status = 'FAILED'
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
SELECT namespace_id, run_id, task_queue, status, available_at, undelivered FROM u

-- name: RunsNextLeaseExpiry :one
WITH RECURSIVE h AS (
	(SELECT locked_by, lease_expires_at AS first FROM kagzi.workflow_runs
	WHERE status = 'RUNNING' ORDER BY locked_by, lease_expires_at LIMIT 1)
	UNION ALL
	SELECT n.locked_by, n.first FROM h CROSS JOIN LATERAL (
		SELECT locked_by, lease_expires_at AS first FROM kagzi.workflow_runs
		WHERE status = 'RUNNING' AND locked_by > h.locked_by
		ORDER BY locked_by, lease_expires_at LIMIT 1) n
) SELECT min(first) FROM h

-- name: RunsFailPastDeadline :many
WITH u AS (
	UPDATE kagzi.workflow_runs r SET status = 'FAILED', finished_at = now(), available_at = NULL,
		lease_expires_at = NULL, error = @error
	WHERE r.run_id IN (
		SELECT run_id FROM kagzi.workflow_runs
		WHERE deadline_at IS NOT NULL AND deadline_at <= @now AND status IN ('PENDING', 'RUNNING', 'SLEEPING')
		FOR UPDATE SKIP LOCKED)
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

-- name: RunsNextDeadline :one
SELECT min(deadline_at) FROM kagzi.workflow_runs WHERE deadline_at IS NOT NULL AND status IN ('PENDING', 'RUNNING', 'SLEEPING')

-- name: RunsExtendLeases :one
WITH w AS (
	SELECT * FROM unnest(@worker_ids::uuid[], @untils::timestamptz[]) AS w(worker_id, until)
), held AS (
	SELECT * FROM unnest(@run_worker_ids::uuid[], @run_ids::uuid[]) AS h(worker_id, run_id)
), lk AS (
	SELECT r.run_id, w.until FROM kagzi.workflow_runs r
	JOIN held ON held.run_id = r.run_id AND held.worker_id = r.locked_by
	JOIN w ON w.worker_id = held.worker_id
	WHERE r.status = 'RUNNING'
	FOR NO KEY UPDATE OF r SKIP LOCKED
), ext AS (
	UPDATE kagzi.workflow_runs r SET lease_expires_at = greatest(r.lease_expires_at, lk.until), held = true
	FROM lk WHERE r.run_id = lk.run_id
	RETURNING r.run_id
), stray AS (
	SELECT r.run_id FROM kagzi.workflow_runs r JOIN w ON r.locked_by = w.worker_id
	WHERE r.status = 'RUNNING'
	  AND r.lease_expires_at < w.until - @grace_ms * interval '1 millisecond'
	  AND NOT EXISTS (SELECT 1 FROM held WHERE held.run_id = r.run_id AND held.worker_id = w.worker_id)
	FOR NO KEY UPDATE OF r SKIP LOCKED
), rel AS (
	UPDATE kagzi.workflow_runs r SET status = 'PENDING', available_at = now(), locked_by = NULL, lease_expires_at = NULL
	FROM stray WHERE r.run_id = stray.run_id
	RETURNING r.run_id
)
SELECT (SELECT count(*) FROM ext), (SELECT count(*) FROM rel)
