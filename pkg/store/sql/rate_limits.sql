-- Rate limits of a rate key.

-- name: RateLimitsSet :one
INSERT INTO kagzi.rate_limits AS rl (namespace_id, rate_key, max_claims, period_ms) VALUES (@namespace, @key, @limit, @period_ms)
ON CONFLICT (namespace_id, rate_key) DO UPDATE SET max_claims = excluded.max_claims, period_ms = excluded.period_ms,
	window_start = CASE WHEN rl.period_ms = excluded.period_ms THEN rl.window_start ELSE 'epoch' END,
	claims = CASE WHEN rl.period_ms = excluded.period_ms THEN rl.claims ELSE 0 END,
	updated_at = now()
RETURNING window_start, claims, updated_at

-- name: RateLimitsDelete :exec
DELETE FROM kagzi.rate_limits WHERE namespace_id = @namespace AND rate_key = @key

-- name: RunsRateRespread :exec
-- Sent after RateLimitsSet or RateLimitsDelete in the same transaction, so
-- that its snapshot, taken after their lock on the limit's row, sees the
-- runs a claim held under the old limit meanwhile.
UPDATE kagzi.workflow_runs r SET available_at = least(r.available_at, r.rate_due_at), rate_due_at = NULL
WHERE r.namespace_id = @namespace AND r.rate_key = @key AND r.rate_due_at IS NOT NULL
	AND r.status IN ('PENDING', 'SLEEPING')

-- name: RateLimitsList :many
SELECT namespace_id, rate_key, max_claims, period_ms,
	kagzi.rate_window(now(), period_ms),
	CASE WHEN window_start = kagzi.rate_window(now(), period_ms) THEN claims ELSE 0 END, updated_at
FROM kagzi.rate_limits WHERE namespace_id = @namespace ORDER BY rate_key
