#!/usr/bin/env bash
# Prints the directory of every Go module of the repository, one a line,
# the root (.) first: the public packages' module, then the nested ones
# (the CLI, the deploy tests, the console's browser tests), which hold
# what only tools and tests need so that applications of the public
# packages do not depend on it. `go ... ./...` in the root does not reach
# the nested modules: the Makefile and scripts/fuzz.sh run every module.
set -euo pipefail
cd "$(dirname "$0")/.."
echo .
find . -mindepth 2 -name go.mod -not -path '*/.*' -not -path '*/testdata/*' -not -path '*/node_modules/*' -printf '%h\n' | sed 's#^\./##' | sort
