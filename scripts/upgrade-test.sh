#!/usr/bin/env bash
# `make test-upgrade`: a rolling upgrade from an older Kagzi to the one in
# this work tree, with runs in flight the whole time, then checks that no
# run was lost and no step ran twice:
#
#   1. OLD is $UPGRADE_FROM (a commit), by default the first parent of the
#      mainline commit that added HEAD's newest migration, so the upgrade
#      applies at least one migration. (Across 016_inline_payloads.sql an
#      upgrade is a stop and a start, docs/operations.md "Upgrading": an OLD before it
#      is not a rolling upgrade this script can check.) It is checked out detached in a temporary `git
#      worktree` and built there; NEW is built from this work tree as it is.
#      Each build gives the service binaries (cmd/dispatcher, cmd/scheduler,
#      cmd/reaper) and the CLI (cmd/kagzi); workers are `kagzi serve
#      worker`, which registers the test flows: the runs are of the Chaos
#      probe (tests/testflows): 5 steps with a durable sleep after step
#      2, every step invocation logged to $KAGZI_CHAOS_DIR by whichever
#      worker process ran it.
#   2. A fresh database (kagzi_upgrade_<pid>) migrated by the OLD `kagzi
#      migrate`, a private nats-server, and the OLD services: 2 reapers,
#      1 scheduler, 2 dispatchers, 2 workers. A starter keeps starting runs
#      (`kagzi run start Chaos --id upgrade-N`, the OLD CLI, and after the
#      migration OLD and NEW in turn) until the upgrade is over and at least
#      $UPGRADE_RUNS were started.
#   3. Once runs are in flight, the steps of $UPGRADE_ORDER in turn:
#      "migrate" is the NEW `kagzi migrate`; a slot is replaced: SIGTERM,
#      wait for it to exit, start its NEW build, wait for its /readyz.
#   4. Waits until every run finished, then checks: every run started
#      exists and is COMPLETED; each has its 5 FUNCTION steps and its sleep
#      recorded once, at attempt 1 (the steps never fail); the workers' log
#      shows each step's function invoked exactly once; every NEW process
#      is still up.
#   5. Prints a summary: runs, upgrade order, time of each phase.
#
# Variables: UPGRADE_FROM (commit), UPGRADE_RUNS (200), UPGRADE_SLEEP_MS
# (4000, each run's sleep), UPGRADE_ORDER (the steps: "migrate" and every
# slot once, default "migrate reaper-1 reaper-2 scheduler-1 dispatcher-1
# dispatcher-2 worker-1 worker-2"; another order, e.g. migrate last, tests
# NEW services on the OLD schema), UPGRADE_DATABASE_URL (a server's admin URL; default
# scripts/ensure-postgres.sh), UPGRADE_NATS_URL (use that NATS instead of a
# private nats-server; it must carry no other Kagzi: leader beacons are
# global subjects), UPGRADE_KEEP=1 (keep the database). Logs go to
# artifacts/upgrade-test/ (kept; the last run's only).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

RUNS=${UPGRADE_RUNS:-200}
SLEEP_MS=${UPGRADE_SLEEP_MS:-4000}
STEPS=5
ORDER=${UPGRADE_ORDER:-"migrate reaper-1 reaper-2 scheduler-1 dispatcher-1 dispatcher-2 worker-1 worker-2"}
SLOTS=(reaper-1 reaper-2 scheduler-1 dispatcher-1 dispatcher-2 worker-1 worker-2)
NAMESPACE=upgrade
ART=$ROOT/artifacts/upgrade-test
START=$SECONDS
export GOFLAGS="-buildvcs=false ${GOFLAGS:-}"
export OTEL_SDK_DISABLED=true

log() { printf '[upgrade-test %4ds] %s\n' $((SECONDS - START)) "$*"; }
FAILED=0
fail() {
	FAILED=$((FAILED + 1))
	log "FAIL: $*"
}
die() {
	log "FAILED: $*"
	exit 1
}

