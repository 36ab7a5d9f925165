-- Start batches (migration 033): the open batch of a (namespace, type,
-- queue, key), its items, and its close into one run.

-- name: StartBatchesLockOpen :one
INSERT INTO kagzi.start_batches AS b (batch_id, namespace_id, workflow_type, task_queue, batch_key, max_size, deadline_at)
VALUES (@batch_id, @namespace, @workflow_type, @queue, @batch_key, @max_size, now() + make_interval(secs => @max_wait_ms::float8 / 1000))
ON CONFLICT (namespace_id, workflow_type, task_queue, batch_key) WHERE run_id IS NULL
DO UPDATE SET batch_key = excluded.batch_key
RETURNING b.batch_id, b.size, b.bytes, b.max_size;

-- name: StartBatchItemsAdd :one
WITH i AS (
	INSERT INTO kagzi.start_batch_items (item_id, batch_id, seq, payload, event_id, trigger_id)
	SELECT @item_id, @batch_id, b.size, @payload::json, @event_id, @trigger_id
	FROM kagzi.start_batches b WHERE b.batch_id = @batch_id
	RETURNING batch_id
)
UPDATE kagzi.start_batches b SET size = b.size + 1, bytes = b.bytes + @bytes
FROM i WHERE b.batch_id = i.batch_id
RETURNING b.size;

-- name: StartBatchesInput :one
SELECT b.namespace_id, b.workflow_type, b.task_queue,
	convert_to('[' || coalesce(string_agg(i.payload::text, ',' ORDER BY i.seq), '') || ']', 'UTF8')
FROM kagzi.start_batches b LEFT JOIN kagzi.start_batch_items i ON i.batch_id = b.batch_id
WHERE b.batch_id = @batch_id
GROUP BY b.batch_id;

-- name: StartBatchesSetRun :exec
UPDATE kagzi.start_batches SET run_id = @run_id, closed_at = now() WHERE batch_id = @batch_id AND run_id IS NULL;

-- name: StartBatchesLockDue :many
SELECT batch_id FROM kagzi.start_batches
WHERE run_id IS NULL AND deadline_at <= @now
ORDER BY deadline_at
LIMIT @limit
FOR UPDATE SKIP LOCKED;

-- name: StartBatchesNextDue :one
SELECT min(deadline_at) FROM kagzi.start_batches WHERE run_id IS NULL;

-- name: StartBatchItemsGet :one
SELECT i.item_id, i.batch_id, i.seq, b.batch_key, b.run_id, i.added_at
FROM kagzi.start_batch_items i JOIN kagzi.start_batches b USING (batch_id)
WHERE i.item_id = @item_id AND b.namespace_id = @namespace;

-- name: StartBatchesList :many
SELECT b.batch_id, b.batch_key, b.workflow_type, b.task_queue, b.size, b.max_size, b.opened_at, b.deadline_at, b.run_id, b.closed_at
FROM kagzi.start_batches b
WHERE b.namespace_id = @namespace AND (@open_only::bool IS FALSE OR b.run_id IS NULL)
ORDER BY b.opened_at DESC, b.batch_id DESC
LIMIT @limit;
