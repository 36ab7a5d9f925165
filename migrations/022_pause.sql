-- Pause and resume (docs/pause.md).
--
-- A paused run keeps its status (PENDING, SLEEPING or RUNNING) and says
-- who paused it, why and when (paused_by, paused_reason, paused_at). It is
-- kept out of the claim by its due time, not by a join: while paused, its
-- available_at is NULL, which puts it outside every claim index (they hold
-- only rows with a due time), and the time it would be due is kept in
-- paused_due_at; resuming sets it due again at that time. The claim
-- statements do not change, so an unpaused run's claim costs what it did.
--
-- Every statement that makes a run due (a sleep's end, a retry backoff, an
-- event, a child's end, a cancel request, a release, a recovery, a rate
-- limit's respread), of this version or of an older one still running
-- during an upgrade, is caught by the row trigger below: for a paused run
-- it moves the new due time into paused_due_at (the earliest one wins)
-- and clears available_at again, in the same statement. Its WHEN clause
-- is all an unpaused row costs: it is evaluated on the row the update
-- already holds, with no function call and no lock (an AFTER trigger; a
-- BEFORE row trigger would lock each updated row first). When a paused
-- run ends, the trigger clears its pause: a finished run is not paused.
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS paused_at timestamptz;
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS paused_by text;
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS paused_reason text;
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS paused_due_at timestamptz;

-- The paused runs of a namespace (kagzi run list --status paused, the
-- paused-runs gauge); empty while nothing is paused.
CREATE INDEX IF NOT EXISTS workflow_runs_paused_idx ON kagzi.workflow_runs (namespace_id, paused_at)
    WHERE paused_at IS NOT NULL;

CREATE OR REPLACE FUNCTION kagzi.hold_paused() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('COMPLETED', 'FAILED', 'CANCELLED') THEN
        UPDATE kagzi.workflow_runs SET paused_at = NULL, paused_by = NULL, paused_reason = NULL, paused_due_at = NULL
        WHERE run_id = NEW.run_id AND paused_at IS NOT NULL;
    ELSE
        UPDATE kagzi.workflow_runs SET paused_due_at = least(paused_due_at, available_at), available_at = NULL
        WHERE run_id = NEW.run_id AND paused_at IS NOT NULL AND available_at IS NOT NULL
          AND status IN ('PENDING', 'SLEEPING');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER workflow_runs_hold_paused AFTER UPDATE ON kagzi.workflow_runs FOR EACH ROW
    WHEN (NEW.paused_at IS NOT NULL AND (NEW.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
        OR (NEW.available_at IS NOT NULL AND NEW.status IN ('PENDING', 'SLEEPING'))))
    EXECUTE FUNCTION kagzi.hold_paused();

-- Paused queues and workflow types, per namespace. The claim reads it
-- once per claim statement, by an uncorrelated probe of its key (as it
-- reads concurrency_limits): no claim while a row names the queue or a
-- requested type, and then the claim is made again without the paused
-- types (store.RunsClaim). The table is new and small (a row per paused
-- queue or type); an older binary never reads it, so during an upgrade
-- its claims ignore queue and type pauses.
CREATE TABLE IF NOT EXISTS kagzi.pauses (
    namespace_id text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('queue', 'type')),
    name text NOT NULL,
    paused_by text NOT NULL,
    paused_reason text NOT NULL,
    paused_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace_id, kind, name)
);

---- create above / drop below ----

DROP TABLE IF EXISTS kagzi.pauses;
DROP TRIGGER IF EXISTS workflow_runs_hold_paused ON kagzi.workflow_runs;
DROP FUNCTION IF EXISTS kagzi.hold_paused();
DROP INDEX IF EXISTS kagzi.workflow_runs_paused_idx;
ALTER TABLE kagzi.workflow_runs DROP COLUMN IF EXISTS paused_due_at, DROP COLUMN IF EXISTS paused_reason,
    DROP COLUMN IF EXISTS paused_by, DROP COLUMN IF EXISTS paused_at;
