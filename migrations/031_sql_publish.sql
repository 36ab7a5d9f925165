-- Publishing events from SQL (docs/sql.md, docs/triggers.md).
--
-- kagzi.publish publishes an event to the triggers of its namespace, as
-- the store's PublishedEventsAdd does (the Go client's Publish and
-- PublishTx), with the same checks and limits, in the caller's
-- transaction: the event exists, and is fanned out, only if that
-- transaction commits. The insert into kagzi.published_events fires the
-- same notify trigger (migration 029), so the reaper's leader is woken by
-- the commit.
--
-- As 027's functions it is SECURITY DEFINER with a fixed search_path, and
-- EXECUTE is revoked from PUBLIC; `kagzi migrate --roles` (and
-- --sql-role) grants it to the SQL role.
--
-- Errors (SQLSTATE): 22023 invalid_parameter_value for a bad namespace or
-- event name, 54000 program_limit_exceeded for a payload over the payload
-- limit, 23505 unique_violation for an event id published already as
-- another event (another name or namespace: a key reused by mistake),
-- 40001 serialization_failure when, at REPEATABLE READ or above, a
-- concurrent transaction published the same id (retry the transaction).

-- kagzi.publish publishes the event name with payload in namespace and
-- returns its id: event_id, or a new UUID v7 when it is NULL. An id
-- published already as the same event (namespace and name) adds nothing
-- and returns the id, whatever the payload: a publisher may retry.
CREATE OR REPLACE FUNCTION kagzi.publish(
    namespace text,
    name text,
    payload jsonb DEFAULT 'null',
    event_id uuid DEFAULT NULL
) RETURNS uuid LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
$$;

REVOKE EXECUTE ON FUNCTION kagzi.publish(text, text, jsonb, uuid) FROM PUBLIC;

---- create above / drop below ----

DROP FUNCTION IF EXISTS kagzi.publish(text, text, jsonb, uuid);
