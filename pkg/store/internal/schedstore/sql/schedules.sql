-- Schedules: the templates of workflow_runs (status SCHEDULED or PAUSED)
-- that fire runs on a cron, and the instances they fire. A statement that
-- returns a schedule returns a run's columns (scanRun's) and the
-- template's, in scanSchedule's order. An instance's version is the
-- template's, else the type's default version (as a start's).
--
-- SchedulesFire advances many schedules and creates their instances in one
-- statement; SchedulesBackfill creates instances without moving the
-- template's next fire time. SchedulesLock, the guard of every overlap
-- fire, locks a template still due at @due; SchedulesBuffer sets the fire
-- it holds as a fire leaves it and ends an early due time, and
-- SchedulesBackfillBuffer as a backfill leaves it. SchedulesLive lists a
-- schedule's live instances (the partial index of migration 015). A
-- template's search attributes are rows of kagzi.run_attributes under its
-- id, copied to each instance a fire or a backfill creates.

-- name: SchedulesCreate :one
WITH r AS (
	INSERT INTO kagzi.workflow_runs AS r (run_id, namespace_id, task_queue, workflow_type, version, status,
		available_at, retry_policy, cron_expr, timezone, max_catchup, overlap_policy, jitter_ms, concurrency_key, rate_key, input)
	VALUES (@run_id, @namespace, @queue, @type, @version, 'SCHEDULED', @available_at, @retry_policy, @cron, @timezone, @max_catchup,
		@overlap, @jitter_ms, @concurrency_key, @rate_key, @input::bytea)
	RETURNING r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, coalesce(r.overlap_policy, 'allow-all'), coalesce(r.jitter_ms, 0), r.buffered_fire_at,
	r.held_next_at, coalesce(r.concurrency_key, ''), coalesce(r.rate_key, '')
), a AS (
	-- The template's search attributes, which every instance is given.
	INSERT INTO kagzi.run_attributes (namespace_id, run_id, name, v_text, v_int, v_float, v_bool, v_time, created_at)
	SELECT r.namespace_id, r.run_id, x.name, x.v_text, x.v_int, x.v_float, x.v_bool, x.v_time, r.created_at
	FROM unnest(@attr_names::text[], @attr_texts::text[], @attr_ints::bigint[],
		@attr_floats::float8[], @attr_bools::boolean[], @attr_times::timestamptz[])
		AS x(name, v_text, v_int, v_float, v_bool, v_time)
	CROSS JOIN r
)
SELECT * FROM r

-- name: SchedulesGet :one
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, coalesce(r.overlap_policy, 'allow-all'), coalesce(r.jitter_ms, 0), r.buffered_fire_at,
	r.held_next_at, coalesce(r.concurrency_key, ''), coalesce(r.rate_key, ''), r.input FROM kagzi.workflow_runs r
WHERE r.namespace_id = @namespace AND r.run_id = @run_id AND r.status IN ('SCHEDULED', 'PAUSED')

-- name: SchedulesList :many
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, coalesce(r.overlap_policy, 'allow-all'), coalesce(r.jitter_ms, 0), r.buffered_fire_at,
	r.held_next_at, coalesce(r.concurrency_key, ''), coalesce(r.rate_key, '') FROM kagzi.workflow_runs r
WHERE r.namespace_id = @namespace AND r.status IN ('SCHEDULED', 'PAUSED')
  AND (@after_created_at::timestamptz IS NULL OR (r.created_at, r.run_id) < (@after_created_at, @after_run_id::uuid))
ORDER BY r.created_at DESC, r.run_id DESC
LIMIT @limit

-- name: SchedulesPause :one
UPDATE kagzi.workflow_runs r SET status = 'PAUSED', available_at = NULL, buffered_fire_at = NULL, held_next_at = NULL
WHERE r.namespace_id = @namespace AND r.run_id = @run_id AND r.status = 'SCHEDULED'
RETURNING r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, coalesce(r.overlap_policy, 'allow-all'), coalesce(r.jitter_ms, 0), r.buffered_fire_at,
	r.held_next_at, coalesce(r.concurrency_key, ''), coalesce(r.rate_key, '')

-- name: SchedulesResume :one
UPDATE kagzi.workflow_runs r SET status = 'SCHEDULED', available_at = @available_at
WHERE r.namespace_id = @namespace AND r.run_id = @run_id AND r.status = 'PAUSED'
RETURNING r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, coalesce(r.overlap_policy, 'allow-all'), coalesce(r.jitter_ms, 0), r.buffered_fire_at,
	r.held_next_at, coalesce(r.concurrency_key, ''), coalesce(r.rate_key, '')

-- name: SchedulesDelete :exec
WITH d AS (
	DELETE FROM kagzi.workflow_runs r WHERE r.namespace_id = @namespace AND r.run_id = @run_id AND r.status IN ('SCHEDULED', 'PAUSED')
	RETURNING r.run_id
)
SELECT 1 FROM d

-- name: SchedulesHistory :many
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch FROM kagzi.workflow_runs r
WHERE r.schedule_id = @schedule_id AND r.namespace_id = @namespace
ORDER BY r.schedule_fire_at DESC
LIMIT @limit

-- name: SchedulesDue :many
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, coalesce(r.overlap_policy, 'allow-all'), coalesce(r.jitter_ms, 0), r.buffered_fire_at,
	r.held_next_at, coalesce(r.concurrency_key, ''), coalesce(r.rate_key, '') FROM kagzi.workflow_runs r
WHERE r.status = 'SCHEDULED' AND r.available_at <= @now
ORDER BY r.available_at
LIMIT @limit

-- name: SchedulesNextDue :one
SELECT min(available_at) FROM kagzi.workflow_runs WHERE status = 'SCHEDULED'

-- name: SchedulesFire :many
WITH v AS (
	SELECT * FROM unnest(@namespaces::text[], @schedule_ids::uuid[], @dues::timestamptz[], @nexts::timestamptz[], @last_fires::timestamptz[])
		AS v(namespace_id, run_id, due, next, last_fired)
), l AS (
	SELECT v.* FROM kagzi.workflow_runs r JOIN v ON r.run_id = v.run_id AND r.namespace_id = v.namespace_id
	WHERE r.status = 'SCHEDULED' AND r.available_at = v.due
	ORDER BY r.run_id
	FOR UPDATE OF r
), u AS (
	UPDATE kagzi.workflow_runs r SET available_at = l.next, last_fired_at = coalesce(l.last_fired, r.last_fired_at),
		status = CASE WHEN l.next IS NULL THEN 'PAUSED' ELSE 'SCHEDULED' END
	FROM l
	WHERE r.run_id = l.run_id AND r.namespace_id = l.namespace_id AND r.status = 'SCHEDULED' AND r.available_at = l.due
	RETURNING r.*
), i AS (
	INSERT INTO kagzi.workflow_runs AS r (run_id, namespace_id, task_queue, workflow_type, version, status,
		available_at, retry_policy, priority, trace_context, schedule_id, schedule_fire_at, concurrency_key, rate_key, input)
	SELECT f.run_id, u.namespace_id, u.task_queue, u.workflow_type, coalesce(nullif(u.version, ''), (SELECT d.version FROM kagzi.workflow_defaults d
		WHERE d.namespace_id = u.namespace_id AND d.workflow_type = u.workflow_type), ''), 'PENDING',
		greatest(now(), f.available_at), u.retry_policy, u.priority, f.trace_context, u.run_id, f.fire_at, u.concurrency_key, u.rate_key,
		u.input
	FROM unnest(@run_ids::uuid[], @run_schedule_ids::uuid[], @fire_ats::timestamptz[], @available_ats::timestamptz[], @trace_contexts::text[])
		AS f(run_id, schedule_id, fire_at, available_at, trace_context)
	JOIN u ON u.run_id = f.schedule_id
	ON CONFLICT DO NOTHING
	RETURNING r.*
), ia AS (
	INSERT INTO kagzi.run_attributes (namespace_id, run_id, name, v_text, v_int, v_float, v_bool, v_time, created_at)
	SELECT x.namespace_id, i.run_id, x.name, x.v_text, x.v_int, x.v_float, x.v_bool, x.v_time, i.created_at
	FROM i JOIN kagzi.run_attributes x ON x.run_id = i.schedule_id
)
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, false FROM u r
UNION ALL
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, true FROM i r

-- name: SchedulesInstance :many
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch FROM kagzi.workflow_runs r
WHERE r.namespace_id = @namespace AND r.schedule_id = @schedule_id AND r.schedule_fire_at = @fire_at

-- name: SchedulesLive :many
SELECT r.run_id FROM kagzi.workflow_runs r
WHERE r.schedule_id = @schedule_id AND r.status IN ('PENDING', 'RUNNING', 'SLEEPING')
ORDER BY r.run_id

-- name: SchedulesLock :one
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, coalesce(r.overlap_policy, 'allow-all'), coalesce(r.jitter_ms, 0), r.buffered_fire_at,
	r.held_next_at, coalesce(r.concurrency_key, ''), coalesce(r.rate_key, '') FROM kagzi.workflow_runs r
WHERE r.run_id = @run_id AND r.namespace_id = @namespace AND r.status = 'SCHEDULED' AND r.available_at = @due
FOR UPDATE

-- name: SchedulesBuffer :exec
UPDATE kagzi.workflow_runs r SET buffered_fire_at = @buffered::timestamptz, held_next_at = NULL
WHERE r.run_id = @run_id AND (r.buffered_fire_at IS DISTINCT FROM @buffered::timestamptz OR r.held_next_at IS NOT NULL)

-- name: SchedulesBackfillLock :one
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch, coalesce(r.overlap_policy, 'allow-all'), coalesce(r.jitter_ms, 0), r.buffered_fire_at,
	r.held_next_at, coalesce(r.concurrency_key, ''), coalesce(r.rate_key, '') FROM kagzi.workflow_runs r
WHERE r.run_id = @run_id AND r.namespace_id = @namespace AND r.status IN ('SCHEDULED', 'PAUSED')
FOR UPDATE

-- name: SchedulesBackfillBuffer :exec
UPDATE kagzi.workflow_runs r SET buffered_fire_at = @buffered::timestamptz
WHERE r.run_id = @run_id AND r.buffered_fire_at IS DISTINCT FROM @buffered::timestamptz

-- name: SchedulesBackfill :many
WITH t AS (
	SELECT r.* FROM kagzi.workflow_runs r
	WHERE r.run_id = @schedule_id AND r.namespace_id = @namespace AND r.status IN ('SCHEDULED', 'PAUSED')
), i AS (
	INSERT INTO kagzi.workflow_runs AS r (run_id, namespace_id, task_queue, workflow_type, version, status,
		available_at, retry_policy, priority, trace_context, schedule_id, schedule_fire_at, concurrency_key, rate_key, input)
	SELECT f.run_id, t.namespace_id, t.task_queue, t.workflow_type, coalesce(nullif(t.version, ''), (SELECT d.version FROM kagzi.workflow_defaults d
		WHERE d.namespace_id = t.namespace_id AND d.workflow_type = t.workflow_type), ''), 'PENDING',
		greatest(now(), f.available_at), t.retry_policy, t.priority, f.trace_context, t.run_id, f.fire_at, t.concurrency_key, t.rate_key,
		t.input
	FROM unnest(@run_ids::uuid[], @fire_ats::timestamptz[], @available_ats::timestamptz[], @trace_contexts::text[])
		AS f(run_id, fire_at, available_at, trace_context)
	CROSS JOIN t
	ON CONFLICT DO NOTHING
	RETURNING r.*
), ia AS (
	INSERT INTO kagzi.run_attributes (namespace_id, run_id, name, v_text, v_int, v_float, v_bool, v_time, created_at)
	SELECT x.namespace_id, i.run_id, x.name, x.v_text, x.v_int, x.v_float, x.v_bool, x.v_time, i.created_at
	FROM i JOIN kagzi.run_attributes x ON x.run_id = i.schedule_id
)
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch FROM i r ORDER BY r.schedule_fire_at

-- name: SchedulesFired :many
SELECT r.schedule_fire_at FROM kagzi.workflow_runs r
WHERE r.schedule_id = @schedule_id AND r.schedule_fire_at = ANY(@fire_ats::timestamptz[])
