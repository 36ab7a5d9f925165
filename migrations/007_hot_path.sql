-- The hot path's cost in Postgres, measured with `kagzi bench --own-postgres`
-- (pg_stat_statements, track = all).
--
-- 1. The statement-level triggers on workflow_runs ran every one of their
--    joins of the transition tables for every UPDATE: about five hash joins
--    per claim, completion batch or heartbeat, most of which can find
--    nothing. One pass over new_rows now says which can, and the rest are
--    skipped; the cascade to children is looked for only when an ended run
--    has a live child (a probe of the parent index per ended run). What the
--    triggers send and do is unchanged. (A column list, UPDATE OF, would
--    skip them outright, but Postgres allows no transition tables on such
--    triggers.)
--
-- 2. step_runs and workflow_payloads lose their foreign keys to
--    workflow_runs. Every step write already reads the run row FOR SHARE
--    under the lease check (no lease, no write), which is the stronger
--    guarantee, and a run's payload row is inserted by the statement that
--    inserts the run; each key added a lookup and a KEY SHARE lock on the
--    run row per row written. Only schedule templates are ever deleted
--    (they have no steps): SchedulesDelete deletes the template's payload
--    row with it, which is all the cascades did.

-- kagzi:function notify_runs


-- kagzi:function cancellations


ALTER TABLE kagzi.step_runs DROP CONSTRAINT step_runs_run_id_fkey;
ALTER TABLE kagzi.workflow_payloads DROP CONSTRAINT workflow_payloads_run_id_fkey;

---- create above / drop below ----

ALTER TABLE kagzi.workflow_payloads ADD CONSTRAINT workflow_payloads_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES kagzi.workflow_runs (run_id) ON DELETE CASCADE;
ALTER TABLE kagzi.step_runs ADD CONSTRAINT step_runs_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES kagzi.workflow_runs (run_id) ON DELETE CASCADE;

-- Restore kagzi.cancellations as 004_failure_paths.sql defined it (git history of that file,
-- from before the function moved to functions/cancellations.sql).


-- Restore kagzi.notify_runs as 003_durable.sql defined it (git history of that file,
-- from before the function moved to functions/notify_runs.sql).

