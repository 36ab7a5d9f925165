#!/usr/bin/env bash
# Runs every Go fuzz target in the repository (found with
# `go test -list '^Fuzz'`), one after another, each for FUZZTIME (default
# 60s). Exits non-zero if a package fails to build or list, if no target is
# found, or if any target fails; go test saves a failing input under the package's
# testdata/fuzz/<Target>/, where plain `go test` replays it from then on.
#
# Usage: scripts/fuzz.sh [package patterns...]      (default ./... of every
# module, scripts/modules.sh; patterns are of the root module)
#   FUZZTIME=10s scripts/fuzz.sh ./pkg/protocol/
#   GO=go1.26 FUZZTIME=1000x scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-60s}
pkgs=("$@")
mods=(.)
if [[ ${#pkgs[@]} -eq 0 ]]; then
	pkgs=(./...)
	mapfile -t mods < <(scripts/modules.sh)
fi
trap 'echo "fuzz.sh: interrupted" >&2; exit 130' INT TERM

# A package that does not build fails the run, but the targets of the
# packages that do build are still fuzzed.
listed=ok
targets=() # "<module dir> <pkg> <target>"
for mod in "${mods[@]}"; do
	if ! listing=$("$GO" -C "$mod" test -list '^Fuzz' "${pkgs[@]}" 2>&1); then
		printf '%s\n' "$listing" >&2
		echo "fuzz.sh: listing fuzz targets in $mod failed (see above); fuzzing the rest" >&2
		listed=failed
	fi
	# go test -list prints a package's matching names, then "ok  <pkg> <time>".
	names=()
	while IFS= read -r line; do
		if [[ $line =~ ^Fuzz[[:alnum:]_]*$ ]]; then
			names+=("$line")
		elif [[ $line =~ ^ok[[:space:]]+([^[:space:]]+) ]]; then
			for name in ${names[@]+"${names[@]}"}; do
				targets+=("$mod ${BASH_REMATCH[1]} $name")
			done
			names=()
		fi
	done <<<"$listing"
done

if [[ ${#targets[@]} -eq 0 ]]; then
	echo "fuzz.sh: no fuzz targets found in ${pkgs[*]}" >&2
	exit 1
fi
echo "fuzz.sh: ${#targets[@]} targets, $FUZZTIME each"

# Go 1.26's fuzz coordinator can fail a target with a bare "context
# deadline exceeded" when -fuzztime ends while a worker is mid-call
# (go.dev/issue/75804), writing no input. A real finding always writes its
# input under testdata/fuzz/<Target>/, so a failure that wrote none and
# printed that error is counted as a flake and reported, not failed.
corpus_count() {
	local dir
	dir="$("$GO" -C "$1" list -f '{{.Dir}}' "$2")/testdata/fuzz/$3"
	if [[ -d $dir ]]; then find "$dir" -type f | wc -l; else echo 0; fi
}

failed=()
flaked=()
out=$(mktemp)
trap 'rm -f "$out"; echo "fuzz.sh: interrupted" >&2; exit 130' INT TERM
trap 'rm -f "$out"' EXIT
for t in "${targets[@]}"; do
	read -r mod pkg name <<<"$t"
	echo "=== $name ($pkg)"
	before=$(corpus_count "$mod" "$pkg" "$name")
	if ! "$GO" -C "$mod" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "$out"; then
		if [[ $(corpus_count "$mod" "$pkg" "$name") -eq $before ]] && grep -q '^    context deadline exceeded$' "$out"; then
			flaked+=("$t")
		else
			failed+=("$t")
		fi
	fi
done

if [[ ${#flaked[@]} -gt 0 ]]; then
	echo "fuzz.sh: ${#flaked[@]} targets ended with the coordinator's deadline race (no failing input; go.dev/issue/75804):" >&2
	printf '  %s\n' "${flaked[@]}" >&2
fi

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
