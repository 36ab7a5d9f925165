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

CREATE FUNCTION kagzi.notify_runs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rec record;
BEGIN
    IF TG_OP = 'INSERT' THEN
        FOR rec IN
            SELECT namespace_id, task_queue, min(available_at) AS at FROM new_rows
            WHERE status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL
            GROUP BY namespace_id, task_queue
        LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', rec.at)::text);
        END LOOP;
        FOR rec IN SELECT namespace_id, run_id, available_at FROM new_rows WHERE cron_expr IS NOT NULL LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 's', 'ns', rec.namespace_id, 'id', rec.run_id, 'at', rec.available_at)::text);
        END LOOP;
    ELSIF TG_OP = 'UPDATE' THEN
        -- Became claimable, or its due time moved earlier.
        FOR rec IN
            SELECT n.namespace_id, n.task_queue, min(n.available_at) AS at
            FROM new_rows n JOIN old_rows o USING (run_id)
            WHERE n.status IN ('PENDING', 'SLEEPING') AND n.available_at IS NOT NULL
              AND (o.status NOT IN ('PENDING', 'SLEEPING') OR o.available_at IS NULL OR n.available_at < o.available_at)
            GROUP BY n.namespace_id, n.task_queue
        LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', rec.at)::text);
        END LOOP;
        -- Reached a terminal status: ~100 runs per notification (8000-byte payload limit).
        FOR rec IN
            SELECT namespace_id, json_agg(json_build_array(run_id, status)) AS runs
            FROM (
                SELECT n.namespace_id, n.run_id, n.status,
                       (row_number() OVER (PARTITION BY n.namespace_id ORDER BY n.run_id) - 1) / 100 AS chunk
                FROM new_rows n JOIN old_rows o USING (run_id)
                WHERE n.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
                  AND o.status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')
            ) t
            GROUP BY namespace_id, chunk
        LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 'd', 'ns', rec.namespace_id, 'runs', rec.runs)::text);
        END LOOP;
        -- Cancelled while running: tell the holder.
        FOR rec IN
            SELECT n.namespace_id, n.run_id, o.locked_by
            FROM new_rows n JOIN old_rows o USING (run_id)
            WHERE o.status = 'RUNNING' AND n.status = 'CANCELLED' AND o.locked_by IS NOT NULL
        LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 'c', 'ns', rec.namespace_id, 'id', rec.run_id, 'w', rec.locked_by)::text);
        END LOOP;
        -- Schedule templates that changed status or next fire time.
        FOR rec IN
            SELECT n.namespace_id, n.run_id, CASE WHEN n.status = 'SCHEDULED' THEN n.available_at END AS at
            FROM new_rows n JOIN old_rows o USING (run_id)
            WHERE n.cron_expr IS NOT NULL
              AND (n.status IS DISTINCT FROM o.status OR n.available_at IS DISTINCT FROM o.available_at
                   OR n.cron_expr IS DISTINCT FROM o.cron_expr)
        LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 's', 'ns', rec.namespace_id, 'id', rec.run_id, 'at', rec.at)::text);
        END LOOP;
    ELSIF TG_OP = 'DELETE' THEN
        FOR rec IN SELECT namespace_id, run_id FROM old_rows WHERE cron_expr IS NOT NULL LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 's', 'ns', rec.namespace_id, 'id', rec.run_id, 'at', NULL)::text);
        END LOOP;
    END IF;
    RETURN NULL;
END
$$;

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
