-- Search attributes of runs: RunsCreate with the attributes of the runs
-- it inserts, in the same statement (a start without attributes runs
-- RunsCreate itself, unchanged). The insert of a run's attributes apart
-- from its start, and their removal, are core's (sql/attributes.sql there).

-- name: RunsCreateAttributes :many
WITH v AS (
	SELECT * FROM unnest(@run_ids::uuid[], @namespaces::text[], @external_ids::text[], @queues::text[], @types::text[],
		@versions::text[], @available_ats::timestamptz[], @deadlines::timestamptz[], @retry_policies::jsonb[], @priorities::int[],
		@parent_run_ids::uuid[], @parent_step_ids::text[], @trace_contexts::text[], @schedule_ids::uuid[],
		@schedule_fire_ats::timestamptz[], @require_workers::boolean[], @inputs::bytea[],
		@concurrency_keys::text[], @rate_keys::text[])
		AS v(run_id, namespace_id, external_id, task_queue, workflow_type, version, available_at, deadline_at,
		retry_policy, priority, parent_run_id, parent_step_id, trace_context, schedule_id, schedule_fire_at, require_worker, input,
		concurrency_key, rate_key)
), chk AS (
	SELECT bool_and(kagzi.require_worker(EXISTS (SELECT 1 FROM kagzi.workers w WHERE w.status IN ('ONLINE', 'DRAINING') AND w.namespace_id = g.namespace_id AND w.task_queue = g.task_queue AND w.workflow_types @> jsonb_build_array(CASE WHEN g.version = '' THEN jsonb_build_object('type', g.workflow_type) ELSE jsonb_build_object('type', g.workflow_type, 'version', g.version) END)),
		g.namespace_id, g.task_queue, g.workflow_type, g.version)) AS ok
	FROM (SELECT DISTINCT namespace_id, task_queue, workflow_type, version FROM v WHERE require_worker) g
), r AS (
	INSERT INTO kagzi.workflow_runs AS r (run_id, namespace_id, external_id, task_queue, workflow_type, version,
		status, available_at, deadline_at, retry_policy, priority, parent_run_id, parent_step_id, trace_context,
		schedule_id, schedule_fire_at, concurrency_key, rate_key, input)
	SELECT run_id, namespace_id, external_id, task_queue, workflow_type,
		coalesce(nullif(v.version, ''), (SELECT d.version FROM kagzi.workflow_defaults d
		WHERE d.namespace_id = v.namespace_id AND d.workflow_type = v.workflow_type), ''), 'PENDING',
		coalesce(available_at, now()), deadline_at, retry_policy, priority, parent_run_id, parent_step_id, trace_context,
		schedule_id, schedule_fire_at, concurrency_key, rate_key, input
	FROM v WHERE (SELECT ok FROM chk) IS NOT FALSE
	ON CONFLICT DO NOTHING
	RETURNING r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch
), a AS (
	-- The search attributes of the runs inserted (none for most runs: the
	-- arrays are empty).
	INSERT INTO kagzi.run_attributes (namespace_id, run_id, name, v_text, v_int, v_float, v_bool, v_time, created_at)
	SELECT r.namespace_id, r.run_id, x.name, x.v_text, x.v_int, x.v_float, x.v_bool, x.v_time, r.created_at
	FROM unnest(@attr_run_ids::uuid[], @attr_names::text[], @attr_texts::text[], @attr_ints::bigint[],
		@attr_floats::float8[], @attr_bools::boolean[], @attr_times::timestamptz[])
		AS x(run_id, name, v_text, v_int, v_float, v_bool, v_time)
	JOIN r ON r.run_id = x.run_id
)
SELECT * FROM r
