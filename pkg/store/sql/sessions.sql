-- Sessions: their process ids, their end, the advisory locks that elect
-- leaders, and the terms of those leaders (kagzi.leaders).

-- name: SessionPID :one
SELECT pg_backend_pid()

-- name: SessionTerminate :one
SELECT coalesce(bool_or(pg_terminate_backend(pid, @wait_ms)), false) FROM pg_stat_activity WHERE pid = @pid

-- name: SessionLock :exec
SELECT pg_advisory_lock(@key)

-- name: LeadersElect :one
INSERT INTO kagzi.leaders (role, term) VALUES (@role, 1)
ON CONFLICT (role) DO UPDATE SET term = kagzi.leaders.term + 1, elected_at = now()
RETURNING term

-- name: LeadersFence :one
SELECT term FROM kagzi.leaders WHERE role = @role FOR SHARE
