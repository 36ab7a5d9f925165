-- Storage for a long life: an index of finished runs for retention, and
-- per-table storage parameters, chosen from what the tables do (measured
-- with `kagzi bench`: see docs/BENCHMARKS.md, "Storage").

-- Finished runs by (namespace, type, status, finished_at): retention's
-- loose scan of the groups (store.RunsNextExpiry) and its paced batches
-- (store.RunsDeleteExpired) probe it, instead of reading every run of the
-- table each time. Only finished runs are in it, so the hot path pays one
-- entry per run, at its completion. On a large table, create it first
-- with CREATE INDEX CONCURRENTLY (same name and definition, README
-- "Upgrading"); then this statement finds it and does nothing.
CREATE INDEX IF NOT EXISTS workflow_runs_finished_idx ON kagzi.workflow_runs
    (namespace_id, workflow_type, status, finished_at)
    WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED');

-- workflow_payloads: a run's output is written into its input's row, and
-- only the primary key indexes it, so that update can be HOT (no new index
-- entry, less WAL) when the row's page has room for the new version, as
-- large as the old one plus the output. Measured with `kagzi bench
-- --scenario throughput --steps 1 --runs 10000`: at the default fillfactor
-- 100, 15.6 % of the updates were HOT; at 70, 56 %; at 50, 100 %, with
-- 13 % less WAL per run and a smaller table (1.60 MB instead of 1.82 MB:
-- the old versions are pruned within their page, and the index does not
-- grow with every update).
ALTER TABLE kagzi.workflow_payloads SET (fillfactor = 50);

-- Autovacuum on the tables that churn. The defaults vacuum a table once a
-- fifth of it is dead (autovacuum_vacuum_scale_factor 0.2): on a
-- workflow_runs of 20 million rows that is 4 million dead row versions
-- before the first vacuum, which the claim's partial index and every
-- index scan wade through. A run's row is updated two to four times in
-- its first seconds and then only deleted by retention, so the dead
-- versions come at the rate of the work, not of the table's size: vacuum
-- after a fixed amount of it (threshold) plus 1 % of the table, analyse
-- after 2 %, vacuum inserted-only pages (the visibility map, for
-- index-only scans) after 5 % of inserts, and let the vacuum of these
-- tables work four times as fast as the default cost limit allows.
ALTER TABLE kagzi.workflow_runs SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_limit = 800
);
ALTER TABLE kagzi.step_runs SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_limit = 800
);
ALTER TABLE kagzi.workflow_payloads SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_vacuum_cost_limit = 800
);
ALTER TABLE kagzi.workflow_events SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05
);

-- workers: a few rows, each updated at every heartbeat (last_heartbeat_at
-- is indexed, so never HOT): vacuum after 200 dead versions rather than
-- 50 + 20 %, which for a handful of rows is the same, and keeps the table a
-- few pages long with a thousand workers.
ALTER TABLE kagzi.workers SET (
    autovacuum_vacuum_scale_factor = 0.05,
    autovacuum_vacuum_threshold = 200
);

---- create above / drop below ----

ALTER TABLE kagzi.workers RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE kagzi.workflow_events RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_insert_scale_factor);
ALTER TABLE kagzi.workflow_payloads RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_cost_limit);
ALTER TABLE kagzi.step_runs RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor, autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_limit);
ALTER TABLE kagzi.workflow_runs RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor, autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_limit);
DROP INDEX kagzi.workflow_runs_finished_idx;
