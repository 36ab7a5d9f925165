-- Flow control by a key taken from the run: per-key concurrency limits
-- with fairness across keys, and rate limits per rate key. Both are
-- enforced by the claim (kagzi.claim_flow); runs without keys and types
-- without a per-key limit keep the plain claim statement.

-- concurrency_key: the run counts against its type's per-key limit under
-- this key (e.g. a customer id). rate_key: each claim of the run counts
-- against the rate limit of this key (kagzi.rate_limits). Both are set at
-- start and never change.
ALTER TABLE kagzi.workflow_runs ADD COLUMN concurrency_key text;
ALTER TABLE kagzi.workflow_runs ADD COLUMN rate_key text;

-- max_per_key caps the RUNNING runs per concurrency key of the type (NULL:
-- no per-key limit). max_running may now be NULL: a per-key limit without a
-- cap on the type as a whole.
ALTER TABLE kagzi.concurrency_limits ADD COLUMN max_per_key integer;
ALTER TABLE kagzi.concurrency_limits ALTER COLUMN max_running DROP NOT NULL;
ALTER TABLE kagzi.concurrency_limits ADD CONSTRAINT concurrency_limits_per_key_check
    CHECK (max_per_key IS NULL OR max_per_key >= 1);
ALTER TABLE kagzi.concurrency_limits ADD CONSTRAINT concurrency_limits_some_check
    CHECK (max_running IS NOT NULL OR max_per_key IS NOT NULL);

-- Running runs per concurrency key of limited types: the count claim_flow
-- makes for each key after locking the type's limit row.
CREATE INDEX workflow_runs_running_key_idx ON kagzi.workflow_runs
    (namespace_id, task_queue, workflow_type, concurrency_key)
    WHERE status = 'RUNNING' AND limited AND concurrency_key IS NOT NULL;

-- Claimable runs by concurrency key: the loose index scan over the distinct
-- keys of a type, then each key's best runs. Only keyed runs are in it.
CREATE INDEX workflow_runs_claim_key_idx ON kagzi.workflow_runs
    (namespace_id, task_queue, workflow_type, concurrency_key, priority DESC, available_at)
    WHERE status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL AND concurrency_key IS NOT NULL;

-- Claimable rate-keyed runs by due time: the plain claim's one probe
-- ("is a rate-keyed run due in this queue?"), empty when no run has a rate
-- key, so the common claim pays one probe of an empty index.
CREATE INDEX workflow_runs_claim_rate_due_idx ON kagzi.workflow_runs
    (namespace_id, task_queue, available_at)
    WHERE status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL AND rate_key IS NOT NULL;

-- Claimable rate-keyed runs by key, in claim order: the runs a claim holds
-- back when the key's window is full.
CREATE INDEX workflow_runs_claim_rate_idx ON kagzi.workflow_runs
    (namespace_id, task_queue, rate_key, priority DESC, available_at)
    WHERE status IN ('PENDING', 'SLEEPING') AND available_at IS NOT NULL AND rate_key IS NOT NULL;

-- Rate limits: at most max_claims claims of runs with rate_key per period,
-- in fixed windows aligned to the epoch (window_start is the start of the
-- window claims counts). The claim locks the row, so claims of a key
-- serialise across dispatchers and the count is exact.
CREATE TABLE kagzi.rate_limits (
    namespace_id  text        NOT NULL,
    rate_key      text        NOT NULL,
    max_claims    integer     NOT NULL,
    period_ms     bigint      NOT NULL,
    window_start  timestamptz NOT NULL DEFAULT 'epoch',
    claims        integer     NOT NULL DEFAULT 0,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace_id, rate_key),
    CONSTRAINT rate_limits_max_check CHECK (max_claims >= 1),
    CONSTRAINT rate_limits_period_check CHECK (period_ms >= 1)
);

