-- Finished history that no service makes: the bench's load and what schedules fired.

-- name: HistoryInsertFinished :one
WITH g AS (
	SELECT i, @before::timestamptz - (@from::bigint + @count::bigint - 1 - i) * interval '1 millisecond' AS t
	FROM generate_series(@from::bigint, @from::bigint + @count::bigint - 1) AS i
), r AS (
	INSERT INTO kagzi.workflow_runs (run_id, namespace_id, task_queue, workflow_type, status, attempts, lease_token,
		created_at, started_at, finished_at, input, output)
	SELECT (lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0') || '7000' || '8' || lpad(to_hex(i), 15, '0'))::uuid,
		@namespace, @queue, @type, 'COMPLETED', 1, 1, t, t + interval '1 millisecond', t + interval '3 millisecond',
		'{"steps":1}', '1'
	FROM g
	RETURNING run_id, started_at
), st AS (
	INSERT INTO kagzi.step_runs (run_id, step_id, attempt_number, namespace_id, kind, status, output, created_at,
		started_at, finished_at, run_attempt)
	SELECT run_id, 's0', 1, @namespace, 'FUNCTION', 'COMPLETED', '0', started_at, started_at, started_at + interval '1 millisecond', 1 FROM r
)
SELECT count(*) FROM r;

-- name: HistoryAnalyze :exec
ANALYZE kagzi.workflow_runs, kagzi.step_runs;

-- name: HistoryScheduleFires :many
SELECT schedule_id, run_id, schedule_fire_at, extract(epoch FROM created_at - schedule_fire_at)::float8 * 1000
FROM kagzi.workflow_runs
WHERE namespace_id = @namespace AND schedule_id IS NOT NULL AND schedule_fire_at >= @from AND schedule_fire_at < @to
ORDER BY schedule_fire_at, schedule_id;
