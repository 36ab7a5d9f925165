-- Retrying a failing step now.

-- name: RunsRetryStepNow :one
-- A run backing off before a step's next attempt is due now: its latest
-- failed attempts' retry times and the run's due time become now (a
-- paused run's due time is kept aside by its trigger until it is
-- resumed). Setting the due time makes the notify trigger wake the
-- dispatchers of its queue. Only a run that is not RUNNING: no report
-- writes its steps meanwhile. @override (JSON of a retry.Policy, or NULL
-- for none) is merged over the latest override of the step in the same
-- run attempt, if any: a later override's fields replace an earlier's,
-- the others stay.
WITH r AS (
	SELECT run_id, status FROM kagzi.workflow_runs
	WHERE namespace_id = @namespace AND run_id = @run_id AND cron_expr IS NULL
), s AS (
	UPDATE kagzi.step_runs s SET retry_at = now(),
		retry_override = CASE WHEN @override::jsonb IS NULL THEN s.retry_override
			ELSE coalesce((SELECT x.retry_override FROM kagzi.step_runs x
				WHERE x.run_id = s.run_id AND x.step_id = s.step_id AND x.run_attempt = s.run_attempt
				  AND x.retry_override IS NOT NULL
				ORDER BY x.attempt_number DESC LIMIT 1), '{}'::jsonb) || @override::jsonb END
	FROM r
	WHERE s.run_id = r.run_id AND r.status IN ('PENDING', 'SLEEPING') AND s.is_latest AND s.status = 'FAILED'
		AND s.retry_at > now()
	RETURNING s.run_id, s.step_id
), u AS (
	UPDATE kagzi.workflow_runs w SET available_at = now()
	FROM (SELECT DISTINCT run_id FROM s) x
	WHERE w.run_id = x.run_id AND w.namespace_id = @namespace
	RETURNING w.run_id
)
SELECT r.status, (SELECT count(*) FROM s), coalesce((SELECT string_agg(step_id, ',' ORDER BY step_id) FROM s), ''),
	EXISTS (SELECT 1 FROM u)
FROM r
