#!/usr/bin/env bash
# Installs iproute2 (the ip command) when it is missing and we are root:
# tests/e2e's failover test runs leaders in a network namespace it then
# cuts off. Not root, that test skips and nothing is needed.
set -euo pipefail
if [[ "$(id -u)" != 0 ]] || command -v ip >/dev/null 2>&1; then exit 0; fi
echo "ensure-iproute2: installing iproute2" >&2
DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >&2
