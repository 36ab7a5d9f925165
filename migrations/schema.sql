-- The schema kagzi of a database migrated from empty: tables, indexes,
-- functions and triggers as the migrations leave them. Generated; do not
-- edit. Regenerate it with `make schema` (or `go generate ./migrations`).

-- Name: kagzi; Type: SCHEMA; Schema: -; Owner: -

CREATE SCHEMA kagzi;

-- Name: array_minus(text[], text[]); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.array_minus(a text[], b text[]) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT array_agg(x) FROM unnest(a) AS x WHERE x <> ALL (b) $$;

-- Name: attribute_counts_change(); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.attribute_counts_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO kagzi.attribute_count_deltas (namespace_id, name, value, n)
        SELECT namespace_id, name, kagzi.attribute_value_text(v_text, v_int, v_float, v_bool, v_time), count(*)
        FROM new_rows GROUP BY 1, 2, 3;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO kagzi.attribute_count_deltas (namespace_id, name, value, n)
        SELECT namespace_id, name, kagzi.attribute_value_text(v_text, v_int, v_float, v_bool, v_time), -count(*)
        FROM old_rows GROUP BY 1, 2, 3;
    ELSE
        INSERT INTO kagzi.attribute_count_deltas (namespace_id, name, value, n)
        SELECT namespace_id, name, value, sum(n) FROM (
            SELECT namespace_id, name, kagzi.attribute_value_text(v_text, v_int, v_float, v_bool, v_time) AS value, 1 AS n FROM new_rows
            UNION ALL
            SELECT namespace_id, name, kagzi.attribute_value_text(v_text, v_int, v_float, v_bool, v_time), -1 FROM old_rows) d
        GROUP BY 1, 2, 3 HAVING sum(n) <> 0;
    END IF;
    RETURN NULL;
END
$$;

