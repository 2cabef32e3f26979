#!/usr/bin/env bash
# Compares two revisions of cutkv under one kvbench workload: the "before
# and after" of a change (docs/benchmarks.md, "Profile-driven fixes").
# Both revisions are built from git into a temporary directory; runs
# alternate A B A B ..., each on a fresh local 3-node cluster
# (scripts/run-local.sh, no cuts unless CUTKV_RUN_FLAGS says so) that is
# stopped afterwards, so only the revision measured runs. Prints a
# Markdown table, the ratio of mean throughputs B / A and that of the
# nodes' CPU time per operation (steadier than throughput on a shared
# machine).
#
# Usage: scripts/bench-ab.sh REV_A REV_B WORKLOAD [kvbench flags...]
#   e.g. scripts/bench-ab.sh HEAD~1 HEAD txn --clients 64 --duration 15s
# Environment: PAIRS (default 3), CUTKV_RUN_FLAGS (passed to the nodes,
# default "--cut-interval 0"), KEEP=1 keeps the results directory.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then
	echo "usage: scripts/bench-ab.sh REV_A REV_B WORKLOAD [kvbench flags...]" >&2
	exit 2
fi
A=$1 B=$2 W=$3
shift 3
PAIRS=${PAIRS:-3}
OUT=$(mktemp -d /tmp/cutkv-bench-ab.XXXXXX)
SYS_PID=""
# shellcheck source=scripts/lib/sys.sh
. scripts/lib/sys.sh
cleanup() {
	stop_sys
	for side in a b; do
		[ -d "$OUT/src-$side" ] && git worktree remove --force "$OUT/src-$side" >/dev/null 2>&1
	done
	if [ -z "${KEEP:-}" ]; then rm -rf "$OUT"; else echo "results kept in $OUT" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# build SIDE REV: the revision's kvnode into $OUT/bin-SIDE.
build() {
	local rev
	rev=$(git rev-parse --verify "$2^{commit}") || { echo "bench-ab: unknown revision $2" >&2; exit 2; }
	echo "building $1 = $2 ($rev)" >&2
	git worktree add --detach "$OUT/src-$1" "$rev" >/dev/null 2>&1
	(cd "$OUT/src-$1" && go build -o "$OUT/bin-$1/" ./cmd/kvnode)
	echo "$rev"
}
REV_A=$(build a "$A")
REV_B=$(build b "$B")
make -s build # kvbench from the working tree drives both

run() { # side pass kvbench-flags...
	local side=$1 pass=$2
	shift 2
	mkdir -p "$OUT/data"
	BIN="$OUT/bin-$side" CUTKV_DATA="$OUT/data" CUTKV_RUN_FLAGS="${CUTKV_RUN_FLAGS:---cut-interval 0}" \
		setsid scripts/run-local.sh >"$OUT/data/run.log" 2>&1 &
	SYS_PID=$!
	for _ in $(seq 150); do [ "$(grep -c '^ready' "$OUT/data/run.log" || true)" = 3 ] && break; sleep 0.2; done
	if [ "$(grep -c '^ready' "$OUT/data/run.log" || true)" != 3 ]; then
		echo "bench-ab: cluster $side did not become ready:" >&2
		tail -n 20 "$OUT/data/run.log" >&2
		exit 1
	fi
	echo "$(date -u +%H:%M:%S) $W side $side pass $pass" >&2
	if ! bin/kvbench "$W" --seed "$pass" --progress 0 --metrics-url 127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203 --out "$OUT/$side-$pass.json" "$@" >"$OUT/$side-$pass.txt" 2>&1; then
		echo "bench-ab: kvbench failed on side $side:" >&2
		tail -n 20 "$OUT/$side-$pass.txt" >&2
		exit 1
	fi
	stop_sys
}

rows=()
for i in $(seq "$PAIRS"); do
	for side in a b; do
		run "$side" "$i" "$@"
		rows+=("$(bin/benchrow "$i" "$side" "$OUT/$side-$i.json")")
	done
done
echo
echo "A = $A ($REV_A), B = $B ($REV_B); kvbench $W $*; $PAIRS pairs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| pass | side | ops/s | p50 ms | p99 ms | abort % | cuts completed | cut p50 | cut p99 | cut max | node CPU µs/op |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
printf '%s\n' "${rows[@]}" | awk -F'|' '{ s[$3] += $4; c[$3] += $12; n[$3]++ }
	END {
		a = s[" a "] / n[" a "]; b = s[" b "] / n[" b "]; ca = c[" a "] / n[" a "]; cb = c[" b "] / n[" b "]
		printf "\nmean ops/s: A %.0f, B %.0f; B / A = %.2f\n", a, b, b / a
		if (ca > 0) printf "mean node CPU per operation: A %.0f µs, B %.0f µs; B / A = %.2f\n", ca, cb, cb / ca
	}'
