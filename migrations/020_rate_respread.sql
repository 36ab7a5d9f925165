-- Runs a rate limit held back are given back their due time when the limit
-- is changed or removed. A full window moves a key's due runs to the
-- windows ahead (claim_flow); with a limit of 1 per day, runs are due
-- years ahead, and raising or removing the limit used to leave them there.
--
-- rate_due_at is when a held run was due before the first window held it
-- (NULL for a run no window holds). The flow claim clears it. Changing or
-- removing a key's limit sets each of its held runs due at that time
-- again, and clears it, in the transaction that changes the limit: the
-- next claim spreads them over the new limit's windows, or claims them
-- at once without one. The partial index finds a key's held runs only.
-- The column is added without a rewrite, and the index is empty at first.
ALTER TABLE kagzi.workflow_runs ADD COLUMN IF NOT EXISTS rate_due_at timestamptz;
CREATE INDEX IF NOT EXISTS workflow_runs_rate_held_idx ON kagzi.workflow_runs (namespace_id, rate_key)
    WHERE rate_due_at IS NOT NULL;

-- claim_flow records rate_due_at when it holds a run; the rest is 017's.
-- kagzi:function claim_flow sha256:d41d188ac6a2b8b4

---- create above / drop below ----

-- Restore kagzi.claim_flow as 017_claim_order.sql defined it (git history
-- of migrations/functions/claim_flow.sql) before dropping the column.
DROP INDEX IF EXISTS kagzi.workflow_runs_rate_held_idx;
ALTER TABLE kagzi.workflow_runs DROP COLUMN IF EXISTS rate_due_at;
