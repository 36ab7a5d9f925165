-- Child runs and suspension: a parent starts a child as its CHILD step,
-- and a run suspends until its timer, its children or an awaited event.

-- name: RunsWaitLock :one
SELECT 1 FROM kagzi.workflow_runs
WHERE namespace_id = @namespace AND run_id = @run_id AND lease_token = @token AND status = 'RUNNING'
FOR NO KEY UPDATE;

-- name: RunsWait :batch
WITH ev AS (
	SELECT coalesce(bool_or(EXISTS (SELECT 1 FROM kagzi.workflow_events e
			WHERE e.run_id = s.run_id AND e.name = convert_from(s.input, 'UTF8') AND e.consumed_at IS NULL)), false) AS ready,
		min(s.retry_at) AS due
	FROM kagzi.step_runs s
	WHERE s.run_id = @run_id AND s.is_latest AND s.kind = 'EVENT' AND s.status IN ('PENDING', 'RUNNING')
), ch AS (
	SELECT array_agg(s.step_id) AS ids FROM kagzi.step_runs s
	WHERE s.run_id = @run_id AND s.is_latest AND s.kind = 'CHILD' AND s.status IN ('PENDING', 'RUNNING')
	  AND s.step_id = ANY(@child_steps::text[])
), u AS (
	UPDATE kagzi.workflow_runs w SET status = 'SLEEPING', locked_by = NULL, lease_expires_at = NULL,
		waiting_on = ch.ids,
		available_at = CASE WHEN ev.ready OR (cardinality(@child_steps::text[]) > 0 AND ch.ids IS NULL)
			OR (w.cancel_requested_at IS NOT NULL AND NOT w.cancel_delivered) THEN now() ELSE least(@until::timestamptz, ev.due) END
	FROM ev CROSS JOIN ch
	WHERE w.namespace_id = @namespace AND w.run_id = @run_id AND w.lease_token = @token AND w.status = 'RUNNING'
	RETURNING w.available_at IS NOT NULL AND w.available_at <= now() AS ready
)
SELECT count(*), coalesce(bool_or(ready), false) FROM u;

-- name: RunsChildStart :one
WITH r AS (
	SELECT run_id, namespace_id, epoch, task_queue, trace_context, cancel_requested_at FROM kagzi.workflow_runs
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
), c AS (
	INSERT INTO kagzi.workflow_runs (run_id, namespace_id, task_queue, workflow_type, version, status, available_at,
		retry_policy, priority, parent_run_id, parent_step_id, trace_context, parent_close_policy, input)
	SELECT @child_run_id::uuid, r.namespace_id, coalesce(nullif(@child_queue::text, ''), r.task_queue), @child_type::text,
		coalesce(nullif(@child_version::text, ''), (SELECT d.version FROM kagzi.workflow_defaults d
		WHERE d.namespace_id = r.namespace_id AND d.workflow_type = @child_type::text), ''), 'PENDING', now(),
		@child_policy::jsonb, @child_priority::int, r.run_id, @step_id::text, coalesce(r.trace_context, @child_trace::text), nullif(@child_close::text, ''),
		@child_input::bytea
	FROM r
	ON CONFLICT DO NOTHING
	RETURNING run_id
)
SELECT (SELECT count(*) FROM r) > 0, (SELECT count(*) FROM ins) > 0,
	(SELECT status FROM kagzi.step_runs WHERE run_id = @run_id AND step_id = @step_id AND attempt_number = @attempt),
	coalesce((SELECT cancel_requested_at IS NOT NULL FROM r), false);
