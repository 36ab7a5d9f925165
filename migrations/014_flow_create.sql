-- Flow control on the create path: debounced starts and id reuse
-- policies (store.RunsCreate; README "Flow control").
--
-- A debounced run carries its key and how many starts it took in. Both
-- are NULL on every other run: adding them rewrites nothing, and a start
-- without a debounce key writes them as today.
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS debounce_key text;
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS debounce_starts integer;

-- At most one debounced run per (namespace, type, key) is open: PENDING
-- and never claimed. A debounced start inserts into it with ON CONFLICT
-- DO UPDATE, so concurrent starts with one key meet here and merge into
-- the one run; once claimed (started_at set) the run leaves the index and
-- the next start opens a new one. Only debounced runs are in it, so the
-- hot path pays nothing; on a large table, create it first with CREATE
-- UNIQUE INDEX CONCURRENTLY (same name and definition, README
-- "Upgrading"), and this statement does nothing.
CREATE UNIQUE INDEX IF NOT EXISTS workflow_runs_debounce_idx ON kagzi.workflow_runs
    (namespace_id, workflow_type, debounce_key)
    WHERE debounce_key IS NOT NULL AND status = 'PENDING' AND started_at IS NULL;

-- Finished runs by external id, newest end first: a start with an id
-- reuse policy other than the default reads the last run that held its
-- id (workflow_runs_external_id_idx has only the live ones), and
-- RunsGetByExternalID finds a finished run without a scan. Only finished
-- runs with an external id are in it: a run without one pays nothing, a
-- run with one an entry at its end.
CREATE INDEX IF NOT EXISTS workflow_runs_external_id_finished_idx ON kagzi.workflow_runs
    (namespace_id, external_id, finished_at DESC)
    WHERE external_id IS NOT NULL AND status IN ('COMPLETED', 'FAILED', 'CANCELLED');

---- create above / drop below ----

DROP INDEX kagzi.workflow_runs_external_id_finished_idx;
DROP INDEX kagzi.workflow_runs_debounce_idx;
ALTER TABLE kagzi.workflow_runs DROP COLUMN debounce_starts;
ALTER TABLE kagzi.workflow_runs DROP COLUMN debounce_key;
