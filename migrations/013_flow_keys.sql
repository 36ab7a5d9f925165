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

CREATE FUNCTION kagzi.claim_flow(ns text, queue text, types text[], type_versions text[], lim integer)
    RETURNS TABLE (run_id uuid, due_at timestamptz, limited boolean)
    LANGUAGE plpgsql VOLATILE ROWS 10 SET lock_timeout = '2s' SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    l_types   text[] := '{}';
    l_max     integer[] := '{}';
    l_per     integer[] := '{}';
    rec       record;
    c_ids     uuid[];
    c_rate    text[];
    k_full    integer;
    r_keys    text[] := '{}';
    r_free    integer[] := '{}';
    r_end     timestamptz[] := '{}';
    r_max     integer[] := '{}';
    r_period  bigint[] := '{}';
    cur       timestamptz;
    taken     uuid[];
    held      integer := 0;
    n         integer;
    i         integer;
BEGIN
    FOR rec IN
        SELECT l.workflow_type, l.max_running, l.max_per_key FROM kagzi.concurrency_limits l
        WHERE l.namespace_id = ns AND l.task_queue = queue AND l.workflow_type = ANY(types)
        ORDER BY l.workflow_type
        FOR UPDATE
    LOOP
        l_types := l_types || rec.workflow_type;
        l_max := l_max || rec.max_running;
        l_per := l_per || rec.max_per_key;
    END LOOP;

    WITH RECURSIVE
    lt AS (
        SELECT t.typ, t.mx, t.per FROM unnest(l_types, l_max, l_per) AS t(typ, mx, per)
    ),
    keys(typ, k) AS (
        SELECT lt.typ, (SELECT min(r.concurrency_key) FROM kagzi.workflow_runs r
            WHERE r.namespace_id = ns AND r.task_queue = queue AND r.workflow_type = lt.typ
              AND r.status IN ('PENDING', 'SLEEPING') AND r.available_at IS NOT NULL AND r.concurrency_key IS NOT NULL)
        FROM lt WHERE lt.per IS NOT NULL
        UNION ALL
        SELECT keys.typ, (SELECT min(r.concurrency_key) FROM kagzi.workflow_runs r
            WHERE r.namespace_id = ns AND r.task_queue = queue AND r.workflow_type = keys.typ
              AND r.status IN ('PENDING', 'SLEEPING') AND r.available_at IS NOT NULL AND r.concurrency_key > keys.k)
        FROM keys WHERE keys.k IS NOT NULL
    ),
    run_key AS (
        SELECT r.workflow_type AS typ, r.concurrency_key AS k, count(*)::integer AS n FROM kagzi.workflow_runs r
        WHERE r.namespace_id = ns AND r.task_queue = queue AND r.workflow_type = ANY(l_types)
          AND r.status = 'RUNNING' AND r.limited AND r.concurrency_key IS NOT NULL
        GROUP BY 1, 2
    ),
    run_type AS (
        SELECT r.workflow_type AS typ, count(*)::integer AS n FROM kagzi.workflow_runs r
        WHERE r.namespace_id = ns AND r.task_queue = queue AND r.workflow_type = ANY(l_types)
          AND r.status = 'RUNNING' AND r.limited
        GROUP BY 1
    ),
    kfree AS (
        SELECT keys.typ, keys.k, lt.per - coalesce(rk.n, 0) AS free
        FROM keys JOIN lt USING (typ) LEFT JOIN run_key rk ON rk.typ = keys.typ AND rk.k = keys.k
        WHERE keys.k IS NOT NULL
    ),
    kc AS (
        SELECT x.run_id, kfree.typ, x.rate_key, x.priority, x.available_at, x.rk FROM kfree CROSS JOIN LATERAL (
            SELECT y.*, row_number() OVER (ORDER BY y.priority DESC, y.available_at) AS rk FROM (
                SELECT r.run_id, r.rate_key, r.priority, r.available_at FROM kagzi.workflow_runs r
                WHERE r.namespace_id = ns AND r.task_queue = queue AND r.workflow_type = kfree.typ AND r.concurrency_key = kfree.k
                  AND r.status IN ('PENDING', 'SLEEPING') AND r.available_at <= now()
                  AND (r.version = '' OR r.workflow_type || '@' || r.version = ANY(type_versions))
                ORDER BY r.priority DESC, r.available_at
                LIMIT least(greatest(kfree.free, 0), lim)
            ) y
        ) x
    ),
    uc AS (
        SELECT x.run_id, t.typ, x.rate_key, x.priority, x.available_at, x.rk
        FROM (SELECT DISTINCT u AS typ FROM unnest(types) AS u
              WHERE NOT EXISTS (SELECT 1 FROM lt WHERE lt.typ = u AND lt.per IS NOT NULL)) t CROSS JOIN LATERAL (
            SELECT y.*, row_number() OVER (ORDER BY y.priority DESC, y.available_at) AS rk FROM (
                SELECT r.run_id, r.rate_key, r.priority, r.available_at FROM kagzi.workflow_runs r
                WHERE r.namespace_id = ns AND r.task_queue = queue AND r.workflow_type = t.typ
                  AND r.status IN ('PENDING', 'SLEEPING') AND r.available_at <= now()
                  AND (r.version = '' OR r.workflow_type || '@' || r.version = ANY(type_versions))
                ORDER BY r.priority DESC, r.available_at
                LIMIT lim
            ) y
        ) x
    ),
    -- Runs without a key of a per-key type: one group, looked for among
    -- the first 256 due runs of the queue (no index holds them apart from
    -- the keyed ones, and a scan of the whole queue per claim would cost
    -- as much as the queue is long).
    nc AS (
        SELECT y.run_id, y.workflow_type AS typ, y.rate_key, y.priority, y.available_at,
            row_number() OVER (PARTITION BY y.workflow_type ORDER BY y.priority DESC, y.available_at) AS rk
        FROM (
            SELECT r.run_id, r.workflow_type, r.rate_key, r.priority, r.available_at, r.concurrency_key, r.version
            FROM kagzi.workflow_runs r
            WHERE r.namespace_id = ns AND r.task_queue = queue
              AND r.status IN ('PENDING', 'SLEEPING') AND r.available_at <= now()
            ORDER BY r.priority DESC, r.available_at
            LIMIT 256
        ) y
        WHERE y.concurrency_key IS NULL AND y.workflow_type IN (SELECT lt.typ FROM lt WHERE lt.per IS NOT NULL)
          AND (y.version = '' OR y.workflow_type || '@' || y.version = ANY(type_versions))
    ),
    cand AS (
        SELECT u.*, row_number() OVER (PARTITION BY u.typ ORDER BY u.rk, u.priority DESC, u.available_at) AS tn
        FROM (SELECT * FROM kc UNION ALL SELECT * FROM uc UNION ALL SELECT * FROM nc WHERE nc.rk <= lim) u
    ),
    kept AS (
        SELECT cand.* FROM cand LEFT JOIN lt USING (typ) LEFT JOIN run_type rt USING (typ)
        WHERE lt.mx IS NULL OR cand.tn <= lt.mx - coalesce(rt.n, 0)
    )
    SELECT array_agg(kept.run_id ORDER BY kept.rk, kept.priority DESC, kept.available_at),
           array_agg(kept.rate_key ORDER BY kept.rk, kept.priority DESC, kept.available_at),
           (SELECT count(*) FROM kfree WHERE kfree.free <= 0)
    INTO c_ids, c_rate, k_full FROM kept;

    IF c_ids IS NULL THEN
        PERFORM set_config('kagzi.flow_key_full', k_full::text, true);
        PERFORM set_config('kagzi.flow_rate_held', '0', true);
        PERFORM set_config('kagzi.flow_taken', '[]', true);
        RETURN;
    END IF;

    FOR rec IN
        SELECT rl.rate_key, rl.max_claims, rl.period_ms, rl.window_start, rl.claims FROM kagzi.rate_limits rl
        WHERE rl.namespace_id = ns AND rl.rate_key IN (SELECT DISTINCT x FROM unnest(c_rate) AS x WHERE x IS NOT NULL)
        ORDER BY rl.rate_key
        FOR UPDATE
    LOOP
        cur := kagzi.rate_window(now(), rec.period_ms);
        r_keys := r_keys || rec.rate_key;
        r_max := r_max || rec.max_claims;
        r_period := r_period || rec.period_ms;
        r_end := r_end || (cur + rec.period_ms * interval '1 millisecond');
        r_free := r_free || CASE
            WHEN rec.window_start < cur THEN rec.max_claims
            WHEN rec.window_start = cur THEN greatest(rec.max_claims - rec.claims, 0)
            ELSE 0 END;
    END LOOP;

    -- Keep, per rate key, the candidates its window has room for; then the
    -- first lim; then lock them.
    SELECT coalesce(array_agg(f.id), '{}') INTO taken FROM (
        SELECT r.run_id AS id FROM kagzi.workflow_runs r WHERE r.run_id IN (
            SELECT q.id FROM (
                SELECT c.id, c.ord, rk.free,
                    row_number() OVER (PARTITION BY c.rate ORDER BY c.ord) AS rn
                FROM unnest(c_ids, c_rate) WITH ORDINALITY AS c(id, rate, ord)
                LEFT JOIN unnest(r_keys, r_free) AS rk(key, free) ON rk.key = c.rate
            ) q WHERE q.free IS NULL OR q.rn <= q.free
            ORDER BY q.ord LIMIT lim)
          AND r.status IN ('PENDING', 'SLEEPING') AND r.available_at <= now()
        FOR UPDATE SKIP LOCKED
    ) f;

    FOR i IN 1 .. coalesce(array_length(r_keys, 1), 0) LOOP
        SELECT count(*) INTO n FROM kagzi.workflow_runs r WHERE r.run_id = ANY(taken) AND r.rate_key = r_keys[i];
        IF n > 0 THEN
            -- Count the taken runs in the key's window.
            UPDATE kagzi.rate_limits rl SET
                claims = CASE WHEN rl.window_start = kagzi.rate_window(now(), rl.period_ms) THEN rl.claims + n ELSE n END,
                window_start = kagzi.rate_window(now(), rl.period_ms)
            WHERE rl.namespace_id = ns AND rl.rate_key = r_keys[i];
        END IF;
        CONTINUE WHEN r_free[i] > n;
        -- The window is full: move the key's due runs to the windows ahead.
        UPDATE kagzi.workflow_runs r SET
            available_at = r_end[i] + ((h.rn - 1) / r_max[i]) * r_period[i] * interval '1 millisecond'
        FROM (
            SELECT z.run_id AS id, row_number() OVER (ORDER BY z.priority DESC, z.available_at) AS rn FROM (
                SELECT w.run_id, w.priority, w.available_at FROM kagzi.workflow_runs w
                WHERE w.namespace_id = ns AND w.task_queue = queue AND w.rate_key = r_keys[i]
                  AND w.status IN ('PENDING', 'SLEEPING') AND w.available_at <= now()
                  AND w.run_id <> ALL (taken)
                ORDER BY w.priority DESC, w.available_at
                LIMIT 1000
                FOR UPDATE SKIP LOCKED
            ) z
        ) h
        WHERE r.run_id = h.id;
        GET DIAGNOSTICS n = ROW_COUNT;
        held := held + n;
    END LOOP;

    PERFORM set_config('kagzi.flow_key_full', k_full::text, true);
    PERFORM set_config('kagzi.flow_rate_held', held::text, true);
    -- The runs taken, for the claim statement that follows in the same
    -- transaction (store runsClaimFlowSQL): it must read their steps with
    -- a snapshot taken after these locks. A statement that called this
    -- function would read them with its own, older snapshot, from before a
    -- report that suspended a run this function then found claimable, and
    -- deliver the run without the steps that report recorded.
    PERFORM set_config('kagzi.flow_taken', (
        SELECT coalesce(json_agg(json_build_array(r.run_id, r.available_at, r.workflow_type = ANY(l_types))), '[]')::text
        FROM kagzi.workflow_runs r WHERE r.run_id = ANY(taken)), true);

    RETURN QUERY
        SELECT r.run_id, r.available_at, r.workflow_type = ANY(l_types)
        FROM kagzi.workflow_runs r WHERE r.run_id = ANY(taken);
