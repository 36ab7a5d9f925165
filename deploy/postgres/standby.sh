#!/bin/sh
# Entrypoint of compose.ha.yaml's postgres-standby: on first start (an
# empty data directory) it copies the primary with pg_basebackup, WAL
# streamed alongside (-X stream), and writes standby.signal and
# primary_conninfo (-R), so the server starts as a hot standby streaming
# from the primary; later starts reuse the copy. It runs as the image's
# postgres user (compose sets user: postgres) with POSTGRES_USER and
# POSTGRES_PASSWORD, the primary's administrator, as the replication
# login, and reports itself to the primary as kagzi_standby (cluster_name,
# the walreceiver's application_name), the name the primary's
# synchronous_standby_names waits for.
#
#   sh /etc/kagzi/standby.sh PRIMARY_HOST[:PORT] [SERVER_OPTION...]
#
# SERVER_OPTIONs (-c name=value ...) go to the server after its own, so
# they win (deploy/compose_ha_pg_test.go runs it on loopback ports).
#
# Once promoted (docker compose exec -u postgres postgres-standby pg_ctl
# promote), standby.signal is gone and a restart keeps it a primary: the
# copy is never taken again while the data directory holds one.
set -eu
primary=${1:?usage: standby.sh PRIMARY_HOST[:PORT] [SERVER_OPTION...]}
shift
port=5432
case $primary in
*:*) port=${primary##*:} primary=${primary%:*} ;;
esac
: "${PGDATA:=/var/lib/postgresql/data}"
mkdir -p "$PGDATA"
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	export PGPASSWORD="${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is not set}"
	until pg_isready -q -h "$primary" -p "$port" -U "${POSTGRES_USER:-postgres}"; do
		echo "standby.sh: waiting for the primary $primary" >&2
		sleep 1
	done
	pg_basebackup --host="$primary" --port="$port" --username="${POSTGRES_USER:-postgres}" \
		--pgdata="$PGDATA" --wal-method=stream --write-recovery-conf --checkpoint=fast --progress
	unset PGPASSWORD
	echo "standby.sh: copied the primary $primary; starting as its hot standby" >&2
fi
exec postgres -c listen_addresses='*' -c hba_file=/etc/kagzi/pg_hba.conf \
	-c cluster_name=kagzi_standby -c hot_standby=on "$@"
