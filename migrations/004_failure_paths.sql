-- Failure paths: database-wide settings (the payload limits every process
-- reads from here, so that the client, the dispatcher and the workers it
-- tells agree on them), cancellation requests, parent-close policies,
-- retry epochs and non-retryable step failures.

CREATE TABLE kagzi.settings (
    -- One row: the key is always true.
    id                  boolean     PRIMARY KEY DEFAULT true,
    payload_warn_bytes  integer     NOT NULL DEFAULT 1048576,
    payload_max_bytes   integer     NOT NULL DEFAULT 2097152,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT settings_one_row_check CHECK (id),
    CONSTRAINT settings_payload_check CHECK (
        payload_warn_bytes > 0 AND payload_max_bytes > 0 AND payload_warn_bytes <= payload_max_bytes)
);
INSERT INTO kagzi.settings DEFAULT VALUES;

-- Cancellation is a request the workflow can handle: the run's context is
-- cancelled (by push, if it is running; at its next delivery otherwise,
-- which the request makes due at once), it may run cleanup, then it ends
-- CANCELLED. Terminating ends a run at once.
ALTER TABLE kagzi.workflow_runs ADD COLUMN cancel_requested_at timestamptz;
-- Set by the claim that delivers a run asked to cancel: its workflow has
-- seen the request, so its later suspensions (a cleanup that sleeps or backs
-- off) wait as they say instead of being made due at once again.
ALTER TABLE kagzi.workflow_runs ADD COLUMN cancel_delivered boolean NOT NULL DEFAULT false;

-- What happens to a child run when its parent reaches a terminal status
-- (completed, failed, cancelled, terminated, past its deadline):
-- TERMINATE (the default, NULL) ends it at once, REQUEST_CANCEL asks it to
-- cancel, ABANDON leaves it running.
ALTER TABLE kagzi.workflow_runs ADD COLUMN parent_close_policy text
    CONSTRAINT workflow_runs_parent_close_policy_check CHECK (parent_close_policy IN ('TERMINATE', 'REQUEST_CANCEL', 'ABANDON'));

-- cancellations, after every update of runs, tells the holder of a running
-- run that was asked to cancel (a notification like notify_runs' "c", with
-- "r": the lease holds and the workflow's context is to be cancelled; a
-- "c" without it, sent by notify_runs when a running run is terminated,
-- voids the lease), and applies the parent-close policies of the live
-- children of every run the statement moved to a terminal status. It is a
-- trigger so that no terminal transition can skip it (reports, the
-- reaper's recoveries and deadlines, cancellations, terminations). Its own update
-- fires it again for the children it terminates, so a policy applies down
-- the tree, each run's children by that run's policies. A request to
-- cancel makes a waiting child due at once, and cancels at once a child
-- that never started; a terminated child's CHILD step in the parent is
-- recorded as failed (the parent has ended, but its history shows why).
-- kagzi:function cancellations

CREATE TRIGGER workflow_runs_cancellations AFTER UPDATE ON kagzi.workflow_runs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.cancellations();


-- The run's retry epoch: how many times its workflow's failure was retried
-- under the run's policy (from 1). A step attempt records the epoch that
-- made it (step_runs.run_attempt), and a step's retry budget, a final
-- failure, a timed-out wait and a failed child hold within one epoch. A run
-- taken back after its worker died or its lease expired starts no new
-- epoch (attempts counts that, against the policy's max attempts): a crash
-- changes how often a step function ran, never what the workflow sees.
ALTER TABLE kagzi.workflow_runs ADD COLUMN epoch integer NOT NULL DEFAULT 1;

-- A failed step attempt marked non-retryable keeps the mark, so that a
-- replay of its final failure carries it as the first execution did.
ALTER TABLE kagzi.step_runs ADD COLUMN non_retryable boolean NOT NULL DEFAULT false;

---- create above / drop below ----

ALTER TABLE kagzi.step_runs DROP COLUMN non_retryable;
ALTER TABLE kagzi.workflow_runs DROP COLUMN epoch;
DROP TRIGGER workflow_runs_cancellations ON kagzi.workflow_runs;
DROP FUNCTION kagzi.cancellations();
ALTER TABLE kagzi.workflow_runs DROP COLUMN parent_close_policy;
ALTER TABLE kagzi.workflow_runs DROP COLUMN cancel_delivered;
ALTER TABLE kagzi.workflow_runs DROP COLUMN cancel_requested_at;
DROP TABLE kagzi.settings;
