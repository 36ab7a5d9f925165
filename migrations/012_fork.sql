-- Rerun from a step (fork): a new run that reuses an earlier run's recorded
-- step results up to a chosen step and executes from there.

-- forked_from names the run a fork was made from, forked_at_step the step
-- it executes again from ('' for a fork from the start, which reuses
-- nothing). Both are set together, on the fork only; the run it was made
-- from is not changed. No foreign key, like continued_as: retention
-- deletes finished runs one by one and a fork outlives its origin.
--
-- The columns may exist already (README "Upgrading": added by hand to
-- build the index below concurrently first). The check holds for every
-- row made before it (both NULL), so it is NOT VALID: no scan of the table
-- under its lock, and new and updated rows are checked all the same.
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS forked_from uuid;
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS forked_at_step text;
ALTER TABLE kagzi.workflow_runs ADD CONSTRAINT workflow_runs_fork_check
    CHECK ((forked_from IS NULL) = (forked_at_step IS NULL)) NOT VALID;

-- One fork per (run, step): a repeated or concurrent request for the same
-- pair meets this index and returns the fork that exists (store.RunsFork).
-- It also lists a run's forks. Only forks are in it, so its build reads
-- the table once and holds nothing on the hot path; on a large table,
-- add the two columns and create it with CREATE UNIQUE INDEX CONCURRENTLY
-- first (same names and definitions, README "Upgrading"), and these
-- statements do nothing.
CREATE UNIQUE INDEX IF NOT EXISTS workflow_runs_fork_idx ON kagzi.workflow_runs (forked_from, forked_at_step)
    WHERE forked_from IS NOT NULL;

---- create above / drop below ----

DROP INDEX kagzi.workflow_runs_fork_idx;
ALTER TABLE kagzi.workflow_runs DROP CONSTRAINT workflow_runs_fork_check;
ALTER TABLE kagzi.workflow_runs DROP COLUMN forked_at_step;
ALTER TABLE kagzi.workflow_runs DROP COLUMN forked_from;
