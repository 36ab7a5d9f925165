#!/bin/sh
# Entrypoint of the postgres stand-in (see Dockerfile): the part of the
# official image's docker-entrypoint.sh that compose relies on. On first
# start (no PG_VERSION in PGDATA) it runs initdb with POSTGRES_USER (default
# postgres) as the superuser and POSTGRES_PASSWORD as its password, allows
# password logins from any address, creates POSTGRES_DB (default the user's
# name) on a server reachable by socket only, then starts the server on
# every address. As root it first hands PGDATA to the postgres user.
set -eu

if [ "${1#-}" != "${1:-}" ]; then
	set -- postgres "$@"
fi
if [ "${1:-}" != postgres ]; then
	exec "$@"
fi
shift

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown -R postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" postgres "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	if [ -z "${POSTGRES_PASSWORD:-}" ]; then
		echo "docker-entrypoint.sh: POSTGRES_PASSWORD is not set" >&2
		exit 1
	fi
	user=${POSTGRES_USER:-postgres}
	db=${POSTGRES_DB:-$user}
	pwfile=$(mktemp)
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	initdb --pgdata="$PGDATA" --username="$user" --pwfile="$pwfile" \
		--encoding=UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256
	rm -f "$pwfile"
	printf '\nhost all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
	if [ "$db" != postgres ]; then
		pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses=''" --wait start
		echo 'CREATE DATABASE :"db";' | psql --no-psqlrc --username="$user" --dbname=postgres \
			--set=ON_ERROR_STOP=1 --set=db="$db"
		pg_ctl --pgdata="$PGDATA" --mode=fast --wait stop
	fi
	echo "docker-entrypoint.sh: database $db of user $user initialised"
fi

exec postgres -c listen_addresses='*' "$@"
