#!/usr/bin/env bash
# Installs Debian's python3-psycopg (psycopg 3 for /usr/bin/python3) when
# it is missing and we are root: the test of docs/sql.md runs its Python
# example with it. Not root and not installed, that example skips (outside
# CI, where its absence fails the test).
set -euo pipefail
if /usr/bin/python3 -c 'import psycopg' 2>/dev/null; then exit 0; fi
if [[ "$(id -u)" != 0 ]]; then echo "ensure-psycopg: not root; the Python example of docs/sql.md will skip" >&2; exit 0; fi
echo "ensure-psycopg: installing Debian's python3-psycopg" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq python3-psycopg >&2
