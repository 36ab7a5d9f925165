-- The hot path's cost in Postgres, measured with `kagzi bench --own-postgres`
-- (pg_stat_statements, track = all).
--
-- 1. The statement-level triggers on workflow_runs ran every one of their
--    joins of the transition tables for every UPDATE: about five hash joins
--    per claim, completion batch or heartbeat, most of which can find
--    nothing. One pass over new_rows now says which can, and the rest are
--    skipped; the cascade to children is looked for only when an ended run
--    has a live child (a probe of the parent index per ended run). What the
--    triggers send and do is unchanged. (A column list, UPDATE OF, would
--    skip them outright, but Postgres allows no transition tables on such
--    triggers.)
--
-- 2. step_runs and workflow_payloads lose their foreign keys to
--    workflow_runs. Every step write already reads the run row FOR SHARE
--    under the lease check (no lease, no write), which is the stronger
--    guarantee, and a run's payload row is inserted by the statement that
--    inserts the run; each key added a lookup and a KEY SHARE lock on the
--    run row per row written. Only schedule templates are ever deleted
--    (they have no steps): SchedulesDelete deletes the template's payload
--    row with it, which is all the cascades did.

CREATE OR REPLACE FUNCTION kagzi.notify_runs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rec record;
    due boolean;
    ended boolean;
    cancelled boolean;
    cron boolean;
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
               coalesce(bool_or(cron_expr IS NOT NULL), false)
        INTO due, ended, cancelled, cron FROM new_rows;
        -- Became claimable, or its due time moved earlier.
        FOR rec IN
            SELECT n.namespace_id, n.task_queue, min(n.available_at) AS at
            FROM new_rows n JOIN old_rows o USING (run_id)
            WHERE due AND n.status IN ('PENDING', 'SLEEPING') AND n.available_at IS NOT NULL
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
                WHERE ended AND n.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
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
            WHERE cancelled AND o.status = 'RUNNING' AND n.status = 'CANCELLED' AND o.locked_by IS NOT NULL
        LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 'c', 'ns', rec.namespace_id, 'id', rec.run_id, 'w', rec.locked_by)::text);
        END LOOP;
        -- Schedule templates that changed status or next fire time.
        FOR rec IN
            SELECT n.namespace_id, n.run_id, CASE WHEN n.status = 'SCHEDULED' THEN n.available_at END AS at
            FROM new_rows n JOIN old_rows o USING (run_id)
            WHERE cron AND n.cron_expr IS NOT NULL
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
    FOR rec IN
        SELECT n.namespace_id, n.run_id, n.locked_by
        FROM new_rows n JOIN old_rows o USING (run_id)
        WHERE asked AND n.status = 'RUNNING' AND n.locked_by IS NOT NULL
          AND n.cancel_requested_at IS NOT NULL AND o.cancel_requested_at IS NULL
    LOOP
        PERFORM pg_notify('kagzi', json_build_object('k', 'c', 'ns', rec.namespace_id, 'id', rec.run_id, 'w', rec.locked_by, 'r', true)::text);
    END LOOP;
    -- A completion batch rarely ends a run with live children: probe the
    -- parent index per ended run before the join that locks them.
    IF NOT EXISTS (SELECT 1 FROM new_rows n WHERE n.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
                   AND EXISTS (SELECT 1 FROM kagzi.workflow_runs c WHERE c.parent_run_id = n.run_id
                               AND c.status IN ('PENDING', 'RUNNING', 'SLEEPING'))) THEN
        RETURN NULL;
    END IF;
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


ALTER TABLE kagzi.step_runs DROP CONSTRAINT step_runs_run_id_fkey;
ALTER TABLE kagzi.workflow_payloads DROP CONSTRAINT workflow_payloads_run_id_fkey;

---- create above / drop below ----

ALTER TABLE kagzi.workflow_payloads ADD CONSTRAINT workflow_payloads_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES kagzi.workflow_runs (run_id) ON DELETE CASCADE;
ALTER TABLE kagzi.step_runs ADD CONSTRAINT step_runs_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES kagzi.workflow_runs (run_id) ON DELETE CASCADE;

CREATE OR REPLACE FUNCTION kagzi.cancellations() RETURNS trigger LANGUAGE plpgsql AS $$
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


CREATE OR REPLACE FUNCTION kagzi.notify_runs() RETURNS trigger LANGUAGE plpgsql AS $$
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

