#!/usr/bin/env bash
# Installs Debian's nats-server package (2.9 in bookworm, the oldest
# version Kagzi supports: protocol.MinServerVersion) when it is missing and
# we are root: the tests run the claims about NATS's default settings on
# it as well as on the pinned server (tests/testnats, Binaries). The
# package's service is not started; the tests run the binary themselves.
# Not root and not installed, those cases skip (outside CI).
set -euo pipefail
bin=/usr/sbin/nats-server
if [[ -x $bin ]]; then exit 0; fi
if [[ "$(id -u)" != 0 ]]; then echo "ensure-nats-server: not root; the cases on Debian's nats-server will skip" >&2; exit 0; fi
echo "ensure-nats-server: installing Debian's nats-server" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
# policy-rc.d keeps the package's own service from starting: the port is
# the tests' business.
policy=/usr/sbin/policy-rc.d
made=0
if [[ ! -e $policy ]]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; made=1; fi
trap 'if [[ $made == 1 ]]; then rm -f "$policy"; fi' EXIT
apt-get install -y -qq nats-server >&2
