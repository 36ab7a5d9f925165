#!/usr/bin/env bash
# Installs Debian's jq when it is missing and we are root: the shell
# examples of README.md and docs/ pipe the CLI's JSON through it, and
# TestDocShellExamples runs them as written. Not root and not installed,
# that test skips with a word (outside CI).
set -euo pipefail
if command -v jq >/dev/null; then exit 0; fi
if [[ "$(id -u)" != 0 ]]; then
	if [[ "${CI:-}" == true ]]; then echo "ensure-jq: not root and jq is missing" >&2; exit 1; fi
	echo "ensure-jq: not root; the documentation's shell examples will skip" >&2
	exit 0
fi
echo "ensure-jq: installing Debian's jq" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq jq >&2
