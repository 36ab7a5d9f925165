-- Failure paths: runs waiting behind a concurrency limit are woken when the
-- limit is raised or removed; a run lost before its holder received it
-- does not count an attempt; a start may be refused when no live worker
-- serves its type.

-- A limit raised (max_running grew) or removed frees slots at once: announce
-- the queue as claimable, with the payload kagzi.notify_runs sends for a
-- queue ({"k":"r","ns":…,"q":…,"at":…}), one notification per queue per
-- statement. A new or lowered limit frees nothing and says nothing.
-- kagzi:function notify_limits

CREATE TRIGGER concurrency_limits_notify_update AFTER UPDATE ON kagzi.concurrency_limits
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.notify_limits();
CREATE TRIGGER concurrency_limits_notify_delete AFTER DELETE ON kagzi.concurrency_limits
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.notify_limits();

-- held: the run's holder is known to have received it. The claim clears
-- it; the reaper's heartbeat flush (RunsExtendLeases) sets it for the runs
-- a worker lists. Recovering a run from a lost holder counts an attempt
-- (and may fail it as exhausted) only when it is set: a run claimed for a
-- worker that never got it goes back to PENDING as it was. Runs running
-- now were claimed when every recovery counted: they keep counting.
ALTER TABLE kagzi.workflow_runs ADD COLUMN held boolean NOT NULL DEFAULT false;
UPDATE kagzi.workflow_runs SET held = true WHERE status = 'RUNNING';

-- require_worker refuses a start (RunsCreateParams.RequireWorker) of
-- type@version in a namespace and queue that no live worker serves: served
-- is the caller's check, made in the start's own statement (one snapshot,
-- so it cannot race the insert). The SQLSTATE is the store's ErrNoWorker.
CREATE FUNCTION kagzi.require_worker(served boolean, ns text, queue text, typ text, ver text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF NOT served THEN
        RAISE EXCEPTION 'no live worker serves %@% on queue % of namespace %', typ, ver, queue, ns
            USING ERRCODE = 'KZ001';
    END IF;
    RETURN true;
END
$$;

---- create above / drop below ----

DROP FUNCTION kagzi.require_worker(boolean, text, text, text, text);

ALTER TABLE kagzi.workflow_runs DROP COLUMN held;

DROP TRIGGER concurrency_limits_notify_delete ON kagzi.concurrency_limits;
DROP TRIGGER concurrency_limits_notify_update ON kagzi.concurrency_limits;
DROP FUNCTION kagzi.notify_limits();
