#!/usr/bin/env bash
# Measures cutkv side by side with etcd (make bench-compare): for each
# workload, four runs alternating A B A B (A = a 3-node cutkv cluster,
# B = a 3-member etcd cluster, both on loopback, both fsyncing). Each
# run starts its system fresh (new data directories) and stops it after,
# so only the system being measured runs. Then cmd/benchplot writes the
# Markdown section and one SVG chart per workload.
#
# Environment:
#   RUN        duration of each measured run (default 20s)
#   WORKLOADS  workloads to run, among put get txn bank (default "put get txn")
#   DOC        the Markdown file whose section "Side by side with etcd
#              (make bench-compare)" benchplot replaces, or appends if it
#              is missing (default docs/benchmarks.md)
#   IMGDIR     where the SVG charts go (default docs/img)
#   KEEP       if set, the results directory (JSON, logs) is kept
#
# Installs etcd with apt-get (Debian's etcd-server) if it is missing.
# Not part of make test or CI: it takes about 2 minutes per workload.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${RUN:-20s}
WORKLOADS=${WORKLOADS:-put get txn}
IMGDIR=${IMGDIR:-docs/img}
DOC=${DOC:-docs/benchmarks.md}
COMMON=(--duration "$RUN" --warmup 2s --clients 64 --conns 4 --progress 0)

if ! command -v etcd >/dev/null; then
	echo "etcd not found: installing Debian's etcd-server"
	if ! { apt-get update && apt-get install -y etcd-server; } || ! command -v etcd >/dev/null; then
		echo "bench-compare: could not install etcd with apt-get (needs root and Debian's apt); install etcd 3.x and retry" >&2
		exit 1
	fi
fi
for w in $WORKLOADS; do
	case $w in put | get | txn | bank) ;; *)
		echo "bench-compare: unknown workload $w (want put, get, txn or bank)" >&2
		exit 2
		;;
	esac
done

make -s build
OUT=$(mktemp -d /tmp/cutkv-bench-compare.XXXXXX)
SYS_PID=""

# stop_sys stops the system under test (its whole process group) and
# waits for it; the data directory is removed.
stop_sys() {
	if [ -n "$SYS_PID" ]; then
		kill -TERM -- "-$SYS_PID" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 -- "-$SYS_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL -- "-$SYS_PID" 2>/dev/null || true
		wait "$SYS_PID" 2>/dev/null || true
		SYS_PID=""
	fi
	rm -rf "$OUT/data"
}
cleanup() {
	stop_sys
	if [ -z "${KEEP:-}" ]; then rm -rf "$OUT"; else echo "results kept in $OUT"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_ready waits until the system answers, or fails after 30 s.
wait_ready() { # target log
	for _ in $(seq 150); do
		case $1 in
		cutkv) [ "$(grep -c '^ready' "$2" || true)" = 3 ] && return 0 ;;
		etcd) etcd_healthy && return 0 ;;
		esac
		sleep 0.2
	done
	echo "bench-compare: $1 did not become ready; log $2:" >&2
	tail -n 20 "$2" >&2
	return 1
}

# etcd_healthy: every member says it is healthy (has a leader).
etcd_healthy() {
	local p
	for p in 2379 22379 32379; do
		curl -fsS -m 1 "http://127.0.0.1:$p/health" 2>/dev/null | grep -q '"health":"true"' || return 1
	done
}

CUTKV_EP=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
ETCD_EP=127.0.0.1:2379,127.0.0.1:22379,127.0.0.1:32379
ETCD_CLUSTER=e1=http://127.0.0.1:2380,e2=http://127.0.0.1:22380,e3=http://127.0.0.1:32380

start_cutkv() {
	mkdir -p "$OUT/data"
	CUTKV_DATA="$OUT/data" CUTKV_RUN_FLAGS="--cut-interval 0" setsid scripts/run-local.sh >"$OUT/data/run.log" 2>&1 &
	SYS_PID=$!
	wait_ready cutkv "$OUT/data/run.log"
}

# start_etcd starts 3 etcd members in one process group (ports as in
# etcd's Procfile), default settings: every commit is fsynced.
start_etcd() {
	mkdir -p "$OUT/data"
	setsid bash -c '
		for i in 1 2 3; do
			c=$(( i == 1 ? 2379 : i * 10000 + 2379 )); p=$((c + 1))
			etcd --name "e$i" --data-dir "$0/e$i" \
				--listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
				--listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
				--initial-cluster-token bench-compare --initial-cluster "$1" --initial-cluster-state new \
				--log-level warn 2>>"$0/e$i.log" &
		done
		wait' "$OUT/data" "$ETCD_CLUSTER" >"$OUT/data/run.log" 2>&1 &
	SYS_PID=$!
	wait_ready etcd "$OUT/data/e1.log"
}

run_one() { # workload target index
	local w=$1 t=$2 i=$3 args=()
	case $w in
	put | get) args=(--value-size 256) ;;
	txn)
		args=(--value-size 256)
		[ "$t" = cutkv ] && args+=(--txn-keys cross)
		;;
	bank) ;; # values are balances; 1000 accounts
	esac
	local ep=$CUTKV_EP
	[ "$t" = etcd ] && ep=$ETCD_EP
	"start_$t"
	echo "$(date -u +%H:%M:%S) $w $t run $i"
	if ! bin/kvbench "$w" --target "$t" --endpoints "$ep" "${COMMON[@]}" "${args[@]}" --seed "$i" \
		--out "$OUT/$w-$i-$t.json" >"$OUT/$w-$i-$t.txt" 2>&1; then
		echo "bench-compare: kvbench $w on $t failed:" >&2
		tail -n 20 "$OUT/$w-$i-$t.txt" >&2
		return 1
	fi
	stop_sys
}

start=$(date +%s)
for w in $WORKLOADS; do
	for i in 1 2; do
		run_one "$w" cutkv "$i"
		run_one "$w" etcd "$i"
	done
done
took=$(($(date +%s) - start))

# The command lines as benchplot shows them.
cmds="RUN=$RUN WORKLOADS=\"$WORKLOADS\" make bench-compare; each run: bin/kvbench WORKLOAD --target cutkv|etcd ${COMMON[*]} --value-size 256 --seed N (txn on cutkv: --txn-keys cross)"
go run ./cmd/benchplot --results "$OUT" --doc "$DOC" --imgdir "$IMGDIR" \
	--etcd-version "$(etcd --version | sed -n 's/^etcd Version: //p')" --commands "$cmds" --took "${took}s" --run "$RUN"
echo "bench-compare: section in $DOC, charts in $IMGDIR (measured runs took ${took}s)"
