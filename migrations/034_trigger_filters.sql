-- Trigger filters (docs/triggers.md): a trigger may select, besides its
-- event-name pattern, on the event's payload with a query of the
-- fleet-operations language (package filter; e.g. amount > 100 AND
-- currency = 'usd'). The text is stored as the operator wrote it, checked
-- when the trigger is created; the fan-out evaluates it on each event's
-- payload. NULL: every event whose name matches.
--
-- Additive: a nullable column, which a release without filters neither
-- reads nor writes, and an index.
ALTER TABLE kagzi.triggers ADD COLUMN IF NOT EXISTS filter text;

-- The console lists a namespace's published events newest first
-- (PublishedEventsList), a page at a time. On a large table, create the
-- index CONCURRENTLY first (this statement then does nothing).
CREATE INDEX IF NOT EXISTS published_events_namespace_idx ON kagzi.published_events
    (namespace_id, published_at DESC, event_id DESC);

---- create above / drop below ----

DROP INDEX IF EXISTS kagzi.published_events_namespace_idx;
ALTER TABLE kagzi.triggers DROP COLUMN IF EXISTS filter;
