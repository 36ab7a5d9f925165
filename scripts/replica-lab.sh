#!/usr/bin/env bash
# The read-replica figures of docs/SCALING.md: a throwaway primary and a
# streaming replica (pg_basebackup -R) of the host's newest PostgreSQL, on
# loopback ports 55432 and 55433, in $LAB_DIR (default
# /tmp/kagzi-replica-lab; removed at the end). As root (the servers run as
# the postgres user). It
#
#   1. fills a namespace of the primary with $LAB_RUNS finished runs
#      (`kagzi bench --scenario console --keep`, which also times the
#      console on the primary), then copies the primary into the replica;
#   2. times the console's two namespace reads, the runs page's first page
#      (ConsoleRunsSearch, no filter) and the status counts (RunsCount),
#      with pgbench on the primary and on the replica, idle and while
#      `kagzi bench --scenario throughput` loads the primary;
#   3. samples the replica's replay lag (pg_stat_replication) every 0.2 s
#      during that load, and runs the same throughput bench again with the
#      replica synchronous (synchronous_standby_names) to show what a
#      synchronous standby costs.
#
#   sudo LAB_RUNS=1000000 scripts/replica-lab.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LAB=${LAB_DIR:-/tmp/kagzi-replica-lab}
RUNS=${LAB_RUNS:-1000000}
LOAD_RUNS=${LAB_LOAD_RUNS:-20000}
SECS=${LAB_SECONDS:-15}
P1=55432
P2=55433
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
[[ $(id -u) == 0 ]] || { echo "run as root: the servers run as the postgres user" >&2; exit 1; }

as_pg() { runuser -u postgres -- "$@"; }
cleanup() {
	as_pg "$BIN/pg_ctl" -D "$LAB/replica" -m immediate stop >/dev/null 2>&1 || true
	as_pg "$BIN/pg_ctl" -D "$LAB/primary" -m immediate stop >/dev/null 2>&1 || true
	[[ -n ${LAB_KEEP:-} ]] || rm -rf "$LAB"
}
trap cleanup EXIT
rm -rf "$LAB" && mkdir -p "$LAB" && chown postgres: "$LAB"
log() { printf '[replica-lab %s] %s\n' "$(date -u +%T)" "$*" >&2; }

log "building kagzi"
go -C "$ROOT/cmd/kagzi" build -o "$LAB/kagzi" .
ADMIN1="postgres://postgres@127.0.0.1:$P1/postgres?sslmode=disable"

log "primary: initdb ($("$BIN/postgres" --version))"
as_pg "$BIN/initdb" -D "$LAB/primary" -U postgres -A trust --no-sync >/dev/null
cat >>"$LAB/primary/postgresql.conf" <<CONF
port = $P1
listen_addresses = '127.0.0.1'
unix_socket_directories = '$LAB'
max_connections = 300
shared_buffers = 512MB
wal_level = replica
max_wal_senders = 4
wal_keep_size = 2GB
CONF
as_pg "$BIN/pg_ctl" -D "$LAB/primary" -l "$LAB/primary.log" -w start >/dev/null

log "filling the primary: $RUNS finished runs (kagzi bench --scenario console --keep)"
"$LAB/kagzi" bench --database-url "$ADMIN1" --scenario console --runs "$RUNS" --repeat 100 --keep --json >"$LAB/console-primary.json"
DB=$(psql -AtX "$ADMIN1" -c "select datname from pg_database where datname like 'kagzi_bench_%' limit 1")
log "database $DB; console on the primary: $(jq -c '{first_view_ms, baseline_ms, page_p50_ms, page_p99_ms, api_p50_ms, api_p99_ms}' "$LAB/console-primary.json")"

log "replica: pg_basebackup -R from the primary"
t0=$SECONDS
as_pg "$BIN/pg_basebackup" -h 127.0.0.1 -p $P1 -U postgres -D "$LAB/replica" -X stream -R --checkpoint=fast
log "base backup of $(du -sh "$LAB/replica" | cut -f1) in $((SECONDS - t0)) s"
cat >>"$LAB/replica/postgresql.conf" <<CONF
port = $P2
cluster_name = 'lab_replica'
hot_standby = on
CONF
as_pg "$BIN/pg_ctl" -D "$LAB/replica" -l "$LAB/replica.log" -w start >/dev/null
URL1="postgres://postgres@127.0.0.1:$P1/$DB?sslmode=disable"
URL2="postgres://postgres@127.0.0.1:$P2/$DB?sslmode=disable"
until [[ $(psql -AtX "$ADMIN1" -c "select count(*) from pg_stat_replication where state = 'streaming'") == 1 ]]; do sleep 0.2; done