mkdir -p "$ART"
rm -rf "${ART:?}"/*
mkdir -p "$ART/logs" "$ART/chaos"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kagzi-upgrade.XXXXXX")
WT=$TMP/old-src
BIN_OLD=$TMP/bin-old
BIN_NEW=$TMP/bin-new
STATE=$TMP/state
mkdir -p "$BIN_OLD" "$BIN_NEW" "$STATE"
DB=kagzi_upgrade_$$
ADMIN_URL=
DB_URL=
DB_CREATED=
WT_ADDED=
NATS_PID=
STARTER_PID=
declare -A PID VER ADDR

# ---------------------------------------------------------------- cleanup

# stop_pid PID TIMEOUT: SIGTERM, wait up to TIMEOUT s, then SIGKILL.
# Returns 1 if it had to be killed.
stop_pid() {
	local p=$1 t=$2 i
	kill -TERM "$p" 2>/dev/null || return 0
	for ((i = 0; i < t * 10; i++)); do
		kill -0 "$p" 2>/dev/null || { wait "$p" 2>/dev/null || true; return 0; }
		sleep 0.1
	done
	kill -KILL "$p" 2>/dev/null || true
	wait "$p" 2>/dev/null || true
	return 1
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	[[ -n $STARTER_PID ]] && { kill "$STARTER_PID" 2>/dev/null; wait "$STARTER_PID" 2>/dev/null; }
	local s
	for s in "${!PID[@]}"; do
		[[ -n ${PID[$s]} ]] && stop_pid "${PID[$s]}" 10
	done
	[[ -n $NATS_PID ]] && stop_pid "$NATS_PID" 5
	if [[ -n $DB_CREATED ]]; then
		if [[ -n ${UPGRADE_KEEP:-} ]]; then
			log "UPGRADE_KEEP set: database $DB kept ($DB_URL)"
		else
			psql -q "$ADMIN_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 ||
				log "could not drop database $DB"
		fi
	fi
	if [[ -n $WT_ADDED ]]; then
		git -C "$ROOT" worktree remove --force "$WT" >/dev/null 2>&1
		git -C "$ROOT" worktree prune >/dev/null 2>&1
	fi
	[[ -f $STATE/started.tsv ]] && cp "$STATE/started.tsv" "$ART/"
	rm -rf "$TMP"
	if ((rc != 0 || FAILED != 0)); then
		log "upgrade test FAILED after $((SECONDS - START))s; logs in ${ART#"$ROOT"/}/"
		((rc == 0)) && rc=1
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT TERM

# ---------------------------------------------------------------- helpers

free_port() {
	local p i
	for ((i = 0; i < 200; i++)); do
		# Below Linux's ephemeral range (32768-60999 by default): a port
		# that an outgoing connection holds refuses a connection, so it
		# looks free here, and then refuses the bind.
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

sql() { psql -X -qAt -v ON_ERROR_STOP=1 "$DB_URL" -c "$1"; }

tail_log() { # file
	echo "----- last lines of ${1#"$ROOT"/} -----"
	tail -n 30 "$1" 2>/dev/null
	echo "-----"
}

# start_slot SLOT old|new: start the slot's service from that build.
start_slot() {
	local slot=$1 ver=$2 role=${1%-*} bin port cmd logf
	bin=$TMP/bin-$ver
	port=$(free_port) || die "no free port"
	ADDR[$slot]=127.0.0.1:$port
	VER[$slot]=$ver
	logf=$ART/logs/$slot-$ver.log
	if [[ $role == worker ]]; then
		cmd=("$bin/kagzi" serve worker)
	else
		cmd=("$bin/$role")
	fi
	env KAGZI_DATABASE_URL="$DB_URL" KAGZI_NATS_URL="$NATS_URL" KAGZI_HTTP_ADDR="${ADDR[$slot]}" \
		KAGZI_NAMESPACE="$NAMESPACE" KAGZI_WORKER_IDENTITY="upgrade-$slot" KAGZI_LOG_LEVEL=info \
		KAGZI_CHAOS_DIR="$ART/chaos" "${cmd[@]}" >"$logf" 2>&1 &
	PID[$slot]=$!
	echo "${PID[$slot]} $slot-$ver" >>"$STATE/pids"
}

# wait_ready SLOT TIMEOUT: until the slot's /readyz answers 200.
wait_ready() {
	local slot=$1 t=$2 deadline=$((SECONDS + $2))
	while ((SECONDS < deadline)); do
		if ! kill -0 "${PID[$slot]}" 2>/dev/null; then
			tail_log "$ART/logs/$slot-${VER[$slot]}.log"
			die "$slot (${VER[$slot]}) exited before it was ready"
		fi
		curl -fsS -m 2 -o /dev/null "http://${ADDR[$slot]}/readyz" 2>/dev/null && return 0
		sleep 0.2
	done
	tail_log "$ART/logs/$slot-${VER[$slot]}.log"
	die "$slot (${VER[$slot]}) not ready within ${t}s (http://${ADDR[$slot]}/readyz)"
}

# stop_slot SLOT: SIGTERM, and wait for it to exit (a worker drains).
stop_slot() {
	local slot=$1 rc
	if ! kill -0 "${PID[$slot]}" 2>/dev/null; then
		wait "${PID[$slot]}" 2>/dev/null && rc=0 || rc=$?
		tail_log "$ART/logs/$slot-${VER[$slot]}.log"
		die "$slot (${VER[$slot]}) had already exited (status $rc) before it was stopped"
	fi
	kill -TERM "${PID[$slot]}"
	local deadline=$((SECONDS + 60))
	while kill -0 "${PID[$slot]}" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			kill -KILL "${PID[$slot]}" 2>/dev/null || true
			tail_log "$ART/logs/$slot-${VER[$slot]}.log"
			die "$slot (${VER[$slot]}) did not exit within 60s of SIGTERM (killed)"
		fi
		sleep 0.1
	done
	wait "${PID[$slot]}" 2>/dev/null && rc=0 || rc=$?
	PID[$slot]=
	((rc == 0)) || {
		tail_log "$ART/logs/$slot-${VER[$slot]}.log"
		fail "$slot (${VER[$slot]}) exited with status $rc on SIGTERM"
	}
}

# run_counts: "started finished live" for the runs of this test.
run_counts() {
	sql "SELECT count(*), count(*) FILTER (WHERE status IN ('COMPLETED','FAILED','CANCELLED')),
		count(*) FILTER (WHERE status IN ('RUNNING','SLEEPING','PENDING'))
		FROM kagzi.workflow_runs WHERE workflow_type = 'Chaos'" | tr '|' ' '
}

# starter: starts runs, one at a time, until $STATE/stop exists and at
# least $RUNS were started. Before $STATE/migrated exists every start is by
# the OLD CLI; after it, OLD and NEW in turn. Each start is idempotent (its
# external id), so a failed one is tried again; one that fails 5 times is
# recorded in $STATE/start-failed.
starter() {
	local n=0 ver out id try
	while [[ ! -e $STATE/stop ]] || ((n < RUNS)); do
		n=$((n + 1))
		ver=old
		[[ -e $STATE/migrated ]] && ((n % 2 == 0)) && ver=new
		id=
		for try in 1 2 3 4 5; do
			if out=$(KAGZI_DATABASE_URL="$DB_URL" KAGZI_NATS_URL="$NATS_URL" KAGZI_NAMESPACE="$NAMESPACE" \
				timeout 30 "$TMP/bin-$ver/kagzi" run start Chaos --id "upgrade-$n" --json \
				--input "{\"n\":$n,\"steps\":$STEPS,\"sleep_ms\":$SLEEP_MS,\"work_max_ms\":20}" 2>>"$ART/logs/starter.log"); then
				id=$(jq -r .run_id <<<"$out" 2>/dev/null) || id=
				[[ -n $id && $id != null ]] && break
			fi
			echo "start $n try $try failed: $out" >>"$ART/logs/starter.log"
			id=
			sleep 0.5
		done
		if [[ -z $id ]]; then
			echo "$n" >>"$STATE/start-failed"
		else
			printf '%d\t%s\t%s\n' "$n" "$id" "$ver" >>"$STATE/started.tsv"
		fi
		sleep 0.05
	done
}

started() { [[ -f $STATE/started.tsv ]] && wc -l <"$STATE/started.tsv" || echo 0; }

# ---------------------------------------------------------------- versions

command -v jq >/dev/null || die "jq is required"
command -v curl >/dev/null || die "curl is required"
command -v psql >/dev/null || die "psql is required"

if [[ -n ${UPGRADE_FROM:-} ]]; then
	OLD=$(git rev-parse --verify "$UPGRADE_FROM^{commit}") || die "UPGRADE_FROM=$UPGRADE_FROM is not a commit"
	log "OLD: UPGRADE_FROM=$UPGRADE_FROM"
else
	newest=$(git ls-tree --name-only HEAD migrations/ | grep -E '^migrations/[0-9]+_.*\.sql$' | sort | tail -n 1)
	[[ -n $newest ]] || die "no migration in HEAD's migrations/"
	# Along the first parents: the mainline commit that brought the
	# migration in, so OLD is a version that was released before it.
	added=$(git log --first-parent --diff-filter=A --format=%H -1 HEAD -- "$newest")
	[[ -n $added ]] || die "no commit added $newest"
	OLD=$(git rev-parse --verify "$added^") || die "$added has no parent"
	log "OLD: the parent of $(git log -1 --format='%h %s' "$added" | cut -c1-70)…, which added $newest"
fi
log "OLD $(git log -1 --format='%h (%cs) %s' "$OLD" | cut -c1-100)"
NEW_HEAD=$(git rev-parse --short HEAD)
log "NEW this work tree: HEAD $NEW_HEAD$(git diff --quiet HEAD -- 2>/dev/null || echo ' with local changes')"
OLD_MIGRATIONS=$(git ls-tree --name-only "$OLD" migrations/ | grep -cE '^migrations/[0-9]+_.*\.sql$' || true)
NEW_MIGRATIONS=$(find migrations -maxdepth 1 -name '[0-9]*_*.sql' | wc -l)
log "migrations: OLD has $OLD_MIGRATIONS, NEW has $NEW_MIGRATIONS"
((NEW_MIGRATIONS > OLD_MIGRATIONS)) || log "note: the upgrade applies no migration"
git diff --stat "$OLD" -- migrations/ | sed 's/^/    /'

# An applied migration is never applied again: its SQL (the up part, less
# comments and blank lines) must be OLD's, or upgraded databases and fresh
# ones differ. Comments may change. A function of migrations/functions/ is
# compared apart: a migration's "-- kagzi:function NAME" line and a
# definition of NAME written out (as migrations before the functions/ files
# did) both read "FUNCTION NAME" here, and below.
FUNCTIONS=" $(find migrations/functions -name '*.sql' -printf '%f ' 2>/dev/null | sed 's/\.sql / /g')"
# fold_functions: stdin with each definition of, or directive naming, a
# function of $FUNCTIONS as the line "FUNCTION NAME".
fold_functions() {
	awk -v names="$FUNCTIONS" '
		skip { if ($0 ~ /^[$][$];[[:space:]]*$/) skip = 0; next }
		/^[[:space:]]*CREATE[[:space:]]+(OR[[:space:]]+REPLACE[[:space:]]+)?FUNCTION[[:space:]]+kagzi[.][a-z_0-9]+[(]/ {
			n = $0; sub(/^.*FUNCTION[[:space:]]+kagzi[.]/, "", n); sub(/[(].*$/, "", n)
			if (index(names, " " n " ")) { print "FUNCTION " n; skip = 1; next }
		}
		/^[[:space:]]*--[[:space:]]*kagzi:function[[:space:]]/ {
			n = $0; sub(/^[[:space:]]*--[[:space:]]*kagzi:function[[:space:]]+/, "", n); sub(/[[:space:]].*$/, "", n)
			print "FUNCTION " n; next
		}
		{ print }'
}
up_part() { sed -e '/^---- create above \/ drop below ----/,$d'; }
sql_only() { sed -e 's/^[[:space:]]*--.*$//' -e 's/[[:space:]]*$//' | grep -v '^$' || true; }
# A table's own triggers turned off and on again around a statement leave
# the schema as it was: an applied migration may gain such pairs (016 did,
# so that its copy of every run's row no longer runs trigger functions
# whose current definitions call what later migrations create), and
# databases past it are what they were. Only balanced pairs are left out:
# a trigger left off would change the schema, and the diff shows it.
triggers_toggled() {
	local sql off on
	sql=$(cat)
	off=$(grep -cE '^ALTER TABLE kagzi\.[a-z_]+ DISABLE TRIGGER USER;$' <<<"$sql" || true)
	on=$(grep -cE '^ALTER TABLE kagzi\.[a-z_]+ ENABLE TRIGGER USER;$' <<<"$sql" || true)
	if [[ $off == "$on" ]]; then
		grep -vE '^ALTER TABLE kagzi\.[a-z_]+ (DISABLE|ENABLE) TRIGGER USER;$' <<<"$sql" || true
	else
		printf '%s\n' "$sql"
	fi
}
migration_sql() { up_part | fold_functions | sql_only | triggers_toggled; }
for f in $(git ls-tree --name-only "$OLD" migrations/ | grep -E '^migrations/[0-9]+_.*\.sql$'); do
	if [[ ! -f $f ]]; then
		fail "$f of OLD is gone from the work tree"
	elif ! diff <(git show "$OLD:$f" | migration_sql) <(migration_sql <"$f") >"$TMP/migration.diff"; then
		fail "$f: its SQL differs from OLD's, which databases at OLD's version already applied:"
		sed 's/^/    /' "$TMP/migration.diff" | head -n 20
	fi
done
# A function whose pinning migration (the last naming it) OLD applied is
# OLD's definition: OLD's functions/ file, or else the last definition its
# migrations wrote out. Otherwise upgraded databases would keep OLD's.
function_sql() { sql_only | sed -E 's/^CREATE[[:space:]]+FUNCTION/CREATE OR REPLACE FUNCTION/'; }
old_function() { # name: OLD's definition of kagzi.name
	local fn=$1 f def=
	if git cat-file -e "$OLD:migrations/functions/$fn.sql" 2>/dev/null; then
		git show "$OLD:migrations/functions/$fn.sql"
		return
	fi
	for f in $(git ls-tree --name-only "$OLD" migrations/ | grep -E '^migrations/[0-9]+_.*\.sql$' | sort); do
		local d
		d=$(git show "$OLD:$f" | up_part | awk -v fn="$fn" '
			/^[[:space:]]*CREATE[[:space:]]+(OR[[:space:]]+REPLACE[[:space:]]+)?FUNCTION[[:space:]]+kagzi[.]/ && index($0, "kagzi." fn "(") { on = 1 }
			on { print; if ($0 ~ /^[$][$];[[:space:]]*$/) on = 0 }')
		[[ -n $d ]] && def=$d
	done
	printf '%s\n' "$def"
}
for fn in $FUNCTIONS; do
	pin=$(grep -lE "^-- kagzi:function $fn sha256:" migrations/[0-9]*_*.sql | sort | tail -n 1)
	[[ -n $pin ]] && git cat-file -e "$OLD:$pin" 2>/dev/null || continue
	if ! diff <(old_function "$fn" | function_sql) <(function_sql <"migrations/functions/$fn.sql") >"$TMP/function.diff"; then
		fail "migrations/functions/$fn.sql differs from OLD's kagzi.$fn, though OLD applied $pin, which pins it: a change needs a new migration naming it:"
		sed 's/^/    /' "$TMP/function.diff" | head -n 20
	fi
done

# ---------------------------------------------------------------- builds

T0=$SECONDS
git worktree add --detach "$WT" "$OLD" >"$ART/logs/worktree.log" 2>&1 || { cat "$ART/logs/worktree.log"; die "git worktree add $OLD"; }
WT_ADDED=1
build() { # src bin
	local src=$1 bin=$2 svc=()
	local r
	for r in dispatcher scheduler reaper; do
		[[ -d $src/cmd/$r ]] || die "$src has no cmd/$r"
		svc+=("./cmd/$r")
	done
	go -C "$src" build -o "$bin/" "${svc[@]}" &&
		go -C "$src/cmd/kagzi" build -o "$bin/kagzi" .
}
# The default OLD may not build (a commit can carry part of the next one's
# change): then its first parent, up to 5 commits back, each one reported.
for ((try = 1; ; try++)); do
	log "building OLD $(git rev-parse --short "$OLD") (dispatcher, scheduler, reaper, kagzi) in a worktree"
	build "$WT" "$BIN_OLD" >"$ART/logs/build-old.log" 2>&1 && break
	tail_log "$ART/logs/build-old.log"
	if [[ -n ${UPGRADE_FROM:-} ]] || ((try >= 5)); then die "building OLD $(git rev-parse --short "$OLD")"; fi
	log "OLD $(git rev-parse --short "$OLD") does not build; trying its parent"
	cp "$ART/logs/build-old.log" "$ART/logs/build-old-$(git rev-parse --short "$OLD").log"
	OLD=$(git rev-parse --verify "$OLD^") || die "no parent to try"
	git worktree remove --force "$WT" >>"$ART/logs/worktree.log" 2>&1
	git worktree add --detach "$WT" "$OLD" >>"$ART/logs/worktree.log" 2>&1 || die "git worktree add $OLD"
	OLD_MIGRATIONS=$(git ls-tree --name-only "$OLD" migrations/ | grep -cE '^migrations/[0-9]+_.*\.sql$' || true)
	log "OLD $(git log -1 --format='%h (%cs) %s' "$OLD" | cut -c1-100), $OLD_MIGRATIONS migrations"
done
log "building NEW from the work tree"
build "$ROOT" "$BIN_NEW" >"$ART/logs/build-new.log" 2>&1 || { tail_log "$ART/logs/build-new.log"; die "building NEW"; }
for v in old new; do "$TMP/bin-$v/kagzi" --help >/dev/null 2>&1 || die "the ${v^^} kagzi does not run"; done
T_BUILD=$((SECONDS - T0))

# ---------------------------------------------------------------- infra

ADMIN_URL=${UPGRADE_DATABASE_URL:-$(scripts/ensure-postgres.sh)}
DB_URL=$(sed -E "s#^(postgres(ql)?://[^/]*/)[^?]*#\1$DB#" <<<"$ADMIN_URL")
# Databases of earlier runs whose script is gone.
for d in $(psql -X -qAt "$ADMIN_URL" -c "SELECT datname FROM pg_database WHERE datname ~ '^kagzi_upgrade_[0-9]+$'" 2>/dev/null); do
	kill -0 "${d#kagzi_upgrade_}" 2>/dev/null && continue
	psql -X -q "$ADMIN_URL" -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1 && log "dropped $d, left by an earlier run"
