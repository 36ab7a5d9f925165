-- kagzi.notify_runs: the statement-level triggers on workflow_runs
-- (002_notify.sql) send wakeups on the channel 'kagzi' with it: runs of a
-- queue due, a slot of a limited type freed, runs ended, a running run
-- cancelled, a schedule changed. After an update it also holds paused runs
-- (022_pause.sql) and releases the buffered fire of a schedule whose
-- instance ended (015_schedule_overlap.sql), which row triggers with a
-- WHEN clause did until 039: Postgres prepares a WHEN clause for every
-- statement that updates the table, whatever its rows (docs/BENCHMARKS.md,
-- "What a one-row statement costs before its row"), where this function
-- looks for such runs only when its pass over the new rows has found a run
-- made due or ended.
--
-- The current definition, which every migration naming it (a line
-- "-- kagzi:function NAME") runs, so that a fresh database and an upgraded
-- one end with the same function. A change to it is a new migration naming
-- it, pinned with the file's digest (see migrations/embed.go).
-- Declared with nested loops off: its joins of new_rows and old_rows are
-- planned once per session and the plan kept, planned for the row counts
-- of the call that planned it (often a claim of one row). A nested loop
-- over two transition tables is quadratic in the rows a statement updates
-- (17 ms for a report ending 200 runs); with nested loops off the kept
-- plan is a hash join, linear at any count. Planning each join per
-- statement through EXECUTE (036) cost as much as running it.
CREATE OR REPLACE FUNCTION kagzi.notify_runs() RETURNS trigger LANGUAGE plpgsql
SET enable_nestloop = off AS $$
DECLARE
    rec record;
    due boolean;
    ended boolean;
    cancelled boolean;
    cron boolean;
    freed boolean;
    held boolean;
    instance_ended boolean;
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
        -- One pass over the new rows says which of the joins below can
        -- find anything: a claim or a heartbeat needs none of them, a
        -- completion only the finished runs'.
        SELECT coalesce(bool_or(status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL), false),
               coalesce(bool_or(status IN ('COMPLETED', 'FAILED', 'CANCELLED')), false),
               coalesce(bool_or(status = 'CANCELLED'), false),
               coalesce(bool_or(cron_expr IS NOT NULL), false),
               coalesce(bool_or(limited AND status <> 'RUNNING'), false)
        INTO due, ended, cancelled, cron, freed FROM new_rows;
        -- Only a run that ended or became due can be held or end a
        -- schedule's instance: a claim or a heartbeat reads no further.
        -- (This pass names paused_at, which 022 adds; kept apart, the one
        -- above runs in the migrations before it, which update no such row.)
        held := false;
        instance_ended := false;
        IF due OR ended THEN
            SELECT coalesce(bool_or(paused_at IS NOT NULL AND (status IN ('COMPLETED', 'FAILED', 'CANCELLED')
                       OR (available_at IS NOT NULL AND status IN ('PENDING', 'SLEEPING')))), false),
                   coalesce(bool_or(schedule_id IS NOT NULL AND status IN ('COMPLETED', 'FAILED', 'CANCELLED')), false)
            INTO held, instance_ended FROM new_rows;
        END IF;
        -- A paused run that ended is no longer paused; one that became due
        -- keeps its due time aside until it is resumed (022_pause.sql).
        -- The runs are named by an array, not joined: nested loops are off
        -- in this function, and a join would scan workflow_runs.
        IF held THEN
            UPDATE kagzi.workflow_runs SET paused_at = NULL, paused_by = NULL, paused_reason = NULL, paused_due_at = NULL
            WHERE run_id = ANY (ARRAY(SELECT run_id FROM new_rows
                                      WHERE paused_at IS NOT NULL AND status IN ('COMPLETED', 'FAILED', 'CANCELLED')))
              AND paused_at IS NOT NULL;
            UPDATE kagzi.workflow_runs SET paused_due_at = least(paused_due_at, available_at), available_at = NULL
            WHERE run_id = ANY (ARRAY(SELECT run_id FROM new_rows
                                      WHERE paused_at IS NOT NULL AND available_at IS NOT NULL AND status IN ('PENDING', 'SLEEPING')))
              AND paused_at IS NOT NULL AND available_at IS NOT NULL AND status IN ('PENDING', 'SLEEPING');
        END IF;
        -- An instance of a schedule with overlap policy buffer-one ended:
        -- its template fires the buffered fire now (015_schedule_overlap.sql).
        -- The template's lock is taken first, and the update is a statement
        -- of its own: it sees what a scheduler committed while this waited.
        IF instance_ended THEN
            FOR rec IN
                SELECT DISTINCT n.schedule_id FROM new_rows n JOIN old_rows o USING (run_id)
                WHERE o.schedule_id IS NOT NULL AND o.status IN ('PENDING', 'RUNNING', 'SLEEPING')
                  AND n.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
            LOOP
                PERFORM 1 FROM kagzi.workflow_runs t
                WHERE t.run_id = rec.schedule_id AND t.status = 'SCHEDULED' AND t.overlap_policy = 'buffer-one'
                FOR NO KEY UPDATE;
                IF FOUND THEN
                    UPDATE kagzi.workflow_runs t SET available_at = now(), held_next_at = t.available_at
                    WHERE t.run_id = rec.schedule_id AND t.status = 'SCHEDULED' AND t.buffered_fire_at IS NOT NULL
                      AND t.available_at > now();
                END IF;
            END LOOP;
        END IF;
        -- The joins of new_rows and old_rows below run only when the pass
        -- above says they can find something.
        -- Became claimable, or its due time moved earlier.
        IF due THEN
            FOR rec IN
                SELECT n.namespace_id, n.task_queue, min(n.available_at) AS at
                FROM new_rows n JOIN old_rows o USING (run_id)
                WHERE n.status IN ('PENDING', 'SLEEPING') AND n.available_at IS NOT NULL
                  AND (o.status NOT IN ('PENDING', 'SLEEPING') OR o.available_at IS NULL OR n.available_at < o.available_at)
                GROUP BY n.namespace_id, n.task_queue
            LOOP
                PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', rec.at)::text);
            END LOOP;
        END IF;
        -- Reached a terminal status: ~100 runs per notification (8000-byte payload limit).
        IF ended THEN
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
        END IF;
        -- A run claimed under a concurrency limit (limited: a total or
        -- per-key limit of its type) stopped running: a slot is free, so
        -- runs waiting for one may be claimable now. Without this the
        -- dispatchers find them only at their backed-off look at a queue
        -- whose due runs the claim left (up to 30 s).
        IF freed THEN
            FOR rec IN
                SELECT DISTINCT n.namespace_id, n.task_queue
                FROM new_rows n JOIN old_rows o USING (run_id)
                WHERE o.status = 'RUNNING' AND o.limited AND n.status <> 'RUNNING'
            LOOP
                PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', now())::text);
            END LOOP;
        END IF;
        -- Cancelled while running: tell the holder.
        IF cancelled THEN
            FOR rec IN
                SELECT n.namespace_id, n.run_id, o.locked_by
                FROM new_rows n JOIN old_rows o USING (run_id)
                WHERE o.status = 'RUNNING' AND n.status = 'CANCELLED' AND o.locked_by IS NOT NULL
            LOOP
                PERFORM pg_notify('kagzi', json_build_object('k', 'c', 'ns', rec.namespace_id, 'id', rec.run_id, 'w', rec.locked_by)::text);
            END LOOP;
        END IF;
        -- Schedule templates that changed status or next fire time.
        IF cron THEN
            FOR rec IN
                SELECT n.namespace_id, n.run_id, CASE WHEN n.status = 'SCHEDULED' THEN n.available_at END AS at
                FROM new_rows n JOIN old_rows o USING (run_id)
                WHERE n.cron_expr IS NOT NULL
                  AND (n.status IS DISTINCT FROM o.status OR n.available_at IS DISTINCT FROM o.available_at
                       OR n.cron_expr IS DISTINCT FROM o.cron_expr)
            LOOP
                PERFORM pg_notify('kagzi', json_build_object('k', 's', 'ns', rec.namespace_id, 'id', rec.run_id, 'at', rec.at)::text);
            END LOOP;
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        FOR rec IN SELECT namespace_id, run_id FROM old_rows WHERE cron_expr IS NOT NULL LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 's', 'ns', rec.namespace_id, 'id', rec.run_id, 'at', NULL)::text);
        END LOOP;
    END IF;
    RETURN NULL;
END
$$;
