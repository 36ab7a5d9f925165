-- Search attributes: typed values a run is started with, declared per
-- namespace, by which runs are listed and counted (store.RunsList's and
-- store.RunsCountQuery's filter).
--
-- search_attributes declares each name with its kind; run_attributes holds
-- one row per value (a keyword list is several rows), with the run's
-- created_at copied so the partial indexes below list newest first without
-- visiting the runs table. Both tables are new: old binaries never read
-- them, so the migration is additive. A run that sets no attribute costs
-- nothing: there is no trigger, and its start inserts no row here. A run's
-- rows are deleted with it (ON DELETE CASCADE), so retention's deletes
-- take them along.
CREATE TABLE IF NOT EXISTS kagzi.search_attributes (
    namespace_id text NOT NULL,
    name text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('keyword', 'text', 'int', 'float', 'bool', 'time')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace_id, name)
);

CREATE TABLE IF NOT EXISTS kagzi.run_attributes (
    namespace_id text NOT NULL,
    run_id uuid NOT NULL REFERENCES kagzi.workflow_runs (run_id) ON DELETE CASCADE,
    name text NOT NULL,
    v_text text,
    v_int bigint,
    v_float float8,
    v_bool boolean,
    v_time timestamptz,
    created_at timestamptz NOT NULL,
    CHECK (num_nonnulls(v_text, v_int, v_float, v_bool, v_time) = 1)
);

-- The cascade's lookup, and a run's attributes (run show).
CREATE INDEX IF NOT EXISTS run_attributes_run_idx ON kagzi.run_attributes (run_id);
-- A listing by one value reads its runs newest first.
CREATE INDEX IF NOT EXISTS run_attributes_text_idx ON kagzi.run_attributes (namespace_id, name, v_text, created_at DESC) WHERE v_text IS NOT NULL;
CREATE INDEX IF NOT EXISTS run_attributes_int_idx ON kagzi.run_attributes (namespace_id, name, v_int, created_at DESC) WHERE v_int IS NOT NULL;
CREATE INDEX IF NOT EXISTS run_attributes_float_idx ON kagzi.run_attributes (namespace_id, name, v_float, created_at DESC) WHERE v_float IS NOT NULL;
CREATE INDEX IF NOT EXISTS run_attributes_time_idx ON kagzi.run_attributes (namespace_id, name, v_time, created_at DESC) WHERE v_time IS NOT NULL;
CREATE INDEX IF NOT EXISTS run_attributes_bool_idx ON kagzi.run_attributes (namespace_id, name, v_bool, created_at DESC) WHERE v_bool IS NOT NULL;

---- create above / drop below ----

DROP TABLE IF EXISTS kagzi.run_attributes;
DROP TABLE IF EXISTS kagzi.search_attributes;
