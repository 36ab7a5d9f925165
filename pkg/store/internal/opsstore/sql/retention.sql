-- Retention: how long finished runs are kept (kagzi.retention), and their
-- deletion. A statement that returns a policy returns its columns in
-- scanRetention's order.
--
-- RetentionNextExpiry and RetentionDeleteExpired read the finished runs by
-- groups: grp, every (namespace, type, status) of finished runs
-- (COMPLETED, FAILED, CANCELLED), found by a loose scan (one probe per
-- group of the index workflow_runs_finished_idx, migration 010), and pol,
-- the period of each group: the type's policy, else the namespace's, else
-- the default, column by column (a NULL inherits). A group without a
-- period (the default row removed by hand) keeps its runs. A run is read
-- in its group in the form that index serves. A finished run may go when
-- it is no child of a run that has not finished (whose history shows it),
-- so a parent's children outlive it; a child whose parent is gone may go.
-- The parent is read by a scalar subquery, a probe of the primary key per
-- child: as NOT EXISTS, Postgres may hash the set of every live run
-- instead, which reads the whole table.

-- name: RetentionSet :one
INSERT INTO kagzi.retention AS k (namespace_id, workflow_type, keep_completed, keep_failed)
SELECT @namespace, @type, coalesce(@keep_completed::interval, o.keep_completed), coalesce(@keep_failed::interval, o.keep_failed)
FROM (VALUES (1)) AS v(x)
LEFT JOIN kagzi.retention o ON o.namespace_id = @namespace AND o.workflow_type = @type
ON CONFLICT (namespace_id, workflow_type) DO UPDATE SET
	keep_completed = coalesce(@keep_completed::interval, k.keep_completed),
	keep_failed = coalesce(@keep_failed::interval, k.keep_failed),
	updated_at = now()
RETURNING k.namespace_id, k.workflow_type, k.keep_completed, k.keep_failed, k.updated_at

-- name: RetentionDelete :exec
DELETE FROM kagzi.retention WHERE namespace_id = @namespace AND workflow_type = @type

-- name: RetentionList :many
SELECT k.namespace_id, k.workflow_type, k.keep_completed, k.keep_failed, k.updated_at FROM kagzi.retention k
WHERE k.namespace_id = '' OR k.namespace_id = @namespace
ORDER BY k.namespace_id, k.workflow_type

-- name: RetentionNextExpiry :one
WITH RECURSIVE grp(namespace_id, workflow_type, status) AS (
	(SELECT r.namespace_id, r.workflow_type, r.status FROM kagzi.workflow_runs r
	 WHERE r.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
	 ORDER BY r.namespace_id, r.workflow_type, r.status LIMIT 1)
	UNION ALL
	SELECT n.namespace_id, n.workflow_type, n.status FROM grp g CROSS JOIN LATERAL (
		SELECT r.namespace_id, r.workflow_type, r.status FROM kagzi.workflow_runs r
		WHERE r.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
		  AND (r.namespace_id, r.workflow_type, r.status) > (g.namespace_id, g.workflow_type, g.status)
		ORDER BY r.namespace_id, r.workflow_type, r.status LIMIT 1) n
), pol AS MATERIALIZED (
	SELECT g.namespace_id, g.workflow_type, g.status, coalesce(
		(SELECT CASE WHEN g.status = 'FAILED' THEN k.keep_failed ELSE k.keep_completed END FROM kagzi.retention k
		 WHERE k.namespace_id = g.namespace_id AND k.workflow_type = g.workflow_type),
		(SELECT CASE WHEN g.status = 'FAILED' THEN k.keep_failed ELSE k.keep_completed END FROM kagzi.retention k
		 WHERE k.namespace_id = g.namespace_id AND k.workflow_type = ''),
		(SELECT CASE WHEN g.status = 'FAILED' THEN k.keep_failed ELSE k.keep_completed END FROM kagzi.retention k
		 WHERE k.namespace_id = '' AND k.workflow_type = '')) AS keep
	FROM grp g
)
SELECT min(o.finished_at), min(e.finished_at + pol.keep),
	(SELECT min(v) FROM kagzi.retention, LATERAL (VALUES (keep_completed), (keep_failed)) AS x(v) WHERE v > interval '0')
