-- Sessions: their process ids, their end, the advisory locks that elect
-- leaders, and the terms of those leaders (kagzi.leaders).

-- name: SessionPID :one
SELECT pg_backend_pid()

-- name: SessionTerminate :one
SELECT coalesce(bool_or(pg_terminate_backend(pid, @wait_ms)), false) FROM pg_stat_activity WHERE pid = @pid

-- name: SessionLock :exec
SELECT pg_advisory_lock(@key)
