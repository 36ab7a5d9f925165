-- kagzi.notify_limits: a concurrency limit raised or removed frees slots,
-- so it announces the queue as claimable (005_recovery.sql,
-- 013_flow_keys.sql).
--
-- The current definition, which every migration naming it (a line
-- "-- kagzi:function NAME") runs, so that a fresh database and an upgraded
-- one end with the same function. A change to it is a new migration naming
-- it, pinned with the file's digest (see migrations/embed.go).
CREATE OR REPLACE FUNCTION kagzi.notify_limits() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rec record;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        FOR rec IN
            SELECT DISTINCT n.namespace_id, n.task_queue
            FROM new_rows n JOIN old_rows o USING (namespace_id, task_queue, workflow_type)
            WHERE n.max_running > o.max_running OR (n.max_running IS NULL AND o.max_running IS NOT NULL)
               OR n.max_per_key > o.max_per_key OR (n.max_per_key IS NULL AND o.max_per_key IS NOT NULL)
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
