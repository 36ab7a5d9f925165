-- The declared kinds of a namespace's search attributes, which a start or a
-- schedule checks its attributes against, and the values of one run's (or
-- schedule template's).

-- name: AttributeKinds :many
SELECT name, kind FROM kagzi.search_attributes WHERE namespace_id = @namespace

-- name: RunAttributes :many
SELECT name, v_text, v_int, v_float, v_bool, v_time FROM kagzi.run_attributes
WHERE run_id = @run_id AND namespace_id = @namespace ORDER BY name, v_text
