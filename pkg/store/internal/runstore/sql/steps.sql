-- Step attempts recorded under a run's lease, and read back.

-- name: StepsRecord :one
WITH r AS (
	SELECT run_id, namespace_id, epoch, task_queue, trace_context, cancel_requested_at, paused_at FROM kagzi.workflow_runs
	WHERE namespace_id = @ns AND run_id = @run_id AND lease_token = @tok AND status = 'RUNNING'
	FOR SHARE
), prev AS (
	UPDATE kagzi.step_runs s SET is_latest = false
	FROM r
	WHERE s.run_id = r.run_id AND s.step_id = @step_id AND s.is_latest AND s.attempt_number < @attempt
	RETURNING 1
), ins AS (
	INSERT INTO kagzi.step_runs AS s (run_id, step_id, attempt_number, namespace_id, kind, status, is_latest,
		input, output, error, started_at, finished_at, retry_at, child_run_id, run_attempt, error_type, non_retryable)
	SELECT r.run_id, @step_id::text, @attempt::int, r.namespace_id, @kind::text, @status::text,
		NOT EXISTS (SELECT 1 FROM kagzi.step_runs l WHERE l.run_id = r.run_id AND l.step_id = @step_id AND l.attempt_number > @attempt),
		@input::bytea, @output::bytea, @error::text, @started_at::timestamptz,
		coalesce(@finished_at::timestamptz, CASE WHEN @status::text IN ('COMPLETED', 'FAILED') THEN now() END),
		@retry_at::timestamptz, @child_run_id::uuid, r.epoch, @error_type::text, @non_retryable::bool
	FROM r CROSS JOIN (SELECT count(*) FROM prev) AS flipped
	ON CONFLICT (run_id, step_id, attempt_number) DO UPDATE SET
		kind = excluded.kind, status = excluded.status,
		input = coalesce(excluded.input, s.input), output = excluded.output, error = excluded.error,
		started_at = coalesce(s.started_at, excluded.started_at), finished_at = excluded.finished_at,
		retry_at = excluded.retry_at, child_run_id = coalesce(excluded.child_run_id, s.child_run_id),
		error_type = excluded.error_type, non_retryable = excluded.non_retryable
	WHERE s.status IN ('PENDING', 'RUNNING')
	RETURNING 1
)
SELECT (SELECT count(*) FROM r) > 0, (SELECT count(*) FROM ins) > 0,
	(SELECT status FROM kagzi.step_runs WHERE run_id = @run_id AND step_id = @step_id AND attempt_number = @attempt),
	coalesce((SELECT cancel_requested_at IS NOT NULL FROM r), false),
	coalesce((SELECT paused_at IS NOT NULL FROM r), false);

-- name: StepsRecordMany :many
WITH l AS MATERIALIZED (
	-- running: compared with the run's status as a column, not a constant
	-- (runs_report.sql says why).
	SELECT *, 'RUNNING'::text AS running FROM unnest(@ns::text[], @run_id::uuid[], @tok::bigint[], @step_id::text[], @attempt::int[], @kind::text[],
		@status::text[], @input::bytea[], @output::bytea[], @error::text[], @started_at::timestamptz[],
		@finished_at::timestamptz[], @retry_at::timestamptz[], @child_run_id::uuid[], @error_type::text[],
		@non_retryable::bool[])
	WITH ORDINALITY AS l(ns, run_id, tok, step_id, attempt, kind, status, input, output, error,
		started_at, finished_at, retry_at, child_run_id, error_type, non_retryable, ord)
), r AS (
	SELECT l.*, w.namespace_id, w.epoch, w.cancel_requested_at, w.paused_at FROM l JOIN kagzi.workflow_runs w
		ON w.namespace_id = l.ns AND w.run_id = l.run_id AND w.lease_token = l.tok AND w.status = l.running
	ORDER BY w.run_id
	FOR SHARE OF w
), prev AS (
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
)
SELECT l.ord, l.ord IN (SELECT ord FROM r) AS held,
	(l.run_id, l.step_id) IN (SELECT run_id, step_id FROM ins) AS wrote,
	(SELECT b.status FROM kagzi.step_runs b WHERE b.run_id = l.run_id AND b.step_id = l.step_id AND b.attempt_number = l.attempt) AS before,
	l.ord IN (SELECT ord FROM r WHERE cancel_requested_at IS NOT NULL) AS cancel,
	l.ord IN (SELECT ord FROM r WHERE paused_at IS NOT NULL) AS paused
FROM l;

-- name: StepsLeaseFailed :one
SELECT r.status, r.lease_token, s.status FROM kagzi.workflow_runs r
LEFT JOIN kagzi.step_runs s ON s.run_id = r.run_id AND s.step_id = @step_id AND s.attempt_number = @attempt
WHERE r.namespace_id = @ns AND r.run_id = @run_id;

-- name: StepsList :many
SELECT s.step_id IS NOT NULL, s.run_id, s.step_id, s.attempt_number, s.namespace_id, s.kind, s.status, s.is_latest,
	s.input, s.output, coalesce(s.error, ''), s.created_at, s.started_at, s.finished_at, s.retry_at, s.child_run_id,
	coalesce(s.run_attempt, 0), coalesce(s.error_type, ''), s.non_retryable FROM kagzi.workflow_runs r
LEFT JOIN kagzi.step_runs s ON s.run_id = r.run_id
WHERE r.namespace_id = @ns AND r.run_id = @run_id
ORDER BY s.created_at, s.step_id, s.attempt_number;

-- name: StepsLatest :many
SELECT run_id, step_id, status, attempt_number, output, coalesce(error, ''), coalesce(error_type, ''), retry_at,
	coalesce(run_attempt, 0), non_retryable FROM kagzi.step_runs
WHERE run_id = ANY(@run_ids::uuid[]) AND is_latest AND namespace_id = @ns
ORDER BY run_id, step_id;
