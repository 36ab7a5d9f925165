-- Event triggers (migration 029): the triggers of a namespace, published
-- events, and their fan-out to runs, exactly once per (event, trigger).

-- name: TriggersCreate :one
INSERT INTO kagzi.triggers (trigger_id, namespace_id, name, event_pattern, workflow_type, task_queue, input_path, filter,
	batch_key, batch_max_size, batch_max_wait_ms)
SELECT @trigger_id, @namespace, @name, @pattern, @workflow_type, @queue, @input_path, @filter, @batch_key, @batch_max_size, @batch_max_wait_ms
WHERE (SELECT count(*) FROM kagzi.triggers WHERE namespace_id = @namespace) < @max_triggers
ON CONFLICT (namespace_id, name) DO NOTHING
RETURNING created_at;

-- name: TriggersList :many
SELECT trigger_id, namespace_id, name, event_pattern, workflow_type, task_queue, coalesce(input_path, ''), coalesce(filter, ''), created_at,
	coalesce(batch_key, ''), coalesce(batch_max_size, 0), coalesce(batch_max_wait_ms, 0)
FROM kagzi.triggers WHERE namespace_id = @namespace ORDER BY name;

-- name: TriggersDelete :exec
DELETE FROM kagzi.triggers WHERE namespace_id = @namespace AND name = @name;

-- name: PublishedEventsAdd :one
WITH ins AS (
	INSERT INTO kagzi.published_events (event_id, namespace_id, name, payload)
	VALUES (@event_id, @namespace, @name, @payload)
	ON CONFLICT (event_id) DO NOTHING
	RETURNING namespace_id, name, true AS created
)
SELECT namespace_id, name, created FROM ins
UNION ALL
SELECT namespace_id, name, false FROM kagzi.published_events WHERE event_id = @event_id
LIMIT 1;

-- name: PublishedEventsPending :many
SELECT event_id FROM kagzi.published_events WHERE fanned_out_at IS NULL ORDER BY published_at, event_id LIMIT @limit;

-- name: PublishedEventsLock :one
SELECT namespace_id, name, payload, fanned_out_at IS NOT NULL
FROM kagzi.published_events WHERE event_id = @event_id
FOR UPDATE;

-- name: PublishedEventsGet :one
SELECT event_id, namespace_id, name, payload, published_at, fanned_out_at, fan_out_attempts, coalesce(fan_out_error, ''), failed_at
FROM kagzi.published_events WHERE namespace_id = @namespace AND event_id = @event_id;

-- name: PublishedEventsMarkFannedOut :exec
UPDATE kagzi.published_events SET fanned_out_at = now() WHERE event_id = @event_id;

-- name: TriggerFiringsAdd :one
INSERT INTO kagzi.trigger_firings (event_id, trigger_id, run_id) VALUES (@event_id, @trigger_id, @run_id)
ON CONFLICT (event_id, trigger_id) DO NOTHING
RETURNING fired_at;

-- name: TriggerFiringsList :many
SELECT f.trigger_id, coalesce(t.name, ''), f.run_id, f.fired_at
FROM kagzi.trigger_firings f LEFT JOIN kagzi.triggers t USING (trigger_id)
WHERE f.event_id = @event_id ORDER BY t.name;
