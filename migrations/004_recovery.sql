-- Failure paths: runs waiting behind a concurrency limit are woken when the
-- limit is raised or removed.

-- A limit raised (max_running grew) or removed frees slots at once: announce
-- the queue as claimable, with the payload kagzi.notify_runs sends for a
-- queue ({"k":"r","ns":…,"q":…,"at":…}), one notification per queue per
-- statement. A new or lowered limit frees nothing and says nothing.
CREATE FUNCTION kagzi.notify_limits() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rec record;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        FOR rec IN
            SELECT DISTINCT n.namespace_id, n.task_queue
            FROM new_rows n JOIN old_rows o USING (namespace_id, task_queue, workflow_type)
            WHERE n.max_running > o.max_running
        LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', now())::text);
        END LOOP;
    ELSIF TG_OP = 'DELETE' THEN
        FOR rec IN SELECT DISTINCT namespace_id, task_queue FROM old_rows LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', now())::text);
        END LOOP;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER concurrency_limits_notify_update AFTER UPDATE ON kagzi.concurrency_limits
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.notify_limits();
CREATE TRIGGER concurrency_limits_notify_delete AFTER DELETE ON kagzi.concurrency_limits
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.notify_limits();

---- create above / drop below ----

DROP TRIGGER concurrency_limits_notify_delete ON kagzi.concurrency_limits;
DROP TRIGGER concurrency_limits_notify_update ON kagzi.concurrency_limits;
DROP FUNCTION kagzi.notify_limits();