FROM pol
CROSS JOIN LATERAL (
	SELECT r.finished_at FROM kagzi.workflow_runs r WHERE r.namespace_id = pol.namespace_id AND r.workflow_type = pol.workflow_type AND r.status = pol.status
		  AND r.status IN ('COMPLETED', 'FAILED', 'CANCELLED') AND r.finished_at IS NOT NULL
	ORDER BY r.finished_at LIMIT 1) o
LEFT JOIN LATERAL (
	SELECT r.finished_at FROM kagzi.workflow_runs r WHERE r.namespace_id = pol.namespace_id AND r.workflow_type = pol.workflow_type AND r.status = pol.status
		  AND r.status IN ('COMPLETED', 'FAILED', 'CANCELLED') AND r.finished_at IS NOT NULL AND pol.keep > interval '0' AND (r.parent_run_id IS NULL OR coalesce((SELECT p.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
		  FROM kagzi.workflow_runs p WHERE p.run_id = r.parent_run_id), true))
	ORDER BY r.finished_at LIMIT 1) e ON true

-- name: RetentionDeleteExpired :one
-- Deletes the runs retention finds due (@run_id NULL), or the one run
-- @run_id of @namespace (a batch's delete) by the same rules: finished,
-- no child of a live parent, not held by another transaction. The
-- by-id candidate's branch alone runs then (the policy scan's branch is
-- behind a one-time filter, so grp and pol are never read). The second
-- column is the status the run @run_id had (NULL: no such run), which
-- tells a refusal of the by-id deletion from a run gone.
WITH RECURSIVE grp(namespace_id, workflow_type, status) AS (
	(SELECT r.namespace_id, r.workflow_type, r.status FROM kagzi.workflow_runs r
	 WHERE r.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
	 ORDER BY r.namespace_id, r.workflow_type, r.status LIMIT 1)
	UNION ALL
	SELECT n.namespace_id, n.workflow_type, n.status FROM grp g CROSS JOIN LATERAL (
		SELECT r.namespace_id, r.workflow_type, r.status FROM kagzi.workflow_runs r
		WHERE r.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
		  AND (r.namespace_id, r.workflow_type, r.status) > (g.namespace_id, g.workflow_type, g.status)
		ORDER BY r.namespace_id, r.workflow_type, r.status LIMIT 1) n
), pol AS MATERIALIZED (
	SELECT g.namespace_id, g.workflow_type, g.status, coalesce(
		(SELECT CASE WHEN g.status = 'FAILED' THEN k.keep_failed ELSE k.keep_completed END FROM kagzi.retention k
		 WHERE k.namespace_id = g.namespace_id AND k.workflow_type = g.workflow_type),
		(SELECT CASE WHEN g.status = 'FAILED' THEN k.keep_failed ELSE k.keep_completed END FROM kagzi.retention k
		 WHERE k.namespace_id = g.namespace_id AND k.workflow_type = ''),
		(SELECT CASE WHEN g.status = 'FAILED' THEN k.keep_failed ELSE k.keep_completed END FROM kagzi.retention k
		 WHERE k.namespace_id = '' AND k.workflow_type = '')) AS keep
	FROM grp g
),
cand AS MATERIALIZED (
	(SELECT c.run_id, c.parent_run_id, @now::timestamptz - pol.keep AS cutoff FROM pol CROSS JOIN LATERAL (
		SELECT r.run_id, r.parent_run_id FROM kagzi.workflow_runs r
		WHERE r.namespace_id = pol.namespace_id AND r.workflow_type = pol.workflow_type AND r.status = pol.status
		  AND r.status IN ('COMPLETED', 'FAILED', 'CANCELLED') AND r.finished_at IS NOT NULL AND r.finished_at < @now::timestamptz - pol.keep AND (r.parent_run_id IS NULL OR coalesce((SELECT p.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
		  FROM kagzi.workflow_runs p WHERE p.run_id = r.parent_run_id), true))
		ORDER BY r.finished_at LIMIT @limit) c
	WHERE pol.keep > interval '0' AND @run_id::uuid IS NULL
	LIMIT @limit)
	UNION ALL
	SELECT r.run_id, r.parent_run_id, 'infinity'::timestamptz FROM kagzi.workflow_runs r
	WHERE r.run_id = @run_id::uuid AND r.namespace_id = @namespace::text
), parents AS MATERIALIZED (
	-- A finished parent stays finished until the batch commits (a retry
	-- waits for it), so its child is never deleted under a live parent.
	SELECT p.run_id FROM kagzi.workflow_runs p
	WHERE p.run_id IN (SELECT parent_run_id FROM cand)
	  AND p.status IN ('COMPLETED', 'FAILED', 'CANCELLED')
	ORDER BY p.run_id
	FOR SHARE OF p SKIP LOCKED
), victims AS MATERIALIZED (
	-- Locked, and checked again as they are now: a run retried (or
	-- retried and finished again) since the scan is not taken, nor a
	-- child whose parent is live or was skipped above. (A scalar
	-- subquery looks for a parent gone: NOT EXISTS may be hashed over
	-- every run.)
	SELECT r.run_id FROM kagzi.workflow_runs r JOIN cand c USING (run_id)
	WHERE r.status IN ('COMPLETED', 'FAILED', 'CANCELLED') AND r.finished_at < c.cutoff
	  AND (r.parent_run_id IS NULL OR r.parent_run_id IN (SELECT run_id FROM parents)
	       OR (SELECT true FROM kagzi.workflow_runs p WHERE p.run_id = r.parent_run_id) IS NULL)
	ORDER BY r.run_id
	FOR UPDATE OF r SKIP LOCKED
), runs AS (
	DELETE FROM kagzi.workflow_runs r USING victims v WHERE r.run_id = v.run_id
	RETURNING r.run_id
), steps AS (
	DELETE FROM kagzi.step_runs s USING victims v WHERE s.run_id = v.run_id
), events AS (
	DELETE FROM kagzi.workflow_events e USING victims v WHERE e.run_id = v.run_id
)
SELECT count(*), (SELECT r.status FROM kagzi.workflow_runs r WHERE r.run_id = @run_id::uuid AND r.namespace_id = @namespace::text
	AND r.status NOT IN ('SCHEDULED', 'PAUSED')) FROM runs

