-- The declared kinds of a namespace's search attributes, which a start or a
-- schedule checks its attributes against, and the values of one run's (or
-- schedule template's).

-- name: AttributeKinds :many
SELECT name, kind FROM kagzi.search_attributes WHERE namespace_id = @namespace

-- name: RunAttributes :many
SELECT name, v_text, v_int, v_float, v_bool, v_time FROM kagzi.run_attributes
WHERE run_id = @run_id AND namespace_id = @namespace ORDER BY name, v_text

-- The insert of a run's attributes apart from its start (a start with flow
-- control, in that start's transaction; a workflow's SetAttributes; a
-- batch's set-attributes), and their removal by name.

-- name: RunsAttributesAdd :exec
INSERT INTO kagzi.run_attributes (namespace_id, run_id, name, v_text, v_int, v_float, v_bool, v_time, created_at)
SELECT r.namespace_id, r.run_id, x.name, x.v_text, x.v_int, x.v_float, x.v_bool, x.v_time, r.created_at
FROM unnest(@attr_run_ids::uuid[], @attr_names::text[], @attr_texts::text[], @attr_ints::bigint[],
	@attr_floats::float8[], @attr_bools::boolean[], @attr_times::timestamptz[])
	AS x(run_id, name, v_text, v_int, v_float, v_bool, v_time)
JOIN kagzi.workflow_runs r ON r.run_id = x.run_id

-- name: RunsAttributesRemove :exec
DELETE FROM kagzi.run_attributes
WHERE namespace_id = @namespace AND run_id = @run_id AND name = ANY(@names::text[]);
