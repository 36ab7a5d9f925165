-- Batch operations (docs/batches.md). A batch is one action (cancel,
-- terminate, signal, update, pause, resume, retry, fork) over a set of runs fixed when
-- it is created: the runs a query matched then, or a list of ids. Each run
-- of the set is a row of kagzi.batch_runs; its outcome is written in the
-- same transaction as the action on the run, so a batch whose worker
-- dies or stalls mid-way acts on no run twice and skips none: what the
-- worker did committed with its outcomes, what it did not is still
-- pending. The reaper's leader works batches (services/reaper/batches.go)
-- at each batch's rate, woken by the notification below.
CREATE TABLE IF NOT EXISTS kagzi.batches (
    batch_id uuid PRIMARY KEY,
    namespace_id text NOT NULL,
    action text NOT NULL CHECK (action IN ('cancel', 'terminate', 'signal', 'update', 'pause', 'resume', 'retry', 'fork')),
    -- query is the filter the set was resolved from (NULL: a list of ids).
    query text,
    -- reason: a terminate's or a pause's; event_name and payload: a
    -- signal's event, or an update's name and request.
    reason text NOT NULL DEFAULT '',
    event_name text NOT NULL DEFAULT '',
    payload jsonb,
    created_by text NOT NULL DEFAULT '',
    state text NOT NULL CHECK (state IN ('running', 'paused', 'cancelled', 'completed')),
    -- rate caps the runs acted on per second.
    rate integer NOT NULL CHECK (rate > 0),
    total integer NOT NULL,
    done integer NOT NULL DEFAULT 0,
    failed integer NOT NULL DEFAULT 0,
    skipped integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);

-- A namespace's batches, newest first (kagzi batch list).
CREATE INDEX IF NOT EXISTS batches_namespace_idx ON kagzi.batches (namespace_id, created_at DESC);
-- The batches to work on: empty while none runs.
CREATE INDEX IF NOT EXISTS batches_running_idx ON kagzi.batches (created_at) WHERE state = 'running';

-- outcome is NULL while the run waits for the action; error says why an
-- action failed or was skipped (the run had finished, say); detail what a
-- done action made (a fork's run, an update's id).
CREATE TABLE IF NOT EXISTS kagzi.batch_runs (
    batch_id uuid NOT NULL REFERENCES kagzi.batches ON DELETE CASCADE,
    run_id uuid NOT NULL,
    outcome text CHECK (outcome IN ('done', 'failed', 'skipped')),
    error text,
    detail text,
    acted_at timestamptz,
    PRIMARY KEY (batch_id, run_id)
);

-- The runs a batch has still to act on.
CREATE INDEX IF NOT EXISTS batch_runs_pending_idx ON kagzi.batch_runs (batch_id, run_id) WHERE outcome IS NULL;

-- A batch that is created, changes state or moves on by a percent of its
-- runs notifies (relayed as protocol.BatchChanged): the reaper's leader
-- works on a batch created or resumed running, and the consoles show the
-- progress. A batch records its outcomes one run at a time; notifying each
-- would put up to its rate of messages a second on the relay, so progress
-- notifies at most a hundred times a batch.
CREATE OR REPLACE FUNCTION kagzi.notify_batch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.state = NEW.state AND OLD.total = NEW.total
        AND (OLD.done + OLD.failed + OLD.skipped) * 100 / greatest(NEW.total, 1)
            = (NEW.done + NEW.failed + NEW.skipped) * 100 / greatest(NEW.total, 1) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('kagzi', json_build_object('k', 'b', 'ns', NEW.namespace_id, 'id', NEW.batch_id, 'st', NEW.state,
        'r', TG_OP = 'INSERT' OR OLD.state IS DISTINCT FROM NEW.state)::text);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS batches_notify ON kagzi.batches;
CREATE TRIGGER batches_notify AFTER INSERT OR UPDATE ON kagzi.batches
    FOR EACH ROW EXECUTE FUNCTION kagzi.notify_batch();

---- create above / drop below ----

DROP TABLE IF EXISTS kagzi.batch_runs;
DROP TABLE IF EXISTS kagzi.batches;
DROP FUNCTION IF EXISTS kagzi.notify_batch();
