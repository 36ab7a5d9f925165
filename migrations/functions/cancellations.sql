-- kagzi.cancellations: after every update of runs, tells the holder of a
-- running run asked to cancel, and applies the parent-close policies of the
-- live children of the runs the statement ended (004_failure_paths.sql).
--
-- The current definition, which every migration naming it (a line
-- "-- kagzi:function NAME") runs, so that a fresh database and an upgraded
-- one end with the same function. A change to it is a new migration naming
-- it, pinned with the file's digest (see migrations/embed.go).
CREATE OR REPLACE FUNCTION kagzi.cancellations() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rec record;
    ended boolean;
    asked boolean;
BEGIN
    -- Most statements (claims, sleeps, heartbeats) neither end a run nor
    -- touch a request to cancel: one pass over their new rows and nothing
    -- else.
    SELECT coalesce(bool_or(status IN ('COMPLETED', 'FAILED', 'CANCELLED')), false),
           coalesce(bool_or(cancel_requested_at IS NOT NULL), false)
    INTO ended, asked FROM new_rows;
    IF NOT ended AND NOT asked THEN
        RETURN NULL;
    END IF;
    -- The joins of new_rows and old_rows run through EXECUTE, each only
    -- when it can find something, so each is planned for this statement's
    -- row counts: a cached plan keeps the counts of the statement that
    -- planned it (often one row, a nested loop), and a nested loop over two
    -- transition tables is quadratic in the rows the statement updated.
    IF asked THEN
        FOR rec IN EXECUTE $q$
            SELECT n.namespace_id, n.run_id, n.locked_by
            FROM new_rows n JOIN old_rows o USING (run_id)
            WHERE n.status = 'RUNNING' AND n.locked_by IS NOT NULL
              AND n.cancel_requested_at IS NOT NULL AND o.cancel_requested_at IS NULL $q$
        LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 'c', 'ns', rec.namespace_id, 'id', rec.run_id, 'w', rec.locked_by, 'r', true)::text);
        END LOOP;
    END IF;
    -- A completion batch rarely ends a run with live children: probe the
    -- parent index for the ended runs before the join that locks them
    -- (kagzi.live_children, whose plan cannot turn into a scan of the
    -- table).
    IF NOT ended THEN
        RETURN NULL;
    END IF;
    IF NOT kagzi.live_children(ARRAY(SELECT run_id FROM new_rows WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED'))) THEN
        RETURN NULL;
    END IF;
    EXECUTE $q$
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
      AND s.is_latest AND s.kind = 'CHILD' AND s.child_run_id = u.run_id AND s.status IN ('PENDING', 'RUNNING') $q$;
    RETURN NULL;
END
$$;
