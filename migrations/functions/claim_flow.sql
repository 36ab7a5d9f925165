-- kagzi.claim_flow: the claim's candidates under concurrency and rate
-- limits, per flow key (013_flow_keys.sql; its order, 017_claim_order.sql).
--
-- The current definition, which every migration naming it (a line
-- "-- kagzi:function NAME") runs, so that a fresh database and an upgraded
-- one end with the same function. A change to it is a new migration naming
-- it, pinned with the file's digest (see migrations/embed.go).
CREATE OR REPLACE FUNCTION kagzi.claim_flow(ns text, queue text, types text[], type_versions text[], lim integer)
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
            SELECT y.*, row_number() OVER (ORDER BY y.priority DESC, (y.started_at IS NULL OR y.rate_key IS NOT NULL), y.available_at) AS rk FROM (
                SELECT r.run_id, r.rate_key, r.priority, r.available_at, r.started_at FROM kagzi.workflow_runs r
                WHERE r.namespace_id = ns AND r.task_queue = queue AND r.workflow_type = t.typ
                  AND r.status IN ('PENDING', 'SLEEPING') AND r.available_at <= now()
                  AND (r.version = '' OR r.workflow_type || '@' || r.version = ANY(type_versions))
                ORDER BY r.priority DESC, (r.started_at IS NULL OR r.rate_key IS NOT NULL), r.available_at
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
            row_number() OVER (PARTITION BY y.workflow_type ORDER BY y.priority DESC, (y.started_at IS NULL OR y.rate_key IS NOT NULL), y.available_at) AS rk
        FROM (
            SELECT r.run_id, r.workflow_type, r.rate_key, r.priority, r.available_at, r.concurrency_key, r.version, r.started_at
            FROM kagzi.workflow_runs r
            WHERE r.namespace_id = ns AND r.task_queue = queue
              AND r.status IN ('PENDING', 'SLEEPING') AND r.available_at <= now()
            ORDER BY r.priority DESC, (r.started_at IS NULL OR r.rate_key IS NOT NULL), r.available_at
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
        -- rate_due_at keeps when the run was due before any window held
        -- it, so that changing or removing the limit gives it back
        -- (store.RateLimitsSet, RateLimitsDelete).
        UPDATE kagzi.workflow_runs r SET
            available_at = r_end[i] + ((h.rn - 1) / r_max[i]) * r_period[i] * interval '1 millisecond',
            rate_due_at = coalesce(r.rate_due_at, r.available_at)
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