-- claim_flow chooses the runs a claim takes when a requested type has a
-- per-key limit or a rate-keyed run is due, and locks them; the claim
-- statement (store runsClaimFlowSQL) then claims them. In order:
--
--  1. It locks the limit rows of the requested types (by type, so two
--     claims never deadlock): claims of a limited type serialise there.
--  2. With a snapshot taken after those locks (each query of a VOLATILE
--     function gets one), it counts the RUNNING runs per type and per key,
--     and picks candidates: for each key of a per-key type with claimable
--     runs (a loose index scan over the distinct keys), up to its free
--     slots; for the rest of each type (runs without a key, types without a
--     per-key limit), up to lim (runs without a key of a per-key type are
--     looked for among the queue's first 256 due runs). Each candidate is
--     ranked within its key (or type); candidates go in round-robin order — rank, then priority, then
--     age — and each type keeps only as many as its own free slots.
--  3. It locks the rate_limits rows of the candidates' rate keys (by key)
--     and keeps, per key, only what the current window has left; the rate
--     window is the epoch-aligned one of the claim's transaction time.
--  4. It takes the first lim and locks them (SKIP LOCKED, rechecking that
--     each is still claimable), names them in the transaction-local setting
--     kagzi.flow_taken (the claim statement, run next, claims those), adds
--     them to their keys' windows, and moves
--     the due runs of each key whose window is full (at most 1000 per key
--     and claim) to the windows ahead — max_claims per window, in claim
--     order — so they are not due until then: the dispatcher's timer wakes
--     for them, nothing polls.
--
-- ROWS 10 keeps the claim statement's plan on the primary key (the
-- default estimate, 1000 rows, makes it scan the whole table).
-- Its queries are planned once per session (force_generic_plan): planning
-- the candidate query afresh for each claim would cost more than running it.
-- Row locks wait at most lock_timeout (2 s): a claim stuck behind a frozen
-- session fails and is retried, instead of waiting as long as the freeze.
-- Two settings local to the transaction report what the claim held back:
-- kagzi.flow_key_full (keys at their limit with queued runs) and
-- kagzi.flow_rate_held (runs moved to a later window).
-- rate_window is the start of the epoch-aligned window of period_ms
-- milliseconds that holds t.
CREATE FUNCTION kagzi.rate_window(t timestamptz, period_ms bigint) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT 'epoch'::timestamptz + (floor(extract(epoch FROM t) * 1000 / period_ms) * period_ms) * interval '1 millisecond' $$;

-- kagzi:function claim_flow


-- A per-key limit raised or removed frees slots as a raised total does
-- (migration 005): announce the queue; so does a total cap removed from a
-- type that keeps its per-key limit (max_running now NULL).
-- kagzi:function notify_limits sha256:bab47c2e5b873aac

---- create above / drop below ----

-- Restore kagzi.notify_limits as 005_recovery.sql defined it (git history of that file,
-- from before the function moved to functions/notify_limits.sql).

DROP FUNCTION kagzi.claim_flow(text, text, text[], text[], integer);
DROP FUNCTION kagzi.rate_window(timestamptz, bigint);
DROP TABLE kagzi.rate_limits;
DROP INDEX kagzi.workflow_runs_claim_rate_idx;
DROP INDEX kagzi.workflow_runs_claim_rate_due_idx;
DROP INDEX kagzi.workflow_runs_claim_key_idx;
DROP INDEX kagzi.workflow_runs_running_key_idx;
DELETE FROM kagzi.concurrency_limits WHERE max_running IS NULL;
ALTER TABLE kagzi.concurrency_limits DROP CONSTRAINT concurrency_limits_some_check;
ALTER TABLE kagzi.concurrency_limits DROP CONSTRAINT concurrency_limits_per_key_check;
ALTER TABLE kagzi.concurrency_limits ALTER COLUMN max_running SET NOT NULL;
ALTER TABLE kagzi.concurrency_limits DROP COLUMN max_per_key;
ALTER TABLE kagzi.workflow_runs DROP COLUMN rate_key;
ALTER TABLE kagzi.workflow_runs DROP COLUMN concurrency_key;