done
PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 "$ADMIN_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB" >/dev/null ||
	die "cannot create database $DB on $ADMIN_URL"
DB_CREATED=1
log "database $DB"

if [[ -n ${UPGRADE_NATS_URL:-} ]]; then
	NATS_URL=$UPGRADE_NATS_URL
	log "NATS $NATS_URL (UPGRADE_NATS_URL)"
else
	NATS_BIN=$(command -v nats-server || true)
	if [[ -z $NATS_BIN ]]; then
		NATS_BIN=$BIN_NEW/nats-server
		log "building nats-server (tests/testnats/natsbin's version)"
		go -C tests/testnats/natsbin build -o "$NATS_BIN" github.com/nats-io/nats-server/v2 >"$ART/logs/build-nats.log" 2>&1 ||
			die "building nats-server (see artifacts/upgrade-test/logs/build-nats.log)"
	fi
	port=$(free_port) || die "no free port"
	# max_payload as deploy/compose.yaml's, above the payload limit.
	printf 'listen: "127.0.0.1:%d"\nmax_payload: 8388608\n' "$port" >"$TMP/nats.conf"
	"$NATS_BIN" -c "$TMP/nats.conf" >"$ART/logs/nats-server.log" 2>&1 &
	NATS_PID=$!
	NATS_URL=nats://127.0.0.1:$port
	for ((i = 0; i < 100; i++)); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
		kill -0 "$NATS_PID" 2>/dev/null || { tail_log "$ART/logs/nats-server.log"; die "nats-server exited"; }
		sleep 0.1
	done
	((i < 100)) || die "nats-server not listening on $port within 10s"
	log "private nats-server $NATS_URL ($NATS_BIN)"
