#!/usr/bin/env bash
# Starts a 3-node cutkv cluster on 127.0.0.1 in the foreground (make run).
# gRPC 7001-7003, gossip 7101-7103, HTTP 7201-7203, data under ./data/n1..n3,
# logs in ./data/nN/kvnode.log. The nodes take a consistent cut every 10s
# (--cut-interval; flags in $CUTKV_RUN_FLAGS come after it and win, e.g.
# CUTKV_RUN_FLAGS="--cut-interval 0" turns it off). Ctrl-C (or SIGTERM)
# stops every node gracefully; a second Ctrl-C stops them at once. Running
# it again reuses the data.
set -u
cd "$(dirname "$0")/.."
BIN=${BIN:-./bin}
DATA=${CUTKV_DATA:-./data}
CUT_INTERVAL_FLAGS=${CUTKV_RUN_FLAGS:-}
initial="n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003"
pids=()

stop() {
	trap - INT TERM
	echo "stopping cluster..."
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	trap 'echo "second signal: killing nodes"; for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done' INT TERM
	wait
	echo "cluster stopped"
	exit 0
}
trap stop INT TERM

# One snapshot store for the whole local cluster: whichever node leads
# group 0 writes there, and every node uploads its partitions there.
mkdir -p "$DATA/snapshots"
store="file://$(cd "$DATA/snapshots" && pwd)"

for i in 1 2 3; do
	mkdir -p "$DATA/n$i"
	join=""
	for j in 1 2 3; do [ "$j" != "$i" ] && join="${join:+$join,}127.0.0.1:710$j"; done
	# shellcheck disable=SC2086
	setsid "$BIN/kvnode" --id "n$i" --data-dir "$DATA/n$i" \
		--grpc-addr "127.0.0.1:700$i" --gossip-addr "127.0.0.1:710$i" --http-addr "127.0.0.1:720$i" \
		--join "$join" --initial-cluster "$initial" --cut-interval 10s --snapshot-store "$store" $CUT_INTERVAL_FLAGS \
		2>>"$DATA/n$i/kvnode.log" &
	pids+=("$!")
done
echo "starting 3 nodes (logs: $DATA/n1/kvnode.log ...); Ctrl-C stops them"

# If any node exits on its own, report it and stop the others.
while true; do
	for idx in "${!pids[@]}"; do
		if ! kill -0 "${pids[$idx]}" 2>/dev/null; then
			wait "${pids[$idx]}"; rc=$?
			n=$((idx + 1))
			echo "node n$n exited with status $rc; last log lines:" >&2
			tail -n 5 "$DATA/n$n/kvnode.log" >&2
			unset 'pids[idx]'
			stop
		fi
	done
	sleep 1 &
	wait $! 2>/dev/null
done
