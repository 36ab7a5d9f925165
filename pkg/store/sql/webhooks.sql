-- Webhooks (migration 030): a namespace's webhook sources and the
-- deliveries accepted from them.

-- name: WebhookSourcesCreate :one
INSERT INTO kagzi.webhook_sources (source_id, namespace_id, name, kind, secret, tolerance_s, event_template)
SELECT @source_id, @namespace, @name, @kind, @secret, @tolerance_s, @event_template
WHERE (SELECT count(*) FROM kagzi.webhook_sources WHERE namespace_id = @namespace) < @max_sources
ON CONFLICT (namespace_id, name) DO NOTHING
RETURNING created_at;

-- name: WebhookSourcesList :many
SELECT source_id, namespace_id, name, kind, secret, tolerance_s, event_template, created_at
FROM kagzi.webhook_sources WHERE namespace_id = @namespace ORDER BY name;

-- name: WebhookSourcesGet :one
SELECT source_id, namespace_id, name, kind, secret, tolerance_s, event_template, created_at
FROM kagzi.webhook_sources WHERE namespace_id = @namespace AND name = @name;

-- name: WebhookSourcesDelete :exec
DELETE FROM kagzi.webhook_sources WHERE namespace_id = @namespace AND name = @name;

-- name: WebhookDeliveriesAdd :one
INSERT INTO kagzi.webhook_deliveries (source_id, delivery_id, event_id)
VALUES (@source_id, @delivery_id, @event_id)
ON CONFLICT (source_id, delivery_id) DO NOTHING
RETURNING received_at;