fi

KAGZI_DATABASE_URL=$DB_URL "$BIN_OLD/kagzi" migrate >"$ART/logs/migrate-old.log" 2>&1 || { tail_log "$ART/logs/migrate-old.log"; die "OLD kagzi migrate"; }
v=$(sql "SELECT version FROM public.kagzi_schema_version")
log "OLD kagzi migrate: schema version $v"
((v == OLD_MIGRATIONS)) || die "schema version $v after the OLD migrate, want $OLD_MIGRATIONS"

# ---------------------------------------------------------------- OLD stack

log "starting the OLD services: ${SLOTS[*]}"
for s in "${SLOTS[@]}"; do start_slot "$s" old; done
for s in "${SLOTS[@]}"; do wait_ready "$s" 60; done
log "OLD services ready"

T_LOAD=$SECONDS
starter &
STARTER_PID=$!
want=$((RUNS / 4))
deadline=$((SECONDS + 180))
while :; do
	n=$(started)
	read -r total finished live < <(run_counts)
	((n >= want && live > 0 && finished > 0)) && break
	((SECONDS < deadline)) || die "after 180s: $n runs started, $finished finished, $live in flight (want $want started and runs in flight)"
	kill -0 "$STARTER_PID" 2>/dev/null || die "the starter exited"
	sleep 1
