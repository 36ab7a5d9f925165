-- A worker's reports on the runs it holds: each applies under the run's
-- lease (status RUNNING and the lease token the claim gave).
--
-- A statement that joins a batch (its arrays) with workflow_runs compares
-- the status with a column of the batch, `running`, in a MATERIALIZED
-- CTE, not with the constant 'RUNNING'. The constant lets the planner
-- reach the runs through workflow_runs_lease_idx (partial: status =
-- 'RUNNING'), reading every running run for each report, whenever its
-- statistics make running runs look few, as they do at any table size
-- (RUNNING is a rare value). They are also sent with sequential scans off
-- (QueryByKey, ExecByKey in core/bykey.go): the primary key is then their
-- only way in. TestReportsReachRunsByKey checks it.

-- name: RunsLeaseCheck :one
SELECT status, lease_token FROM kagzi.workflow_runs WHERE namespace_id = @namespace AND run_id = @run_id

-- name: RunsComplete :many
WITH c AS MATERIALIZED (
	SELECT *, 'RUNNING'::text AS running FROM unnest(@c_ns::text[], @c_run_id::uuid[], @c_tok::bigint[], @c_output::bytea[], @c_seen::bigint[])
		AS c(ns, run_id, tok, output, seen)
), u AS (
	UPDATE kagzi.workflow_runs w SET status = 'COMPLETED', finished_at = now(), lease_expires_at = NULL, error = NULL,
		output = c.output FROM c
	WHERE w.namespace_id = c.ns AND w.run_id = c.run_id AND w.lease_token = c.tok AND w.status = c.running
	  AND (c.seen IS NULL OR w.event_seq = c.seen)
	RETURNING w.run_id, w.parent_run_id, w.parent_step_id, w.status, w.error, w.workflow_type

), done AS (
	SELECT u.run_id, u.parent_run_id, u.parent_step_id, u.status, u.error, c.output FROM u JOIN c USING (run_id)
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
SELECT 'c', 0::bigint, run_id::text, workflow_type, false, false, NULL::text, false FROM u

-- name: RunsCompleteWithSteps :many
WITH c AS MATERIALIZED (
	SELECT *, 'RUNNING'::text AS running FROM unnest(@c_ns::text[], @c_run_id::uuid[], @c_tok::bigint[], @c_output::bytea[], @c_seen::bigint[])
		AS c(ns, run_id, tok, output, seen)
), k AS (
	SELECT w.run_id, w.namespace_id, w.epoch, w.cancel_requested_at, c.tok, c.output, c.seen FROM c JOIN kagzi.workflow_runs w
		ON w.namespace_id = c.ns AND w.run_id = c.run_id AND w.lease_token = c.tok AND w.status = c.running
	ORDER BY w.run_id
	FOR NO KEY UPDATE OF w
), l AS (
	SELECT * FROM unnest(@ns::text[], @run_id::uuid[], @tok::bigint[], @step_id::text[], @attempt::int[], @kind::text[],
		@status::text[], @input::bytea[], @output::bytea[], @error::text[], @started_at::timestamptz[],
		@finished_at::timestamptz[], @retry_at::timestamptz[], @child_run_id::uuid[], @error_type::text[],
		@non_retryable::bool[])
	WITH ORDINALITY AS l(ns, run_id, tok, step_id, attempt, kind, status, input, output, error,
		started_at, finished_at, retry_at, child_run_id, error_type, non_retryable, ord)
), r AS (
	SELECT l.*, k.namespace_id, k.epoch, k.cancel_requested_at FROM l JOIN k ON k.run_id = l.run_id AND k.tok = l.tok
),
prev AS (
	UPDATE kagzi.step_runs s SET is_latest = false
	FROM r
	WHERE s.run_id = r.run_id AND s.step_id = r.step_id AND s.is_latest AND s.attempt_number < r.attempt
	RETURNING 1
), ins AS (
	INSERT INTO kagzi.step_runs AS s (run_id, step_id, attempt_number, namespace_id, kind, status, is_latest,
		input, output, error, started_at, finished_at, retry_at, child_run_id, run_attempt, error_type, non_retryable)
	SELECT r.run_id, r.step_id, r.attempt, r.namespace_id, r.kind, r.status,
		NOT EXISTS (SELECT 1 FROM kagzi.step_runs x WHERE x.run_id = r.run_id AND x.step_id = r.step_id AND x.attempt_number > r.attempt),
		r.input, r.output, r.error, r.started_at,
		coalesce(r.finished_at, CASE WHEN r.status IN ('COMPLETED', 'FAILED') THEN now() END),
		r.retry_at, r.child_run_id, r.epoch, r.error_type, r.non_retryable
	FROM r CROSS JOIN (SELECT count(*) FROM prev) AS flipped
	ON CONFLICT (run_id, step_id, attempt_number) DO UPDATE SET
		kind = excluded.kind, status = excluded.status,
		input = coalesce(excluded.input, s.input), output = excluded.output, error = excluded.error,
		started_at = coalesce(s.started_at, excluded.started_at), finished_at = excluded.finished_at,
		retry_at = excluded.retry_at, child_run_id = coalesce(excluded.child_run_id, s.child_run_id),
		error_type = excluded.error_type, non_retryable = excluded.non_retryable
	WHERE s.status IN ('PENDING', 'RUNNING')
	RETURNING s.run_id, s.step_id
), so AS (
SELECT l.ord, l.ord IN (SELECT ord FROM r) AS held,
	(l.run_id, l.step_id) IN (SELECT run_id, step_id FROM ins) AS wrote,
	(SELECT b.status FROM kagzi.step_runs b WHERE b.run_id = l.run_id AND b.step_id = l.step_id AND b.attempt_number = l.attempt) AS before,
	l.ord IN (SELECT ord FROM r WHERE cancel_requested_at IS NOT NULL) AS cancel
FROM l
), bad AS (
	SELECT l.run_id FROM so JOIN l USING (ord)
	WHERE NOT (so.held AND (so.wrote OR so.before IS NULL OR so.before = l.status OR l.status NOT IN ('COMPLETED', 'FAILED')))
), u AS (
	UPDATE kagzi.workflow_runs w SET status = 'COMPLETED', finished_at = now(), lease_expires_at = NULL, error = NULL,
		output = k.output FROM k
	WHERE w.namespace_id = k.namespace_id AND w.run_id = k.run_id AND k.run_id NOT IN (SELECT run_id FROM bad)
	  AND (k.seen IS NULL OR w.event_seq = k.seen)
	RETURNING w.run_id, w.parent_run_id, w.parent_step_id, w.status, w.error, w.workflow_type

), done AS (
	SELECT u.run_id, u.parent_run_id, u.parent_step_id, u.status, u.error, c.output FROM u JOIN c USING (run_id)
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
SELECT 'c', 0::bigint, run_id::text, workflow_type, false, false, NULL::text, false FROM u
UNION ALL
SELECT 's', ord, NULL::text, NULL::text, held, wrote, before, cancel FROM so

-- name: RunsFail :one
WITH r AS (
	UPDATE kagzi.workflow_runs SET status = 'FAILED', finished_at = now(), lease_expires_at = NULL, error = @error

WHERE namespace_id = @namespace AND run_id = @run_id AND lease_token = @token AND status = 'RUNNING'
	RETURNING run_id, parent_run_id, parent_step_id, status, error
), done AS (
	SELECT r.*, NULL::bytea AS output FROM r
), touched AS (
	SELECT run_id FROM r
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
SELECT count(*) FROM r

-- name: RunsFailAttempt :one
WITH u AS (
	UPDATE kagzi.workflow_runs r SET
	locked_by = NULL, lease_expires_at = NULL,
	error = @error,
	status = CASE WHEN r.cancel_requested_at IS NOT NULL THEN 'CANCELLED' WHEN @final::boolean THEN 'FAILED' ELSE 'PENDING' END,
	finished_at = CASE WHEN @final::boolean OR r.cancel_requested_at IS NOT NULL THEN now() END,
	attempts = CASE WHEN @final::boolean OR r.cancel_requested_at IS NOT NULL THEN r.attempts ELSE r.attempts + 1 END,
	epoch = CASE WHEN @final::boolean OR r.cancel_requested_at IS NOT NULL THEN r.epoch ELSE r.epoch + 1 END,
	available_at = CASE WHEN @final::boolean OR r.cancel_requested_at IS NOT NULL THEN NULL
		ELSE now() + @delay_ms::float8 * interval '1 millisecond' END
	WHERE r.namespace_id = @ns AND r.run_id = @run_id AND r.lease_token = @tok AND r.status = 'RUNNING' AND r.attempts = @attempts
	RETURNING r.run_id, r.parent_run_id, r.parent_step_id, r.status, r.error, r.available_at, r.workflow_type
), done AS (
	SELECT run_id, parent_run_id, parent_step_id, status, error, NULL::bytea AS output FROM u WHERE status IN ('FAILED', 'CANCELLED')
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
SELECT status, available_at, workflow_type FROM u

-- name: RunsFailAttemptRead :one
SELECT status, lease_token, available_at, attempts, retry_policy FROM kagzi.workflow_runs WHERE namespace_id = @ns AND run_id = @run_id

-- name: RunsSleep :exec
UPDATE kagzi.workflow_runs SET status = 'SLEEPING',
	available_at = CASE WHEN cancel_requested_at IS NOT NULL AND NOT cancel_delivered THEN now() ELSE @until::timestamptz END,
	locked_by = NULL, lease_expires_at = NULL
WHERE namespace_id = @namespace AND run_id = @run_id AND lease_token = @token AND status = 'RUNNING'

-- name: RunsRetryAt :exec
UPDATE kagzi.workflow_runs SET status = 'PENDING', available_at = @at, attempts = attempts + 1,
	locked_by = NULL, lease_expires_at = NULL, error = @error
WHERE namespace_id = @namespace AND run_id = @run_id AND lease_token = @token AND status = 'RUNNING'

-- name: RunsReleaseMany :exec
WITH l AS MATERIALIZED (
	SELECT *, 'RUNNING'::text AS running FROM unnest(@ns::text[], @run_id::uuid[], @tok::bigint[]) AS l(ns, run_id, tok)
)
UPDATE kagzi.workflow_runs r SET status = 'PENDING', available_at = now(), locked_by = NULL, lease_expires_at = NULL
FROM l
WHERE r.namespace_id = l.ns AND r.run_id = l.run_id AND r.lease_token = l.tok AND r.status = l.running

-- name: RunsPauseRelease :exec
-- Paused RUNNING runs whose step was just recorded give their lease back:
-- due now, which the hold_paused trigger keeps in paused_due_at. The
-- lease token is left as it is; the holder's next report is refused.
WITH l AS MATERIALIZED (
	SELECT *, 'RUNNING'::text AS running FROM unnest(@ns::text[], @run_id::uuid[], @tok::bigint[]) AS l(ns, run_id, tok)
)
UPDATE kagzi.workflow_runs r SET status = 'PENDING', available_at = now(), locked_by = NULL, lease_expires_at = NULL
FROM l
WHERE r.namespace_id = l.ns AND r.run_id = l.run_id AND r.lease_token = l.tok AND r.status = l.running
	AND r.paused_at IS NOT NULL
