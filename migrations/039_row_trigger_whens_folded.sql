-- Two row triggers with a WHEN clause on workflow_runs, hold_paused (022)
-- and schedule_instance_ended (015), cost every statement that updates the
-- table: Postgres reads each WHEN clause back from its stored text and
-- prepares it once per statement, whatever the rows; a one-row lease
-- extension cost 75-81 µs with them and 72 without (docs/BENCHMARKS.md,
-- "What a one-row statement costs before its row"). At a low start rate
-- every claim and completion is such a statement. What they
-- did is now done by kagzi.notify_runs, the statement trigger that already
-- passes over the new rows once: set-wise, only when that pass finds a run
-- that ended or became due. Only triggers and functions change: a service
-- of the previous version runs against them unchanged.

-- kagzi:function notify_runs sha256:d0b20b3eb11f6af6

DROP TRIGGER IF EXISTS workflow_runs_hold_paused ON kagzi.workflow_runs;
DROP FUNCTION IF EXISTS kagzi.hold_paused();
DROP TRIGGER IF EXISTS workflow_runs_schedule_instance_ended ON kagzi.workflow_runs;
DROP FUNCTION IF EXISTS kagzi.schedule_instance_ended();

---- create above / drop below ----

-- The previous definition of notify_runs is 038_trigger_joins_cached.sql's;
-- the function's file in git at that migration holds it. The row triggers
-- and their functions are 015_schedule_overlap.sql's and 022_pause.sql's.
