-- Retention of the ways in (docs/operations.md#retention-of-events-and-tokens)
-- and poison events (docs/triggers.md).
--
-- The reaper's retention sweep deletes published events that were fanned
-- out (or given up) longer ago than KAGZI_EVENT_RETENTION, with their
-- trigger_firings and webhook_deliveries (ON DELETE CASCADE, migrations
-- 029 and 030), and wait tokens used or expired that long ago. The two
-- indexes let it find the oldest such rows without reading the others;
-- an event still pending is in neither and never deleted.
--
-- fan_out_attempts counts the fan-outs of an event that failed;
-- fan_out_error is the last one's error. After store.MaxFanOutAttempts
-- the event is given up: failed_at and fanned_out_at are set (so the
-- events after it, and a reaper of the previous version, go on), and no
-- run is started for it.
ALTER TABLE kagzi.published_events ADD COLUMN IF NOT EXISTS fan_out_attempts integer NOT NULL DEFAULT 0;
ALTER TABLE kagzi.published_events ADD COLUMN IF NOT EXISTS fan_out_error text;
ALTER TABLE kagzi.published_events ADD COLUMN IF NOT EXISTS failed_at timestamptz;

CREATE INDEX IF NOT EXISTS published_events_done_idx ON kagzi.published_events (published_at)
    WHERE fanned_out_at IS NOT NULL;

CREATE INDEX IF NOT EXISTS wait_tokens_done_idx ON kagzi.wait_tokens (least(used_at, expires_at));

---- create above / drop below ----

DROP INDEX IF EXISTS kagzi.wait_tokens_done_idx;
DROP INDEX IF EXISTS kagzi.published_events_done_idx;
ALTER TABLE kagzi.published_events DROP COLUMN IF EXISTS failed_at;
ALTER TABLE kagzi.published_events DROP COLUMN IF EXISTS fan_out_error;
ALTER TABLE kagzi.published_events DROP COLUMN IF EXISTS fan_out_attempts;
