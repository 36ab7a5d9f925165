#!/usr/bin/env bash
# Prints the URL of a reachable Postgres server for tests and `make run`,
# starting one when none answers: KAGZI_TEST_DATABASE_URL if set, else the
# local server on 127.0.0.1:5432, else a throwaway cluster under .cache/pg
# (installing Debian's postgresql first when it is missing and we are root).
# With an argument, the printed URL names that database instead of
# "postgres" (the database itself is created by `kagzi migrate`/`kagzi dev`).
set -euo pipefail

dbname="${1:-postgres}"

log() { echo "ensure-postgres: $*" >&2; }

if [[ -n "${KAGZI_TEST_DATABASE_URL:-}" && "$dbname" == postgres ]]; then
  echo "$KAGZI_TEST_DATABASE_URL"; exit 0
fi

DEFAULT_URL="postgres://postgres@127.0.0.1:5432/$dbname?sslmode=disable"
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.cache/pg"
port="${KAGZI_LOCAL_PG_PORT:-55432}"
LOCAL_URL="postgres://postgres@127.0.0.1:$port/$dbname?sslmode=disable"

reachable() { # host port
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$1" -p "$2" -U postgres -t 3
  else
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
  fi
}

if reachable 127.0.0.1 5432; then echo "$DEFAULT_URL"; exit 0; fi
if reachable 127.0.0.1 "$port"; then echo "$LOCAL_URL"; exit 0; fi

bindir=""
for d in /usr/lib/postgresql/*/bin; do [[ -x "$d/initdb" ]] && bindir="$d"; done
if [[ -z "$bindir" ]] && command -v initdb >/dev/null 2>&1; then bindir="$(dirname "$(command -v initdb)")"; fi
if [[ -z "$bindir" ]]; then
  if [[ "$(id -u)" != 0 ]]; then
    log "no Postgres is reachable and initdb is not installed; install postgresql or set KAGZI_TEST_DATABASE_URL"; exit 1
  fi
  log "installing Debian's postgresql"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  for d in /usr/lib/postgresql/*/bin; do [[ -x "$d/initdb" ]] && bindir="$d"; done
fi

# initdb refuses to run as root: run the cluster as the postgres user.
runas=()
if [[ "$(id -u)" == 0 ]]; then
  id postgres >/dev/null 2>&1 || useradd -r -m postgres
  runas=(runuser -u postgres --)
fi
mkdir -p "$dir"
[[ "$(id -u)" == 0 ]] && chown -R postgres "$dir"
if [[ ! -f "$dir/data/PG_VERSION" ]]; then
  log "initdb $dir/data"
  "${runas[@]}" "$bindir/initdb" -D "$dir/data" -U postgres -A trust >&2
fi
log "starting throwaway Postgres on 127.0.0.1:$port"
"${runas[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
  -o "-p $port -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" start >&2
echo "$LOCAL_URL"
