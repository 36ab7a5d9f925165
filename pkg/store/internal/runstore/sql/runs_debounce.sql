-- Debounced starts: many starts of one key make one run.

-- name: RunsDebounce :one
WITH chk AS (
	SELECT kagzi.require_worker(EXISTS (SELECT 1 FROM kagzi.workers w
			WHERE w.status IN ('ONLINE', 'DRAINING') AND w.namespace_id = @namespace::text AND w.task_queue = @queue::text
			  AND w.workflow_types @> jsonb_build_array(CASE WHEN @version::text = '' THEN jsonb_build_object('type', @type::text)
				ELSE jsonb_build_object('type', @type::text, 'version', @version::text) END)),
		@namespace::text, @queue::text, @type::text, @version::text) AS ok
	WHERE @require_worker::boolean
), r AS (
	INSERT INTO kagzi.workflow_runs AS r (run_id, namespace_id, task_queue, workflow_type, version, status,
		available_at, deadline_at, retry_policy, priority, trace_context, debounce_key, debounce_starts, concurrency_key, rate_key, input)
	SELECT @run_id::uuid, @namespace::text, @queue::text, @type::text,
		coalesce(nullif(@version::text, ''), (SELECT d.version FROM kagzi.workflow_defaults d
		WHERE d.namespace_id = @namespace::text AND d.workflow_type = @type::text), ''), 'PENDING', now() + @window::interval,
		@deadline::timestamptz, @retry_policy::jsonb, @priority::int, @trace_context::text, @key::text, 1,
		@concurrency_key::text, @rate_key::text, @input::bytea
	WHERE (SELECT ok FROM chk) IS NOT FALSE
	ON CONFLICT (namespace_id, workflow_type, debounce_key)
		WHERE debounce_key IS NOT NULL AND status = 'PENDING' AND started_at IS NULL
	DO UPDATE SET
		available_at = least(greatest(r.available_at, now() + @window::interval), r.created_at + @max_wait::interval),
		debounce_starts = r.debounce_starts + 1,
		input = CASE WHEN @keep_last::boolean THEN excluded.input ELSE r.input END
	RETURNING r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
		r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
		r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
		coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
		r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
		r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch
)
SELECT * FROM r;
