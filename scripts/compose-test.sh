#!/usr/bin/env bash
# `make test-compose`: deploy/compose.yaml run through a real Docker engine
# and checked through its containers. Needs root on Debian (it installs what
# it needs) and the Go module proxy; no container registry:
#
#   1. installs docker.io, debootstrap, jq and curl if missing, and starts
#      dockerd in the background if no engine answers (stopped again at the
#      end, with the host's ip_forward and Docker's iptables rules undone);
#   2. builds Docker Compose v2 ($COMPOSE_VERSION) from its Go module and
#      installs it as a CLI plugin (/usr/local/lib/docker/cli-plugins) if
#      `docker compose` is missing; the binary is cached in $CACHE;
#   3. builds local stand-ins for the images it cannot pull, tagged with the
#      names the Dockerfile and compose.yaml use, so that both are used
#      unchanged (deploy/standins/README.md): golang:$GO_VERSION and
#      gcr.io/distroless/static-debian12:nonroot for the Dockerfile,
#      compose.yaml's postgres, nats and jaeger images. A tag that names an
#      image that is not a stand-in (a real one) is used as it is;
#   4. builds the Kagzi image with `docker compose build` (the repository's
#      Dockerfile), starts every service of compose.yaml but Prometheus and
#      Grafana (no stand-ins) with `docker compose up`, and checks the stack;
#   5. `docker compose down -v`, removes the Kagzi image it built, and stops
#      what it started. The stand-ins, the build cache and the Go binaries
#      stay, so a second run takes minutes.
#
# One line per check, PASS or FAIL, then "N passed, N failed" as the last
# line; the exit code is 1 if any check failed. The project is
# kagzi-compose-test and the image kagzi:compose-test, so a stack or image
# of the user's own (project kagzi, image kagzi:local) is not touched.
# KAGZI_COMPOSE_TEST_KEEP=1 leaves the stack (and dockerd) running; take it
# down with `docker compose -p kagzi-compose-test -f deploy/compose.yaml
# down -v`. Logs and what the checks read go to artifacts/compose-test/.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1

COMPOSE_VERSION=v2.40.3
PROJECT=kagzi-compose-test
export KAGZI_IMAGE=kagzi:compose-test
# A worker password nats-server would misread unquoted (a leading digit,
# blanks, quotes, a backslash, a dollar): deploy/nats/start.sh quotes it
# for the server, the workers send it bare, and they connect only if both
# read the same password.
export KAGZI_NATS_PASSWORD_WORKER_DEFAULT_WORKER='1st "worker" pa\ss $HOME word'
# Services whose images have no stand-in: not started.
SKIP_SERVICES=(prometheus grafana)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/kagzi/compose-test
ART=$ROOT/artifacts/compose-test
BASE_IMAGE=kagzi-standin/debian:bookworm
STANDIN_LABEL=org.kagzi.standin
KEEP=${KAGZI_COMPOSE_TEST_KEEP:-}

