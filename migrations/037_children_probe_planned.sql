-- The cancellations trigger's probe for live children of the runs a
-- statement ended joined new_rows to workflow_runs in a statement without
-- parameters, whose plan PL/pgSQL makes once per session: made while
-- workflow_runs was nearly empty (a fresh database, a session opened
-- early) it scanned the whole table for every ended run once the table had
-- grown, 850 ms for a report ending 300 runs among 40,000
-- (docs/BENCHMARKS.md, "The children probe"). The probe is now
-- kagzi.live_children, whose one statement is planned once per session
-- (a generic plan: a custom plan per call costs 0.2 ms) with sequential
-- scans off, so the parent index is its only way in, whatever size the
-- table had when the session planned it. (Planning the probe per statement
-- through EXECUTE, as 036 does for the joins of transition tables, cost
-- 0.2-0.4 ms per report: the table has two dozen indexes to consider.)
-- Only functions change: a service of the previous version runs against
-- them unchanged.

-- live_children says whether a run of parents has a child not yet ended.
CREATE OR REPLACE FUNCTION kagzi.live_children(parents uuid[]) RETURNS boolean
LANGUAGE plpgsql STABLE SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM kagzi.workflow_runs c
                   WHERE c.parent_run_id = ANY(parents) AND c.status IN ('PENDING', 'RUNNING', 'SLEEPING'));
END
$$;

-- A run claimed under a concurrency limit that stops running announces
-- its queue as claimable again (notify_runs): the announcement
-- 003_durable.sql added was lost when 007_hot_path.sql redefined the
-- function, so runs waiting for a free slot were found only by the
-- dispatchers' backed-off look at a queue whose due runs the claim left
-- (up to 30 s).

-- kagzi:function notify_runs

-- kagzi:function cancellations sha256:27f33fdd6cac0ff2

---- create above / drop below ----

-- The previous definitions of notify_runs and cancellations are
-- 036_trigger_joins_planned.sql's; the functions' files in git at that
-- migration hold them.
DROP FUNCTION IF EXISTS kagzi.live_children(uuid[]);