-- name: RetentionOrphans :one
SELECT (SELECT count(*) FROM kagzi.step_runs s WHERE NOT EXISTS (SELECT 1 FROM kagzi.workflow_runs r WHERE r.run_id = s.run_id)),
	(SELECT count(*) FROM kagzi.workflow_events e WHERE NOT EXISTS (SELECT 1 FROM kagzi.workflow_runs r WHERE r.run_id = e.run_id))

-- name: PublishedEventsDeleteExpired :one
-- Published events fanned out (or given up) and published before the cutoff,
-- oldest first, on published_events_done_idx (migration 035); their
-- firings and webhook deliveries go with them (ON DELETE CASCADE). A
-- pending event is not in the index and never goes; one a fan-out holds
-- is skipped.
WITH due AS (
	SELECT event_id FROM kagzi.published_events
	WHERE fanned_out_at IS NOT NULL AND published_at < @before
	ORDER BY published_at LIMIT @limit
	FOR UPDATE SKIP LOCKED
), del AS (
	DELETE FROM kagzi.published_events e USING due WHERE e.event_id = due.event_id RETURNING 1
)
SELECT count(*) FROM del;

-- name: WaitTokensDeleteExpired :one
-- Wait tokens used or expired before the cutoff, oldest first, on
-- wait_tokens_done_idx (least ignores a NULL used_at).
WITH due AS (
	SELECT token_id FROM kagzi.wait_tokens
	WHERE least(used_at, expires_at) < @before
	ORDER BY least(used_at, expires_at) LIMIT @limit
	FOR UPDATE SKIP LOCKED
), del AS (
	DELETE FROM kagzi.wait_tokens t USING due WHERE t.token_id = due.token_id RETURNING 1
)
SELECT count(*) FROM del;

-- name: PublishedEventsFanOutFailed :one
-- A failed fan-out of a pending event: one attempt more and its error;
-- at the last attempt the event is given up (failed_at, and fanned_out_at
-- so that it is no longer pending).
UPDATE kagzi.published_events
SET fan_out_attempts = fan_out_attempts + 1, fan_out_error = @error,
	failed_at = CASE WHEN fan_out_attempts + 1 >= @max_attempts THEN now() END,
	fanned_out_at = CASE WHEN fan_out_attempts + 1 >= @max_attempts THEN now() END
WHERE event_id = @event_id AND fanned_out_at IS NULL
RETURNING fan_out_attempts, failed_at IS NOT NULL;
