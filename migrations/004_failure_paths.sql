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
CREATE FUNCTION kagzi.cancellations() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rec record;
BEGIN
    -- Most statements (claims, sleeps, heartbeats) neither end a run nor
    -- touch a request to cancel: one pass over their new rows and nothing
    -- else.
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED')
                   OR cancel_requested_at IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    FOR rec IN
        SELECT n.namespace_id, n.run_id, n.locked_by
        FROM new_rows n JOIN old_rows o USING (run_id)
        WHERE n.status = 'RUNNING' AND n.locked_by IS NOT NULL
          AND n.cancel_requested_at IS NOT NULL AND o.cancel_requested_at IS NULL
    LOOP
        PERFORM pg_notify('kagzi', json_build_object('k', 'c', 'ns', rec.namespace_id, 'id', rec.run_id, 'w', rec.locked_by, 'r', true)::text);
    END LOOP;
    WITH closed AS (
        SELECT n.run_id FROM new_rows n JOIN old_rows o USING (run_id)
        WHERE n.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
          AND o.status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')
    ), kids AS (
        SELECT c.run_id, coalesce(c.parent_close_policy, 'TERMINATE') AS policy,
               c.status = 'PENDING' AND c.started_at IS NULL AS unstarted
        FROM kagzi.workflow_runs c JOIN closed p ON c.parent_run_id = p.run_id
        WHERE c.status IN ('PENDING', 'RUNNING', 'SLEEPING') AND coalesce(c.parent_close_policy, 'TERMINATE') <> 'ABANDON'
        ORDER BY c.run_id
        FOR NO KEY UPDATE OF c
    ), u AS (
        UPDATE kagzi.workflow_runs c SET
            status = CASE WHEN k.policy = 'TERMINATE' OR k.unstarted THEN 'CANCELLED' ELSE c.status END,
            finished_at = CASE WHEN k.policy = 'TERMINATE' OR k.unstarted THEN now() ELSE c.finished_at END,
            error = CASE WHEN k.policy = 'TERMINATE' THEN 'terminated: parent closed'
                         WHEN k.unstarted THEN 'cancelled: parent closed' ELSE c.error END,
            lease_expires_at = CASE WHEN k.policy = 'TERMINATE' OR k.unstarted THEN NULL ELSE c.lease_expires_at END,
            waiting_on = CASE WHEN k.policy = 'TERMINATE' OR k.unstarted THEN NULL ELSE c.waiting_on END,
            available_at = CASE WHEN k.policy = 'TERMINATE' OR k.unstarted THEN NULL
                                WHEN c.status IN ('PENDING', 'SLEEPING') THEN now() ELSE c.available_at END,
            cancel_requested_at = CASE WHEN k.policy = 'REQUEST_CANCEL' THEN coalesce(c.cancel_requested_at, now())
                                       ELSE c.cancel_requested_at END
        FROM kids k WHERE c.run_id = k.run_id
        RETURNING c.run_id, c.parent_run_id, c.parent_step_id, c.status, c.error
    )
    UPDATE kagzi.step_runs s SET status = 'FAILED', finished_at = now(), error_type = 'ChildCancelled',
        error = 'child run ' || u.run_id || ' cancelled: ' || u.error
    FROM u
    WHERE u.status = 'CANCELLED' AND s.run_id = u.parent_run_id AND s.step_id = u.parent_step_id
      AND s.is_latest AND s.kind = 'CHILD' AND s.child_run_id = u.run_id AND s.status IN ('PENDING', 'RUNNING');
    RETURN NULL;
END
$$;

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