END
$$;


-- A per-key limit raised or removed frees slots as a raised total does
-- (migration 005): announce the queue; so does a total cap removed from a
-- type that keeps its per-key limit (max_running now NULL).
CREATE OR REPLACE FUNCTION kagzi.notify_limits() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rec record;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        FOR rec IN
            SELECT DISTINCT n.namespace_id, n.task_queue
            FROM new_rows n JOIN old_rows o USING (namespace_id, task_queue, workflow_type)
            WHERE n.max_running > o.max_running OR (n.max_running IS NULL AND o.max_running IS NOT NULL)
               OR n.max_per_key > o.max_per_key OR (n.max_per_key IS NULL AND o.max_per_key IS NOT NULL)
        LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', now())::text);
        END LOOP;
    ELSIF TG_OP = 'DELETE' THEN
        FOR rec IN SELECT DISTINCT namespace_id, task_queue FROM old_rows LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', now())::text);
        END LOOP;
    END IF;
    RETURN NULL;
END
$$;

---- create above / drop below ----

CREATE OR REPLACE FUNCTION kagzi.notify_limits() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rec record;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        FOR rec IN
            SELECT DISTINCT n.namespace_id, n.task_queue
            FROM new_rows n JOIN old_rows o USING (namespace_id, task_queue, workflow_type)
            WHERE n.max_running > o.max_running
        LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', now())::text);
        END LOOP;
    ELSIF TG_OP = 'DELETE' THEN
        FOR rec IN SELECT DISTINCT namespace_id, task_queue FROM old_rows LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', now())::text);
        END LOOP;
    END IF;
    RETURN NULL;
END
$$;

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
