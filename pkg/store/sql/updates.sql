-- Updates: requests sent to a run as events, answered by a step.

-- name: UpdatesAnswer :one
SELECT r.status, e.event_id IS NOT NULL, coalesce(e.name, ''), coalesce(e.consumed_by, ''), s.step_id IS NOT NULL, s.output
FROM kagzi.workflow_runs r
LEFT JOIN kagzi.workflow_events e ON e.event_id = @event_id AND e.run_id = r.run_id AND starts_with(e.name, @event_prefix)
LEFT JOIN kagzi.step_runs s ON s.run_id = r.run_id AND s.is_latest AND s.status = 'COMPLETED'
	AND starts_with(e.consumed_by, @event_step_prefix)
	AND s.step_id = @step_prefix || substr(e.consumed_by, @cut)
WHERE r.namespace_id = @namespace AND r.run_id = @run_id;
