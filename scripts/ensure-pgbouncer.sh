#!/usr/bin/env bash
# Installs Debian's pgbouncer package (1.18 in bookworm: no prepared
# statements in transaction mode, the oldest pooler Kagzi supports) when it
# is missing and we are root: the tests run the services through it in
# transaction mode (tests/testpgbouncer). The package's service is not
# started; the tests run the binary themselves, on ports of their own.
# Not root and not installed, those tests skip with a word (outside CI).
set -euo pipefail
bin=/usr/sbin/pgbouncer
if [[ -x $bin ]]; then exit 0; fi
if [[ "$(id -u)" != 0 ]]; then
	if [[ "${CI:-}" == true ]]; then echo "ensure-pgbouncer: not root and $bin is missing" >&2; exit 1; fi
	echo "ensure-pgbouncer: not root; the tests through PgBouncer will skip" >&2
	exit 0
fi
echo "ensure-pgbouncer: installing Debian's pgbouncer" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
# policy-rc.d keeps the package's own service from starting: the port is
# the tests' business.
policy=/usr/sbin/policy-rc.d
made=0
if [[ ! -e $policy ]]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; made=1; fi
trap 'if [[ $made == 1 ]]; then rm -f "$policy"; fi' EXIT
apt-get install -y -qq pgbouncer >&2
