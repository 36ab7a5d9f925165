-- The server as operators and standbys see it: the sessions holding and
-- awaiting an advisory lock (leaders, the relay), and its settings.

-- name: LockSessions :one
SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted) FROM pg_locks
WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((classid::bigint << 32) | objid::bigint) = @key;

-- name: LockHolderTerminate :one
SELECT count(pg_terminate_backend(pid)) FROM pg_locks
WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((classid::bigint << 32) | objid::bigint) = @key;

-- name: LockHolderTerminateIdle :one
SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((l.classid::bigint << 32) | l.objid::bigint) = @key
  AND a.state = 'idle' AND a.state_change < clock_timestamp() - make_interval(secs => @idle_ms::float8 / 1000);

-- name: ServerAutovacuum :one
SELECT current_setting('autovacuum')::bool;

-- name: ServerInRecovery :one
SELECT pg_is_in_recovery();

-- name: ReplicationStandbys :one
SELECT count(*) FILTER (WHERE state = 'streaming'), count(*) FILTER (WHERE state = 'streaming' AND sync_state = 'sync')
FROM pg_stat_replication;

-- name: RunsLockExclusive :exec
LOCK TABLE kagzi.workflow_runs IN ACCESS EXCLUSIVE MODE;

-- name: ServerSleep :exec
SELECT pg_sleep(@ms::float8 / 1000);
