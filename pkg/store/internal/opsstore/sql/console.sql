-- The console's reads: searches and pages of runs, dead letters grouped
-- by their error's fingerprint (the error with ids, quoted text and
-- numbers masked, over the newest failures), queue statistics and the
-- namespaces in use.

-- name: ConsoleRunsSearchPath :one
SELECT @path::jsonpath IS NOT NULL

-- name: ConsoleRunsSearch :many
-- The run columns, then its pause (a listing marks a paused run). A query
-- that requires one attribute value replaces `/*drive*/` with the join of
-- that value's attribute rows d, and `/*order*/ r.created_at` with
-- d.created_at (the same time, in that value's index order; see
-- buildSearch).
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch,
	r.paused_at, coalesce(r.paused_by, ''), coalesce(r.paused_reason, '') FROM /*drive*/ kagzi.workflow_runs r
WHERE r.namespace_id = @namespace
  AND (cardinality(@statuses::text[]) = 0 AND r.status NOT IN ('SCHEDULED', 'PAUSED') OR r.status = ANY(@statuses))
  AND (@type = '' OR r.workflow_type = @type)
  AND (@queue = '' OR r.task_queue = @queue)
  AND (@schedule_id::uuid IS NULL OR r.schedule_id = @schedule_id)
  AND (@parent_run_id::uuid IS NULL OR r.parent_run_id = @parent_run_id)
  AND (@external_id = '' OR r.external_id = @external_id)
  AND (@created_from::timestamptz IS NULL OR r.created_at >= @created_from)
  AND (@created_to::timestamptz IS NULL OR r.created_at < @created_to)
  AND (@finished_before::timestamptz IS NULL OR r.finished_at < @finished_before)
  AND (@after_created_at::timestamptz IS NULL OR (r.created_at, r.run_id) < (@after_created_at, @after_run_id::uuid))
  AND (@input_match = '' OR jsonb_path_match(convert_from(r.input, 'UTF8')::jsonb, @input_match::jsonpath, '{}', true) IS TRUE)
  AND (@output_match = '' OR jsonb_path_match(convert_from(r.output, 'UTF8')::jsonb, @output_match::jsonpath, '{}', true) IS TRUE)
  AND (/*query*/ TRUE)
ORDER BY /*order*/ r.created_at DESC, r.run_id DESC
LIMIT @limit

-- name: ConsoleRunsGetMany :many
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch FROM kagzi.workflow_runs r WHERE r.run_id = ANY(@run_ids) AND r.namespace_id = @namespace

-- name: ConsoleRunsCreatedAfter :many
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch FROM kagzi.workflow_runs r
WHERE r.namespace_id = @namespace AND (r.created_at, r.run_id) > (@after_created_at, @after_run_id::uuid) AND r.cron_expr IS NULL
ORDER BY r.created_at, r.run_id LIMIT @limit

-- name: ConsoleRunsNewest :one
SELECT created_at, run_id FROM kagzi.workflow_runs WHERE namespace_id = @namespace
ORDER BY created_at DESC, run_id DESC LIMIT 1

-- name: ConsoleRunsDeadLetters :many
WITH f AS (
	SELECT workflow_type, left(regexp_replace(regexp_replace(regexp_replace(coalesce(error, ''),
	'[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}', '<id>', 'g'), '"[^"]*"', '"…"', 'g'), '[0-9]+', '<n>', 'g'), 300) AS fp, coalesce(error, '') AS error, finished_at
	FROM kagzi.workflow_runs WHERE namespace_id = @namespace AND status = 'FAILED'
	ORDER BY finished_at DESC LIMIT @scan
)
SELECT workflow_type, fp, (array_agg(error ORDER BY finished_at DESC))[1], count(*), max(finished_at), min(finished_at)
FROM f GROUP BY workflow_type, fp ORDER BY count(*) DESC, max(finished_at) DESC

-- name: ConsoleRunsDeadLetterIDs :many
SELECT run_id FROM (
	SELECT run_id, workflow_type, left(regexp_replace(regexp_replace(regexp_replace(coalesce(error, ''),
	'[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}', '<id>', 'g'), '"[^"]*"', '"…"', 'g'), '[0-9]+', '<n>', 'g'), 300) AS fp, finished_at
	FROM kagzi.workflow_runs WHERE namespace_id = @namespace AND status = 'FAILED'
	ORDER BY finished_at DESC LIMIT @scan
) f WHERE (@type = '' OR workflow_type = @type) AND (@fingerprint = '' OR fp = @fingerprint)
ORDER BY finished_at DESC LIMIT @limit

-- name: ConsoleRunsQueueStats :many
WITH live AS (
	SELECT task_queue, workflow_type, status, available_at FROM kagzi.workflow_runs
	WHERE namespace_id = @namespace AND status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL
	UNION ALL
	SELECT task_queue, workflow_type, status, NULL FROM kagzi.workflow_runs
	WHERE status = 'RUNNING' AND locked_by IS NOT NULL AND namespace_id = @namespace
)
SELECT task_queue, workflow_type,
	count(*) FILTER (WHERE status <> 'RUNNING' AND available_at <= now()),
	count(*) FILTER (WHERE status = 'RUNNING'),
	count(*) FILTER (WHERE status = 'SLEEPING' AND available_at > now()),
	min(available_at) FILTER (WHERE status <> 'RUNNING' AND available_at <= now())
FROM live GROUP BY task_queue, workflow_type ORDER BY task_queue, workflow_type

-- name: ConsoleNamespaces :many
WITH RECURSIVE ns AS (
	(SELECT namespace_id FROM kagzi.workflow_runs ORDER BY namespace_id LIMIT 1)
	UNION ALL
	SELECT (SELECT namespace_id FROM kagzi.workflow_runs WHERE namespace_id > ns.namespace_id ORDER BY namespace_id LIMIT 1)
	FROM ns WHERE ns.namespace_id IS NOT NULL
)
SELECT namespace_id FROM ns WHERE namespace_id IS NOT NULL
UNION SELECT DISTINCT namespace_id FROM kagzi.workers
ORDER BY 1 LIMIT 200

-- name: ConsoleRunsLiveStatuses :many
SELECT run_id, status, task_queue FROM kagzi.workflow_runs
WHERE namespace_id = @namespace AND status IN ('PENDING', 'RUNNING', 'SLEEPING') LIMIT @limit

-- name: ConsoleRunsHeldBy :many
SELECT locked_by, count(*) FROM kagzi.workflow_runs
WHERE status = 'RUNNING' AND locked_by = ANY(@worker_ids::uuid[]) AND namespace_id = @namespace GROUP BY locked_by
