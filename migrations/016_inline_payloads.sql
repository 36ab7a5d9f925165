-- A run's input and output move into its workflow_runs row.
--
-- They lived in workflow_payloads(run_id, input, output) so that the hot
-- row stayed narrow, at the price of a second row per run: one more insert
-- when a run starts, one more update (and its index lookup) when it ends,
-- and a join in every read of a payload. A bytea column costs a statement
-- that does not name it nothing (the claim's index scans and the console's
-- lists select their columns), and a payload larger than about 2 kB is
-- compressed and moved out of line by TOAST, where an update that does not
-- change it copies only its pointer. So a run is one inserted row and its
-- completion one updated row.
--
-- Earlier versions read and write workflow_payloads, so this migration is
-- not additive: upgrade across it with every service stopped (README
-- "Upgrading"). The column additions take no rewrite (no default); the
-- copy is one UPDATE, which rewrites every run row once.
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS input bytea;
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS output bytea;

-- With the table's own triggers off: the copy changes no status, so they
-- would find nothing to announce or cancel, and the trigger functions a
-- migration runs are their current definitions (migrations/embed.go),
-- which may call what later migrations create (kagzi.live_children, 037).
ALTER TABLE kagzi.workflow_runs DISABLE TRIGGER USER;
UPDATE kagzi.workflow_runs r SET input = p.input, output = p.output
FROM kagzi.workflow_payloads p
WHERE p.run_id = r.run_id AND (p.input IS NOT NULL OR p.output IS NOT NULL);
ALTER TABLE kagzi.workflow_runs ENABLE TRIGGER USER;

-- Its fillfactor and autovacuum settings (migration 010) go with it.
DROP TABLE kagzi.workflow_payloads;

-- Room in workflow_runs' pages. Its updates (claim, sleep, completion)
-- change indexed columns, so none is HOT; but a new row version that fits
-- in the old one's page is logged as the bytes that changed only (the
-- unchanged prefix and suffix of the row are left out), and the payloads
-- are the row's last columns. With no room, every update logs the whole
-- row, input included: with 1 kB inputs (below TOAST's threshold, so in
-- the row) the claim logged 1,704 WAL bytes per run instead of 660, and a
-- run's claim and completion 6,109 bytes instead of 4,366 with
-- workflow_payloads. At fillfactor 50: 534 for the claim and 3,916 in all;
-- with 16-byte inputs 1,688 bytes a run instead of 1,894 at fillfactor 100
-- and 2,133 before (docs/BENCHMARKS.md, "Payloads in the run row").
-- It applies to pages written from now on.
ALTER TABLE kagzi.workflow_runs SET (fillfactor = 50);

---- create above / drop below ----

CREATE TABLE kagzi.workflow_payloads (
    run_id  uuid  PRIMARY KEY,
    input   bytea,
    output  bytea
) WITH (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_vacuum_cost_limit = 800
);
INSERT INTO kagzi.workflow_payloads (run_id, input, output)
SELECT run_id, input, output FROM kagzi.workflow_runs;
ALTER TABLE kagzi.workflow_runs RESET (fillfactor);
ALTER TABLE kagzi.workflow_runs DROP COLUMN output;
ALTER TABLE kagzi.workflow_runs DROP COLUMN input;
