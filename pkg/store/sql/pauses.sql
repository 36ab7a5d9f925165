-- Pause and resume of runs, queues and workflow types (022_pause.sql).

-- name: RunsPause :one
-- A live run becomes paused: a suspended one (PENDING, SLEEPING) is taken
-- out of the claim by moving its due time to paused_due_at; a RUNNING one
-- keeps its lease until its next step is recorded (store.StepsRecordBatch
-- then releases it). A run paused already keeps its first pause.
WITH r AS (
	SELECT run_id, status, paused_at, paused_by, paused_reason FROM kagzi.workflow_runs
	WHERE namespace_id = @namespace AND run_id = @run_id AND cron_expr IS NULL
	FOR UPDATE
), u AS (
	UPDATE kagzi.workflow_runs w SET paused_at = now(), paused_by = @by, paused_reason = @reason,
		paused_due_at = CASE WHEN w.status IN ('PENDING', 'SLEEPING') THEN w.available_at END,
		available_at = CASE WHEN w.status IN ('PENDING', 'SLEEPING') THEN NULL ELSE w.available_at END
	FROM r
	WHERE w.run_id = r.run_id AND r.paused_at IS NULL AND r.status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')
	RETURNING w.status, w.paused_at, w.paused_by, w.paused_reason
)
SELECT coalesce(u.status, r.status), u.status IS NOT NULL, coalesce(u.paused_at, r.paused_at),
	coalesce(u.paused_by, r.paused_by, ''), coalesce(u.paused_reason, r.paused_reason, '')
FROM r LEFT JOIN u ON true

-- name: RunsResume :one
-- A paused run is due again at the time it would have been due (a sleep's
-- end, a retry's, an event's arrival: paused_due_at), or stays waiting
-- (an event not yet sent). Setting its due time makes the notify trigger
-- wake the dispatchers of its queue. A RUNNING run just carries on.
WITH r AS (
	SELECT run_id, status, paused_at FROM kagzi.workflow_runs
	WHERE namespace_id = @namespace AND run_id = @run_id AND cron_expr IS NULL
	FOR UPDATE
), u AS (
	UPDATE kagzi.workflow_runs w SET paused_at = NULL, paused_by = NULL, paused_reason = NULL, paused_due_at = NULL,
		available_at = CASE WHEN w.status IN ('PENDING', 'SLEEPING') THEN coalesce(w.available_at, w.paused_due_at) ELSE w.available_at END
	FROM r
	WHERE w.run_id = r.run_id AND r.paused_at IS NOT NULL
	RETURNING w.status, w.available_at
)
SELECT coalesce(u.status, r.status), u.status IS NOT NULL, u.available_at
FROM r LEFT JOIN u ON true

-- name: RunsPausedCount :many
-- Paused runs per namespace (the paused-runs gauge): a range of the
-- paused index, empty while nothing is paused.
SELECT namespace_id, count(*) FROM kagzi.workflow_runs WHERE paused_at IS NOT NULL GROUP BY namespace_id

-- name: PausesAdd :one
WITH ins AS (
	INSERT INTO kagzi.pauses (namespace_id, kind, name, paused_by, paused_reason)
	VALUES (@namespace, @kind, @name, @by, @reason)
	ON CONFLICT (namespace_id, kind, name) DO NOTHING
	RETURNING paused_by, paused_reason, paused_at
)
SELECT true, paused_by, paused_reason, paused_at FROM ins
UNION ALL
SELECT false, paused_by, paused_reason, paused_at FROM kagzi.pauses
WHERE namespace_id = @namespace AND kind = @kind AND name = @name AND NOT EXISTS (SELECT 1 FROM ins)

-- name: PausesRemove :one
-- The pause ends, and the queues with runs it held that are due are
-- woken the way a run made due wakes them: a notification on the channel
-- 'kagzi' (migrations/functions/notify_runs.sql), sent at commit, which
-- the relay republishes as the queue's ready wakeup.
WITH d AS (
	DELETE FROM kagzi.pauses WHERE namespace_id = @namespace AND kind = @kind AND name = @name
	RETURNING kind, name
), q AS (
	SELECT r.task_queue, min(r.available_at) AS at FROM kagzi.workflow_runs r JOIN d
		ON (d.kind = 'queue' AND r.task_queue = d.name) OR (d.kind = 'type' AND r.workflow_type = d.name)
	WHERE r.namespace_id = @namespace AND r.status IN ('PENDING', 'SLEEPING') AND r.available_at IS NOT NULL
	GROUP BY r.task_queue
)
SELECT (SELECT count(*) FROM d) > 0,
	(SELECT count(pg_notify('kagzi', json_build_object('k', 'r', 'ns', @namespace::text, 'q', q.task_queue, 'at', q.at)::text)) FROM q)

-- name: PausesList :many
SELECT kind, name, paused_by, paused_reason, paused_at FROM kagzi.pauses
WHERE namespace_id = @namespace ORDER BY kind, name