done
log "runs in flight: $n started, $finished finished, $live live; upgrading now"

# ---------------------------------------------------------------- upgrade

T_UP=$SECONDS
migrate_new() {
	local t=$SECONDS v
	KAGZI_DATABASE_URL=$DB_URL timeout 120 "$BIN_NEW/kagzi" migrate >"$ART/logs/migrate-new.log" 2>&1 || { tail_log "$ART/logs/migrate-new.log"; die "NEW kagzi migrate"; }
	v=$(sql "SELECT version FROM public.kagzi_schema_version")
	((v == NEW_MIGRATIONS)) || die "schema version $v after the NEW migrate, want $NEW_MIGRATIONS"
	touch "$STATE/migrated"
	read -r total finished live < <(run_counts)
	log "NEW kagzi migrate: schema version $v ($((SECONDS - t))s); runs: $total, $finished finished, $live live"
}

grep -qw migrate <<<"$ORDER" || die "UPGRADE_ORDER must hold the step migrate"
UP_LOG=()
for s in $ORDER; do
	if [[ $s == migrate ]]; then
		[[ -e $STATE/migrated ]] && die "UPGRADE_ORDER names migrate twice"
		migrate_new
		UP_LOG+=(migrate)
		sleep 3
		continue
	fi
	[[ -n ${VER[$s]+x} ]] || die "UPGRADE_ORDER names $s; the slots are ${SLOTS[*]}"
	[[ ${VER[$s]} == old ]] || die "UPGRADE_ORDER names $s twice"
	t=$SECONDS
	stop_slot "$s"
	t_stop=$((SECONDS - t))
	start_slot "$s" new
	wait_ready "$s" 60
	read -r total finished live < <(run_counts)
	log "replaced $s: stopped in ${t_stop}s, NEW ready after $((SECONDS - t))s; runs: $total, $finished finished, $live live"
	UP_LOG+=("$s")
	# Let runs move through the mixed stack before the next step.
	sleep 3
