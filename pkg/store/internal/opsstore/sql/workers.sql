-- Workers: their registrations, heartbeats and liveness (kagzi.workers).
-- A statement that returns a worker returns its columns in scanWorker's
-- order. WorkersDrain and WorkersDeregister move a worker of the namespace
-- that is not OFFLINE, and return it.
--
-- WorkersServing counts the workers that serve runs of @type at @version
-- on a queue as a claim matches them: live (ONLINE, or DRAINING: its
-- replacement is usually on its way, and a rolling deploy must not look
-- like no worker), and registered for the type at the version, or at any
-- version when @version is empty.

-- name: WorkersRegister :one
INSERT INTO kagzi.workers AS w (worker_id, namespace_id, task_queue, hostname, pid, version, workflow_types,
	max_concurrency, status, labels)
VALUES (@worker_id, @namespace, @queue, @hostname, @pid, @version, @workflow_types, @max_concurrency, 'ONLINE', @labels)
ON CONFLICT (worker_id) DO UPDATE SET
	task_queue = excluded.task_queue, hostname = excluded.hostname, pid = excluded.pid, version = excluded.version,
	workflow_types = excluded.workflow_types, max_concurrency = excluded.max_concurrency, labels = excluded.labels,
	status = 'ONLINE', last_heartbeat_at = now(), deregistered_at = NULL,
	registered_at = CASE WHEN w.status = 'OFFLINE' THEN now() ELSE w.registered_at END
WHERE w.namespace_id = excluded.namespace_id
RETURNING worker_id, namespace_id, task_queue, hostname, pid, version, workflow_types, max_concurrency,
	status, registered_at, last_heartbeat_at, deregistered_at, labels

-- name: WorkersHeartbeat :exec
WITH b AS (
	SELECT * FROM unnest(@worker_ids::uuid[], @ats::timestamptz[], @draining::bool[]) AS b(worker_id, at, draining)
), l AS (
	SELECT w.worker_id FROM kagzi.workers w JOIN b USING (worker_id)
	WHERE w.status <> 'OFFLINE'
	ORDER BY w.worker_id
	FOR NO KEY UPDATE OF w
)
UPDATE kagzi.workers w SET
	last_heartbeat_at = greatest(w.last_heartbeat_at, coalesce(b.at, now())),
	status = CASE WHEN b.draining AND w.status = 'ONLINE' THEN 'DRAINING' ELSE w.status END
FROM b JOIN l USING (worker_id)
WHERE w.worker_id = b.worker_id AND w.status <> 'OFFLINE'

-- name: WorkersDrain :one
UPDATE kagzi.workers SET status = 'DRAINING'
WHERE namespace_id = @namespace AND worker_id = @worker_id AND status <> 'OFFLINE'
RETURNING worker_id, namespace_id, task_queue, hostname, pid, version, workflow_types, max_concurrency,
	status, registered_at, last_heartbeat_at, deregistered_at, labels

-- name: WorkersDeregister :one
UPDATE kagzi.workers SET status = 'OFFLINE', deregistered_at = now()
WHERE namespace_id = @namespace AND worker_id = @worker_id AND status <> 'OFFLINE'
RETURNING worker_id, namespace_id, task_queue, hostname, pid, version, workflow_types, max_concurrency,
	status, registered_at, last_heartbeat_at, deregistered_at, labels

-- name: WorkersMarkStaleOffline :many
UPDATE kagzi.workers w SET status = 'OFFLINE'
WHERE w.worker_id IN (
	SELECT worker_id FROM kagzi.workers
	WHERE status <> 'OFFLINE' AND last_heartbeat_at < @before
	FOR UPDATE SKIP LOCKED)
  AND w.status <> 'OFFLINE' AND w.last_heartbeat_at < @before
RETURNING w.worker_id

-- name: WorkersOldestHeartbeat :one
SELECT min(last_heartbeat_at) FROM kagzi.workers WHERE status <> 'OFFLINE'

-- name: WorkersGet :one
SELECT worker_id, namespace_id, task_queue, hostname, pid, version, workflow_types, max_concurrency,
	status, registered_at, last_heartbeat_at, deregistered_at, labels FROM kagzi.workers WHERE namespace_id = @namespace AND worker_id = @worker_id

-- name: WorkersList :many
SELECT worker_id, namespace_id, task_queue, hostname, pid, version, workflow_types, max_concurrency,
	status, registered_at, last_heartbeat_at, deregistered_at, labels FROM kagzi.workers
WHERE namespace_id = @namespace AND (@queue = '' OR task_queue = @queue) AND (@status = '' OR status = @status)
ORDER BY task_queue, registered_at, worker_id
LIMIT @limit

-- name: WorkersCountOnline :many
SELECT namespace_id, task_queue, count(*) FROM kagzi.workers WHERE status = 'ONLINE' GROUP BY namespace_id, task_queue

-- name: WorkersDeleteOffline :exec
DELETE FROM kagzi.workers WHERE status = 'OFFLINE' AND last_heartbeat_at < @before

-- name: WorkersServing :one
SELECT count(*) FROM kagzi.workers w WHERE w.status IN ('ONLINE', 'DRAINING') AND w.namespace_id = @namespace::text AND w.task_queue = @queue::text AND w.workflow_types @> jsonb_build_array(CASE WHEN @version::text = '' THEN jsonb_build_object('type', @type::text) ELSE jsonb_build_object('type', @type::text, 'version', @version::text) END)
