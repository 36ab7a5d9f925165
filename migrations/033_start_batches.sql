-- Start batches (docs/batching.md): starts or trigger events with a batch
-- option become items of the open batch of their (namespace, workflow
-- type, queue, key); the batch becomes ONE run, whose input is the JSON
-- list of its items in order, when it holds max_size items or at
-- deadline_at (its first item's time plus its max wait), whichever is
-- first. The database holds the open batch, no process does: a process
-- killed or frozen while it adds loses nothing (its transaction rolls
-- back), and a batch due by time is closed by the reaper's leader in a
-- transaction fenced by its term.
--
-- start_batches: one row per batch. The partial unique index allows one
-- open batch (run_id NULL) per (namespace, type, queue, key): adders lock
-- it by upserting, so adds and the close of one batch are serialised by
-- its row lock. run_id is set once, when the batch closes, in the
-- transaction that creates the run (external id 'batch:' || batch_id): an
-- item is in its batch's run and no other.
--
-- start_batch_items: an item belongs to one batch (seq orders it there);
-- bytes keeps the batch's input under the payload limit (a batch closes
-- early rather than exceed it). An item added by a trigger names its
-- event and trigger, unique: one item per (event, trigger).
--
-- Opening a batch notifies as a published event does (kind 'e', relayed as
-- protocol.EventPublished): the reaper's leader then reads the next batch
-- deadline again.
CREATE TABLE IF NOT EXISTS kagzi.start_batches (
    batch_id      uuid        PRIMARY KEY,
    namespace_id  text        NOT NULL,
    workflow_type text        NOT NULL,
    task_queue    text        NOT NULL,
    batch_key     text        NOT NULL,
    max_size      integer     NOT NULL,
    size          integer     NOT NULL DEFAULT 0,
    bytes         bigint      NOT NULL DEFAULT 0,
    opened_at     timestamptz NOT NULL DEFAULT now(),
    deadline_at   timestamptz NOT NULL,
    run_id        uuid,
    closed_at     timestamptz
);

CREATE UNIQUE INDEX IF NOT EXISTS start_batches_open_idx
    ON kagzi.start_batches (namespace_id, workflow_type, task_queue, batch_key) WHERE run_id IS NULL;

-- The open batches by deadline: the reaper's timer reads the first.
CREATE INDEX IF NOT EXISTS start_batches_due_idx ON kagzi.start_batches (deadline_at) WHERE run_id IS NULL;

CREATE TABLE IF NOT EXISTS kagzi.start_batch_items (
    item_id    uuid        PRIMARY KEY,
    batch_id   uuid        NOT NULL REFERENCES kagzi.start_batches ON DELETE CASCADE,
    seq        integer     NOT NULL,
    payload    json        NOT NULL,
    event_id   uuid,
    trigger_id uuid,
    added_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (batch_id, seq)
);

CREATE UNIQUE INDEX IF NOT EXISTS start_batch_items_firing_idx
    ON kagzi.start_batch_items (event_id, trigger_id) WHERE event_id IS NOT NULL;

-- A trigger's batch settings (NULL batch_max_size: each event starts a run).
ALTER TABLE kagzi.triggers ADD COLUMN IF NOT EXISTS batch_key text;
ALTER TABLE kagzi.triggers ADD COLUMN IF NOT EXISTS batch_max_size integer;
ALTER TABLE kagzi.triggers ADD COLUMN IF NOT EXISTS batch_max_wait_ms bigint;

CREATE OR REPLACE FUNCTION kagzi.notify_start_batch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kagzi', json_build_object('k', 'e', 'ns', NEW.namespace_id, 'id', NEW.batch_id)::text);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS start_batches_notify ON kagzi.start_batches;
CREATE TRIGGER start_batches_notify AFTER INSERT ON kagzi.start_batches
    FOR EACH ROW EXECUTE FUNCTION kagzi.notify_start_batch();

---- create above / drop below ----

DROP TABLE IF EXISTS kagzi.start_batch_items;
DROP TABLE IF EXISTS kagzi.start_batches;
DROP FUNCTION IF EXISTS kagzi.notify_start_batch();
ALTER TABLE kagzi.triggers DROP COLUMN IF EXISTS batch_key;
ALTER TABLE kagzi.triggers DROP COLUMN IF EXISTS batch_max_size;
ALTER TABLE kagzi.triggers DROP COLUMN IF EXISTS batch_max_wait_ms;