done
for s in "${SLOTS[@]}"; do [[ ${VER[$s]} == new ]] || die "$s was not upgraded (UPGRADE_ORDER=$ORDER)"; done
T_UPGRADE=$((SECONDS - T_UP))
log "every service upgraded in ${T_UPGRADE}s"

# ---------------------------------------------------------------- drain

touch "$STATE/stop"
deadline=$((SECONDS + 300))
while kill -0 "$STARTER_PID" 2>/dev/null; do
	((SECONDS < deadline)) || die "the starter did not reach $RUNS runs within 300s ($(started) started)"
	sleep 1
done
wait "$STARTER_PID" || true
STARTER_PID=
N_STARTED=$(started)
log "starter done: $N_STARTED runs started"
[[ -s $STATE/start-failed ]] && fail "$(wc -l <"$STATE/start-failed") starts failed 5 times (see logs/starter.log): $(tr '\n' ' ' <"$STATE/start-failed")"

deadline=$((SECONDS + 300))
last=
while :; do
	read -r total finished live < <(run_counts)
	((live == 0 && total > 0)) && break
	if ((SECONDS >= deadline)); then
		fail "after 300s $live runs still live"
		break
	fi
	if [[ $finished != "$last" ]]; then
		log "waiting: $finished of $total finished"
		last=$finished
	fi
	for s in "${SLOTS[@]}"; do
		kill -0 "${PID[$s]}" 2>/dev/null || { tail_log "$ART/logs/$s-new.log"; die "NEW $s exited"; }
	done
	sleep 2
