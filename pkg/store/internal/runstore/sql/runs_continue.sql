-- A run that ends and starts its continuation in one statement.

-- name: RunsContinueAsNew :one
WITH o AS (
	UPDATE kagzi.workflow_runs SET status = 'COMPLETED', finished_at = now(), lease_expires_at = NULL, error = NULL,
		continued_as = @new_run_id, output = 'null'::bytea
	WHERE namespace_id = @namespace AND run_id = @run_id AND lease_token = @token AND status = 'RUNNING'
	  AND parent_run_id IS NULL AND (@seen::bigint IS NULL OR event_seq = @seen)
	RETURNING namespace_id, external_id, task_queue, workflow_type, retry_policy, priority, trace_context, concurrency_key, rate_key
), n AS (
	INSERT INTO kagzi.workflow_runs (run_id, namespace_id, external_id, task_queue, workflow_type, version,
		status, available_at, retry_policy, priority, trace_context, concurrency_key, rate_key, input)
	SELECT @new_run_id, o.namespace_id, o.external_id, o.task_queue, o.workflow_type,
		coalesce(nullif('', ''), (SELECT d.version FROM kagzi.workflow_defaults d
		WHERE d.namespace_id = o.namespace_id AND d.workflow_type = o.workflow_type), ''), 'PENDING', now(), o.retry_policy, o.priority,
		CASE WHEN o.trace_context LIKE '%-01' THEN left(o.trace_context, length(o.trace_context) - 2) || '03' ELSE o.trace_context END,
		o.concurrency_key, o.rate_key, @input::bytea
	FROM o
	RETURNING run_id, created_at
), a AS (
	-- The new run keeps the search attributes of the one it continues.
	INSERT INTO kagzi.run_attributes (namespace_id, run_id, name, v_text, v_int, v_float, v_bool, v_time, created_at)
	SELECT x.namespace_id, n.run_id, x.name, x.v_text, x.v_int, x.v_float, x.v_bool, x.v_time, n.created_at
	FROM kagzi.run_attributes x, n WHERE x.run_id = @run_id
)
SELECT o.workflow_type FROM n, o;

-- name: RunsContinueAsNewState :one
SELECT status, lease_token, parent_run_id, continued_as FROM kagzi.workflow_runs
WHERE namespace_id = @namespace AND run_id = @run_id;
