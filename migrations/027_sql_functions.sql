-- Starting runs and sending events from SQL (docs/sql.md).
--
-- kagzi.start_run and kagzi.send_event let an application in any language
-- start a run or send an event with one SELECT, inside its own
-- transaction: the run or event exists only if that transaction commits.
-- They do what the Go client's Start (a plain start: no flow control, no
-- attributes) and SendEvent do, with the same checks and limits, and the
-- inserts and updates fire the same notify trigger, so dispatchers are
-- woken by the commit as they are for a start from Go.
--
-- Least privilege: both are SECURITY DEFINER with a fixed search_path
-- (every name below is schema-qualified or in pg_catalog) and run as the
-- schema's owner, which migrations run as. EXECUTE is revoked from PUBLIC;
-- `kagzi migrate --roles` grants it to the SQL role (--sql-role, default
-- kagzi_sql), which gets nothing else: no table privileges. The runtime
-- role may call them too (it is granted every function of the schema).
--
-- Errors (SQLSTATE): 22023 invalid_parameter_value for a bad argument,
-- 54000 program_limit_exceeded for an input or payload over the payload
-- limit, P0002 no_data_found for an unknown run, 55000
-- object_not_in_prerequisite_state for an event to a finished run or a
-- schedule template, 40001 serialization_failure when an external id
-- keeps changing hands (retry the transaction).

-- kagzi.uuid_v7 is a UUID version 7 (RFC 9562), as the Go side's run ids
-- (uuid.NewV7): the Unix time in milliseconds in the first 48 bits, then
-- random bits with the version and variant set. It starts from
-- gen_random_uuid (a version 4 UUID: 122 random bits, variant 10), puts the
-- time over its first 6 bytes, and turns version 0100 into 0111 (bits 52
-- and 53 of the bytea). Postgres 15 has no uuidv7(). Ids made in one
-- millisecond are not ordered among themselves (Go's carry a sub-
-- millisecond sequence); ids of different milliseconds are.
CREATE OR REPLACE FUNCTION kagzi.uuid_v7() RETURNS uuid LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
        PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
        FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;

-- kagzi.token_refused reports whether v holds a character a namespace,
-- queue, workflow type or version may not (protocol.ValidToken), or with
-- event true one an event name may not (protocol.ValidEventName, which
-- allows '.'): a space, '*', '>', '@', or one Go's unicode.IsPrint
-- refuses. The class lists those among assigned characters (controls,
-- format characters, private use, spaces other than ' ', line and
-- paragraph separators); Go also refuses code points Unicode leaves
-- unassigned, which this accepts. TestSQLTokenRuleMatchesGo compares the
-- two over every assigned code point.
CREATE OR REPLACE FUNCTION kagzi.token_refused(v text, event boolean) RETURNS boolean
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT v ~ ('[\x01-\x20\x7f-\xa0\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u1680\u180e'
        '\u2000-\u200f\u2028-\u202f\u205f-\u2064\u2066-\u206f\u3000\ue000-\uf8ff\ufeff\ufff9-\ufffb'
        '\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a'
        '\U000e0001\U000e0020-\U000e007f\U000f0000-\U0010ffff*>@'
        || CASE WHEN event THEN '' ELSE '.' END || ']')
$$;

-- kagzi.check_token raises 22023 unless v can be a namespace, queue,
-- workflow type or version (field names it), or with event true an event
-- name: 1 to 200 bytes (protocol.MaxNameLen) without the characters
-- token_refused finds.
CREATE OR REPLACE FUNCTION kagzi.check_token(field text, v text, event boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
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

-- kagzi.check_payload raises 54000 when payload, as stored (its JSON
-- text), is over the database's payload limit (kagzi.settings), as the
-- store's CheckPayload does. It returns the stored bytes.
CREATE OR REPLACE FUNCTION kagzi.check_payload(what text, payload jsonb) RETURNS bytea
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
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

-- kagzi.start_run starts a run of workflow_type in namespace on queue and
-- returns its id: store.RunsCreate's insert for one run. With an external
-- id that a live run holds, it returns that run's id and starts nothing
-- (the Go client's default id reuse: a finished run's id may name a new
-- run). start_at delays the first claim (NULL: now); version pins the code
-- version (NULL: the type's default version, else unpinned); deadline
-- fails the run if it has not ended by then.
CREATE OR REPLACE FUNCTION kagzi.start_run(
    namespace text,
    workflow_type text,
    input jsonb DEFAULT 'null',
    queue text DEFAULT 'default',
    external_id text DEFAULT NULL,
    start_at timestamptz DEFAULT NULL,
    priority integer DEFAULT 0,
    version text DEFAULT NULL,
    deadline timestamptz DEFAULT NULL
) RETURNS uuid LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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

-- kagzi.send_event sends an event to a run and returns the event's id:
-- store.EventsSend by run id. The run row is locked first, so a send and a
-- wait serialise and no wakeup is lost; a run sleeping in a wait for an
-- event of that name is made claimable now (the update fires the notify
-- trigger), a running one counts the event (event_seq).
CREATE OR REPLACE FUNCTION kagzi.send_event(
    namespace text,
    run_id uuid,
    name text,
    payload jsonb DEFAULT 'null'
) RETURNS uuid LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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

REVOKE EXECUTE ON FUNCTION kagzi.token_refused(text, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION kagzi.check_token(text, text, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION kagzi.check_payload(text, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION kagzi.start_run(text, text, jsonb, text, text, timestamptz, integer, text, timestamptz) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION kagzi.send_event(text, uuid, text, jsonb) FROM PUBLIC;

---- create above / drop below ----

DROP FUNCTION IF EXISTS kagzi.send_event(text, uuid, text, jsonb);
DROP FUNCTION IF EXISTS kagzi.start_run(text, text, jsonb, text, text, timestamptz, integer, text, timestamptz);
DROP FUNCTION IF EXISTS kagzi.check_payload(text, jsonb);
DROP FUNCTION IF EXISTS kagzi.check_token(text, text, boolean);
DROP FUNCTION IF EXISTS kagzi.token_refused(text, boolean);
DROP FUNCTION IF EXISTS kagzi.uuid_v7();