# The console's statements as the console runs them for the runs page's
# first page with no filter (limit 50 + 1) and its status counts.
cat >"$LAB/list.sql" <<'SQL'
SELECT r.run_id, r.namespace_id, coalesce(r.external_id, ''), r.task_queue, r.workflow_type, r.version,
	r.status, r.attempts, r.available_at, r.locked_by, r.lease_token, r.lease_expires_at, coalesce(r.error, ''),
	r.created_at, r.started_at, r.finished_at, r.deadline_at, r.retry_policy, r.parent_run_id,
	coalesce(r.parent_step_id, ''), coalesce(r.cron_expr, ''), coalesce(r.timezone, ''), coalesce(r.max_catchup, 0),
	r.last_fired_at, r.schedule_id, r.schedule_fire_at, coalesce(r.trace_context, ''), r.priority,
	r.cancel_requested_at, coalesce(r.parent_close_policy, ''), r.epoch FROM kagzi.workflow_runs r
WHERE r.namespace_id = 'bench'
  AND (cardinality('{}'::text[]) = 0 AND r.status NOT IN ('SCHEDULED', 'PAUSED') OR r.status = ANY('{}'::text[]))
ORDER BY r.created_at DESC, r.run_id DESC
LIMIT 51;
SQL
cat >"$LAB/count.sql" <<'SQL'
SELECT status, count(*) FROM kagzi.workflow_runs WHERE namespace_id = 'bench' GROUP BY status;
SQL

# pgb URL SCRIPT: one client, $SECS seconds; prints "avg ms, stddev ms, tps".
pgb() {
	"$BIN/pgbench" -n -c 1 -T "$SECS" -P "$SECS" -f "$2" "$1" 2>&1 |
		awk '/latency average/ {a = $4} /latency stddev/ {s = $4} /^tps/ {t = $3} END {printf "avg %s ms, stddev %s ms, %s/s\n", a, s, t}'
}
measure() {
	local what=$1
	for q in list count; do
		log "$what: $q on the primary: $(pgb "$URL1" "$LAB/$q.sql")"
		log "$what: $q on the replica: $(pgb "$URL2" "$LAB/$q.sql")"
	done
}
measure idle

# lag_sampler: the replica's replay lag every 0.2 s until stopped.
lag_sampler() {
	while :; do
		psql -AtX "$ADMIN1" -c "select pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), coalesce(extract(epoch from replay_lag) * 1000, 0), coalesce(extract(epoch from write_lag) * 1000, 0) from pg_stat_replication" 2>/dev/null
		sleep 0.2
	done >"$LAB/lag.txt"
}

throughput() {
	"$LAB/kagzi" bench --database-url "$ADMIN1" --scenario throughput --runs "$LOAD_RUNS" --json 2>"$LAB/bench-$1.log" |
		jq -c '{runs, runs_per_sec, duration_sec}'
}

log "under load: kagzi bench --scenario throughput --runs $LOAD_RUNS on the primary, replica asynchronous"
lag_sampler &
LAG_PID=$!
throughput async >"$LAB/load-async.json" &
LOAD_PID=$!
sleep 5
measure "under load"
wait "$LOAD_PID"
kill "$LAG_PID" && wait "$LAG_PID" 2>/dev/null || true
log "throughput with an asynchronous replica: $(cat "$LAB/load-async.json")"
# pct FILE COLUMN: p50, p99 and max of a column of lag.txt.
pct() {
	cut -d'|' -f"$2" "$1" | sort -n | awk '{v[NR] = $1} END {
		if (!NR) { print "no samples"; exit }
		i = int(NR * 0.99); if (i < 1) i = 1
		printf "p50 %s, p99 %s, max %s (%d samples)\n", v[int(NR / 2) + 1], v[i], v[NR], NR }'
}
cp "$LAB/lag.txt" "${LAB_LAG_OUT:-/tmp/kagzi-replica-lag.txt}"
log "replay lag in bytes (pg_current_wal_lsn - replay_lsn): $(pct "$LAB/lag.txt" 1)"
log "replay_lag in ms (pg_stat_replication): $(pct "$LAB/lag.txt" 2)"
log "write_lag in ms (pg_stat_replication): $(pct "$LAB/lag.txt" 3)"

log "the same load with the replica synchronous (synchronous_standby_names = 'lab_replica')"
psql -qAtX "$ADMIN1" -c "alter system set synchronous_standby_names = 'lab_replica'" -c "select pg_reload_conf()" >/dev/null
until [[ $(psql -AtX "$ADMIN1" -c "select sync_state from pg_stat_replication") == sync ]]; do sleep 0.2; done
log "throughput with a synchronous replica: $(throughput sync)"
psql -qAtX "$ADMIN1" -c "alter system reset synchronous_standby_names" -c "select pg_reload_conf()" >/dev/null
log "the same load again, replica asynchronous: $(throughput async2)"
