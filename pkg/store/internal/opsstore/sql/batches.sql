-- Batch operations (023_batches.sql, docs/batches.md).

-- name: BatchesInsert :exec
INSERT INTO kagzi.batches (batch_id, namespace_id, action, query, reason, event_name, payload, created_by, state, rate, total)
VALUES (@batch_id, @namespace, @action, @query, @reason, @event_name, @payload, @by, 'running', @rate, @total)

-- name: BatchesSetTotal :exec
-- The batch's total, once its runs are inserted (in the same transaction).
UPDATE kagzi.batches SET total = @total WHERE batch_id = @batch_id

-- name: BatchRunsCountQuery :one
-- How many runs a query resolves to, counting one past the most a batch
-- may hold so that a query matching millions stops there.
SELECT count(*) FROM (
	SELECT 1 FROM kagzi.workflow_runs r
	WHERE r.namespace_id = @namespace AND r.status = ANY(@statuses::text[]) AND (/*query*/ TRUE)
	LIMIT @limit
) m

-- name: BatchRunsInsertQuery :exec
INSERT INTO kagzi.batch_runs (batch_id, run_id)
SELECT @batch_id, r.run_id FROM kagzi.workflow_runs r
WHERE r.namespace_id = @namespace AND r.status = ANY(@statuses::text[]) AND (/*query*/ TRUE)
LIMIT @limit

-- name: BatchRunsCheckIDs :many
-- The ids of a list that are not runs of the namespace (templates are
-- not runs), or whose status the action does not take.
SELECT i.id, r.status FROM unnest(@ids::uuid[]) AS i(id)
LEFT JOIN kagzi.workflow_runs r ON r.run_id = i.id AND r.namespace_id = @namespace AND r.status NOT IN ('SCHEDULED', 'PAUSED')
WHERE r.run_id IS NULL OR r.status <> ALL(@statuses::text[])
LIMIT 1

-- name: BatchRunsInsertIDs :exec
INSERT INTO kagzi.batch_runs (batch_id, run_id)
SELECT @batch_id, id FROM unnest(@ids::uuid[]) AS i(id)
ON CONFLICT DO NOTHING

-- name: BatchesGet :one
SELECT batch_id, namespace_id, action, coalesce(query, ''), reason, event_name, payload, created_by, state, rate,
	total, done, failed, skipped, created_at, finished_at
FROM kagzi.batches WHERE namespace_id = @namespace AND batch_id = @batch_id

-- name: BatchesList :many
SELECT batch_id, namespace_id, action, coalesce(query, ''), reason, event_name, payload, created_by, state, rate,
	total, done, failed, skipped, created_at, finished_at
FROM kagzi.batches WHERE namespace_id = @namespace
ORDER BY created_at DESC, batch_id LIMIT @limit

-- name: BatchesRunning :many
-- The batches the reaper's leader works on, oldest first.
SELECT batch_id, namespace_id, action, coalesce(query, ''), reason, event_name, payload, created_by, state, rate,
	total, done, failed, skipped, created_at, finished_at
FROM kagzi.batches WHERE state = 'running'
ORDER BY created_at, batch_id LIMIT @limit

-- name: BatchesSetState :one
-- Pause (running → paused), resume (paused → running) or cancel (running
-- or paused → cancelled). The row as it was is returned with whether it
-- changed, so a pause of a paused batch is told apart from a finished one.
WITH b AS (
	SELECT batch_id, state FROM kagzi.batches WHERE namespace_id = @namespace AND batch_id = @batch_id FOR UPDATE
), u AS (
	UPDATE kagzi.batches x SET state = @to, finished_at = CASE WHEN @to = 'cancelled' THEN now() END
	FROM b WHERE x.batch_id = b.batch_id AND b.state = ANY(@from::text[])
	RETURNING x.state
)
SELECT b.state, u.state IS NOT NULL FROM b LEFT JOIN u ON true

-- name: BatchRunsTake :many
-- The next runs of a batch to act on, locked until the transaction that
-- acts on them and records their outcomes ends; another worker of the
-- same batch skips them.
-- A batch that is not running (paused, cancelled) gives none.
SELECT br.run_id FROM kagzi.batch_runs br
WHERE br.batch_id = @batch_id AND br.outcome IS NULL
	AND EXISTS (SELECT 1 FROM kagzi.batches b WHERE b.batch_id = @batch_id AND b.state = 'running')
ORDER BY br.run_id LIMIT @limit
FOR UPDATE OF br SKIP LOCKED

-- name: BatchRunsSettle :one
-- Records the outcomes of runs taken by BatchRunsTake and adds them to
-- the batch's counters; the batch completes with its last run. Returns
-- the batch's state after it.
WITH s AS (
	UPDATE kagzi.batch_runs br SET outcome = o.outcome, error = nullif(o.error, ''), detail = nullif(o.detail, ''), acted_at = now()
	FROM unnest(@run_ids::uuid[], @outcomes::text[], @errors::text[], @details::text[]) AS o(run_id, outcome, error, detail)
	WHERE br.batch_id = @batch_id AND br.run_id = o.run_id AND br.outcome IS NULL
	RETURNING br.outcome
), c AS (
	SELECT count(*) FILTER (WHERE outcome = 'done') AS done, count(*) FILTER (WHERE outcome = 'failed') AS failed,
		count(*) FILTER (WHERE outcome = 'skipped') AS skipped FROM s
)
UPDATE kagzi.batches b SET done = b.done + c.done, failed = b.failed + c.failed, skipped = b.skipped + c.skipped,
	state = CASE WHEN b.state = 'running' AND b.done + c.done + b.failed + c.failed + b.skipped + c.skipped >= b.total THEN 'completed' ELSE b.state END,
	finished_at = CASE WHEN b.state = 'running' AND b.done + c.done + b.failed + c.failed + b.skipped + c.skipped >= b.total THEN now() ELSE b.finished_at END
FROM c WHERE b.batch_id = @batch_id
RETURNING b.state

-- name: BatchRunsList :many
-- A batch's runs with their outcomes, by run id, after a
-- run id.
SELECT run_id, coalesce(outcome, ''), coalesce(error, ''), coalesce(detail, ''), acted_at FROM kagzi.batch_runs
WHERE batch_id = @batch_id AND (@outcome = '' OR coalesce(outcome, 'pending') = @outcome) AND run_id > @after
ORDER BY run_id LIMIT @limit
