#!/usr/bin/env bash
# Measures what consistent cuts cost: bank throughput with a cut every
# second vs none, alternating A B A B on one local 3-node cluster, and cut
# completion times under that load. Prints a Markdown table (paste it into
# docs/benchmarks.md). Usage: scripts/bench-cuts.sh [duration per run]
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${1:-15s}
CLIENTS=${CLIENTS:-16}
make -s build
DATA=$(mktemp -d /tmp/cutkv-bench-cuts.XXXXXX)
CUTKV_DATA=$DATA CUTKV_RUN_FLAGS="--cut-interval 0" setsid scripts/run-local.sh >"$DATA/run.log" 2>&1 &
RUN=$!
trap 'kill -TERM -- -$RUN 2>/dev/null || kill -TERM $RUN; wait $RUN 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do [ "$(grep -c '^ready' "$DATA/run.log" || true)" = 3 ] && break; sleep 0.2; done
EP=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
echo "| run | cuts | transfers/s | p50 ms | p99 ms | abort % | cuts completed | cut p50 | cut p99 | cut max | node CPU µs/op |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for i in 1 2 3 4; do
	for mode in none 1s; do
		extra=()
		[ "$mode" != none ] && extra=(--cut-interval "$mode")
		out="$DATA/r$i-$mode.json"
		bin/kvbench bank --endpoints "$EP" --metrics-url 127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203 --clients "$CLIENTS" --conns 4 --duration "$DUR" --warmup 2s \
			--seed "$i" --progress 0 --out "$out" "${extra[@]}" >"$DATA/r$i-$mode.txt" 2>&1
		bin/benchrow "$i" "$mode" "$out"
	done
done
