-- A run's durable state and streams, read from its completed steps.

-- name: StepsState :many
SELECT r.status, v.key, v.n, v.output, v.finished_at FROM kagzi.workflow_runs r
LEFT JOIN LATERAL (
	SELECT DISTINCT ON (p.key) p.key, p.n, p.output, p.finished_at FROM (
		SELECT split_part(substr(s.step_id, length(@prefix::text) + 1), '#', 1) AS key,
			CASE WHEN split_part(substr(s.step_id, length(@prefix::text) + 1), '#', 2) ~ '^[1-9][0-9]{0,8}$'
				THEN split_part(substr(s.step_id, length(@prefix::text) + 1), '#', 2)::int END AS n,
			s.output, s.finished_at
		FROM kagzi.step_runs s
		WHERE s.run_id = r.run_id AND s.is_latest AND s.status = 'COMPLETED' AND starts_with(s.step_id, @prefix::text)
	) p
	WHERE p.n IS NOT NULL AND (@key::text = '' OR p.key = @key::text)
	ORDER BY p.key, p.n DESC
) v ON true
WHERE r.namespace_id = @ns AND r.run_id = @run_id
ORDER BY v.key;

-- name: StepsStream :many
SELECT r.status, e.n, e.output, e.finished_at FROM kagzi.workflow_runs r
LEFT JOIN LATERAL (
	SELECT p.n, p.output, p.finished_at FROM (
		SELECT CASE WHEN substr(s.step_id, length(@prefix::text) + 1) = @end::text THEN 0
				WHEN substr(s.step_id, length(@prefix::text) + 1) ~ '^[1-9][0-9]{0,8}$'
				THEN substr(s.step_id, length(@prefix::text) + 1)::int END AS n,
			s.output, s.finished_at
		FROM kagzi.step_runs s
		WHERE s.run_id = r.run_id AND s.is_latest AND s.status = 'COMPLETED' AND starts_with(s.step_id, @prefix::text)
	) p
	WHERE p.n = 0 OR p.n > @after::int
	ORDER BY p.n
	LIMIT @limit::int + 2
) e ON true
WHERE r.namespace_id = @ns AND r.run_id = @run_id
ORDER BY e.n;

-- name: StepsStreams :many
SELECT p.name, count(p.n) FILTER (WHERE p.n > 0), coalesce(max(p.n), 0), bool_or(p.n = 0) FROM (
	SELECT split_part(substr(s.step_id, length(@prefix::text) + 1), '#', 1) AS name,
		CASE WHEN split_part(substr(s.step_id, length(@prefix::text) + 1), '#', 2) = @end::text THEN 0
			WHEN split_part(substr(s.step_id, length(@prefix::text) + 1), '#', 2) ~ '^[1-9][0-9]{0,8}$'
			THEN split_part(substr(s.step_id, length(@prefix::text) + 1), '#', 2)::int END AS n
	FROM kagzi.step_runs s
	WHERE s.run_id = @run_id AND s.namespace_id = @ns AND s.is_latest AND s.status = 'COMPLETED'
		AND starts_with(s.step_id, @prefix::text)
) p
WHERE p.n IS NOT NULL
GROUP BY p.name
ORDER BY p.name;
