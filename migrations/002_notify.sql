-- Wakeups: statement-level triggers on workflow_runs send compact JSON on the
-- one channel 'kagzi'; the dispatcher's relay republishes them on NATS.
-- Statement-level with transition tables so a batch of writes sends a
-- handful of notifications (one per queue, one per ~100 finished runs),
-- not one per row: NOTIFY serialises commits.
--
-- Payloads ("k" is the kind):
--   {"k":"r","ns":…,"q":…,"at":…}            runs of a queue claimable at "at" (earliest)
--   {"k":"d","ns":…,"runs":[[id,status],…]}  runs reached a terminal status
--   {"k":"c","ns":…,"id":…,"w":…}            a running run was cancelled; "w" held it
--   {"k":"s","ns":…,"id":…,"at":…}           a schedule template changed (at: next fire, null if none)

-- kagzi:function notify_runs

CREATE TRIGGER workflow_runs_notify_insert AFTER INSERT ON kagzi.workflow_runs
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.notify_runs();
CREATE TRIGGER workflow_runs_notify_update AFTER UPDATE ON kagzi.workflow_runs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.notify_runs();
CREATE TRIGGER workflow_runs_notify_delete AFTER DELETE ON kagzi.workflow_runs
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.notify_runs();

---- create above / drop below ----

DROP TRIGGER workflow_runs_notify_delete ON kagzi.workflow_runs;
DROP TRIGGER workflow_runs_notify_update ON kagzi.workflow_runs;
DROP TRIGGER workflow_runs_notify_insert ON kagzi.workflow_runs;
DROP FUNCTION kagzi.notify_runs();
