#!/usr/bin/env bash
# Measures what checkpoints (materializations) buy and cost on a local
# 3-node cluster (the addresses of scripts/run-local.sh; nodes started and
# timed by bench/cmd/benchckpt), and prints Markdown tables:
#
#  1. Restart time vs history length: write N keys (256 B values, keyspace
#     100000, 64 clients) with automatic materialization off, stop all
#     nodes (SIGTERM), restart all three and time each node from process
#     start to its "node started" log line, its "ready" line and the moment
#     it has applied again what it had applied before the stop ("without
#     materialization": the whole WAL is replayed). Then one checkpoint
#     (Cluster.Checkpoint), stop, restart and time again ("with
#     materialization"). WAL and materialization bytes on disk are taken
#     before each restart. N = 100000, and 1000000 unless FULL=0.
#  2. WAL size under steady writes: kvbench put for DURATION (default 5m,
#     64 clients) with the default materialization interval and
#     --materialize-bytes 16777216; every 10 s the nodes' WAL bytes and the
#     materialization files' bytes, summed over the three nodes.
#  3. Put throughput with checkpoints taken back to back (or every
#     CKPT_EVERY, a Go duration such as 10s) vs none: four pairs of RUN
#     (default 15s) kvbench put runs, A (none) then B; with the nodes' CPU
#     time per operation (kvbench --metrics-url).
#
# Usage: [FULL=0] [DURATION=5m] [RUN=15s] [CKPT_EVERY=0] [PARTS=123] [KEEP=1]
#        scripts/bench-checkpoints.sh
# (WRITES="20000 50000" replaces the history lengths of part 1, for a
# quick try.)
# Takes about 20 minutes with the defaults on a 2-core machine. Needs the
# ports 7001-7003, 7101-7103, 7201-7203 and 7301-7303 free, and jq. Data and logs go to a
# temporary directory, removed at the end unless KEEP=1 or a step failed.
set -euo pipefail
cd "$(dirname "$0")/.."
FULL=${FULL:-1}
DURATION=${DURATION:-5m}
RUN=${RUN:-15s}
# CKPT_EVERY: pause between two checkpoints in part 3's B runs (0: back to
# back). PARTS: which parts to run, e.g. PARTS=3.
CKPT_EVERY=${CKPT_EVERY:-0}
PARTS=${PARTS:-123}
CLIENTS=64
EP=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
METRICS=127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203
NOMAT=(--materialize-interval 24h --materialize-bytes 1000000000000)
PUT=(--endpoints "$EP" --clients "$CLIENTS" --conns 4 --keyspace 100000 --value-size 256 --progress 0)

make -s build
WORK=$(mktemp -d /tmp/cutkv-bench-ckpt.XXXXXX)
go build -C bench -o "$WORK/benchckpt" ./cmd/benchckpt
B=$WORK/benchckpt

# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh

# Read-only git: no index refresh (another checkout user may hold the lock).
echo "cutkv: commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(git --no-optional-locks status --porcelain 2>/dev/null | wc -l) paths changed or untracked"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load average $(loadavg) at the start ($(date -u '+%Y-%m-%d %H:%M UTC'))"
echo

if [[ $PARTS == *1* ]]; then
# --- 1. Restart time vs history length ---
if [ -n "${WRITES:-}" ]; then
	read -r -a NS <<<"$WRITES"
elif [ "$FULL" = 1 ]; then
	NS=(100000 1000000)
else
	NS=(100000)
fi
RESTART_ROWS=()
for N in "${NS[@]}"; do
	D=$WORK/restart-$N
	start_cluster "$D" "$D/start.events" "" -- "${NOMAT[@]}"
	bin/kvbench put "${PUT[@]}" --total "$N" --seed 1 --out "$D/put.json" >"$D/put.txt" 2>&1
	echo "restart, $N writes: $("$B" summary "$D/put.json"); load average $(loadavg)" >&2
	for mode in without with; do
		if [ "$mode" = with ]; then
			ck=$("$B" checkpoint -endpoints "$EP")
			echo "checkpoint ($N writes): $ck" >&2
		fi
		"$B" applied -endpoints "$EP" >"$D/targets-$mode.json"
		stop_cluster
		wal=$(bytes "$D"/n*/wal)
		mat=$(bytes "$D"/n*/materializations)
		start_cluster "$D" "$D/restart-$mode.events" "$D/targets-$mode.json" -- "${NOMAT[@]}"
		RESTART_ROWS+=("| $N | $mode | $(mib "$wal") | $(mib "$mat") | $(node_times "$D/restart-$mode.events" open) | $(node_times "$D/restart-$mode.events" ready) | $(node_times "$D/restart-$mode.events" applied) |")
	done
	stop_cluster
	grep -h 'WAL truncated' "$D"/n*/kvnode.log >"$D/truncations.txt" || true
	echo "restart, $N writes: WAL truncations logged: $(wc -l <"$D/truncations.txt"); load average $(loadavg)" >&2
	if [ "${KEEP:-0}" != 1 ]; then rm -rf "$D"/n*/wal "$D"/n*/materializations; fi
