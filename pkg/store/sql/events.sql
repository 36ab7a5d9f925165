-- Events sent to runs: sends, waits, drains and the guard on a run's end.

-- name: EventsTargetByID :one
SELECT run_id, status, task_queue FROM kagzi.workflow_runs WHERE namespace_id = @namespace AND run_id = @run_id
FOR NO KEY UPDATE;

-- name: EventsTargetByExternalID :one
SELECT run_id, status, task_queue FROM kagzi.workflow_runs
WHERE namespace_id = @namespace AND external_id = @external_id AND status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')
FOR NO KEY UPDATE;

-- name: EventsTargetLastByExternalID :one
SELECT run_id, status, task_queue FROM kagzi.workflow_runs
WHERE namespace_id = @namespace AND external_id = @external_id
ORDER BY created_at DESC LIMIT 1;

-- name: EventsSend :one
WITH x AS (
	SELECT r.event_seq, r.status = 'RUNNING' AS running,
		r.status = 'SLEEPING' AND (r.available_at IS NULL OR r.available_at > now())
		AND EXISTS (SELECT 1 FROM kagzi.step_runs s
			WHERE s.run_id = @run_id AND s.kind = 'EVENT' AND s.is_latest AND s.status IN ('PENDING', 'RUNNING')
			  AND s.input = @name_bytes::bytea) AS wake
	FROM kagzi.workflow_runs r WHERE r.run_id = @run_id
), u AS (
	UPDATE kagzi.workflow_runs r SET event_seq = r.event_seq + CASE WHEN x.running THEN 1 ELSE 0 END,
		available_at = CASE WHEN x.wake THEN now() ELSE r.available_at END
	FROM x WHERE r.run_id = @run_id AND (x.running OR x.wake)
	RETURNING r.event_seq
), e AS (
	INSERT INTO kagzi.workflow_events (event_id, namespace_id, run_id, name, payload, seq)
	SELECT @event_id, @namespace, @run_id, @name, @payload, coalesce((SELECT event_seq FROM u), x.event_seq) FROM x
	RETURNING created_at
)
SELECT (SELECT created_at FROM e), coalesce((SELECT wake FROM x), false);

-- name: EventsConsume :one
WITH r AS (
	SELECT run_id FROM kagzi.workflow_runs
	WHERE namespace_id = @namespace AND run_id = @run_id AND lease_token = @token AND status = 'RUNNING'
	FOR SHARE
), prev AS (
	SELECT e.event_id FROM kagzi.workflow_events e JOIN r USING (run_id)
	WHERE e.name = @name AND e.consumed_by = @step_id AND e.consumed_at IS NOT NULL
	ORDER BY e.consumed_at, e.event_id
	LIMIT 1
), pick AS (
	SELECT e.event_id FROM kagzi.workflow_events e JOIN r USING (run_id)
	WHERE e.name = @name AND e.consumed_at IS NULL AND NOT EXISTS (SELECT 1 FROM prev)
	ORDER BY e.created_at, e.event_id
	LIMIT 1
	FOR UPDATE OF e SKIP LOCKED
), c AS (
	UPDATE kagzi.workflow_events e SET consumed_at = now(), consumed_by = @step_id
	FROM pick WHERE e.event_id = pick.event_id
	RETURNING e.event_id, e.consumed_at
)
SELECT r.run_id IS NOT NULL,
	e.event_id, e.namespace_id, e.run_id, e.name, e.payload, e.created_at, e.consumed_at, coalesce(e.consumed_by, ''),
	got.fresh
FROM (SELECT 1) one
LEFT JOIN r ON true
LEFT JOIN (SELECT event_id, NULL::timestamptz AS fresh FROM prev UNION ALL SELECT event_id, consumed_at FROM c) got ON true
LEFT JOIN kagzi.workflow_events e ON e.event_id = got.event_id;

-- name: EventsList :many
SELECT e.event_id, e.namespace_id, e.run_id, e.name, e.payload, e.created_at, e.consumed_at, coalesce(e.consumed_by, ''),
	e.consumed_at IS NULL AND r.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
FROM kagzi.workflow_runs r
LEFT JOIN kagzi.workflow_events e ON e.run_id = r.run_id
WHERE r.namespace_id = @namespace AND r.run_id = @run_id
ORDER BY e.created_at, e.event_id;

-- name: EventsWaitState :one
SELECT s.status, s.output, d.at, coalesce(d.at <= now(), false)
FROM (SELECT 1) one
LEFT JOIN kagzi.step_runs s ON s.run_id = @run_id AND s.step_id = @step_id AND s.attempt_number = @attempt
CROSS JOIN LATERAL (SELECT CASE WHEN s.status IS NULL THEN @until::timestamptz ELSE s.retry_at END AS at) d;

-- name: EventsReceived :one
SELECT r.status, r.lease_token, s.status, s.output FROM kagzi.workflow_runs r
LEFT JOIN kagzi.step_runs s ON s.run_id = r.run_id AND s.step_id = @step_id AND s.attempt_number = @attempt
WHERE r.namespace_id = @namespace AND r.run_id = @run_id;

-- name: EventsDrainStep :one
SELECT kind, status, coalesce(input, ''::bytea), output FROM kagzi.step_runs
WHERE run_id = @run_id AND step_id = @step_id AND attempt_number = 1;

-- name: EventsDrain :many
WITH pend AS (
	SELECT e.event_id, row_number() OVER w AS n, sum(coalesce(octet_length(e.payload), 4) + 1) OVER w AS upto
	FROM kagzi.workflow_events e
	WHERE e.run_id = @run_id AND e.name = @name AND e.consumed_at IS NULL
	WINDOW w AS (ORDER BY e.created_at, e.event_id)
), c AS (
	UPDATE kagzi.workflow_events e SET consumed_at = now(), consumed_by = @step_id
	FROM pend
	WHERE e.event_id = pend.event_id AND pend.n <= @max_events AND pend.upto <= @max_bytes
	RETURNING e.event_id, e.payload, e.created_at
)
SELECT event_id, payload FROM c ORDER BY created_at, event_id;

-- name: EventsDrainGiveBack :exec
UPDATE kagzi.workflow_events SET consumed_at = NULL, consumed_by = NULL WHERE event_id = ANY(@ids::uuid[]);

-- name: EventsDrainRecord :one
INSERT INTO kagzi.step_runs AS s (run_id, step_id, attempt_number, namespace_id, kind, status, is_latest, input, output,
	started_at, finished_at, run_attempt)
SELECT r.run_id, @step_id, 1, r.namespace_id, 'EVENT', 'COMPLETED', true, @name_bytes::bytea, @output::bytea,
	@started_at::timestamptz, now(), r.epoch
FROM kagzi.workflow_runs r WHERE r.run_id = @run_id
ON CONFLICT (run_id, step_id, attempt_number) DO UPDATE SET output = excluded.output, finished_at = excluded.finished_at
WHERE s.kind = 'EVENT' AND s.status = 'COMPLETED' AND s.input = excluded.input
RETURNING 1;

-- name: EventsWithStartTarget :one
SELECT run_id, status, task_queue, workflow_type FROM kagzi.workflow_runs
WHERE namespace_id = @namespace AND external_id = @external_id AND status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED')
FOR NO KEY UPDATE;
