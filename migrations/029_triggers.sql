-- Event triggers (docs/triggers.md): an event is published once, and every
-- trigger of its namespace whose pattern matches its name starts a run.
--
-- triggers holds the subscriptions: a name unique per namespace, a
-- NATS-style pattern over dotted event names ('*' one token, '>' the rest),
-- the workflow type and queue of the runs it starts, and input_path, the
-- top-level key of the payload that is the run's input (NULL: the whole
-- payload).
--
-- published_events holds each event once: its id is the caller's (or a
-- UUIDv7), so a publisher that retries with the same id adds nothing.
-- fanned_out_at stays NULL until the reaper's leader has started the runs
-- of every matching trigger; an insert notifies (relayed as
-- protocol.EventPublished) so the leader wakes.
--
-- trigger_firings is what makes a fan-out exactly once: the row of (event,
-- trigger) and the run it started are inserted in one transaction, and the
-- primary key refuses a second row.
CREATE TABLE IF NOT EXISTS kagzi.triggers (
    trigger_id    uuid        PRIMARY KEY,
    namespace_id  text        NOT NULL,
    name          text        NOT NULL,
    event_pattern text        NOT NULL,
    workflow_type text        NOT NULL,
    task_queue    text        NOT NULL,
    input_path    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (namespace_id, name)
);

CREATE TABLE IF NOT EXISTS kagzi.published_events (
    event_id      uuid        PRIMARY KEY,
    namespace_id  text        NOT NULL,
    name          text        NOT NULL,
    payload       jsonb       NOT NULL,
    published_at  timestamptz NOT NULL DEFAULT now(),
    fanned_out_at timestamptz
);

-- The events still to fan out: empty while none waits.
CREATE INDEX IF NOT EXISTS published_events_pending_idx ON kagzi.published_events (published_at)
    WHERE fanned_out_at IS NULL;

CREATE TABLE IF NOT EXISTS kagzi.trigger_firings (
    event_id   uuid        NOT NULL REFERENCES kagzi.published_events ON DELETE CASCADE,
    trigger_id uuid        NOT NULL,
    run_id     uuid        NOT NULL,
    fired_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, trigger_id)
);

CREATE OR REPLACE FUNCTION kagzi.notify_published_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kagzi', json_build_object('k', 'e', 'ns', NEW.namespace_id, 'id', NEW.event_id)::text);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS published_events_notify ON kagzi.published_events;
CREATE TRIGGER published_events_notify AFTER INSERT ON kagzi.published_events
    FOR EACH ROW EXECUTE FUNCTION kagzi.notify_published_event();

---- create above / drop below ----

DROP TABLE IF EXISTS kagzi.trigger_firings;
DROP TABLE IF EXISTS kagzi.published_events;
DROP TABLE IF EXISTS kagzi.triggers;
DROP FUNCTION IF EXISTS kagzi.notify_published_event();