done
echo "### Restart time vs history length"
echo
echo "Seconds from process start, per node (n1 / n2 / n3): to the \"node started\" log line (WAL read, state restored), to the \"ready\" line (every group knows a leader), to having applied again everything applied before the stop. WAL and materializations: bytes on disk, sum of the 3 nodes, before the restart."
echo
echo "| writes | materialization | WAL MiB | materializations MiB | node started s | ready s | applied s |"
echo "|--:|---|--:|--:|---|---|---|"
printf '%s\n' "${RESTART_ROWS[@]}"
echo

fi

if [[ $PARTS == *2* ]]; then
# --- 2. WAL size under steady writes ---
D=$WORK/walsize
start_cluster "$D" "$D/start.events" "" -- --materialize-bytes 16777216
"$B" watch -endpoints "$EP" -data "$D" -every 10s -for "$DURATION" >"$D/watch.md" &
W_PID=$!
bin/kvbench put "${PUT[@]}" --duration "$DURATION" --seed 2 --out "$D/put.json" >"$D/put.txt" 2>&1
wait "$W_PID"
stop_cluster
echo "### WAL size during $DURATION of writes (--materialize-bytes 16777216, interval 1m)"
echo
echo "Sum over the 3 nodes. Load: $("$B" summary "$D/put.json"). Materializations written (log lines \"materialized\", all nodes): $(cat "$D"/n*/kvnode.log | grep -c 'msg=materialized' || true); WAL truncations: $(cat "$D"/n*/kvnode.log | grep -c 'WAL truncated' || true). Load average after: $(loadavg)."
echo
cat "$D/watch.md"
echo
if [ "${KEEP:-0}" != 1 ]; then rm -rf "$D"/n*/wal "$D"/n*/materializations; fi

fi

if [[ $PARTS == *3* ]]; then
# --- 3. Put throughput: checkpoints back to back vs none ---
D=$WORK/throughput
start_cluster "$D" "$D/start.events" "" -- "${NOMAT[@]}"
# kvbench get writes every key once first: the runs all start from a full keyspace.
bin/kvbench get "${PUT[@]}" --total 1000 --out "$D/preload.json" >"$D/preload.txt" 2>&1
BLABEL="back to back"
[ "$CKPT_EVERY" != 0 ] && BLABEL="every $CKPT_EVERY"
echo "### Put throughput, checkpoints $BLABEL (B) vs none (A)"
echo
echo "Automatic materialization off; each run $RUN after 2 s warm-up, 64 clients, keyspace of 100000 keys all written first. WAL write+fsync: mean over the 3 nodes' group commits during the run (kvbench --metrics-url). Checkpoint times: one Cluster.Checkpoint call each (all groups on all nodes)."
echo
echo "| run | checkpoints | ops/s | p50 ms | p99 ms | errors | WAL write+fsync mean ms | node CPU µs/op | checkpoints completed (failed), p50 / max s |"
echo "|---|---|--:|--:|--:|--:|--:|--:|---|"
SUM_A=0
SUM_B=0
CPU_A=""
CPU_B=""
for i in 1 2 3 4; do
	for mode in A B; do
		out=$D/r$i-$mode.json
		ck="-"
		if [ "$mode" = B ]; then
			"$B" ckloop -endpoints "$EP" -for 1h -every "$CKPT_EVERY" >"$D/ck-$i.txt" 2>"$D/ck-$i.err" &
			BG_PID=$!
		fi
		bin/kvbench put "${PUT[@]}" --duration "$RUN" --warmup 2s --seed "$i" --metrics-url "$METRICS" \
			--out "$out" >"$D/r$i-$mode.txt" 2>&1
		if [ "$mode" = B ]; then
			kill -TERM "$BG_PID"
			wait "$BG_PID"
			BG_PID=""
			ck=$(awk '{ split($1,c,"="); split($2,f,"="); split($3,p,"="); split($4,m,"="); printf "%s (%s), %s / %s", c[2], f[2], p[2], m[2] }' "$D/ck-$i.txt")
			if [ -s "$D/ck-$i.err" ]; then echo "run $i: $(cat "$D/ck-$i.err")" >&2; fi
		fi
		row=$("$B" row "$i" "$out" "$ck")
		echo "$row" | sed "s/^| $i |/| $i | $([ "$mode" = A ] && echo none || echo "$BLABEL") |/"
		ops=$(echo "$row" | cut -d'|' -f3 | tr -d ' ')
		cpu=$(jq -r '.wal.cpu_us_per_op // 0' "$out")
		if [ "$mode" = A ]; then SUM_A=$((SUM_A + ops)); CPU_A="$CPU_A $cpu"; else SUM_B=$((SUM_B + ops)); CPU_B="$CPU_B $cpu"; fi
	done
done
stop_cluster
echo
echo "B / A (sums of ops/s over the 4 pairs): $SUM_B / $SUM_A = $(awk -v a="$SUM_A" -v b="$SUM_B" 'BEGIN { printf "%.2f", b / a }')"
echo
# Node CPU per operation, mean of the 4 runs of each side.
echo "$CPU_A" "|" "$CPU_B" | awk '{ s = 0; for (i = 1; i <= NF; i++) { if ($i == "|") { s = 1; continue } v[s] += $i; n[s]++ } if (v[0] > 0 && v[1] > 0) printf "Node CPU per operation, mean of the runs: A %.0f µs, B %.0f µs; B / A = %.2f\n", v[0] / n[0], v[1] / n[1], (v[1] / n[1]) / (v[0] / n[0]) }'
echo
echo "load average at the end: $(loadavg)"
fi
