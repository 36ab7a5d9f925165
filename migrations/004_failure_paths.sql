-- Failure paths: database-wide settings (the payload limits every process
-- reads from here, so that the client, the dispatcher and the workers it
-- tells agree on them).

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

-- What happens to a child run when its parent reaches a terminal status
-- (completed, failed, cancelled, terminated, past its deadline):
-- TERMINATE (the default, NULL) ends it at once, REQUEST_CANCEL asks it to
-- cancel, ABANDON leaves it running.
ALTER TABLE kagzi.workflow_runs ADD COLUMN parent_close_policy text
    CONSTRAINT workflow_runs_parent_close_policy_check CHECK (parent_close_policy IN ('TERMINATE', 'REQUEST_CANCEL', 'ABANDON'));

-- The notification trigger function of 003_durable.sql, with the holder of
-- a running run told of a cancellation request as well as a termination.
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
        -- A run of a type with a concurrency limit stopped running: a slot
        -- is free, so runs of that type waiting for one may be claimable.
        -- (Only when limits exist: the common case pays one probe.)
        IF EXISTS (SELECT 1 FROM kagzi.concurrency_limits) THEN
            FOR rec IN
                SELECT DISTINCT n.namespace_id, n.task_queue
                FROM new_rows n JOIN old_rows o USING (run_id)
                JOIN kagzi.concurrency_limits l ON l.namespace_id = n.namespace_id
                    AND l.task_queue = n.task_queue AND l.workflow_type = n.workflow_type
                WHERE o.status = 'RUNNING' AND n.status <> 'RUNNING'
            LOOP
                PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', now())::text);
            END LOOP;
        END IF;
        -- Terminated while running ("t": the lease is void, abandon it), or
        -- asked to cancel while running (the workflow's context is
        -- cancelled; it may clean up and end): tell the holder.
        FOR rec IN
            SELECT n.namespace_id, n.run_id, o.locked_by, n.status = 'CANCELLED' AS t
            FROM new_rows n JOIN old_rows o USING (run_id)
            WHERE o.status = 'RUNNING' AND o.locked_by IS NOT NULL
              AND (n.status = 'CANCELLED'
                   OR (n.status = 'RUNNING' AND n.cancel_requested_at IS NOT NULL AND o.cancel_requested_at IS NULL))
        LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 'c', 'ns', rec.namespace_id, 'id', rec.run_id, 'w', rec.locked_by, 't', rec.t)::text);
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

-- close_children applies the parent-close policies of the live children of
-- every run the statement moved to a terminal status. It is a trigger so
-- that no terminal transition can skip it (reports, the reaper's
-- recoveries and deadlines, cancellations, terminations). Its own update
-- fires it again for the children it terminates, so a policy applies down
-- the tree, each run's children by that run's policies. A request to
-- cancel makes a waiting child due at once, and cancels at once a child
-- that never started; a terminated child's CHILD step in the parent is
-- recorded as failed (the parent has ended, but its history shows why).
CREATE FUNCTION kagzi.close_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Most statements (claims, sleeps, heartbeats) end no run: one pass
    -- over their new rows and nothing else.
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED')) THEN
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

CREATE TRIGGER workflow_runs_close_children AFTER UPDATE ON kagzi.workflow_runs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.close_children();


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

DROP TRIGGER workflow_runs_close_children ON kagzi.workflow_runs;
DROP FUNCTION kagzi.close_children();
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
        -- A run of a type with a concurrency limit stopped running: a slot
        -- is free, so runs of that type waiting for one may be claimable.
        -- (Only when limits exist: the common case pays one probe.)
        IF EXISTS (SELECT 1 FROM kagzi.concurrency_limits) THEN
            FOR rec IN
                SELECT DISTINCT n.namespace_id, n.task_queue
                FROM new_rows n JOIN old_rows o USING (run_id)
                JOIN kagzi.concurrency_limits l ON l.namespace_id = n.namespace_id
                    AND l.task_queue = n.task_queue AND l.workflow_type = n.workflow_type
                WHERE o.status = 'RUNNING' AND n.status <> 'RUNNING'
            LOOP
                PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', now())::text);
            END LOOP;
        END IF;
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
ALTER TABLE kagzi.workflow_runs DROP COLUMN parent_close_policy;
ALTER TABLE kagzi.workflow_runs DROP COLUMN cancel_requested_at;
DROP TABLE kagzi.settings;
