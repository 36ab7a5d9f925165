-- Events sent to runs: sends, waits, drains and the guard on a run's end.

-- name: EventsGuardLock :one
SELECT event_seq FROM kagzi.workflow_runs
WHERE namespace_id = @namespace AND run_id = @run_id AND lease_token = @token AND status = 'RUNNING'
FOR NO KEY UPDATE;

-- name: EventsGuardRequeue :exec
UPDATE kagzi.workflow_runs r SET status = 'PENDING', available_at = now(), locked_by = NULL, lease_expires_at = NULL
WHERE r.run_id = @run_id AND EXISTS (
	SELECT 1 FROM kagzi.workflow_events e
	WHERE e.run_id = @run_id AND e.consumed_at IS NULL AND e.seq > @seen
	  AND (@all OR e.name = ANY(@names::text[])));
