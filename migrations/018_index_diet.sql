-- Fewer index entries per run on workflow_runs. Every claim and every
-- completion changes a run's status, which partial indexes name, so
-- neither update is HOT: each writes an entry in every index whose
-- predicate the new row version meets. One index held the claim index's
-- rows in another order, and two more are now one (measured with `kagzi
-- bench --scenario throughput`: see docs/BENCHMARKS.md, "Fewer index
-- entries per run").

-- The earliest due time per queue (store.RunsNextDue) reads the claim
-- index (namespace, queue, priority DESC, available_at) by a loose scan
-- over the queue's few distinct priorities, so the index with the same
-- rows ordered by due time alone goes: one entry less for every run made,
-- woken or retried.
DROP INDEX IF EXISTS kagzi.workflow_runs_due_idx;

-- Leases by worker, then expiry, over running runs: one index where there
-- were two (by worker; by expiry), one entry less per claim and per lease
-- extension. A dead worker's runs and a heartbeat's strays are a range of
-- it; the earliest expiry and the expired leases are read by a loose scan
-- over the few workers that hold runs (store.RunsNextLeaseExpiry,
-- store.RunsExpireLeases). On a large table, create it first with CREATE
-- INDEX CONCURRENTLY (same name and definition, README "Upgrading"); then
-- this statement finds it and does nothing.
CREATE INDEX IF NOT EXISTS workflow_runs_lease_idx ON kagzi.workflow_runs (locked_by, lease_expires_at)
    WHERE status = 'RUNNING';
DROP INDEX IF EXISTS kagzi.workflow_runs_locked_by_idx;
DROP INDEX IF EXISTS kagzi.workflow_runs_lease_expiry_idx;

-- The loose scans walk the holders of running runs: a running run without
-- one would be in no walk, so its lease would never expire. The claim, the
-- only statement that makes a run RUNNING, always names its worker; the
-- check keeps it so. NOT VALID: every row made before holds it, and new
-- and updated rows are checked all the same, with no scan under the lock.
ALTER TABLE kagzi.workflow_runs ADD CONSTRAINT workflow_runs_running_holder_check
    CHECK (status <> 'RUNNING' OR locked_by IS NOT NULL) NOT VALID;

---- create above / drop below ----

ALTER TABLE kagzi.workflow_runs DROP CONSTRAINT workflow_runs_running_holder_check;
CREATE INDEX workflow_runs_lease_expiry_idx ON kagzi.workflow_runs (lease_expires_at)
    WHERE status = 'RUNNING';
CREATE INDEX workflow_runs_locked_by_idx ON kagzi.workflow_runs (locked_by)
    WHERE status = 'RUNNING';
DROP INDEX kagzi.workflow_runs_lease_idx;
CREATE INDEX workflow_runs_due_idx ON kagzi.workflow_runs
    (namespace_id, task_queue, available_at)
    WHERE status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL;
