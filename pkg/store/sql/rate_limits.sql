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

-- name: RateLimitsList :many
SELECT namespace_id, rate_key, max_claims, period_ms,
	kagzi.rate_window(now(), period_ms),
	CASE WHEN window_start = kagzi.rate_window(now(), period_ms) THEN claims ELSE 0 END, updated_at
FROM kagzi.rate_limits WHERE namespace_id = @namespace ORDER BY rate_key
