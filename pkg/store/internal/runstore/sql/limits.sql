-- Concurrency limits of a workflow type in a queue, total and per key.

-- name: LimitsSet :one
WITH l AS (
	INSERT INTO kagzi.concurrency_limits (namespace_id, task_queue, workflow_type, max_running) VALUES (@namespace, @queue, @type, @max_running)
	ON CONFLICT (namespace_id, task_queue, workflow_type) DO UPDATE SET max_running = excluded.max_running, updated_at = now()
	RETURNING updated_at, coalesce(max_per_key, 0) AS max_per_key
), running AS (
	UPDATE kagzi.workflow_runs SET limited = true
	WHERE namespace_id = @namespace AND task_queue = @queue AND workflow_type = @type AND status = 'RUNNING' AND NOT limited
)
SELECT updated_at, max_per_key FROM l

-- name: LimitsDelete :exec
DELETE FROM kagzi.concurrency_limits WHERE namespace_id = @namespace AND task_queue = @queue AND workflow_type = @type

-- name: LimitsList :many
SELECT namespace_id, task_queue, workflow_type, coalesce(max_running, -1), coalesce(max_per_key, 0), updated_at FROM kagzi.concurrency_limits
WHERE namespace_id = @namespace ORDER BY task_queue, workflow_type

-- name: LimitsPerKeySet :one
WITH l AS (
	INSERT INTO kagzi.concurrency_limits (namespace_id, task_queue, workflow_type, max_running, max_per_key)
	VALUES (@namespace, @queue, @type, NULL, @per_key)
	ON CONFLICT (namespace_id, task_queue, workflow_type) DO UPDATE SET max_per_key = excluded.max_per_key, updated_at = now()
	RETURNING max_running, updated_at
), running AS (
	UPDATE kagzi.workflow_runs SET limited = true
	WHERE namespace_id = @namespace AND task_queue = @queue AND workflow_type = @type AND status = 'RUNNING' AND NOT limited
)
SELECT max_running, updated_at FROM l

-- name: LimitsPerKeyRemove :exec
WITH u AS (
	UPDATE kagzi.concurrency_limits SET max_per_key = NULL, updated_at = now()
	WHERE namespace_id = @namespace AND task_queue = @queue AND workflow_type = @type AND max_running IS NOT NULL
	RETURNING 1
), d AS (
	DELETE FROM kagzi.concurrency_limits
	WHERE namespace_id = @namespace AND task_queue = @queue AND workflow_type = @type AND max_running IS NULL
	RETURNING 1
)
SELECT (SELECT count(*) FROM u) + (SELECT count(*) FROM d)

-- name: LimitsKeyUsage :many
SELECT concurrency_key, count(*) FROM kagzi.workflow_runs
WHERE namespace_id = @namespace AND task_queue = @queue AND workflow_type = @type
  AND status = 'RUNNING' AND limited AND concurrency_key IS NOT NULL
GROUP BY concurrency_key ORDER BY count(*) DESC, concurrency_key LIMIT @top
