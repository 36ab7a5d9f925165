-- The claim's order: within a priority, runs that have begun (started_at
-- set: resumed after a sleep, an event, a child or a retry, or released
-- by a worker) before runs not yet started, then by due time. A run that
-- wakes at T is claimed at T however many starts are queued before T:
-- finishing started work comes first, and new starts only add load. Runs
-- with a rate key keep priority, then due time: a full window holds them
-- in the windows ahead, and a run claimed again waits behind those held
-- before it rather than taking their window.
--
-- One ordered scan still serves the claim: the index's order is the
-- claim's ORDER BY (priority DESC, started_at IS NULL OR rate_key IS NOT
-- NULL, available_at). It replaces workflow_runs_claim_idx, so every
-- run's transitions keep one claim index to maintain. The next-due-time
-- queries read workflow_runs_due_idx, unchanged.
--
-- README "Upgrading": on a large table, create the index CONCURRENTLY
-- first (this statement then does nothing); the drop is instant. Replace
-- the dispatchers soon after: an older dispatcher's claim, ordered without
-- started_at, no longer has an index in its order and sorts the due runs.
CREATE INDEX IF NOT EXISTS workflow_runs_claim_started_idx ON kagzi.workflow_runs
    (namespace_id, task_queue, priority DESC, (started_at IS NULL OR rate_key IS NOT NULL), available_at)
    WHERE status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL;
DROP INDEX IF EXISTS kagzi.workflow_runs_claim_idx;

-- claim_flow (013_flow_keys.sql) read workflow_runs_claim_idx for its
-- candidates of types without a per-key limit (uc) and its runs without a
-- key (nc, the queue's first 256 due runs): both now take the claim's
-- order, begun runs first within a priority, and read the new index.
-- Across keys the order stays the round-robin rank, then priority, then
-- age. The rest of the function is 013's.
-- kagzi:function claim_flow

---- create above / drop below ----

CREATE INDEX workflow_runs_claim_idx ON kagzi.workflow_runs
    (namespace_id, task_queue, priority DESC, available_at)
    WHERE status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL;
DROP INDEX kagzi.workflow_runs_claim_started_idx;

-- Restore kagzi.claim_flow as 013_flow_keys.sql defined it (git history of that file,
-- from before the function moved to functions/claim_flow.sql).
