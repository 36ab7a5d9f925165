package store

// SQL fragments that statements built in Go join, in runs.go and
// runs_report.go. The statements of the other files are written whole in
// sql/*.sql; these go with the last statement that joins them.

// parentWakeCTEs is appended (after a comma) to a statement that defines
// the CTEs done and touched: pstep and pwake, which record each finished
// child in its parent's CHILD step and wake the parent (see
// runs_children.go).
const parentWakeCTEs = `
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
)`

// stepWriteCTEs writes one step attempt under a lease, as stepRecordSQL
// does; statements using it take the parameters of stepWriteArgs and may
// add more.
const stepWriteCTEs = `
r AS (
	SELECT run_id, namespace_id, epoch, task_queue, trace_context, cancel_requested_at FROM kagzi.workflow_runs
	WHERE namespace_id = @ns AND run_id = @run_id AND lease_token = @tok AND status = 'RUNNING'
	FOR SHARE
), prev AS (
	UPDATE kagzi.step_runs s SET is_latest = false
	FROM r
	WHERE s.run_id = r.run_id AND s.step_id = @step_id AND s.is_latest AND s.attempt_number < @attempt
	RETURNING 1
), ins AS (
	INSERT INTO kagzi.step_runs AS s ` + stepInsertCols + `
	SELECT r.run_id, @step_id::text, @attempt::int, r.namespace_id, @kind::text, @status::text,
		NOT EXISTS (SELECT 1 FROM kagzi.step_runs l WHERE l.run_id = r.run_id AND l.step_id = @step_id AND l.attempt_number > @attempt),
		@input::bytea, @output::bytea, @error::text, @started_at::timestamptz,
		coalesce(@finished_at::timestamptz, CASE WHEN @status::text IN ('COMPLETED', 'FAILED') THEN now() END),
		@retry_at::timestamptz, @child_run_id::uuid, r.epoch, @error_type::text, @non_retryable::bool
	FROM r CROSS JOIN (SELECT count(*) FROM prev) AS flipped` + stepUpsert + `
	RETURNING 1
)`

// stepInsertCols and stepUpsert are the parts of the step insert that
// stepWriteCTEs and stepSetCTEs share, so that a report means the same
// whichever path applies it.
const (
	stepInsertCols = `(run_id, step_id, attempt_number, namespace_id, kind, status, is_latest,
		input, output, error, started_at, finished_at, retry_at, child_run_id, run_attempt, error_type, non_retryable)`
	stepUpsert = `
	ON CONFLICT (run_id, step_id, attempt_number) DO UPDATE SET
		kind = excluded.kind, status = excluded.status,
		input = coalesce(excluded.input, s.input), output = excluded.output, error = excluded.error,
		started_at = coalesce(s.started_at, excluded.started_at), finished_at = excluded.finished_at,
		retry_at = excluded.retry_at, child_run_id = coalesce(excluded.child_run_id, s.child_run_id),
		error_type = excluded.error_type, non_retryable = excluded.non_retryable
	WHERE s.status IN ('PENDING', 'RUNNING')`
)

// stepOutcomeSelect ends a statement built on stepWriteCTEs with the row
// stepOutcome reads (see stepRecordSQL).
const stepOutcomeSelect = `
SELECT (SELECT count(*) FROM r) > 0, (SELECT count(*) FROM ins) > 0,
	(SELECT status FROM kagzi.step_runs WHERE run_id = @run_id AND step_id = @step_id AND attempt_number = @attempt),
	coalesce((SELECT cancel_requested_at IS NOT NULL FROM r), false)`

// stepReports are the step reports of a set-wise statement as rows, one per
// element of the parallel arrays of stepArrays.args, with their ordinal
// (from 1). A statement may hold them as l.
const stepReports = `
	SELECT * FROM unnest(@ns::text[], @run_id::uuid[], @tok::bigint[], @step_id::text[], @attempt::int[], @kind::text[],
		@status::text[], @input::bytea[], @output::bytea[], @error::text[], @started_at::timestamptz[],
		@finished_at::timestamptz[], @retry_at::timestamptz[], @child_run_id::uuid[], @error_type::text[],
		@non_retryable::bool[])
	WITH ORDINALITY AS l(ns, run_id, tok, step_id, attempt, kind, status, input, output, error,
		started_at, finished_at, retry_at, child_run_id, error_type, non_retryable, ord)`

// stepSetCTEs write the reports of r — the rows of l (stepReports) whose
// lease held, each with its run's namespace_id, epoch and
// cancel_requested_at — as stepWriteCTEs writes one (see
// stepRecordManySQL).
const stepSetCTEs = `
prev AS (
	UPDATE kagzi.step_runs s SET is_latest = false
	FROM r
	WHERE s.run_id = r.run_id AND s.step_id = r.step_id AND s.is_latest AND s.attempt_number < r.attempt
	RETURNING 1
), ins AS (
	INSERT INTO kagzi.step_runs AS s ` + stepInsertCols + `
	SELECT r.run_id, r.step_id, r.attempt, r.namespace_id, r.kind, r.status,
		NOT EXISTS (SELECT 1 FROM kagzi.step_runs x WHERE x.run_id = r.run_id AND x.step_id = r.step_id AND x.attempt_number > r.attempt),
		r.input, r.output, r.error, r.started_at,
		coalesce(r.finished_at, CASE WHEN r.status IN ('COMPLETED', 'FAILED') THEN now() END),
		r.retry_at, r.child_run_id, r.epoch, r.error_type, r.non_retryable
	FROM r CROSS JOIN (SELECT count(*) FROM prev) AS flipped` + stepUpsert + `
	RETURNING s.run_id, s.step_id
)`

// stepSetOutcomes are the rows stepResult reads, one per report of l (see
// stepRecordManySQL).
const stepSetOutcomes = `
SELECT l.ord, l.ord IN (SELECT ord FROM r) AS held,
	(l.run_id, l.step_id) IN (SELECT run_id, step_id FROM ins) AS wrote,
	(SELECT b.status FROM kagzi.step_runs b WHERE b.run_id = l.run_id AND b.step_id = l.step_id AND b.attempt_number = l.attempt) AS before,
	l.ord IN (SELECT ord FROM r WHERE cancel_requested_at IS NOT NULL) AS cancel
FROM l`