-- Name: attribute_value_text(text, bigint, double precision, boolean, timestamp with time zone); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.attribute_value_text(v_text text, v_int bigint, v_float double precision, v_bool boolean, v_time timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT coalesce(v_text, v_int::text, v_float::text, v_bool::text,
        to_char(v_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
$$;

-- Name: cancellations(); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.cancellations() RETURNS trigger
    LANGUAGE plpgsql
    AS $_$
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
$_$;

-- Name: check_payload(text, jsonb); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.check_payload(what text, payload jsonb) RETURNS bytea
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    raw bytea := convert_to(payload::text, 'UTF8');
    lim integer;
BEGIN
    SELECT s.payload_max_bytes INTO lim FROM kagzi.settings s;
    IF octet_length(raw) > lim THEN
        RAISE EXCEPTION '% is % bytes, the limit is %', what, octet_length(raw), lim USING ERRCODE = '54000';
    END IF;
    RETURN raw;
END
$$;

-- Name: check_token(text, text, boolean); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.check_token(field text, v text, event boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF v IS NULL OR v = '' THEN
        RAISE EXCEPTION '% is required', field USING ERRCODE = '22023';
    END IF;
    IF octet_length(v) > 200 THEN
        RAISE EXCEPTION '% is % bytes, at most 200', field, octet_length(v) USING ERRCODE = '22023';
    END IF;
    IF kagzi.token_refused(v, event) THEN
        IF event THEN
            RAISE EXCEPTION '% % must not contain spaces, control characters or any of * > @', field, quote_literal(v)
                USING ERRCODE = '22023';
        END IF;
        RAISE EXCEPTION '% % must not contain spaces, control characters or any of . * > @', field, quote_literal(v)
            USING ERRCODE = '22023';
    END IF;
END
$$;

-- Name: claim_flow(text, text, text[], text[], integer); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.claim_flow(ns text, queue text, types text[], type_versions text[], lim integer) RETURNS TABLE(run_id uuid, due_at timestamp with time zone, limited boolean)
    LANGUAGE plpgsql ROWS 10
    SET lock_timeout TO '2s'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
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

-- Name: claim_slots(text, text, text); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.claim_slots(ns text, queue text, typ text) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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

-- Name: live_children(uuid[]); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.live_children(parents uuid[]) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET enable_seqscan TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM kagzi.workflow_runs c
                   WHERE c.parent_run_id = ANY(parents) AND c.status IN ('PENDING', 'RUNNING', 'SLEEPING'));
END
$$;

-- Name: notify_batch(); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.notify_batch() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.state = NEW.state AND OLD.total = NEW.total
        AND (OLD.done + OLD.failed + OLD.skipped) * 100 / greatest(NEW.total, 1)
            = (NEW.done + NEW.failed + NEW.skipped) * 100 / greatest(NEW.total, 1) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('kagzi', json_build_object('k', 'b', 'ns', NEW.namespace_id, 'id', NEW.batch_id, 'st', NEW.state,
        'r', TG_OP = 'INSERT' OR OLD.state IS DISTINCT FROM NEW.state)::text);
    RETURN NULL;
END
$$;

-- Name: notify_limits(); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.notify_limits() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

-- Name: notify_published_event(); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.notify_published_event() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('kagzi', json_build_object('k', 'e', 'ns', NEW.namespace_id, 'id', NEW.event_id)::text);
    RETURN NULL;
END
$$;

-- Name: notify_runs(); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.notify_runs() RETURNS trigger
    LANGUAGE plpgsql
    SET enable_nestloop TO 'off'
    AS $$
DECLARE
    rec record;
    due boolean;
    ended boolean;
    cancelled boolean;
    cron boolean;
    freed boolean;
    held boolean;
    instance_ended boolean;
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
               coalesce(bool_or(cron_expr IS NOT NULL), false),
               coalesce(bool_or(limited AND status <> 'RUNNING'), false)
        INTO due, ended, cancelled, cron, freed FROM new_rows;
        -- Only a run that ended or became due can be held or end a
        -- schedule's instance: a claim or a heartbeat reads no further.
        -- (This pass names paused_at, which 022 adds; kept apart, the one
        -- above runs in the migrations before it, which update no such row.)
        held := false;
        instance_ended := false;
        IF due OR ended THEN
            SELECT coalesce(bool_or(paused_at IS NOT NULL AND (status IN ('COMPLETED', 'FAILED', 'CANCELLED')
                       OR (available_at IS NOT NULL AND status IN ('PENDING', 'SLEEPING')))), false),
                   coalesce(bool_or(schedule_id IS NOT NULL AND status IN ('COMPLETED', 'FAILED', 'CANCELLED')), false)
            INTO held, instance_ended FROM new_rows;
        END IF;
        -- A paused run that ended is no longer paused; one that became due
        -- keeps its due time aside until it is resumed (022_pause.sql).
        -- The runs are named by an array, not joined: nested loops are off
        -- in this function, and a join would scan workflow_runs.
        IF held THEN
            UPDATE kagzi.workflow_runs SET paused_at = NULL, paused_by = NULL, paused_reason = NULL, paused_due_at = NULL
            WHERE run_id = ANY (ARRAY(SELECT run_id FROM new_rows
                                      WHERE paused_at IS NOT NULL AND status IN ('COMPLETED', 'FAILED', 'CANCELLED')))
              AND paused_at IS NOT NULL;
            UPDATE kagzi.workflow_runs SET paused_due_at = least(paused_due_at, available_at), available_at = NULL
            WHERE run_id = ANY (ARRAY(SELECT run_id FROM new_rows
                                      WHERE paused_at IS NOT NULL AND available_at IS NOT NULL AND status IN ('PENDING', 'SLEEPING')))
              AND paused_at IS NOT NULL AND available_at IS NOT NULL AND status IN ('PENDING', 'SLEEPING');
        END IF;
        -- An instance of a schedule with overlap policy buffer-one ended:
        -- its template fires the buffered fire now (015_schedule_overlap.sql).
        -- The template's lock is taken first, and the update is a statement
        -- of its own: it sees what a scheduler committed while this waited.
        IF instance_ended THEN
            FOR rec IN
                SELECT DISTINCT n.schedule_id FROM new_rows n JOIN old_rows o USING (run_id)
                WHERE o.schedule_id IS NOT NULL AND o.status IN ('PENDING', 'RUNNING', 'SLEEPING')
                  AND n.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
            LOOP
                PERFORM 1 FROM kagzi.workflow_runs t
                WHERE t.run_id = rec.schedule_id AND t.status = 'SCHEDULED' AND t.overlap_policy = 'buffer-one'
                FOR NO KEY UPDATE;
                IF FOUND THEN
                    UPDATE kagzi.workflow_runs t SET available_at = now(), held_next_at = t.available_at
                    WHERE t.run_id = rec.schedule_id AND t.status = 'SCHEDULED' AND t.buffered_fire_at IS NOT NULL
                      AND t.available_at > now();
                END IF;
            END LOOP;
        END IF;
        -- The joins of new_rows and old_rows below run only when the pass
        -- above says they can find something.
        -- Became claimable, or its due time moved earlier.
        IF due THEN
            FOR rec IN
                SELECT n.namespace_id, n.task_queue, min(n.available_at) AS at
                FROM new_rows n JOIN old_rows o USING (run_id)
                WHERE n.status IN ('PENDING', 'SLEEPING') AND n.available_at IS NOT NULL
                  AND (o.status NOT IN ('PENDING', 'SLEEPING') OR o.available_at IS NULL OR n.available_at < o.available_at)
                GROUP BY n.namespace_id, n.task_queue
            LOOP
                PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', rec.at)::text);
            END LOOP;
        END IF;
        -- Reached a terminal status: ~100 runs per notification (8000-byte payload limit).
        IF ended THEN
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
        END IF;
        -- A run claimed under a concurrency limit (limited: a total or
        -- per-key limit of its type) stopped running: a slot is free, so
        -- runs waiting for one may be claimable now. Without this the
        -- dispatchers find them only at their backed-off look at a queue
        -- whose due runs the claim left (up to 30 s).
        IF freed THEN
            FOR rec IN
                SELECT DISTINCT n.namespace_id, n.task_queue
                FROM new_rows n JOIN old_rows o USING (run_id)
                WHERE o.status = 'RUNNING' AND o.limited AND n.status <> 'RUNNING'
            LOOP
                PERFORM pg_notify('kagzi', json_build_object('k', 'r', 'ns', rec.namespace_id, 'q', rec.task_queue, 'at', now())::text);
            END LOOP;
        END IF;
        -- Cancelled while running: tell the holder.
        IF cancelled THEN
            FOR rec IN
                SELECT n.namespace_id, n.run_id, o.locked_by
                FROM new_rows n JOIN old_rows o USING (run_id)
                WHERE o.status = 'RUNNING' AND n.status = 'CANCELLED' AND o.locked_by IS NOT NULL
            LOOP
                PERFORM pg_notify('kagzi', json_build_object('k', 'c', 'ns', rec.namespace_id, 'id', rec.run_id, 'w', rec.locked_by)::text);
            END LOOP;
        END IF;
        -- Schedule templates that changed status or next fire time.
        IF cron THEN
            FOR rec IN
                SELECT n.namespace_id, n.run_id, CASE WHEN n.status = 'SCHEDULED' THEN n.available_at END AS at
                FROM new_rows n JOIN old_rows o USING (run_id)
                WHERE n.cron_expr IS NOT NULL
                  AND (n.status IS DISTINCT FROM o.status OR n.available_at IS DISTINCT FROM o.available_at
                       OR n.cron_expr IS DISTINCT FROM o.cron_expr)
            LOOP
                PERFORM pg_notify('kagzi', json_build_object('k', 's', 'ns', rec.namespace_id, 'id', rec.run_id, 'at', rec.at)::text);
            END LOOP;
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        FOR rec IN SELECT namespace_id, run_id FROM old_rows WHERE cron_expr IS NOT NULL LOOP
            PERFORM pg_notify('kagzi', json_build_object('k', 's', 'ns', rec.namespace_id, 'id', rec.run_id, 'at', NULL)::text);
        END LOOP;
    END IF;
    RETURN NULL;
END
$$;

-- Name: notify_start_batch(); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.notify_start_batch() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('kagzi', json_build_object('k', 'e', 'ns', NEW.namespace_id, 'id', NEW.batch_id)::text);
    RETURN NULL;
END
$$;

-- Name: notify_step_progress(); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.notify_step_progress() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('kagzi', json_build_object('k', 'p', 'ns', NEW.namespace_id, 'id', NEW.run_id, 'st', NEW.step_id)::text);
    RETURN NULL;
END;
$$;

-- Name: publish(text, text, jsonb, uuid); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.publish(namespace text, name text, payload jsonb DEFAULT 'null'::jsonb, event_id uuid DEFAULT NULL::uuid) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    id uuid := coalesce(publish.event_id, kagzi.uuid_v7());
    pl jsonb := coalesce(publish.payload, 'null');
    got_ns text;
    got_name text;
BEGIN
    PERFORM kagzi.check_token('namespace', publish.namespace);
    -- store.CheckPublishedEventName: dotted tokens, each a name as a
    -- queue's; check_token allows the dots, and an empty token remains.
    PERFORM kagzi.check_token('event name', publish.name, true);
    IF publish.name ~ '(^\.|\.\.|\.$)' THEN
        RAISE EXCEPTION 'event name % has an empty token (a leading, trailing or doubled dot)', quote_literal(publish.name)
            USING ERRCODE = '22023';
    END IF;
    PERFORM kagzi.check_payload('event payload', pl);
    -- store's PublishedEventsAdd (pkg/store/sql/triggers.sql), in two
    -- statements: the second sees a row a concurrent publish of the id
    -- committed after the first began (READ COMMITTED; at REPEATABLE READ
    -- the insert raises 40001 instead). A row gone in between (deleted by
    -- hand) frees the id: try again.
    FOR attempt IN 1..3 LOOP
        INSERT INTO kagzi.published_events (event_id, namespace_id, name, payload)
        VALUES (id, publish.namespace, publish.name, pl)
        ON CONFLICT ON CONSTRAINT published_events_pkey DO NOTHING;
        IF FOUND THEN
            RETURN id;
        END IF;
        SELECT e.namespace_id, e.name INTO got_ns, got_name FROM kagzi.published_events e WHERE e.event_id = id;
        IF FOUND THEN
            IF got_ns <> publish.namespace OR got_name <> publish.name THEN
                RAISE EXCEPTION 'event id % was published as another event', id USING ERRCODE = '23505';
            END IF;
            RETURN id;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'event id % keeps changing hands', id USING ERRCODE = '40001';
END
$_$;

-- Name: rate_window(timestamp with time zone, bigint); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.rate_window(t timestamp with time zone, period_ms bigint) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT 'epoch'::timestamptz + (floor(extract(epoch FROM t) * 1000 / period_ms) * period_ms) * interval '1 millisecond' $$;

-- Name: require_worker(boolean, text, text, text, text); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.require_worker(served boolean, ns text, queue text, typ text, ver text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT served THEN
        RAISE EXCEPTION 'no live worker serves %@% on queue % of namespace %', typ, ver, queue, ns
            USING ERRCODE = 'KZ001';
    END IF;
    RETURN true;
END
$$;

-- Name: send_event(text, uuid, text, jsonb); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.send_event(namespace text, run_id uuid, name text, payload jsonb DEFAULT 'null'::jsonb) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    raw bytea;
    st text;
    id uuid := kagzi.uuid_v7();
BEGIN
    PERFORM kagzi.check_token('namespace', send_event.namespace);
    PERFORM kagzi.check_token('event name', send_event.name, true);
    IF send_event.run_id IS NULL THEN
        RAISE EXCEPTION 'run id is required' USING ERRCODE = '22023';
    END IF;
    raw := kagzi.check_payload('event payload', coalesce(send_event.payload, 'null'));
    SELECT r.status INTO st FROM kagzi.workflow_runs r
    WHERE r.namespace_id = send_event.namespace AND r.run_id = send_event.run_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'send event to run %: run not found in namespace %', send_event.run_id, send_event.namespace
            USING ERRCODE = 'P0002';
    ELSIF st IN ('COMPLETED', 'FAILED', 'CANCELLED') THEN
        RAISE EXCEPTION 'send event to run %: the run is finished (%)', send_event.run_id, st USING ERRCODE = '55000';
    ELSIF st IN ('SCHEDULED', 'PAUSED') THEN
        RAISE EXCEPTION 'send event to run %: it is a schedule template; send to the runs it fires', send_event.run_id
            USING ERRCODE = '55000';
    END IF;
    -- store's EventsSend statement (pkg/store/sql/events.sql), the same
    -- in every clause; TestSQLSendEventMatchesTheStore compares the two.
    WITH x AS (
        SELECT r.event_seq, r.status = 'RUNNING' AS running,
            r.status = 'SLEEPING' AND (r.available_at IS NULL OR r.available_at > now())
            AND EXISTS (SELECT 1 FROM kagzi.step_runs s
                WHERE s.run_id = send_event.run_id AND s.kind = 'EVENT' AND s.is_latest AND s.status IN ('PENDING', 'RUNNING')
                  AND s.input = convert_to(send_event.name, 'UTF8')) AS wake
        FROM kagzi.workflow_runs r WHERE r.run_id = send_event.run_id
    ), u AS (
        UPDATE kagzi.workflow_runs r SET event_seq = r.event_seq + CASE WHEN x.running THEN 1 ELSE 0 END,
            available_at = CASE WHEN x.wake THEN now() ELSE r.available_at END
        FROM x WHERE r.run_id = send_event.run_id AND (x.running OR x.wake)
        RETURNING r.event_seq
    )
    INSERT INTO kagzi.workflow_events (event_id, namespace_id, run_id, name, payload, seq)
    SELECT id, send_event.namespace, send_event.run_id, send_event.name, raw, coalesce((SELECT event_seq FROM u), x.event_seq) FROM x;
    RETURN id;
END
$$;

-- Name: start_run(text, text, jsonb, text, text, timestamp with time zone, integer, text, timestamp with time zone); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.start_run(namespace text, workflow_type text, input jsonb DEFAULT 'null'::jsonb, queue text DEFAULT 'default'::text, external_id text DEFAULT NULL::text, start_at timestamp with time zone DEFAULT NULL::timestamp with time zone, priority integer DEFAULT 0, version text DEFAULT NULL::text, deadline timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    raw bytea;
    id uuid;
BEGIN
    PERFORM kagzi.check_token('namespace', start_run.namespace);
    PERFORM kagzi.check_token('queue', start_run.queue);
    PERFORM kagzi.check_token('workflow type', start_run.workflow_type);
    IF coalesce(start_run.version, '') <> '' THEN
        PERFORM kagzi.check_token('version', start_run.version);
    END IF;
    IF start_run.external_id = '' THEN
        start_run.external_id := NULL;
    END IF;
    IF octet_length(start_run.external_id) > 200 THEN
        RAISE EXCEPTION 'external id is % bytes, at most 200', octet_length(start_run.external_id) USING ERRCODE = '22023';
    END IF;
    IF start_run.external_id ~ '[\x01-\x1f\x7f-\x9f]' THEN
        RAISE EXCEPTION 'external id % holds a control character', quote_literal(start_run.external_id) USING ERRCODE = '22023';
    END IF;
    IF start_run.priority IS NULL THEN
        RAISE EXCEPTION 'priority is required' USING ERRCODE = '22023';
    END IF;
    IF NOT isfinite(coalesce(start_run.start_at, now())) OR NOT isfinite(coalesce(start_run.deadline, now())) THEN
        RAISE EXCEPTION 'start time and deadline must be finite' USING ERRCODE = '22023';
    END IF;
    raw := kagzi.check_payload('input', coalesce(start_run.input, 'null'));
    -- As store.RunsCreate: insert, or find the live run holding the
    -- external id; a holder that finished in between frees the id, and
    -- the insert is tried again.
    FOR attempt IN 1..3 LOOP
        id := kagzi.uuid_v7();
        INSERT INTO kagzi.workflow_runs AS r (run_id, namespace_id, external_id, task_queue, workflow_type, version,
            status, available_at, deadline_at, priority, input)
        VALUES (id, start_run.namespace, start_run.external_id, start_run.queue, start_run.workflow_type,
            coalesce(nullif(start_run.version, ''), (SELECT d.version FROM kagzi.workflow_defaults d
                WHERE d.namespace_id = start_run.namespace AND d.workflow_type = start_run.workflow_type), ''),
            'PENDING', coalesce(start_run.start_at, now()), start_run.deadline, start_run.priority, raw)
        ON CONFLICT DO NOTHING
        RETURNING r.run_id INTO id;
        IF id IS NOT NULL THEN
            RETURN id;
        END IF;
        SELECT r.run_id INTO id FROM kagzi.workflow_runs r
        WHERE r.namespace_id = start_run.namespace AND r.external_id = start_run.external_id
          AND r.status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')
        LIMIT 1;
        IF id IS NOT NULL THEN
            RETURN id;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'external id % keeps changing hands', quote_literal(start_run.external_id) USING ERRCODE = '40001';
END
$$;

-- Name: token_refused(text, boolean); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.token_refused(v text, event boolean) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT v ~ ('[\x01-\x20\x7f-\xa0\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u1680\u180e'
        '\u2000-\u200f\u2028-\u202f\u205f-\u2064\u2066-\u206f\u3000\ue000-\uf8ff\ufeff\ufff9-\ufffb'
        '\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a'
        '\U000e0001\U000e0020-\U000e007f\U000f0000-\U0010ffff*>@'
        || CASE WHEN event THEN '' ELSE '.' END || ']')
$$;

-- Name: uuid_v7(); Type: FUNCTION; Schema: kagzi; Owner: -

CREATE FUNCTION kagzi.uuid_v7() RETURNS uuid
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
        PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
        FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;

-- Name: api_tokens; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.api_tokens (
    token_id uuid NOT NULL,
    namespace_id text NOT NULL,
    name text NOT NULL,
    secret_hash bytea NOT NULL,
    scopes text[] NOT NULL,
    rate integer NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    CONSTRAINT api_tokens_rate_check CHECK ((rate > 0))
);

-- Name: attribute_count_deltas; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.attribute_count_deltas (
    namespace_id text NOT NULL,
    name text NOT NULL,
    value text NOT NULL,
    n bigint NOT NULL
);

-- Name: attribute_counts; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.attribute_counts (
    namespace_id text NOT NULL,
    name text NOT NULL,
    value text NOT NULL,
    n bigint NOT NULL
);

-- Name: batch_runs; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.batch_runs (
    batch_id uuid NOT NULL,
    run_id uuid NOT NULL,
    outcome text,
    error text,
    detail text,
    acted_at timestamp with time zone,
    CONSTRAINT batch_runs_outcome_check CHECK ((outcome = ANY (ARRAY['done'::text, 'failed'::text, 'skipped'::text])))
);

-- Name: batches; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.batches (
    batch_id uuid NOT NULL,
    namespace_id text NOT NULL,
    action text NOT NULL,
    query text,
    reason text DEFAULT ''::text NOT NULL,
    event_name text DEFAULT ''::text NOT NULL,
    payload jsonb,
    created_by text DEFAULT ''::text NOT NULL,
    state text NOT NULL,
    rate integer NOT NULL,
    total integer NOT NULL,
    done integer DEFAULT 0 NOT NULL,
    failed integer DEFAULT 0 NOT NULL,
    skipped integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT batches_action_check CHECK ((action = ANY (ARRAY['cancel'::text, 'terminate'::text, 'signal'::text, 'update'::text, 'pause'::text, 'resume'::text, 'retry'::text, 'fork'::text, 'set-attributes'::text, 'remove-attributes'::text, 'delete'::text]))),
    CONSTRAINT batches_rate_check CHECK ((rate > 0)),
    CONSTRAINT batches_state_check CHECK ((state = ANY (ARRAY['running'::text, 'paused'::text, 'cancelled'::text, 'completed'::text])))
);

-- Name: concurrency_limits; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.concurrency_limits (
    namespace_id text NOT NULL,
    task_queue text NOT NULL,
    workflow_type text NOT NULL,
    max_running integer,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    max_per_key integer,
    CONSTRAINT concurrency_limits_max_check CHECK ((max_running >= 0)),
    CONSTRAINT concurrency_limits_per_key_check CHECK (((max_per_key IS NULL) OR (max_per_key >= 1))),
    CONSTRAINT concurrency_limits_some_check CHECK (((max_running IS NOT NULL) OR (max_per_key IS NOT NULL)))
);

-- Name: leaders; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.leaders (
    role text NOT NULL,
    term bigint NOT NULL,
    elected_at timestamp with time zone DEFAULT now() NOT NULL
);

-- Name: pauses; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.pauses (
    namespace_id text NOT NULL,
    kind text NOT NULL,
    name text NOT NULL,
    paused_by text NOT NULL,
    paused_reason text NOT NULL,
    paused_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT pauses_kind_check CHECK ((kind = ANY (ARRAY['queue'::text, 'type'::text])))
);

-- Name: published_events; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.published_events (
    event_id uuid NOT NULL,
    namespace_id text NOT NULL,
    name text NOT NULL,
    payload jsonb NOT NULL,
    published_at timestamp with time zone DEFAULT now() NOT NULL,
    fanned_out_at timestamp with time zone,
    fan_out_attempts integer DEFAULT 0 NOT NULL,
    fan_out_error text,
    failed_at timestamp with time zone
);

-- Name: rate_limits; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.rate_limits (
    namespace_id text NOT NULL,
    rate_key text NOT NULL,
    max_claims integer NOT NULL,
    period_ms bigint NOT NULL,
    window_start timestamp with time zone DEFAULT '1970-01-01 00:00:00+00'::timestamp with time zone NOT NULL,
    claims integer DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT rate_limits_max_check CHECK ((max_claims >= 1)),
    CONSTRAINT rate_limits_period_check CHECK ((period_ms >= 1))
);

-- Name: retention; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.retention (
    namespace_id text NOT NULL,
    workflow_type text DEFAULT ''::text NOT NULL,
    keep_completed interval,
    keep_failed interval,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT retention_default_check CHECK (((namespace_id <> ''::text) OR ((workflow_type = ''::text) AND (keep_completed IS NOT NULL) AND (keep_failed IS NOT NULL)))),
    CONSTRAINT retention_keep_check CHECK (((keep_completed >= '00:00:00'::interval) AND (keep_failed >= '00:00:00'::interval)))
);

-- Name: run_attributes; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.run_attributes (
    namespace_id text NOT NULL,
    run_id uuid NOT NULL,
    name text NOT NULL,
    v_text text,
    v_int bigint,
    v_float double precision,
    v_bool boolean,
    v_time timestamp with time zone,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT run_attributes_check CHECK ((num_nonnulls(v_text, v_int, v_float, v_bool, v_time) = 1))
);

-- Name: search_attributes; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.search_attributes (
    namespace_id text NOT NULL,
    name text NOT NULL,
    kind text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT search_attributes_kind_check CHECK ((kind = ANY (ARRAY['keyword'::text, 'text'::text, 'int'::text, 'float'::text, 'bool'::text, 'time'::text])))
);

-- Name: settings; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.settings (
    id boolean DEFAULT true NOT NULL,
    payload_warn_bytes integer DEFAULT 1048576 NOT NULL,
    payload_max_bytes integer DEFAULT 2097152 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT settings_one_row_check CHECK (id),
    CONSTRAINT settings_payload_check CHECK (((payload_warn_bytes > 0) AND (payload_max_bytes > 0) AND (payload_warn_bytes <= payload_max_bytes)))
);

-- Name: start_batch_items; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.start_batch_items (
    item_id uuid NOT NULL,
    batch_id uuid NOT NULL,
    seq integer NOT NULL,
    payload json NOT NULL,
    event_id uuid,
    trigger_id uuid,
    added_at timestamp with time zone DEFAULT now() NOT NULL
);

-- Name: start_batches; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.start_batches (
    batch_id uuid NOT NULL,
    namespace_id text NOT NULL,
    workflow_type text NOT NULL,
    task_queue text NOT NULL,
    batch_key text NOT NULL,
    max_size integer NOT NULL,
    size integer DEFAULT 0 NOT NULL,
    bytes bigint DEFAULT 0 NOT NULL,
    opened_at timestamp with time zone DEFAULT now() NOT NULL,
    deadline_at timestamp with time zone NOT NULL,
    run_id uuid,
    closed_at timestamp with time zone
);

-- Name: step_runs; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.step_runs (
    run_id uuid NOT NULL,
    step_id text NOT NULL,
    attempt_number integer NOT NULL,
    namespace_id text NOT NULL,
    kind text NOT NULL,
    status text NOT NULL,
    is_latest boolean DEFAULT true NOT NULL,
    input bytea,
    output bytea,
    error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    retry_at timestamp with time zone,
    child_run_id uuid,
    run_attempt integer,
    error_type text,
    non_retryable boolean DEFAULT false NOT NULL,
    retry_override jsonb,
    CONSTRAINT step_runs_attempt_check CHECK ((attempt_number >= 1)),
    CONSTRAINT step_runs_kind_check CHECK ((kind = ANY (ARRAY['FUNCTION'::text, 'SLEEP'::text, 'EVENT'::text, 'CHILD'::text]))),
    CONSTRAINT step_runs_status_check CHECK ((status = ANY (ARRAY['PENDING'::text, 'RUNNING'::text, 'COMPLETED'::text, 'FAILED'::text])))
)
WITH (autovacuum_vacuum_scale_factor='0.01', autovacuum_vacuum_threshold='10000', autovacuum_vacuum_insert_scale_factor='0.05', autovacuum_analyze_scale_factor='0.02', autovacuum_vacuum_cost_limit='800');

-- Name: trigger_firings; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.trigger_firings (
    event_id uuid NOT NULL,
    trigger_id uuid NOT NULL,
    run_id uuid NOT NULL,
    fired_at timestamp with time zone DEFAULT now() NOT NULL
);

-- Name: triggers; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.triggers (
    trigger_id uuid NOT NULL,
    namespace_id text NOT NULL,
    name text NOT NULL,
    event_pattern text NOT NULL,
    workflow_type text NOT NULL,
    task_queue text NOT NULL,
    input_path text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    batch_key text,
    batch_max_size integer,
    batch_max_wait_ms bigint,
    filter text
);

-- Name: wait_token_keys; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.wait_token_keys (
    namespace_id text NOT NULL,
    key bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT wait_token_keys_key_check CHECK ((length(key) = 32))
);

-- Name: wait_tokens; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.wait_tokens (
    token_id uuid NOT NULL,
    namespace_id text NOT NULL,
    run_id uuid NOT NULL,
    step_id text NOT NULL,
    event_name text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    used_at timestamp with time zone,
    event_id uuid
);

-- Name: webhook_deliveries; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.webhook_deliveries (
    source_id uuid NOT NULL,
    delivery_id text NOT NULL,
    event_id uuid NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL
);

-- Name: webhook_sources; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.webhook_sources (
    source_id uuid NOT NULL,
    namespace_id text NOT NULL,
    name text NOT NULL,
    kind text NOT NULL,
    secret text NOT NULL,
    tolerance_s integer NOT NULL,
    event_template text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT webhook_sources_kind_check CHECK ((kind = ANY (ARRAY['github'::text, 'stripe'::text, 'generic'::text])))
);

-- Name: workers; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.workers (
    worker_id uuid NOT NULL,
    namespace_id text NOT NULL,
    task_queue text NOT NULL,
    hostname text DEFAULT ''::text NOT NULL,
    pid integer DEFAULT 0 NOT NULL,
    version text DEFAULT ''::text NOT NULL,
    workflow_types jsonb DEFAULT '[]'::jsonb NOT NULL,
    max_concurrency integer NOT NULL,
    status text NOT NULL,
    registered_at timestamp with time zone DEFAULT now() NOT NULL,
    last_heartbeat_at timestamp with time zone DEFAULT now() NOT NULL,
    deregistered_at timestamp with time zone,
    labels jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT workers_max_concurrency_check CHECK ((max_concurrency > 0)),
    CONSTRAINT workers_status_check CHECK ((status = ANY (ARRAY['ONLINE'::text, 'DRAINING'::text, 'OFFLINE'::text])))
)
WITH (autovacuum_vacuum_scale_factor='0.05', autovacuum_vacuum_threshold='200');

-- Name: workflow_defaults; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.workflow_defaults (
    namespace_id text NOT NULL,
    workflow_type text NOT NULL,
    version text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_defaults_version_check CHECK ((version <> ''::text))
);

-- Name: workflow_events; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.workflow_events (
    event_id uuid NOT NULL,
    namespace_id text NOT NULL,
    run_id uuid NOT NULL,
    name text NOT NULL,
    payload bytea,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    consumed_at timestamp with time zone,
    consumed_by text,
    seq bigint
)
WITH (autovacuum_vacuum_scale_factor='0.02', autovacuum_vacuum_insert_scale_factor='0.05');

-- Name: workflow_runs; Type: TABLE; Schema: kagzi; Owner: -

CREATE TABLE kagzi.workflow_runs (
    run_id uuid NOT NULL,
    namespace_id text NOT NULL,
    external_id text,
    task_queue text NOT NULL,
    workflow_type text NOT NULL,
    version text DEFAULT ''::text NOT NULL,
    status text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    available_at timestamp with time zone,
    locked_by uuid,
    lease_token bigint DEFAULT 0 NOT NULL,
    lease_expires_at timestamp with time zone,
    error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    deadline_at timestamp with time zone,
    retry_policy jsonb,
    parent_run_id uuid,
    parent_step_id text,
    cron_expr text,
    timezone text,
    max_catchup integer,
    last_fired_at timestamp with time zone,
    schedule_id uuid,
    schedule_fire_at timestamp with time zone,
    trace_context text,
    priority integer DEFAULT 0 NOT NULL,
    waiting_on text[],
    limited boolean DEFAULT false NOT NULL,
    cancel_requested_at timestamp with time zone,
    cancel_delivered boolean DEFAULT false NOT NULL,
    parent_close_policy text,
    epoch integer DEFAULT 1 NOT NULL,
    held boolean DEFAULT false NOT NULL,
    continued_as uuid,
    forked_from uuid,
    forked_at_step text,
    concurrency_key text,
    rate_key text,
    debounce_key text,
    debounce_starts integer,
    overlap_policy text,
    jitter_ms bigint,
    buffered_fire_at timestamp with time zone,
    held_next_at timestamp with time zone,
    input bytea,
    output bytea,
    event_seq bigint DEFAULT 0 NOT NULL,
    rate_due_at timestamp with time zone,
    paused_at timestamp with time zone,
    paused_by text,
    paused_reason text,
    paused_due_at timestamp with time zone,
    CONSTRAINT workflow_runs_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT workflow_runs_fire_check CHECK (((schedule_fire_at IS NULL) OR (cron_expr IS NULL))),
    CONSTRAINT workflow_runs_max_catchup_check CHECK (((max_catchup IS NULL) OR (max_catchup >= 0))),
    CONSTRAINT workflow_runs_parent_close_policy_check CHECK ((parent_close_policy = ANY (ARRAY['TERMINATE'::text, 'REQUEST_CANCEL'::text, 'ABANDON'::text]))),
    CONSTRAINT workflow_runs_status_check CHECK ((status = ANY (ARRAY['PENDING'::text, 'RUNNING'::text, 'SLEEPING'::text, 'COMPLETED'::text, 'FAILED'::text, 'CANCELLED'::text, 'SCHEDULED'::text, 'PAUSED'::text]))),
    CONSTRAINT workflow_runs_template_check CHECK (((status = ANY (ARRAY['SCHEDULED'::text, 'PAUSED'::text])) = (cron_expr IS NOT NULL)))
)
WITH (autovacuum_vacuum_scale_factor='0.01', autovacuum_vacuum_threshold='10000', autovacuum_vacuum_insert_scale_factor='0.05', autovacuum_analyze_scale_factor='0.02', autovacuum_vacuum_cost_limit='800', fillfactor='50');

-- Name: api_tokens api_tokens_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (token_id);

-- Name: api_tokens api_tokens_secret_hash_key; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.api_tokens
    ADD CONSTRAINT api_tokens_secret_hash_key UNIQUE (secret_hash);

-- Name: attribute_counts attribute_counts_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.attribute_counts
    ADD CONSTRAINT attribute_counts_pkey PRIMARY KEY (namespace_id, name, value);

-- Name: batch_runs batch_runs_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.batch_runs
    ADD CONSTRAINT batch_runs_pkey PRIMARY KEY (batch_id, run_id);

-- Name: batches batches_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.batches
    ADD CONSTRAINT batches_pkey PRIMARY KEY (batch_id);

-- Name: concurrency_limits concurrency_limits_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.concurrency_limits
    ADD CONSTRAINT concurrency_limits_pkey PRIMARY KEY (namespace_id, task_queue, workflow_type);

-- Name: leaders leaders_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.leaders
    ADD CONSTRAINT leaders_pkey PRIMARY KEY (role);

-- Name: pauses pauses_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.pauses
    ADD CONSTRAINT pauses_pkey PRIMARY KEY (namespace_id, kind, name);

-- Name: published_events published_events_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.published_events
    ADD CONSTRAINT published_events_pkey PRIMARY KEY (event_id);

-- Name: rate_limits rate_limits_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.rate_limits
    ADD CONSTRAINT rate_limits_pkey PRIMARY KEY (namespace_id, rate_key);

-- Name: retention retention_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.retention
    ADD CONSTRAINT retention_pkey PRIMARY KEY (namespace_id, workflow_type);

-- Name: search_attributes search_attributes_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.search_attributes
    ADD CONSTRAINT search_attributes_pkey PRIMARY KEY (namespace_id, name);

-- Name: settings settings_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.settings
    ADD CONSTRAINT settings_pkey PRIMARY KEY (id);

-- Name: start_batch_items start_batch_items_batch_id_seq_key; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.start_batch_items
    ADD CONSTRAINT start_batch_items_batch_id_seq_key UNIQUE (batch_id, seq);

-- Name: start_batch_items start_batch_items_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.start_batch_items
    ADD CONSTRAINT start_batch_items_pkey PRIMARY KEY (item_id);

-- Name: start_batches start_batches_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.start_batches
    ADD CONSTRAINT start_batches_pkey PRIMARY KEY (batch_id);

-- Name: step_runs step_runs_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.step_runs
    ADD CONSTRAINT step_runs_pkey PRIMARY KEY (run_id, step_id, attempt_number);

-- Name: trigger_firings trigger_firings_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.trigger_firings
    ADD CONSTRAINT trigger_firings_pkey PRIMARY KEY (event_id, trigger_id);

-- Name: triggers triggers_namespace_id_name_key; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.triggers
    ADD CONSTRAINT triggers_namespace_id_name_key UNIQUE (namespace_id, name);

-- Name: triggers triggers_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.triggers
    ADD CONSTRAINT triggers_pkey PRIMARY KEY (trigger_id);

-- Name: wait_token_keys wait_token_keys_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.wait_token_keys
    ADD CONSTRAINT wait_token_keys_pkey PRIMARY KEY (namespace_id);

-- Name: wait_tokens wait_tokens_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.wait_tokens
    ADD CONSTRAINT wait_tokens_pkey PRIMARY KEY (token_id);

-- Name: webhook_deliveries webhook_deliveries_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (source_id, delivery_id);

-- Name: webhook_sources webhook_sources_namespace_id_name_key; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.webhook_sources
    ADD CONSTRAINT webhook_sources_namespace_id_name_key UNIQUE (namespace_id, name);

-- Name: webhook_sources webhook_sources_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.webhook_sources
    ADD CONSTRAINT webhook_sources_pkey PRIMARY KEY (source_id);

-- Name: workers workers_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.workers
    ADD CONSTRAINT workers_pkey PRIMARY KEY (worker_id);

-- Name: workflow_defaults workflow_defaults_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.workflow_defaults
    ADD CONSTRAINT workflow_defaults_pkey PRIMARY KEY (namespace_id, workflow_type);

-- Name: workflow_events workflow_events_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.workflow_events
    ADD CONSTRAINT workflow_events_pkey PRIMARY KEY (event_id);

-- Name: workflow_runs workflow_runs_fork_check; Type: CHECK CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE kagzi.workflow_runs
    ADD CONSTRAINT workflow_runs_fork_check CHECK (((forked_from IS NULL) = (forked_at_step IS NULL))) NOT VALID;

-- Name: workflow_runs workflow_runs_overlap_check; Type: CHECK CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE kagzi.workflow_runs
    ADD CONSTRAINT workflow_runs_overlap_check CHECK ((((overlap_policy IS NULL) OR ((cron_expr IS NOT NULL) AND (overlap_policy = ANY (ARRAY['skip'::text, 'buffer-one'::text, 'cancel-other'::text, 'terminate-other'::text])))) AND ((jitter_ms IS NULL) OR ((cron_expr IS NOT NULL) AND (jitter_ms > 0))) AND ((buffered_fire_at IS NULL) OR (overlap_policy = 'buffer-one'::text)) AND ((held_next_at IS NULL) OR (overlap_policy = 'buffer-one'::text)))) NOT VALID;

-- Name: workflow_runs workflow_runs_pkey; Type: CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.workflow_runs
    ADD CONSTRAINT workflow_runs_pkey PRIMARY KEY (run_id);

-- Name: workflow_runs workflow_runs_running_holder_check; Type: CHECK CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE kagzi.workflow_runs
    ADD CONSTRAINT workflow_runs_running_holder_check CHECK (((status <> 'RUNNING'::text) OR (locked_by IS NOT NULL))) NOT VALID;

-- Name: api_tokens_live_name_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE UNIQUE INDEX api_tokens_live_name_idx ON kagzi.api_tokens USING btree (namespace_id, name) WHERE (revoked_at IS NULL);

-- Name: batch_runs_pending_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX batch_runs_pending_idx ON kagzi.batch_runs USING btree (batch_id, run_id) WHERE (outcome IS NULL);

-- Name: batches_namespace_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX batches_namespace_idx ON kagzi.batches USING btree (namespace_id, created_at DESC);

-- Name: batches_running_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX batches_running_idx ON kagzi.batches USING btree (created_at) WHERE (state = 'running'::text);

-- Name: published_events_done_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX published_events_done_idx ON kagzi.published_events USING btree (published_at) WHERE (fanned_out_at IS NOT NULL);

-- Name: published_events_namespace_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX published_events_namespace_idx ON kagzi.published_events USING btree (namespace_id, published_at DESC, event_id DESC);

-- Name: published_events_pending_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX published_events_pending_idx ON kagzi.published_events USING btree (published_at) WHERE (fanned_out_at IS NULL);

-- Name: run_attributes_bool_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX run_attributes_bool_idx ON kagzi.run_attributes USING btree (namespace_id, name, v_bool, created_at DESC) WHERE (v_bool IS NOT NULL);

-- Name: run_attributes_float_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX run_attributes_float_idx ON kagzi.run_attributes USING btree (namespace_id, name, v_float, created_at DESC) WHERE (v_float IS NOT NULL);

-- Name: run_attributes_int_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX run_attributes_int_idx ON kagzi.run_attributes USING btree (namespace_id, name, v_int, created_at DESC) WHERE (v_int IS NOT NULL);

-- Name: run_attributes_run_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX run_attributes_run_idx ON kagzi.run_attributes USING btree (run_id);

-- Name: run_attributes_text_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX run_attributes_text_idx ON kagzi.run_attributes USING btree (namespace_id, name, v_text, created_at DESC) WHERE (v_text IS NOT NULL);

-- Name: run_attributes_time_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX run_attributes_time_idx ON kagzi.run_attributes USING btree (namespace_id, name, v_time, created_at DESC) WHERE (v_time IS NOT NULL);

-- Name: start_batch_items_firing_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE UNIQUE INDEX start_batch_items_firing_idx ON kagzi.start_batch_items USING btree (event_id, trigger_id) WHERE (event_id IS NOT NULL);

-- Name: start_batches_due_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX start_batches_due_idx ON kagzi.start_batches USING btree (deadline_at) WHERE (run_id IS NULL);

-- Name: start_batches_open_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE UNIQUE INDEX start_batches_open_idx ON kagzi.start_batches USING btree (namespace_id, workflow_type, task_queue, batch_key) WHERE (run_id IS NULL);

-- Name: step_runs_latest_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE UNIQUE INDEX step_runs_latest_idx ON kagzi.step_runs USING btree (run_id, step_id) WHERE is_latest;

-- Name: wait_tokens_done_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX wait_tokens_done_idx ON kagzi.wait_tokens USING btree (LEAST(used_at, expires_at));

-- Name: wait_tokens_run_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX wait_tokens_run_idx ON kagzi.wait_tokens USING btree (run_id);

-- Name: webhook_deliveries_event_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX webhook_deliveries_event_idx ON kagzi.webhook_deliveries USING btree (event_id);

-- Name: workers_list_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workers_list_idx ON kagzi.workers USING btree (namespace_id, task_queue, registered_at);

-- Name: workers_live_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workers_live_idx ON kagzi.workers USING btree (last_heartbeat_at) WHERE (status <> 'OFFLINE'::text);

-- Name: workflow_events_pending_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_events_pending_idx ON kagzi.workflow_events USING btree (run_id, name, created_at) WHERE (consumed_at IS NULL);

-- Name: workflow_events_run_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_events_run_idx ON kagzi.workflow_events USING btree (run_id, created_at);

-- Name: workflow_runs_claim_key_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_claim_key_idx ON kagzi.workflow_runs USING btree (namespace_id, task_queue, workflow_type, concurrency_key, priority DESC, available_at) WHERE ((status = ANY (ARRAY['PENDING'::text, 'SLEEPING'::text])) AND (available_at IS NOT NULL) AND (concurrency_key IS NOT NULL));

-- Name: workflow_runs_claim_rate_due_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_claim_rate_due_idx ON kagzi.workflow_runs USING btree (namespace_id, task_queue, available_at) WHERE ((status = ANY (ARRAY['PENDING'::text, 'SLEEPING'::text])) AND (available_at IS NOT NULL) AND (rate_key IS NOT NULL));

-- Name: workflow_runs_claim_rate_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_claim_rate_idx ON kagzi.workflow_runs USING btree (namespace_id, task_queue, rate_key, priority DESC, available_at) WHERE ((status = ANY (ARRAY['PENDING'::text, 'SLEEPING'::text])) AND (available_at IS NOT NULL) AND (rate_key IS NOT NULL));

-- Name: workflow_runs_claim_started_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_claim_started_idx ON kagzi.workflow_runs USING btree (namespace_id, task_queue, priority DESC, (((started_at IS NULL) OR (rate_key IS NOT NULL))), available_at) WHERE ((status = ANY (ARRAY['PENDING'::text, 'SLEEPING'::text])) AND (available_at IS NOT NULL));

-- Name: workflow_runs_deadline_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_deadline_idx ON kagzi.workflow_runs USING btree (deadline_at) WHERE ((deadline_at IS NOT NULL) AND (status = ANY (ARRAY['PENDING'::text, 'RUNNING'::text, 'SLEEPING'::text])));

-- Name: workflow_runs_debounce_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE UNIQUE INDEX workflow_runs_debounce_idx ON kagzi.workflow_runs USING btree (namespace_id, workflow_type, debounce_key) WHERE ((debounce_key IS NOT NULL) AND (status = 'PENDING'::text) AND (started_at IS NULL));

-- Name: workflow_runs_external_id_finished_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_external_id_finished_idx ON kagzi.workflow_runs USING btree (namespace_id, external_id, finished_at DESC) WHERE ((external_id IS NOT NULL) AND (status = ANY (ARRAY['COMPLETED'::text, 'FAILED'::text, 'CANCELLED'::text])));

-- Name: workflow_runs_external_id_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE UNIQUE INDEX workflow_runs_external_id_idx ON kagzi.workflow_runs USING btree (namespace_id, external_id) WHERE ((external_id IS NOT NULL) AND (status <> ALL (ARRAY['COMPLETED'::text, 'FAILED'::text, 'CANCELLED'::text])));

-- Name: workflow_runs_failed_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_failed_idx ON kagzi.workflow_runs USING btree (namespace_id, finished_at DESC) WHERE (status = 'FAILED'::text);

-- Name: workflow_runs_finished_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_finished_idx ON kagzi.workflow_runs USING btree (namespace_id, workflow_type, status, finished_at) WHERE (status = ANY (ARRAY['COMPLETED'::text, 'FAILED'::text, 'CANCELLED'::text]));

-- Name: workflow_runs_fork_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE UNIQUE INDEX workflow_runs_fork_idx ON kagzi.workflow_runs USING btree (forked_from, forked_at_step) WHERE (forked_from IS NOT NULL);

-- Name: workflow_runs_lease_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_lease_idx ON kagzi.workflow_runs USING btree (locked_by, lease_expires_at) WHERE (status = 'RUNNING'::text);

-- Name: workflow_runs_list_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_list_idx ON kagzi.workflow_runs USING btree (namespace_id, created_at DESC, run_id DESC);

-- Name: workflow_runs_parent_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_parent_idx ON kagzi.workflow_runs USING btree (parent_run_id) WHERE (parent_run_id IS NOT NULL);

-- Name: workflow_runs_paused_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_paused_idx ON kagzi.workflow_runs USING btree (namespace_id, paused_at) WHERE (paused_at IS NOT NULL);

-- Name: workflow_runs_rate_held_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_rate_held_idx ON kagzi.workflow_runs USING btree (namespace_id, rate_key) WHERE (rate_due_at IS NOT NULL);

-- Name: workflow_runs_running_key_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_running_key_idx ON kagzi.workflow_runs USING btree (namespace_id, task_queue, workflow_type, concurrency_key) WHERE ((status = 'RUNNING'::text) AND limited AND (concurrency_key IS NOT NULL));

-- Name: workflow_runs_running_limited_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_running_limited_idx ON kagzi.workflow_runs USING btree (workflow_type, task_queue, namespace_id) WHERE ((status = 'RUNNING'::text) AND limited);

-- Name: workflow_runs_schedule_fire_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE UNIQUE INDEX workflow_runs_schedule_fire_idx ON kagzi.workflow_runs USING btree (schedule_id, schedule_fire_at) WHERE (schedule_id IS NOT NULL);

-- Name: workflow_runs_schedule_live_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_schedule_live_idx ON kagzi.workflow_runs USING btree (schedule_id) WHERE ((schedule_id IS NOT NULL) AND (status = ANY (ARRAY['PENDING'::text, 'RUNNING'::text, 'SLEEPING'::text])));

-- Name: workflow_runs_templates_due_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_templates_due_idx ON kagzi.workflow_runs USING btree (available_at) WHERE (status = 'SCHEDULED'::text);

-- Name: workflow_runs_templates_list_idx; Type: INDEX; Schema: kagzi; Owner: -

CREATE INDEX workflow_runs_templates_list_idx ON kagzi.workflow_runs USING btree (namespace_id, created_at DESC, run_id DESC) WHERE (cron_expr IS NOT NULL);

-- Name: batches batches_notify; Type: TRIGGER; Schema: kagzi; Owner: -

CREATE TRIGGER batches_notify AFTER INSERT OR UPDATE ON kagzi.batches FOR EACH ROW EXECUTE FUNCTION kagzi.notify_batch();

-- Name: concurrency_limits concurrency_limits_notify_delete; Type: TRIGGER; Schema: kagzi; Owner: -

CREATE TRIGGER concurrency_limits_notify_delete AFTER DELETE ON kagzi.concurrency_limits REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.notify_limits();

-- Name: concurrency_limits concurrency_limits_notify_update; Type: TRIGGER; Schema: kagzi; Owner: -

CREATE TRIGGER concurrency_limits_notify_update AFTER UPDATE ON kagzi.concurrency_limits REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.notify_limits();

-- Name: published_events published_events_notify; Type: TRIGGER; Schema: kagzi; Owner: -

CREATE TRIGGER published_events_notify AFTER INSERT ON kagzi.published_events FOR EACH ROW EXECUTE FUNCTION kagzi.notify_published_event();

-- Name: run_attributes run_attributes_count_delete; Type: TRIGGER; Schema: kagzi; Owner: -

CREATE TRIGGER run_attributes_count_delete AFTER DELETE ON kagzi.run_attributes REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.attribute_counts_change();

-- Name: run_attributes run_attributes_count_insert; Type: TRIGGER; Schema: kagzi; Owner: -

CREATE TRIGGER run_attributes_count_insert AFTER INSERT ON kagzi.run_attributes REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.attribute_counts_change();

-- Name: run_attributes run_attributes_count_update; Type: TRIGGER; Schema: kagzi; Owner: -

CREATE TRIGGER run_attributes_count_update AFTER UPDATE ON kagzi.run_attributes REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.attribute_counts_change();

-- Name: start_batches start_batches_notify; Type: TRIGGER; Schema: kagzi; Owner: -

CREATE TRIGGER start_batches_notify AFTER INSERT ON kagzi.start_batches FOR EACH ROW EXECUTE FUNCTION kagzi.notify_start_batch();

-- Name: step_runs step_runs_notify_progress; Type: TRIGGER; Schema: kagzi; Owner: -

CREATE TRIGGER step_runs_notify_progress AFTER INSERT OR UPDATE OF status ON kagzi.step_runs FOR EACH ROW WHEN (((new.status = 'COMPLETED'::text) AND new.is_latest AND ((new.step_id ~~ 'state:%'::text) OR (new.step_id ~~ 'stream:%'::text) OR (new.step_id ~~ 'update:%'::text)))) EXECUTE FUNCTION kagzi.notify_step_progress();

-- Name: workflow_runs workflow_runs_cancellations; Type: TRIGGER; Schema: kagzi; Owner: -

CREATE TRIGGER workflow_runs_cancellations AFTER UPDATE ON kagzi.workflow_runs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.cancellations();

-- Name: workflow_runs workflow_runs_notify_delete; Type: TRIGGER; Schema: kagzi; Owner: -

CREATE TRIGGER workflow_runs_notify_delete AFTER DELETE ON kagzi.workflow_runs REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.notify_runs();

-- Name: workflow_runs workflow_runs_notify_insert; Type: TRIGGER; Schema: kagzi; Owner: -

CREATE TRIGGER workflow_runs_notify_insert AFTER INSERT ON kagzi.workflow_runs REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.notify_runs();

-- Name: workflow_runs workflow_runs_notify_update; Type: TRIGGER; Schema: kagzi; Owner: -

CREATE TRIGGER workflow_runs_notify_update AFTER UPDATE ON kagzi.workflow_runs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.notify_runs();

-- Name: batch_runs batch_runs_batch_id_fkey; Type: FK CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.batch_runs
    ADD CONSTRAINT batch_runs_batch_id_fkey FOREIGN KEY (batch_id) REFERENCES kagzi.batches(batch_id) ON DELETE CASCADE;

-- Name: run_attributes run_attributes_run_id_fkey; Type: FK CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.run_attributes
    ADD CONSTRAINT run_attributes_run_id_fkey FOREIGN KEY (run_id) REFERENCES kagzi.workflow_runs(run_id) ON DELETE CASCADE;

-- Name: start_batch_items start_batch_items_batch_id_fkey; Type: FK CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.start_batch_items
    ADD CONSTRAINT start_batch_items_batch_id_fkey FOREIGN KEY (batch_id) REFERENCES kagzi.start_batches(batch_id) ON DELETE CASCADE;

-- Name: trigger_firings trigger_firings_event_id_fkey; Type: FK CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.trigger_firings
    ADD CONSTRAINT trigger_firings_event_id_fkey FOREIGN KEY (event_id) REFERENCES kagzi.published_events(event_id) ON DELETE CASCADE;

-- Name: wait_tokens wait_tokens_run_id_fkey; Type: FK CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.wait_tokens
    ADD CONSTRAINT wait_tokens_run_id_fkey FOREIGN KEY (run_id) REFERENCES kagzi.workflow_runs(run_id) ON DELETE CASCADE;

-- Name: webhook_deliveries webhook_deliveries_event_id_fkey; Type: FK CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES kagzi.published_events(event_id) ON DELETE CASCADE;

-- Name: webhook_deliveries webhook_deliveries_source_id_fkey; Type: FK CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_source_id_fkey FOREIGN KEY (source_id) REFERENCES kagzi.webhook_sources(source_id) ON DELETE CASCADE;

-- Name: workflow_events workflow_events_run_id_fkey; Type: FK CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.workflow_events
    ADD CONSTRAINT workflow_events_run_id_fkey FOREIGN KEY (run_id) REFERENCES kagzi.workflow_runs(run_id) ON DELETE CASCADE;

-- Name: workflow_runs workflow_runs_schedule_id_fkey; Type: FK CONSTRAINT; Schema: kagzi; Owner: -

ALTER TABLE ONLY kagzi.workflow_runs
    ADD CONSTRAINT workflow_runs_schedule_id_fkey FOREIGN KEY (schedule_id) REFERENCES kagzi.workflow_runs(run_id) ON DELETE SET NULL;