mkdir -p "$CACHE" "$ART" || exit 1
rm -rf "${ART:?}"/*
START=$SECONDS
TMP=$(mktemp -d)
PASSED=0
FAILED=0
IN_BACKGROUND=

log() { printf '[compose-test %4ds] %s\n' $((SECONDS - START)) "$*"; }
pass() {
	PASSED=$((PASSED + 1))
	log "PASS: $*"
}
fail() {
	FAILED=$((FAILED + 1))
	log "FAIL: $*"
}
# die: a setup step failed; counts as one failed check.
die() {
	log "setup failed: $*"
	[[ -n $IN_BACKGROUND ]] && exit 1
	FAILED=$((FAILED + 1))
	exit 1
}

# ---------------------------------------------------------------- cleanup

STARTED_DOCKERD=
OLD_IP_FORWARD=
STACK_UP=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	# Background setup jobs still running (after a failure): end them.
	local j
	for j in "${BG_PID[@]}"; do kill "$j" 2>/dev/null && wait "$j" 2>/dev/null; done
	if [[ -n $KEEP ]]; then
		log "KAGZI_COMPOSE_TEST_KEEP set: the stack${STARTED_DOCKERD:+ and dockerd (pid $STARTED_DOCKERD)} left running"
	else
		if [[ -n $STACK_UP ]]; then
			dc logs --no-color --timestamps >"$ART/compose.log" 2>&1
			log "docker compose down -v"
			dc down -v --remove-orphans --timeout 10 >"$ART/down.log" 2>&1 || log "docker compose down failed (see $ART/down.log)"
			docker image rm "$KAGZI_IMAGE" >/dev/null 2>&1
		fi
		if [[ -n $STARTED_DOCKERD ]]; then
			log "stopping dockerd (pid $STARTED_DOCKERD), which this test started"
			kill "$STARTED_DOCKERD" 2>/dev/null
			for _ in $(seq 1 30); do kill -0 "$STARTED_DOCKERD" 2>/dev/null || break; sleep 1; done
			undo_docker_network
		fi
	fi
	rm -rf "$TMP"
	log "total time $((SECONDS - START))s"
	((FAILED == 0)) || rc=1
	echo "$PASSED passed, $FAILED failed"
	exit "$rc"
}
trap cleanup EXIT
trap 'log interrupted; FAILED=$((FAILED + 1)); exit 130' INT TERM

# undo_docker_network removes what a dockerd this test started left in the
# host's network once stopped: its iptables rules and chains, the docker0
# bridge, and ip_forward as it was.
undo_docker_network() {
	local t rule c
	for t in filter nat; do
		while read -r rule; do
			eval "iptables -t $t ${rule/#-A/-D}" 2>/dev/null
		done < <(iptables -t "$t" -S 2>/dev/null | grep -E '^-A ' | grep -E 'DOCKER|docker0' | grep -vE '^-A DOCKER')
		for c in $(iptables -t "$t" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^DOCKER/ {print $2}'); do
			iptables -t "$t" -F "$c" 2>/dev/null
		done
		for c in $(iptables -t "$t" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^DOCKER/ {print $2}'); do
			iptables -t "$t" -X "$c" 2>/dev/null
		done
	done
	ip link delete docker0 2>/dev/null
	[[ -n $OLD_IP_FORWARD ]] && sysctl -qw net.ipv4.ip_forward="$OLD_IP_FORWARD"
}

# ---------------------------------------------------------------- setup

install_packages() {
	local missing=()
	command -v dockerd >/dev/null || missing+=(docker.io)
	command -v debootstrap >/dev/null || missing+=(debootstrap)
	command -v jq >/dev/null || missing+=(jq)
	command -v curl >/dev/null || missing+=(curl)
	command -v iptables >/dev/null || missing+=(iptables)
	command -v ip >/dev/null || missing+=(iproute2)
	((${#missing[@]})) || return 0
	log "apt-get install ${missing[*]}"
	apt-get update -qq >"$ART/apt.log" 2>&1 &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$ART/apt.log" 2>&1 ||
		die "apt-get install ${missing[*]} (see $ART/apt.log)"
}

start_docker() {
	if docker info >/dev/null 2>&1; then
		log "using the running Docker engine"
		return
	fi
	# dockerd sets the FORWARD policy to DROP when it turns ip_forward on
	# itself, which would cut the host's other forwarded traffic: turn it
	# on first (dockerd then leaves the policy), restore it at the end.
	OLD_IP_FORWARD=$(sysctl -n net.ipv4.ip_forward)
	sysctl -qw net.ipv4.ip_forward=1
	log "starting dockerd (log: $ART/dockerd.log)"
	setsid dockerd >"$ART/dockerd.log" 2>&1 </dev/null &
	STARTED_DOCKERD=$!
	for _ in $(seq 1 60); do
		if docker info >/dev/null 2>&1; then
			STARTED_DOCKERD=$(cat /var/run/docker.pid 2>/dev/null || echo "$STARTED_DOCKERD")
			return
		fi
		kill -0 "$STARTED_DOCKERD" 2>/dev/null || die "dockerd exited (see $ART/dockerd.log)"
		sleep 1
	done
	die "dockerd did not answer within 60s (see $ART/dockerd.log)"
}

# go_module_dir MODULE@VERSION: downloads it through the module proxy and
# prints its directory in the module cache.
go_module_dir() {
	(cd / && GOFLAGS='' GOWORK=off go mod download -json "$1") | jq -r '.Dir // empty'
}

# go_build_module MODULE@VERSION PACKAGE OUT [LDFLAGS]: builds a main
# package of a module in the module's own directory: `go install m@v`
# refuses modules with replace or exclude directives, building there
# honours them.
go_build_module() {
	local dir
	dir=$(go_module_dir "$1") && [[ -n $dir ]] || return 1
	(cd "$dir" && GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 GOTOOLCHAIN=auto \
		go build -trimpath -ldflags="-s -w ${4:-}" -o "$3.tmp" "$2") && mv "$3.tmp" "$3"
}

ensure_compose() {
	local v
	v=$(docker compose version --short 2>/dev/null)
	if [[ $v == v2.* || $v == 2.* ]]; then
		log "using Docker Compose $v"
		return
	fi
	local bin=$CACHE/docker-compose-$COMPOSE_VERSION
	if [[ ! -x $bin ]]; then
		log "building Docker Compose $COMPOSE_VERSION from its Go module (minutes; once)"
		go_build_module "github.com/docker/compose/v2@$COMPOSE_VERSION" ./cmd "$bin" \
			"-X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" >"$ART/compose-build.log" 2>&1 ||
			die "building Docker Compose (see $ART/compose-build.log)"
	fi
	install -D -m 755 "$bin" /usr/local/lib/docker/cli-plugins/docker-compose
	docker compose version >/dev/null 2>&1 || die "docker compose does not run"
	log "installed Docker Compose $COMPOSE_VERSION as a Docker CLI plugin"
}

dc() { docker compose -p "$PROJECT" -f "$ROOT/deploy/compose.yaml" "$@"; }

# ---------------------------------------------------------------- stand-ins

# recipe_hash FILE...: a short hash of the files and of the words on stdin
# (versions): a stand-in is rebuilt when its recipe changes.
recipe_hash() { { cat "$@"; cat; } | sha256sum | cut -c1-16; }

# needs_build TAG HASH: true when TAG is missing or a stand-in of another
# recipe; false when it is this stand-in, or an image that is no stand-in.
needs_build() {
	local have
	docker image inspect "$1" >/dev/null 2>&1 || return 0
	have=$(docker image inspect -f "{{index .Config.Labels \"$STANDIN_LABEL\"}}" "$1" 2>/dev/null)
	if [[ -z $have || $have == "<no value>" ]]; then
		log "$1: an image that is no stand-in is present; using it"
		return 1
	fi
	[[ $have != "$2" ]]
}

# build_standin TAG HASH CONTEXT [--build-arg ...]: with the classic
# builder (neither BuildKit nor buildx needed for these).
build_standin() {
	local tag=$1 hash=$2 ctx=$3 logf=$ART/standin-${1//[\/:]/_}.log
	shift 3
	log "building stand-in $tag"
	DOCKER_BUILDKIT=0 docker build --label "$STANDIN_LABEL=$hash" -t "$tag" "$@" "$ctx" >"$logf" 2>&1 || {
		tail -20 "$logf"
		die "building stand-in $tag (see $logf)"
	}
}

ensure_base() {
	docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 && return
	log "debootstrap --variant=minbase bookworm, the stand-ins' base (once)"
	local fs=$TMP/rootfs
	debootstrap --variant=minbase bookworm "$fs" http://deb.debian.org/debian >"$ART/debootstrap.log" 2>&1 ||
		die "debootstrap (see $ART/debootstrap.log)"
	rm -rf "$fs"/var/cache/apt/archives/*.deb "$fs"/var/lib/apt/lists/* "$fs"/usr/share/doc/* "$fs"/usr/share/man/* "$fs"/usr/share/info/*
	tar -C "$fs" -c . | docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null || die "docker import of the debootstrap root"
	rm -rf "$fs"
}

SD=$ROOT/deploy/standins
GO_VERSION=$(sed -n 's/^ARG GO_VERSION=//p' Dockerfile | tr -d '"')
RUNTIME_IMAGE=$(awk '$1 == "FROM" {img = $2} END {print img}' Dockerfile)

# The Dockerfile's stages: golang:$GO_VERSION and distroless static.
dockerfile_standins() {
	local tag=golang:$GO_VERSION hash ctx goroot
	hash=$(echo "$GO_VERSION" | recipe_hash "$SD/golang/Dockerfile" /etc/ssl/certs/ca-certificates.crt)
	if needs_build "$tag" "$hash"; then
		ensure_base
		# The host's Go if it is that version, else that toolchain through
		# the module proxy (golang.org/toolchain).
		goroot=$(GOTOOLCHAIN=go$GO_VERSION go env GOROOT) && [[ -x $goroot/bin/go ]] || die "no Go $GO_VERSION toolchain"
		ctx=$TMP/golang && mkdir -p "$ctx"
		cp "$SD/golang/Dockerfile" /etc/ssl/certs/ca-certificates.crt "$ctx/"
		cp -a "$goroot" "$ctx/go"
		build_standin "$tag" "$hash" "$ctx" --build-arg "BASE=$BASE_IMAGE" --build-arg "GO_VERSION=$GO_VERSION"
		rm -rf "$ctx"
	fi

	hash=$(echo static | recipe_hash "$SD/static/Dockerfile" "$SD"/static/etc/* /etc/ssl/certs/ca-certificates.crt)
	if needs_build "$RUNTIME_IMAGE" "$hash"; then
		ctx=$TMP/static && mkdir -p "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/usr/share" "$ctx/rootfs/tmp" "$ctx/home/nonroot"
		cp "$SD/static/Dockerfile" "$ctx/"
		cp "$SD"/static/etc/* "$ctx/rootfs/etc/"
		cp /etc/ssl/certs/ca-certificates.crt "$ctx/rootfs/etc/ssl/certs/"
		[[ -d /usr/share/zoneinfo ]] && cp -a /usr/share/zoneinfo "$ctx/rootfs/usr/share/"
		chmod 1777 "$ctx/rootfs/tmp"
		chmod 700 "$ctx/home/nonroot"
		build_standin "$RUNTIME_IMAGE" "$hash" "$ctx"
		rm -rf "$ctx"
	fi
}

# compose_image SERVICE: the image compose.yaml names for SERVICE.
compose_image() { jq -r --arg s "$1" '.services[$s].image' "$TMP/compose.json"; }

postgres_standin() {
	local tag hash
	tag=$(compose_image postgres)
	hash=$(echo postgres | recipe_hash "$SD/postgres/Dockerfile" "$SD/postgres/docker-entrypoint.sh")
	if needs_build "$tag" "$hash"; then
		ensure_base
		build_standin "$tag" "$hash" "$SD/postgres" --build-arg "BASE=$BASE_IMAGE"
	fi
}

# nats: the nats-server tests/testnats/natsbin/go.mod pins.
NATS_VERSION=$(awk '$1 == "github.com/nats-io/nats-server/v2" {print $2}' tests/testnats/natsbin/go.mod)
nats_binary() {
	[[ -n $NATS_VERSION ]] || die "no nats-server version in tests/testnats/natsbin/go.mod"
	local bin=$CACHE/nats-server-$NATS_VERSION
	[[ -x $bin ]] && return
	log "building nats-server $NATS_VERSION"
	(cd tests/testnats/natsbin && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' \
		-o "$bin.tmp" github.com/nats-io/nats-server/v2) >"$ART/nats-build.log" 2>&1 && mv "$bin.tmp" "$bin" ||
		die "building nats-server (see $ART/nats-build.log)"
}
nats_standin() {
	local tag hash ctx
	tag=$(compose_image nats)
	hash=$(echo "nats $NATS_VERSION" | recipe_hash "$SD/nats/Dockerfile")
	if needs_build "$tag" "$hash"; then
		ensure_base
		nats_binary
		ctx=$TMP/nats && mkdir -p "$ctx"
		cp "$SD/nats/Dockerfile" "$ctx/" && cp "$CACHE/nats-server-$NATS_VERSION" "$ctx/nats-server"
		build_standin "$tag" "$hash" "$ctx" --build-arg "BASE=$BASE_IMAGE"
		rm -rf "$ctx"
	fi
}

# jaeger: Jaeger v2.N.P is the Go module version v1.(N+63).P.
jaeger_module() {
	local v
	v=$(compose_image jaeger)
	v=${v##*:}
	[[ $v =~ ^2\.([0-9]+)\.([0-9]+)$ ]] || return 1
	echo "v1.$((BASH_REMATCH[1] + 63)).${BASH_REMATCH[2]}"
}
jaeger_binary() {
	local jmod=$JAEGER_MODULE bin
	bin=$CACHE/jaeger-$jmod
	[[ -x $bin ]] && return
	log "building Jaeger's cmd/jaeger $jmod from its Go module (minutes; once)"
	go_build_module "github.com/jaegertracing/jaeger@$jmod" ./cmd/jaeger "$bin" >"$ART/jaeger-build.log" 2>&1 ||
		die "building Jaeger (see $ART/jaeger-build.log)"
}
jaeger_standin() {
	local tag hash ctx jmod=$JAEGER_MODULE
	tag=$(compose_image jaeger)
	hash=$(echo "jaeger $jmod" | recipe_hash "$SD/jaeger/Dockerfile")
	if needs_build "$tag" "$hash"; then
		jaeger_binary
		ctx=$TMP/jaeger && mkdir -p "$ctx"
		cp "$SD/jaeger/Dockerfile" "$ctx/" && cp "$CACHE/jaeger-$jmod" "$ctx/jaeger-linux"
		cp "$(go_module_dir "github.com/jaegertracing/jaeger@$jmod")/cmd/jaeger/sampling-strategies.json" "$ctx/" ||
			die "jaeger's sampling-strategies.json"
		build_standin "$tag" "$hash" "$ctx" --build-arg "BASE=$RUNTIME_IMAGE"
		rm -rf "$ctx"
	fi
}

# in_background NAME FUNCTION: runs a setup function beside the main line
# (image builds that wait on the network and the disk beside Go builds
# that use the CPUs); join with join NAME.
declare -A BG_PID=()
in_background() {
	(
		trap - EXIT INT TERM
		IN_BACKGROUND=1
		"$2"
	) >"$ART/setup-$1.log" 2>&1 &
	BG_PID[$1]=$!
}
join() {
	local pid=${BG_PID[$1]:-}
	[[ -n $pid ]] || return 0
	unset "BG_PID[$1]"
	if ! wait "$pid"; then
		sed 's/^/    /' "$ART/setup-$1.log"
		die "$1 (see $ART/setup-$1.log)"
	fi
	sed 's/^/  /' "$ART/setup-$1.log"
}

# ---------------------------------------------------------------- helpers of the checks

# kagzi ARGS...: the CLI in a one-off container of the migrate service, as
# docs/deployment.md shows (docker compose run --rm migrate kagzi ...).
kagzi() { dc run --rm -T --no-deps migrate kagzi "$@" 2>>"$ART/cli.log"; }

containers() { dc ps -q "$1" 2>/dev/null; }
ip_of() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$1" | awk '{print $1}'; }
host_of() { docker inspect -f '{{.Config.Hostname}}' "$1"; }

# ps_json: one JSON object per container of the project, exited ones too.
ps_json() { dc ps -a --format json 2>/dev/null | jq -c 'if type == "array" then .[] else . end'; }

# wait_healthy SERVICE: every container of the service running and, if it
# has a health check, healthy, within $WAIT_TIMEOUT seconds (default 240).
wait_healthy() {
	local deadline=$((SECONDS + ${WAIT_TIMEOUT:-240})) st
	while ((SECONDS < deadline)); do
		st=$(ps_json | jq -r --arg s "$1" 'select(.Service == $s) | "\(.State)/\(.Health)"')
		[[ -n $st ]] && ! grep -qvE '^running/(healthy|)$' <<<"$st" && return 0
		sleep 2
	done
	return 1
}

# psql_admin SQL: as the Postgres administrator, in the postgres container.
psql_admin() {
	dc exec -T postgres sh -c 'psql -v ON_ERROR_STOP=1 -AtX -U "$POSTGRES_USER" -d "$POSTGRES_DB"' <<<"$1"
}

# worker_list: `kagzi worker list` as a JSON array.
worker_list() { kagzi --json worker list | jq -c 'if type == "array" then . else (.workers // []) end'; }
# runs_json: every run (up to 1000) as a JSON array.
runs_json() { kagzi --json run list --limit 1000 | jq -c '.runs // []'; }
ids_json() { printf '%s\n' "$@" | jq -R . | jq -sc .; }

# start_runs N TYPE INPUT: starts N runs, $START_PARALLEL (4) CLI
# containers at a time, and prints their ids.
start_runs() {
	local n=$1 i
	for ((i = 0; i < n; i++)); do
		kagzi --json run start "$2" --input "$3" | jq -r '.run_id // empty' &
		(((i + 1) % ${START_PARALLEL:-4} == 0)) && wait
	done
	wait
}

# wait_runs_done SECONDS ID...: waits until every run has ended; prints
# "id status" per run (UNFINISHED for one still live at the deadline).
wait_runs_done() {
	local deadline=$((SECONDS + $1)) ids
	shift
	ids=$(ids_json "$@")
	while :; do
		runs_json >"$TMP/wait.json"
		jq -e --argjson ids "$ids" '[.[] | select(.run_id as $i | $ids | index($i)) |
			select(.status | IN("COMPLETED", "FAILED", "CANCELLED", "TERMINATED"))] | length == ($ids | length)' \
			"$TMP/wait.json" >/dev/null && break
		((SECONDS > deadline)) && break
		sleep 2
	done
	jq -r --argjson ids "$ids" '(map({(.run_id): .status}) | add // {}) as $st | $ids[] | "\(.) \($st[.] // "MISSING")"' "$TMP/wait.json" |
		sed -E 's/ (PENDING|RUNNING|SLEEPING|WAITING|[A-Z_]*ING)$/ UNFINISHED(\1)/'
}
all_completed() { [[ -n $1 ]] && ! grep -qv ' COMPLETED$' <<<"$1"; }

# metric_sum CONTAINER NAME: the sum of a metric's samples on the
# container's /metrics (KAGZI_HTTP_ADDR :8080, at its address).
metric_sum() {
	curl -sf --max-time 5 "http://$(ip_of "$1"):8080/metrics" |
		awk -v m="$2" '$1 == m || index($1, m "{") == 1 {s += $NF} END {printf "%d\n", s}'
}
metric_sum_service() {
	local c s=0
	for c in $(containers "$1"); do s=$((s + $(metric_sum "$c" "$2"))); done
	echo "$s"
}

# trace_problem RUN TRACE: empty when Jaeger has the run as trace TRACE with
# spans of the CLI, the dispatcher and the worker, and the worker's spans of
# the run are in no other trace; else what is wrong.
trace_problem() {
	local id=$1 tid=$2 t services s others
	t=$(curl -sf --max-time 10 "http://127.0.0.1:16686/api/traces/$tid") || {
		echo "trace $tid not in Jaeger"
		return
	}
	services=$(jq -r '[.data[0].processes[].serviceName] | unique | join(",")' <<<"$t")
	for s in kagzi-cli kagzi-dispatcher kagzi-worker; do
		[[ ,$services, == *",$s,"* ]] || {
			echo "trace $tid has spans of $services, none of $s"
			return
		}
	done
	jq -e --arg i "$id" '[.data[0].spans[].tags[]? | select(.key == "kagzi.run_id" and .value == $i)] | length > 0' <<<"$t" >/dev/null || {
		echo "trace $tid has no span with kagzi.run_id $id"
		return
	}
	others=$(curl -sf --max-time 10 -G "http://127.0.0.1:16686/api/traces" --data-urlencode service=kagzi-worker \
		--data-urlencode "tags={\"kagzi.run_id\":\"$id\"}" --data-urlencode lookback=6h --data-urlencode limit=100 |
		jq -r '[.data[].traceID] | unique | join(",")')
	[[ $others == "$tid" ]] || echo "the worker's spans of the run are in traces '$others', want only $tid"
}

# ---------------------------------------------------------------- the checks

RUN_IDS=()

check_services_up() {
	local s
	for s in "${SERVICES[@]}"; do
		[[ $s == migrate ]] && continue
		if WAIT_TIMEOUT=240 wait_healthy "$s"; then
			local how
			how=$(ps_json | jq -r --arg s "$s" 'select(.Service == $s) | if .Health == "" then .State else .Health end' | sort -u | tr '\n' ' ')
			if [[ $s == jaeger ]]; then
				# compose.yaml gives Jaeger no health check: its query API answers.
				curl -sf --max-time 5 http://127.0.0.1:16686/api/services >/dev/null || {
					fail "service jaeger: running, but its query API on 127.0.0.1:16686 does not answer"
					continue
				}
				how+="(query API answers on 127.0.0.1:16686)"
			fi
			pass "service $s: $how"
		else
			fail "service $s healthy: $(ps_json | jq -r --arg s "$s" 'select(.Service == $s) | "\(.Name) \(.State) \(.Health) \(.Status)"' | tr '\n' ' ')"
			dc logs --no-color --tail 30 "$s" 2>&1 | sed 's/^/    /'
		fi
	done
}

check_migrate_and_roles() {
	local mig out
	mig=$(ps_json | jq -sc '[.[] | select(.Service == "migrate")]')
	# The logs are read whole first: under pipefail, grep -q leaving the
	# pipe at its first match would fail a `docker compose logs` still
	# writing (SIGPIPE), and with it the check.
	out=$(dc logs --no-color migrate 2>&1)
	if [[ $(jq length <<<"$mig") == 1 && $(jq -r '.[0].State' <<<"$mig") == exited && $(jq -r '.[0].ExitCode' <<<"$mig") == 0 ]] &&
		grep -q 'Migrated as kagzi_owner' <<<"$out"; then
		pass "migrate ran once and exited 0: $(dc logs --no-color --no-log-prefix migrate 2>&1 | tr '\n' ' ')"
	else
		fail "migrate ran once and exited 0: containers $mig"
		dc logs --no-color migrate 2>&1 | tail -20 | sed 's/^/    /'
	fi
	out=$(psql_admin "select rolname, rolsuper, rolcreaterole, rolcreatedb, rolcanlogin from pg_roles where rolname in ('kagzi_owner', 'kagzi_runtime') order by 1;
		select 'owners:' || string_agg(distinct tableowner, ',') from pg_tables where schemaname not in ('pg_catalog', 'information_schema');
		select current_setting('server_version');" 2>&1)
	if grep -qx 'kagzi_owner|f|f|f|t' <<<"$out" && grep -qx 'kagzi_runtime|f|f|f|t' <<<"$out" && grep -qx 'owners:kagzi_owner' <<<"$out"; then
		pass "roles kagzi_owner (owns every table) and kagzi_runtime made, neither superuser nor allowed to create roles or databases (PostgreSQL $(tail -1 <<<"$out"))"
	else
		fail "roles made by migrate --roles: $(tr '\n' ' ' <<<"$out")"
	fi
}

check_wait_runs() {
	local t input expect out id
	local -A want=(
		[ProcessOrder]='{"id":"A-1","customer":"ada","amount":12.5,"items":2}|"order_id":"A-1"'
		[Reminder]='{"to":"ada","message":"hi","after_sec":2}|reminded ada: hi'
		[SumOfSquares]='[1,2,3,4]|30'
	)
	for t in ProcessOrder Reminder SumOfSquares; do
		input=${want[$t]%%|*} expect=${want[$t]#*|}
		out=$(kagzi --json run start "$t" --input "$input" --wait --timeout 2m)
		id=$(jq -r '.run_id // empty' <<<"$out" 2>/dev/null)
		[[ -n $id ]] && RUN_IDS+=("$id")
		if [[ $(jq -r '.run.status' <<<"$out" 2>/dev/null) == COMPLETED ]] && grep -qF -- "$expect" <<<"$(jq -c '.run.output' <<<"$out")"; then
			pass "docker compose run --rm migrate kagzi run start $t --input '$input' --wait: COMPLETED with output $(jq -c '.run.output' <<<"$out")"
		else
			fail "docker compose run --rm migrate kagzi run start $t --input '$input' --wait: $out"
		fi
	done
}

WORKERS=()
check_scale() {
	log "docker compose up -d --scale worker=4 worker"
	dc up -d --no-recreate --scale worker=4 worker >"$ART/scale.log" 2>&1
	mapfile -t WORKERS < <(containers worker)
	if ((${#WORKERS[@]} == 4)) && WAIT_TIMEOUT=120 wait_healthy worker; then
		pass "docker compose up --scale worker=4: 4 worker containers healthy"
	else
		fail "docker compose up --scale worker=4: ${#WORKERS[@]} containers: $(ps_json | jq -r 'select(.Service == "worker") | "\(.Name) \(.State) \(.Health)"' | tr '\n' ' ')"
	fi
	sleep 5 # a heartbeat or two of the new workers
	worker_list >"$TMP/workers.json"
	cp "$TMP/workers.json" "$ART/workers-after-scale.json"
	local missing=() c h
	for c in "${WORKERS[@]}"; do
		h=$(host_of "$c")
		jq -e --arg h "$h" 'map(select(.status == "ONLINE" and .hostname == $h)) | length == 1' "$TMP/workers.json" >/dev/null || missing+=("$h")
	done
	if ((${#missing[@]} == 0)); then
		pass "kagzi worker list: 4 workers registered, one ONLINE worker for the hostname of each of the 4 worker containers"
	else
		fail "kagzi worker list: no single ONLINE worker with the hostname of worker container(s) ${missing[*]}; ONLINE workers: $(jq -c 'map(select(.status == "ONLINE") | {hostname, pid, types: (.types | length)})' "$TMP/workers.json")"
	fi
	local bad
	bad=$(jq -c 'map(select(.status == "ONLINE" and (.pid <= 0 or .hostname == "-" or .hostname == "" or
		((.types | tostring | contains("ProcessOrder")) | not))) | {worker_id, hostname, pid, types})' "$TMP/workers.json")
	if [[ $bad == "[]" ]]; then
		pass "kagzi worker list: every ONLINE worker registered with its hostname, a pid and its workflow types (ProcessOrder among them)"
	else
		fail "kagzi worker list: ONLINE worker(s) registered with no hostname, pid or types: $bad (the known defect of a worker started before the reaper, host '-', pid 0, no types)"
	fi
}

check_all_workers_execute() {
	# Batches of 16 short runs (at most 3) until each worker has executed
	# some: the dispatcher hands runs to whichever worker asks first.
	local before=() idle=() counts i n out ids all=() round incomplete=0
	for i in "${!WORKERS[@]}"; do before+=("$(metric_sum "${WORKERS[$i]}" kagzi_executions_total)"); done
	for round in 1 2 3; do
		log "16 Export runs, to spread over the 4 workers (batch $round)"
		mapfile -t ids < <(start_runs 16 Export '{"rows":8,"row_ms":250}')
		RUN_IDS+=("${ids[@]}")
		all+=("${ids[@]}")
		out=$(wait_runs_done 180 "${ids[@]}")
		((${#ids[@]} == 16)) && all_completed "$out" || incomplete=$((incomplete + 16 - $(grep -c ' COMPLETED$' <<<"$out")))
		idle=() counts=""
		for i in "${!WORKERS[@]}"; do
			n=$(metric_sum "${WORKERS[$i]}" kagzi_executions_total)
			counts+="$(host_of "${WORKERS[$i]}")=$((n - ${before[$i]})) "
			((n > ${before[$i]})) || idle+=("$(host_of "${WORKERS[$i]}")")
		done
		((${#idle[@]} == 0)) && break
	done
	if ((incomplete == 0 && ${#WORKERS[@]} == 4 && ${#idle[@]} == 0)); then
		pass "${#all[@]} runs completed, and each of the 4 workers executed some (kagzi_executions_total on each container's /metrics: ${counts% })"
	else
		fail "${#all[@]} runs over 4 workers: $incomplete not COMPLETED, workers that executed none: ${idle[*]:-none} (${counts% })"
	fi
}

check_kill_worker() {
	log "8 long Export runs, then docker kill of the worker executing most of them"
	local ids runs running started deadline victim victim_host victim_c="" c out recovered0 recovered status kill_at inflight sure
	mapfile -t ids < <(START_PARALLEL=8 start_runs 8 Export '{"rows":120,"row_ms":250}')
	RUN_IDS+=("${ids[@]}")
	# Until every run has started and some are executing (30 s each).
	deadline=$((SECONDS + 120))
	while :; do
		runs=$(runs_json | jq -c --argjson ids "$(ids_json "${ids[@]}")" '[.[] | select(.run_id as $i | $ids | index($i))]')
		running=$(jq -c '[.[] | select(.status == "RUNNING" and .locked_by != null)]' <<<"$runs")
		started=$(jq '[.[] | select(.status != "PENDING")] | length' <<<"$runs")
		((started == ${#ids[@]} && $(jq length <<<"$running") > 0)) || ((SECONDS > deadline)) && break
		sleep 1
	done
	worker_list >"$TMP/workers.json"
	victim=$(jq -r 'group_by(.locked_by) | max_by(length) | .[0].locked_by // empty' <<<"$running")
	victim_host=$(jq -r --arg w "$victim" '.[] | select(.worker_id == $w) | .hostname' "$TMP/workers.json")
	for c in $(containers worker); do [[ -n $victim_host && $(host_of "$c") == "$victim_host" ]] && victim_c=$c; done
	if [[ -z $victim_c ]]; then
		fail "docker kill of a worker mid-run: no worker container executes the runs (runs: $(jq -c 'map({run_id, status, locked_by})' <<<"$runs"))"
		return
	fi
	recovered0=$(metric_sum_service reaper kagzi_runs_recovered_total)
	log "docker kill ${victim_c:0:12} (worker $victim, executing $(jq --arg w "$victim" 'map(select(.locked_by == $w)) | length' <<<"$running") of the 8 runs)"
	kill_at=$(date +%s.%N)
	docker kill "$victim_c" >/dev/null
	out=$(wait_runs_done 300 "${ids[@]}")
	recovered=$(metric_sum_service reaper kagzi_runs_recovered_total)
	status=$(worker_list | jq -r --arg w "$victim" '.[] | select(.worker_id == $w) | .status')
	# The victim's runs that ended after the kill were in flight on it;
	# those that ended more than 1 s after it surely were not reported
	# before it, so the reaper must have recovered them.
	jq -c --argjson ids "$(ids_json "${ids[@]}")" '[.[] | select(.run_id as $i | $ids | index($i))]' "$TMP/wait.json" >"$TMP/killed.json"
	read -r inflight sure < <(jq -r --arg w "$victim" --argjson t "$kill_at" --argjson ran "$running" '
		def epoch: capture("(?<s>[^.Z]+)(?<f>\\.[0-9]+)?Z") | ((.s + "Z") | fromdateiso8601) + (("0" + (.f // "")) | tonumber);
		[$ran[] | select(.locked_by == $w) | .run_id] as $v
		| [.[] | select(.run_id as $i | $v | index($i)) | select(.finished_at != null) | (.finished_at | epoch) - $t]
		| "\([.[] | select(. > 0)] | length) \([.[] | select(. > 1)] | length)"' "$TMP/killed.json")
	if all_completed "$out" && ((inflight > 0 && recovered - recovered0 >= sure)) && [[ $status == OFFLINE ]]; then
		pass "docker kill of a worker mid-run: it is OFFLINE, the $inflight runs it was executing were recovered (the reaper's kagzi_runs_recovered_total +$((recovered - recovered0))) and all 8 runs completed"
	else
		fail "docker kill of a worker mid-run: runs: $(tr '\n' ' ' <<<"$out"); $inflight in flight on it at the kill; recovered +$((recovered - recovered0)) (want at least $sure); the killed worker is '$status'"
	fi
}

check_restart_dispatcher() {
	log "12 runs in flight, then docker compose restart dispatcher"
	local ids out
	mapfile -t ids < <(
		start_runs 6 Export '{"rows":12,"row_ms":250}'
		start_runs 3 Reminder '{"to":"bob","message":"restart","after_sec":4}'
		start_runs 3 ProcessOrder '{"id":"R-1","customer":"bob","amount":3,"items":1}'
	)
	RUN_IDS+=("${ids[@]}")
	dc restart dispatcher >"$ART/restart.log" 2>&1
	out=$(wait_runs_done 240 "${ids[@]}")
	if ((${#ids[@]} == 12)) && all_completed "$out" && WAIT_TIMEOUT=90 wait_healthy dispatcher; then
		pass "docker compose restart dispatcher with 12 runs in flight (Export, durable-sleep Reminder, ProcessOrder): the dispatcher is healthy again and all 12 completed"
	else
		fail "docker compose restart dispatcher with runs in flight: ${#ids[@]} of 12 started; $(tr '\n' ' ' <<<"$out")"
	fi
}

check_nothing_lost() {
	runs_json >"$TMP/runs.json"
	cp "$TMP/runs.json" "$ART/runs.json"
	local total notdone missing
	total=$(jq length "$TMP/runs.json")
	notdone=$(jq -c '[.[] | select(.status != "COMPLETED") | {run_id, type, status}]' "$TMP/runs.json")
	missing=$(jq -r --argjson ids "$(ids_json "${RUN_IDS[@]}")" '[.[].run_id] as $have | [$ids[] | select(. as $i | $have | index($i) | not)] | length' "$TMP/runs.json")
	if [[ $notdone == "[]" && $missing == 0 ]]; then
		pass "nothing lost: the ${#RUN_IDS[@]} runs the test started are all in the database, and all $total runs there (children too) COMPLETED"
	else
		fail "nothing lost: of ${#RUN_IDS[@]} runs started $missing are missing; not COMPLETED: $notdone"
	fi
}

check_console() {
	local code newest unlisted=0 id
	newest=$(jq -r 'max_by(.created_at) | .run_id' "$TMP/runs.json")
	code=$(curl -s --max-time 10 -o "$ART/console-runs.html" -w '%{http_code}' http://127.0.0.1:8088/runs)
	curl -sf --max-time 10 'http://127.0.0.1:8088/api/v1/runs?limit=1000' >"$ART/console-runs.json"
	for id in "${RUN_IDS[@]}"; do grep -q "$id" "$ART/console-runs.json" || unlisted=$((unlisted + 1)); done
	if [[ $code == 200 ]] && grep -q "$newest" "$ART/console-runs.html" && ((unlisted == 0)); then
		pass "console on its published port 127.0.0.1:8088: /runs answers 200 with the newest run, /api/v1/runs lists all ${#RUN_IDS[@]} runs the test started"
	else
		fail "console on 127.0.0.1:8088: /runs answered $code (newest run on it: $(grep -c "$newest" "$ART/console-runs.html")), /api/v1/runs misses $unlisted of ${#RUN_IDS[@]} runs"
	fi
}

check_postgres_roles_in_use() {
	local out s c ipaddr users problems=() seen=""
	out=$(psql_admin "select host(client_addr), usename from pg_stat_activity where datname = current_database() and client_addr is not null")
	echo "$out" >"$ART/pg_stat_activity.txt"
	for s in dispatcher scheduler reaper console; do
		for c in $(containers "$s"); do
			ipaddr=$(ip_of "$c")
			users=$(awk -F'|' -v ip="$ipaddr" '$1 == ip {print $2}' <<<"$out" | sort | uniq -c | awk '{printf "%s(%d) ", $2, $1}')
			seen+="$s: ${users:-none}; "
			[[ -n $users && $(wc -w <<<"$users") == 1 && $users == kagzi_runtime\(* ]] || problems+=("$s ($ipaddr): ${users:-no connection}")
		done
	done
	if ((${#problems[@]} == 0)); then
		pass "Postgres (pg_stat_activity by container address): the dispatcher, scheduler, reaper and console connect only as kagzi_runtime (${seen%; })"
	else
		fail "Postgres connections by service: ${problems[*]}"
	fi
}

check_nats_users() {
	local s c ipaddr users problems=() seen=""
	local -A role=([dispatcher]=dispatcher [scheduler]=scheduler [reaper]=reaper [console]=console [worker]=worker-default-worker)
	dc exec -T nats wget -qO- 'http://127.0.0.1:8222/connz?auth=true&limit=4096' >"$ART/connz.json" 2>/dev/null
	for s in dispatcher scheduler reaper console worker; do
		for c in $(containers "$s"); do
			ipaddr=$(ip_of "$c")
			users=$(jq -r --arg ip "$ipaddr" '.connections[]? | select(.ip == $ip) | .authorized_user // "(none)"' "$ART/connz.json" | sort -u | tr '\n' ' ')
			seen+="$s: ${users% }; "
			[[ $users == "${role[$s]} " ]] || problems+=("$s ($ipaddr): ${users:-no connection}")
		done
	done
	if ((${#problems[@]} == 0)); then
		pass "NATS (/connz by container address): each service's containers connect only as its role's user (${seen%; })"
	else
		fail "NATS connections by service: ${problems[*]}"
	fi
}

check_traces() {
	log "looking up the ${#RUN_IDS[@]} runs in Jaeger"
	local id tid res problems=() deadline=$((SECONDS + 90))
	for id in "${RUN_IDS[@]}"; do
		tid=$(jq -r --arg i "$id" '.[] | select(.run_id == $i) | .trace_id // empty' "$TMP/runs.json")
		if [[ -z $tid ]]; then
			problems+=("$id: no trace id")
			continue
		fi
		while :; do # the services export spans in batches, every few seconds
			res=$(trace_problem "$id" "$tid")
			[[ -z $res ]] || ((SECONDS > deadline)) && break
			sleep 2
		done
		[[ -z $res ]] || problems+=("$id: $res")
	done
	if ((${#problems[@]} == 0)); then
		pass "Jaeger (/api/traces): each of the ${#RUN_IDS[@]} runs is one trace, the run's trace id, with spans of kagzi-cli, kagzi-dispatcher and kagzi-worker"
	else
		fail "Jaeger: ${#problems[@]} of ${#RUN_IDS[@]} runs are not one trace: ${problems[*]:0:5}"
	fi
}

# ---------------------------------------------------------------- main

[[ $(id -u) == 0 ]] || die "run as root: it installs Docker and starts dockerd"
[[ -n $GO_VERSION ]] || die "no ARG GO_VERSION in the Dockerfile"
[[ $RUNTIME_IMAGE == gcr.io/distroless/static* ]] || die "the Dockerfile's runtime stage is $RUNTIME_IMAGE, not distroless static"
command -v go >/dev/null || die "no go on the PATH"

install_packages
start_docker
# The Dockerfile's stand-ins (disk and network) beside Compose (CPU).
in_background dockerfile-standins dockerfile_standins
ensure_compose

dc config --format json >"$TMP/compose.json" 2>"$ART/config.log" || die "docker compose config (see $ART/config.log)"
SERVICES=()
for s in $(jq -r '.services | keys[]' "$TMP/compose.json"); do
	[[ " ${SKIP_SERVICES[*]} " == *" $s "* ]] || SERVICES+=("$s")
done
log "services under test: ${SERVICES[*]} (not started: ${SKIP_SERVICES[*]}, no stand-ins)"
for port in $(jq -r --argjson skip "$(ids_json "${SKIP_SERVICES[@]}")" \
	'.services | to_entries[] | select(.key as $k | $skip | index($k) | not) | .value.ports[]? | .published' "$TMP/compose.json" | sort -u); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		die "127.0.0.1:$port, which compose.yaml publishes, is taken (another compose stack?)"
	fi
done

JAEGER_MODULE=$(jaeger_module) || die "jaeger image $(compose_image jaeger): want a 2.N.P tag (Jaeger v2)"
join dockerfile-standins
in_background postgres-standin postgres_standin
nats_binary
jaeger_binary
join postgres-standin
nats_standin
jaeger_standin
log "stand-ins ready"

log "docker compose build (the repository's Dockerfile; log: $ART/build.log)"
t0=$SECONDS
if dc --progress plain build >"$ART/build.log" 2>&1; then
	# compose builds once per service with a build section: the image's
	# go build step must be there once.
	n=$(grep -E '^#[0-9]+ \[.*\] RUN .*go build' "$ART/build.log" | cut -d' ' -f1 | sort -u | wc -l)
	if ((n == 1)); then
		pass "docker compose build: the Kagzi image builds from the Dockerfile, once ($((SECONDS - t0))s)"
	else
		fail "docker compose build: the Kagzi image built $n times (one go build step per service with a build section; see $ART/build.log)"
	fi
else
	tail -30 "$ART/build.log" | sed 's/^/    /'
	die "docker compose build (see $ART/build.log)"
fi
size=$(docker image inspect -f '{{.Size}}' "$KAGZI_IMAGE")
user=$(docker image inspect -f '{{.Config.User}}' "$KAGZI_IMAGE")
if [[ -n ${user%%:*} && ${user%%:*} != 0 && ${user%%:*} != root ]] && ((size < 200 * 1024 * 1024)); then
	pass "image $KAGZI_IMAGE: $((size / 1024 / 1024)) MiB, user $user (non-root)"
else
	fail "image $KAGZI_IMAGE: $((size / 1024 / 1024)) MiB (want under 200), user '$user' (want non-root)"
fi

log "docker compose up -d ${SERVICES[*]}"
STACK_UP=1
dc up -d "${SERVICES[@]}" >"$ART/up.log" 2>&1 || sed 's/^/    /' "$ART/up.log"
check_services_up
check_migrate_and_roles
check_wait_runs
check_scale
check_all_workers_execute
check_kill_worker
check_restart_dispatcher
check_nothing_lost
check_console
check_postgres_roles_in_use
check_nats_users
check_traces
# Last: nothing above ran the migration again.
n=$(ps_json | jq -s '[.[] | select(.Service == "migrate")] | length')
if [[ $n == 1 ]]; then
	pass "migrate ran once over the whole test (one migrate container; the CLI's were one-off --rm containers)"
else
	fail "migrate ran once over the whole test: $n migrate containers"
fi
