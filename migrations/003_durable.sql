-- Durable execution semantics: step retry budgets, child fan-in, global
-- concurrency limits.

-- The run attempt that made a step attempt (copied from workflow_runs.attempts
-- when the attempt is recorded). A step's retry budget is counted within one
-- run attempt: a failed step of an earlier run attempt starts a fresh budget
-- when the run is retried. A manual retry of a failed run clears it (NULL:
-- "an earlier retry epoch"), since it restarts the run's attempt count.
ALTER TABLE kagzi.step_runs ADD COLUMN run_attempt integer;

-- The kind of error of a failed attempt (workflow.ErrorType), so a replayed
-- failure names the same type as the original.
ALTER TABLE kagzi.step_runs ADD COLUMN error_type text;

-- The CHILD step ids a suspended parent waits for (fan-in). Each child that
-- finishes removes its step id, in the same statement as its own terminal
-- transition, and the one that empties the list makes the parent claimable.
-- The list lives on the parent's row so that concurrent finishing children
-- serialise on that row: each one's removal is applied to the row as the
-- previous one left it, so the last child always sees the list empty.
ALTER TABLE kagzi.workflow_runs ADD COLUMN waiting_on text[];

-- a minus b, NULL when nothing is left (also when a is NULL).
CREATE FUNCTION kagzi.array_minus(a text[], b text[]) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT array_agg(x) FROM unnest(a) AS x WHERE x <> ALL (b) $$;

-- Global concurrency limits: at most max_running runs of a workflow type
-- RUNNING at once in one namespace and queue. The claim statement enforces
-- them (see kagzi.claim_slots); types without a row are unlimited.
CREATE TABLE kagzi.concurrency_limits (
    namespace_id   text        NOT NULL,
    task_queue     text        NOT NULL,
    workflow_type  text        NOT NULL,
    max_running    integer     NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace_id, task_queue, workflow_type),
    CONSTRAINT concurrency_limits_max_check CHECK (max_running >= 0)
);

-- limited marks a run claimed under a concurrency limit (set by the claim
-- statement that took it; LimitsSet marks the runs already running when a
-- limit is set). Only such runs are in the index the limit's count uses, so
-- the claims of unlimited types — the common case — pay for no index entry.
ALTER TABLE kagzi.workflow_runs ADD COLUMN limited boolean NOT NULL DEFAULT false;

-- Running runs of limited types, per type: the count claim_slots makes.
CREATE INDEX workflow_runs_running_limited_idx ON kagzi.workflow_runs (workflow_type, task_queue, namespace_id)
    WHERE status = 'RUNNING' AND limited;

-- claim_slots returns how many more runs of a limited type the calling claim
-- may take. It locks the limit's row until the caller's transaction ends, so
-- claims of that type serialise, and it counts with a snapshot taken after
-- the lock (a VOLATILE function's query gets a fresh snapshot under READ
-- COMMITTED): it sees every run an earlier claim made RUNNING. A claim
-- statement's own snapshot predates the lock, which is why the count cannot
-- be part of the claim statement itself.
CREATE FUNCTION kagzi.claim_slots(ns text, queue text, typ text) RETURNS integer
    LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    lim integer;
    running integer;
BEGIN
    SELECT max_running INTO lim FROM kagzi.concurrency_limits
    WHERE namespace_id = ns AND task_queue = queue AND workflow_type = typ
    FOR UPDATE;
    IF lim IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT count(*) INTO running FROM kagzi.workflow_runs
    WHERE namespace_id = ns AND task_queue = queue AND workflow_type = typ AND status = 'RUNNING' AND limited;
    RETURN greatest(lim - running, 0);
END
$$;

-- The notification trigger function of 002_notify.sql, plus one case:
-- runs of a type with a concurrency limit that stop running (complete,
-- fail, sleep, wait, release, cancel, recovery) announce their queue as
-- claimable, so a dispatcher holding requests for runs that waited for a
-- free slot claims them at once.
-- kagzi:function notify_runs

---- create above / drop below ----

-- Restore kagzi.notify_runs as 002_notify.sql defined it (git history of that file,
-- from before the function moved to functions/notify_runs.sql).


DROP FUNCTION kagzi.claim_slots(text, text, text);
DROP INDEX kagzi.workflow_runs_running_limited_idx;
ALTER TABLE kagzi.workflow_runs DROP COLUMN limited;
DROP TABLE kagzi.concurrency_limits;
DROP FUNCTION kagzi.array_minus(text[], text[]);
ALTER TABLE kagzi.workflow_runs DROP COLUMN waiting_on;
ALTER TABLE kagzi.step_runs DROP COLUMN error_type;
ALTER TABLE kagzi.step_runs DROP COLUMN run_attempt;
