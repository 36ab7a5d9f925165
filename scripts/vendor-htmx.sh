#!/usr/bin/env bash
# Refreshes the console's vendored htmx (pkg/console/static/htmx.min.js) from
# npm. go build never runs this: the file is committed and embedded, so
# building needs no node. HTMX_VERSION picks the version (default: the one
# pinned below).
set -euo pipefail
version="${HTMX_VERSION:-2.0.11}"
dir="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "htmx.org@$version" >/dev/null)
tar -xzf "$tmp"/htmx.org-*.tgz -C "$tmp"
{ echo "/* htmx.org@$version from npm (scripts/vendor-htmx.sh); BSD Zero Clause License */"; cat "$tmp/package/dist/htmx.min.js"; } \
	> "$dir/pkg/console/static/htmx.min.js"
echo "vendored htmx.org@$version into pkg/console/static/htmx.min.js" >&2
