-- Maintained counts of search attribute values, so that a count grouped by
-- an attribute (store.RunsCountQuery with no query) reads one row per
-- value instead of every run holding it.
--
-- A statement that inserts or deletes kagzi.run_attributes rows appends
-- one delta per (namespace, name, value) it changed to
-- attribute_count_deltas: an append without an index, so concurrent
-- starts that set the same value never wait on one counter row. The
-- reaper's leader folds the deltas into attribute_counts a few seconds
-- after starts (store.AttributeCountsFold); a count adds the deltas not
-- folded yet, so it is exact whenever it is read. A run that sets no
-- attribute inserts no attribute row and fires nothing here.
--
-- A value is counted as the text a grouped count shows (a time in RFC
-- 3339, UTC). Schedule templates' attributes are counted too (their rows
-- are the same table's); a count subtracts them, as there are few.
CREATE TABLE IF NOT EXISTS kagzi.attribute_counts (
    namespace_id text NOT NULL,
    name text NOT NULL,
    value text NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (namespace_id, name, value)
);

CREATE TABLE IF NOT EXISTS kagzi.attribute_count_deltas (
    namespace_id text NOT NULL,
    name text NOT NULL,
    value text NOT NULL,
    n bigint NOT NULL
);

-- attribute_value_text is a value as a grouped count shows it.
CREATE OR REPLACE FUNCTION kagzi.attribute_value_text(v_text text, v_int bigint, v_float float8, v_bool boolean, v_time timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(v_text, v_int::text, v_float::text, v_bool::text,
        to_char(v_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
$$;

-- attribute_counts_change appends the deltas of one statement: a row
-- inserted adds one to its value, a row deleted takes one away, an update
-- both.
CREATE OR REPLACE FUNCTION kagzi.attribute_counts_change() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- The counts of the rows already there, and the triggers, in one
-- transaction: a row is counted either here or by a trigger.
LOCK TABLE kagzi.run_attributes IN SHARE MODE;
INSERT INTO kagzi.attribute_counts (namespace_id, name, value, n)
SELECT namespace_id, name, kagzi.attribute_value_text(v_text, v_int, v_float, v_bool, v_time), count(*)
FROM kagzi.run_attributes GROUP BY 1, 2, 3
ON CONFLICT DO NOTHING;

DROP TRIGGER IF EXISTS run_attributes_count_insert ON kagzi.run_attributes;
CREATE TRIGGER run_attributes_count_insert AFTER INSERT ON kagzi.run_attributes
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.attribute_counts_change();
DROP TRIGGER IF EXISTS run_attributes_count_update ON kagzi.run_attributes;
CREATE TRIGGER run_attributes_count_update AFTER UPDATE ON kagzi.run_attributes
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.attribute_counts_change();
DROP TRIGGER IF EXISTS run_attributes_count_delete ON kagzi.run_attributes;
CREATE TRIGGER run_attributes_count_delete AFTER DELETE ON kagzi.run_attributes
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION kagzi.attribute_counts_change();

---- create above / drop below ----

DROP TRIGGER IF EXISTS run_attributes_count_insert ON kagzi.run_attributes;
DROP TRIGGER IF EXISTS run_attributes_count_update ON kagzi.run_attributes;
DROP TRIGGER IF EXISTS run_attributes_count_delete ON kagzi.run_attributes;
DROP FUNCTION IF EXISTS kagzi.attribute_counts_change();
DROP FUNCTION IF EXISTS kagzi.attribute_value_text(text, bigint, float8, boolean, timestamptz);
DROP TABLE IF EXISTS kagzi.attribute_count_deltas;
DROP TABLE IF EXISTS kagzi.attribute_counts;
