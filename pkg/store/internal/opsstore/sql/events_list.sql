-- The console's listing of published events (docs/triggers.md), newest
-- first, and the runs each started.

-- name: PublishedEventsList :many
-- Read by published_events_namespace_idx (migration 034). The payload is
-- left out: a page lists names and outcomes, and a payload may be large.
SELECT event_id, namespace_id, name, published_at, fanned_out_at, fan_out_attempts, coalesce(fan_out_error, ''), failed_at
FROM kagzi.published_events
WHERE namespace_id = @namespace
  AND (@after_published_at::timestamptz IS NULL OR (published_at, event_id) < (@after_published_at, @after_event_id::uuid))
ORDER BY published_at DESC, event_id DESC
LIMIT @limit;

-- name: TriggerFiringsOfEvents :many
SELECT f.event_id, f.trigger_id, coalesce(t.name, ''), f.run_id, f.fired_at
FROM kagzi.trigger_firings f LEFT JOIN kagzi.triggers t USING (trigger_id)
WHERE f.event_id = ANY(@event_ids::uuid[])
ORDER BY f.event_id, t.name;
