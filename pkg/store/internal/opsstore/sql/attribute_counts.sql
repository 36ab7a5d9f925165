-- Maintained counts of search attribute values (migration 025): the
-- deltas the triggers of kagzi.run_attributes append, folded into one row
-- per (namespace, name, value) by the reaper's leader, and the grouped
-- count that reads them.

-- name: AttributeCountsFold :one
WITH d AS (
	DELETE FROM kagzi.attribute_count_deltas
	WHERE ctid = ANY (ARRAY(SELECT ctid FROM kagzi.attribute_count_deltas LIMIT @limit))
	RETURNING namespace_id, name, value, n
), u AS (
	INSERT INTO kagzi.attribute_counts AS c (namespace_id, name, value, n)
	SELECT namespace_id, name, value, sum(n) FROM d GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
	ON CONFLICT (namespace_id, name, value) DO UPDATE SET n = c.n + excluded.n
	RETURNING c.namespace_id, c.name, c.value, c.n
)
SELECT (SELECT count(*) FROM d),
	coalesce(array_agg(namespace_id) FILTER (WHERE n = 0), '{}'),
	coalesce(array_agg(name) FILTER (WHERE n = 0), '{}'),
	coalesce(array_agg(value) FILTER (WHERE n = 0), '{}')
FROM u

-- name: AttributeCountDeltasAny :one
SELECT EXISTS (SELECT 1 FROM kagzi.attribute_count_deltas)

-- name: AttributeCountsPrune :exec
DELETE FROM kagzi.attribute_counts c
USING unnest(@namespaces::text[], @names::text[], @values::text[]) AS z(namespace_id, name, value)
WHERE c.namespace_id = z.namespace_id AND c.name = z.name AND c.value = z.value AND c.n = 0

-- name: AttributeCountsGroup :many
SELECT value, sum(n)::bigint FROM (
	SELECT value, n FROM kagzi.attribute_counts WHERE namespace_id = @namespace AND name = @name
	UNION ALL
	SELECT value, n FROM kagzi.attribute_count_deltas WHERE namespace_id = @namespace AND name = @name
	UNION ALL
	-- Schedule templates hold attributes to give their runs; they are
	-- not runs themselves.
	SELECT kagzi.attribute_value_text(a.v_text, a.v_int, a.v_float, a.v_bool, a.v_time), -1
	FROM kagzi.workflow_runs r JOIN kagzi.run_attributes a ON a.run_id = r.run_id
	WHERE r.namespace_id = @namespace AND r.cron_expr IS NOT NULL AND r.status IN ('SCHEDULED', 'PAUSED') AND a.name = @name
) c
GROUP BY value HAVING sum(n) > 0 ORDER BY 2 DESC, 1 LIMIT @limit
