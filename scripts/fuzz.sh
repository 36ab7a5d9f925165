#!/usr/bin/env bash
# Runs every Go fuzz target in the repository (found with
# `go test -list '^Fuzz'`), one after another, each for FUZZTIME (default
# 60s). Exits non-zero if a package fails to build or list, if no target is
# found, or if any target fails; go test saves a failing input under the package's
# testdata/fuzz/<Target>/, where plain `go test` replays it from then on.
#
# Usage: scripts/fuzz.sh [package patterns...]      (default ./...)
#   FUZZTIME=10s scripts/fuzz.sh ./pkg/protocol/
#   GO=go1.26 FUZZTIME=1000x scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-60s}
pkgs=("$@")
if [[ ${#pkgs[@]} -eq 0 ]]; then
	pkgs=(./...)
fi
trap 'echo "fuzz.sh: interrupted" >&2; exit 130' INT TERM

# A package that does not build fails the run, but the targets of the
# packages that do build are still fuzzed.
listed=ok
if ! listing=$("$GO" test -list '^Fuzz' "${pkgs[@]}" 2>&1); then
	printf '%s\n' "$listing" >&2
	echo "fuzz.sh: listing fuzz targets failed (see above); fuzzing the rest" >&2
	listed=failed
fi

# go test -list prints a package's matching names, then "ok  <pkg> <time>".
targets=() # "<pkg> <target>"
names=()
while IFS= read -r line; do
	if [[ $line =~ ^Fuzz[[:alnum:]_]*$ ]]; then
		names+=("$line")
	elif [[ $line =~ ^ok[[:space:]]+([^[:space:]]+) ]]; then
		for name in ${names[@]+"${names[@]}"}; do
			targets+=("${BASH_REMATCH[1]} $name")
		done
		names=()
	fi
done <<<"$listing"

if [[ ${#targets[@]} -eq 0 ]]; then
	echo "fuzz.sh: no fuzz targets found in ${pkgs[*]}" >&2
	exit 1
fi
echo "fuzz.sh: ${#targets[@]} targets, $FUZZTIME each"

failed=()
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	echo "=== $name ($pkg)"
	if ! "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"; then
		failed+=("$t")
	fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
	echo "fuzz.sh: ${#failed[@]} of ${#targets[@]} targets failed:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
if [[ $listed != ok ]]; then
	echo "fuzz.sh: targets passed, but listing failed for some packages" >&2
	exit 1
fi
echo "fuzz.sh: all ${#targets[@]} targets passed"
