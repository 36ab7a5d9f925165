-- Search attributes: their declarations per namespace, a run's values,
-- and the listings and counts of runs by a query (the filter package's
-- language). A query's predicates replace the `/*query*/ TRUE` of a
-- statement with a clause whose every value is a parameter (see
-- query.go); a grouped count's `/*group*/` parts are replaced with a
-- column of a fixed map or the attribute join.

-- name: AttributesDeclare :one
WITH cur AS (
	SELECT kind FROM kagzi.search_attributes WHERE namespace_id = @namespace AND name = @name
), ins AS (
	INSERT INTO kagzi.search_attributes (namespace_id, name, kind)
	SELECT @namespace, @name, @kind
	WHERE NOT EXISTS (SELECT 1 FROM cur)
	  AND (SELECT count(*) FROM kagzi.search_attributes WHERE namespace_id = @namespace) < @max
	ON CONFLICT DO NOTHING
	RETURNING kind
)
SELECT coalesce((SELECT kind FROM cur), (SELECT kind FROM ins), '')

-- name: AttributesList :many
SELECT name, kind, created_at FROM kagzi.search_attributes WHERE namespace_id = @namespace ORDER BY name

-- name: AttributesHeld :one
SELECT EXISTS (SELECT 1 FROM kagzi.run_attributes WHERE namespace_id = @namespace AND name = @name AND v_text IS NOT NULL)
	OR EXISTS (SELECT 1 FROM kagzi.run_attributes WHERE namespace_id = @namespace AND name = @name AND v_int IS NOT NULL)
	OR EXISTS (SELECT 1 FROM kagzi.run_attributes WHERE namespace_id = @namespace AND name = @name AND v_float IS NOT NULL)
	OR EXISTS (SELECT 1 FROM kagzi.run_attributes WHERE namespace_id = @namespace AND name = @name AND v_bool IS NOT NULL)
	OR EXISTS (SELECT 1 FROM kagzi.run_attributes WHERE namespace_id = @namespace AND name = @name AND v_time IS NOT NULL)

-- name: AttributesDelete :one
DELETE FROM kagzi.search_attributes WHERE namespace_id = @namespace AND name = @name RETURNING name

-- name: RunsQueryTimeout :exec
SELECT set_config('statement_timeout', @timeout, true)

-- name: RunsQueryCount :one
SELECT count(*) FROM kagzi.workflow_runs r
WHERE r.namespace_id = @namespace AND r.status NOT IN ('SCHEDULED', 'PAUSED') AND (/*query*/ TRUE)

-- name: RunsQueryCountGroup :many
SELECT /*group*/ NULL::text AS g, count(*) FROM kagzi.workflow_runs r /*join*/
WHERE r.namespace_id = @namespace AND r.status NOT IN ('SCHEDULED', 'PAUSED') AND (/*query*/ TRUE)
GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT @limit

-- name: AttributesLockRun :one
-- The run a batch changes the attributes of, locked as a report's update
-- of it is, so a workflow's SetAttributes and the batch's change follow
-- one another. A schedule template is no run.
SELECT status FROM kagzi.workflow_runs
WHERE run_id = @run_id AND namespace_id = @namespace AND status NOT IN ('SCHEDULED', 'PAUSED')
FOR NO KEY UPDATE