done
T_LOAD=$((SECONDS - T_LOAD))

# ---------------------------------------------------------------- checks

log "checking"
cp "$STATE/started.tsv" "$ART/started.tsv"
cut -f2 "$STATE/started.tsv" | sort >"$STATE/started.ids"
sql "SELECT run_id FROM kagzi.workflow_runs WHERE workflow_type = 'Chaos'" | sort >"$STATE/db.ids"
missing=$(comm -23 "$STATE/started.ids" "$STATE/db.ids" | wc -l)
extra=$(comm -13 "$STATE/started.ids" "$STATE/db.ids" | wc -l)
((missing == 0)) || fail "$missing started runs are not in the database: $(comm -23 "$STATE/started.ids" "$STATE/db.ids" | head -5 | tr '\n' ' ')"
((extra == 0)) || fail "$extra Chaos runs in the database that no start returned (duplicate starts?)"

sql "SELECT status, count(*) FROM kagzi.workflow_runs WHERE workflow_type = 'Chaos' GROUP BY 1 ORDER BY 1" >"$STATE/status"
N_COMPLETED=$(awk -F'|' '$1 == "COMPLETED" {print $2}' "$STATE/status")
N_COMPLETED=${N_COMPLETED:-0}
log "run statuses: $(tr '\n' ' ' <"$STATE/status")"
if ((N_COMPLETED != N_STARTED)); then
	fail "$N_COMPLETED of $N_STARTED runs COMPLETED"
	sql "SELECT run_id, status, attempts, left(coalesce(error, ''), 200) FROM kagzi.workflow_runs
		WHERE workflow_type = 'Chaos' AND status <> 'COMPLETED' ORDER BY created_at LIMIT 20" | sed 's/^/    /'
fi

