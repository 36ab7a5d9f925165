#!/usr/bin/env bash
# Installs Debian's chromium when it is missing and we are root: the web
# console's browser tests (pkg/console/browsertest, chromedp) drive it
# headless. Not root and no chromium, those tests skip.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then exit 0; fi
if [[ "$(id -u)" != 0 ]]; then echo "ensure-chromium: not root; the browser tests will skip" >&2; exit 0; fi
echo "ensure-chromium: installing chromium" >&2
DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