# Steps in the database: per run, the 5 FUNCTION steps and the sleep, one
# row each, attempt 1, COMPLETED.
bad=$(sql "SELECT r.run_id || ' ' || coalesce(string_agg(s.step_id || '#' || s.attempt_number || ':' || s.status, ',' ORDER BY s.step_id, s.attempt_number), '(no steps)')
	FROM kagzi.workflow_runs r LEFT JOIN kagzi.step_runs s ON s.run_id = r.run_id
	WHERE r.workflow_type = 'Chaos'
	GROUP BY r.run_id
	HAVING count(s.*) FILTER (WHERE s.kind = 'FUNCTION' AND s.attempt_number = 1 AND s.status = 'COMPLETED') <> $STEPS
	    OR count(s.*) FILTER (WHERE s.kind = 'FUNCTION') <> $STEPS
	    OR count(s.*) FILTER (WHERE s.kind = 'SLEEP' AND s.attempt_number = 1 AND s.status = 'COMPLETED') <> 1
	    OR count(s.*) FILTER (WHERE s.kind = 'SLEEP') <> 1")
if [[ -n $bad ]]; then
	fail "$(wc -l <<<"$bad") runs whose step rows are not $STEPS FUNCTION steps and 1 sleep, each once at attempt 1 and COMPLETED:"
	head -n 10 <<<"$bad" | sed 's/^/    /'
fi
N_STEP_ROWS=$(sql "SELECT count(*) FROM kagzi.step_runs s JOIN kagzi.workflow_runs r USING (run_id) WHERE r.workflow_type = 'Chaos'")
MAX_ATTEMPT=$(sql "SELECT coalesce(max(attempt_number), 0) FROM kagzi.step_runs s JOIN kagzi.workflow_runs r USING (run_id) WHERE r.workflow_type = 'Chaos'")

# Step invocations the workers logged (B lines of the chaos log, one file
# per worker process): each (run, step) exactly once.
cat "$ART"/chaos/steps-*.log >"$STATE/chaos.log" 2>/dev/null || true
N_INVOKED=$(awk '$1 == "B"' "$STATE/chaos.log" | wc -l)
dups=$(awk '$1 == "B" {c[$3 " " $6]++} END {for (k in c) if (c[k] > 1) print k, c[k]}' "$STATE/chaos.log")
if [[ -n $dups ]]; then
	fail "$(wc -l <<<"$dups") steps invoked more than once (run step count):"
	head -n 10 <<<"$dups" | sed 's/^/    /'
	for k in $(head -n 3 <<<"$dups" | awk '{print $1}'); do
		grep -h " $k " "$ART"/chaos/steps-*.log | sed 's/^/      /'
	done
fi
((N_INVOKED == N_STARTED * STEPS)) || fail "the workers logged $N_INVOKED step invocations, want $((N_STARTED * STEPS)) ($N_STARTED runs x $STEPS)"
# Which builds ran steps: invocations per worker process.
per_worker=$(awk 'NR == FNR {name[$1] = $2; next} $1 == "B" {c[$5]++}
	END {for (p in c) print (p in name ? name[p] : "pid-" p) ":" c[p]}' "$STATE/pids" "$STATE/chaos.log" | sort | tr '\n' ' ')

# A run written by the OLD services, read by the NEW CLI.
first=$(head -n 1 "$STATE/started.tsv" | cut -f2)
if out=$(KAGZI_DATABASE_URL="$DB_URL" KAGZI_NATS_URL="$NATS_URL" KAGZI_NAMESPACE="$NAMESPACE" "$BIN_NEW/kagzi" run show "$first" --json 2>&1); then
	st=$(jq -r '.status // .run.status // empty' <<<"$out" 2>/dev/null || true)
	[[ $st == COMPLETED ]] || fail "NEW kagzi run show $first: status '$st'"
else
	fail "NEW kagzi run show $first: $out"
fi

for s in "${SLOTS[@]}"; do
	kill -0 "${PID[$s]}" 2>/dev/null || fail "NEW $s is not running at the end"
done
errs=""
for f in "$ART"/logs/{dispatcher,scheduler,reaper,worker}-*.log; do
	c=$(grep -c '"level":"ERROR"' "$f" || true)
	((c == 0)) || errs+=" $(basename "$f" .log):$c"
done

# ---------------------------------------------------------------- summary

by_cli=$(awk -F'\t' '{c[$3]++} END {printf "%d by the OLD CLI, %d by the NEW", c["old"], c["new"]}' "$STATE/started.tsv")
{
	echo "upgrade test summary"
	echo "  OLD              $(git log -1 --format='%h %s' "$OLD" | cut -c1-90) (schema $OLD_MIGRATIONS)"
	echo "  NEW              work tree at $NEW_HEAD (schema $NEW_MIGRATIONS)"
	echo "  services         2 reapers, 1 scheduler, 2 dispatchers (cmd/*), 2 workers (kagzi serve worker)"
	echo "  upgrade order    ${UP_LOG[*]}"
	echo "  runs started     $N_STARTED ($by_cli; Chaos, $STEPS steps, ${SLEEP_MS} ms sleep)"
	echo "  runs completed   $N_COMPLETED"
	echo "  step rows        $N_STEP_ROWS (max attempt $MAX_ATTEMPT)"
	echo "  step invocations $N_INVOKED logged by the workers ($per_worker)"
	echo "  ERROR log lines  ${errs:- none}"
	echo "  time             build ${T_BUILD}s, upgrade ${T_UPGRADE}s, load until all finished ${T_LOAD}s, total $((SECONDS - START))s"
	if ((FAILED == 0)); then echo "  result           PASS"; else echo "  result           FAIL ($FAILED checks)"; fi
} | tee "$ART/summary.txt" | while IFS= read -r l; do log "$l"; done
((FAILED == 0)) || exit 1
