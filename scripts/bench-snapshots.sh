#!/usr/bin/env bash
# Measures snapshots on a local 3-node cluster (run-local.sh's addresses;
# nodes started and timed by bench/cmd/benchckpt, snapshots taken, restored
# and compared by bench/cmd/benchsnap) and prints Markdown tables. Every
# node gets --snapshot-store file://WORK/store (one shared store).
#
#  Setup: KEYS keys (16 B) with 1 KiB values, written once (kvbench get's
#     preload, 64 clients), automatic materialization off; then one
#     checkpoint (Cluster.Checkpoint) so that every partition has a fresh
#     materialization.
#  1. Full vs incremental: a full snapshot (--full: a fresh base of every
#     partition is uploaded), an incremental one right after, CHANGE puts
#     of 1 KiB to random existing keys, an incremental one, then a
#     checkpoint and an incremental one (new local bases: a "rebase",
#     what a snapshot costs after a node's periodic materialization).
#     Duration, bytes and objects uploaded and reused for each. A failed
#     CreateSnapshot is listed under the table and asked for again, up to
#     SNAP_TRIES attempts.
#  2. Restore: source cluster stopped; each of the snapshots of part 1
#     named in RESTORE (full, changed: the incremental after the change,
#     last: the rebase) restored into 3 fresh data dirs, one node after
#     the other (kvnode restore: check every object, rebuild), timed; the
#     restored cluster started on the same addresses and timed to ready;
#     every key-value scanned and its digest compared with the source's
#     at the snapshot (scanned in part 1 right after the snapshot, nothing
#     written in between). Needs part 1 (PARTS=2 runs it too).
#  3. Bank throughput while snapshots are taken: kvbench bank (16
#     clients, 1000 accounts) on the loaded cluster, PAIRS rounds of RUN
#     (after 2 s warm-up) A: none, B: full snapshots back to back from the
#     run's start (the one in flight when the run ends completes before
#     the next run), C: an incremental snapshot started every second.
#  4. Automatic snapshots: the cluster restarted with --snapshot-interval
#     1s --snapshot-keep 30 and the default materialization settings (a
#     partition materializes once a minute, so its next snapshot uploads
#     a new base), kvbench bank for AUTO_RUN once the first automatic
#     snapshot is stored; ListSnapshots is polled every 5 s (snapshots
#     beyond the newest 30 are pruned) and the gaps between the
#     snapshots' cut times, each snapshot's duration and bytes (the
#     leader's "snapshot created" log lines) are reported; the same run
#     after a restart without automatic snapshots, AUTO_PAIRS times.
#  5. Bytes uploaded per minute of automatic snapshots under a slow,
#     uniform change rate: for each --materialize-interval in P5_MAT, the
#     cluster restarted with it (--materialize-bytes at its default) and
#     --snapshot-interval 1s (no pruning); once the first automatic
#     snapshot is stored, kvbench put --rate P5_RATE (1 KiB values to
#     random existing keys; 171 puts/s is about 10 MiB a minute) for
#     P5_RUN (or RUN where P5_MAT says INTERVAL:RUN). Reported: bytes
#     changed (puts x 1 KiB), the snapshots of the window and what they
#     uploaded, in all and per minute (the nodes' "snapshot created" lines:
#     checkpoint files vs changelog pieces and base manifests; files: new
#     f-* objects in the store vs files the snapshots referenced already
#     stored), uploaded / changed, and what the nodes wrote to disk: WAL
#     (cutkv_wal_bytes_total), new SST files in the Pebble state dirs
#     (flush and compaction outputs, listed every second by benchsnap
#     sstwatch), Pebble flushes and compactions (cutkv_state_*), and each
#     process's /proc write_bytes (everything, the store's files
#     included). Then the cluster is stopped and n1 is restored from the
#     window's newest snapshot (kvnode restore, timed) unless
#     P5_RESTORE=0.
#
# Usage: [KEYS=1000000] [CHANGE=10240] [RUN=20s] [PAIRS=3] [AUTO_RUN=60s]
#        [AUTO_PAIRS=2] [PARTS=1234] [RESTORE="full changed last"] [KEEP=1]
#        [NODE_FLAGS="--snapshot-upload-rate 16777216"]
#        [P5_MAT="1m 5m:10m"] [P5_RUN=4m] [P5_RATE=171] [P5_RESTORE=1] [SNAP_TRIES=3]
#        scripts/bench-snapshots.sh
# (Part 5 runs only when PARTS names it, e.g. PARTS=1235.)
# A quick try: KEYS=50000 CHANGE=512 RUN=10s PAIRS=1 AUTO_RUN=20s AUTO_PAIRS=1.
# With the defaults it needs about 10 GB of disk (3 replicas, WAL,
# materializations, the store, restored data dirs) and took 25 minutes on
# a busy 2-core machine (run 8 in docs/benchmarks.md). Needs the ports
# 7001-7003, 7101-7103, 7201-7203 and 7301-7303 free; installs jq with apt-get if it
# is missing. Data and logs go to a
# temporary directory, removed at the end unless KEEP=1 or a step failed.
set -euo pipefail
if ! command -v jq >/dev/null; then
	echo "bench-snapshots: installing jq with apt-get (Debian's package)" >&2
	if ! { apt-get update && apt-get install -y jq; } >/dev/null || ! command -v jq >/dev/null; then
		echo "bench-snapshots: could not install jq with apt-get (needs root and Debian's apt); install jq and retry" >&2
		exit 1
	fi
fi
cd "$(dirname "$0")/.."
KEYS=${KEYS:-1000000}
CHANGE=${CHANGE:-10240}
RUN=${RUN:-20s}
PAIRS=${PAIRS:-3}
AUTO_RUN=${AUTO_RUN:-60s}
AUTO_PAIRS=${AUTO_PAIRS:-2}
PARTS=${PARTS:-1234}
RESTORE=${RESTORE:-full changed last}
P5_MAT=${P5_MAT:-1m}
P5_RUN=${P5_RUN:-4m}
P5_RATE=${P5_RATE:-171}
P5_RESTORE=${P5_RESTORE:-1}
[[ $PARTS == *2* && $PARTS != *1* ]] && PARTS="1$PARTS"
EP=127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
# kvnode restore --initial-cluster: the peer addresses benchckpt cluster gives the nodes.
IC=n1=127.0.0.1:7301,n2=127.0.0.1:7302,n3=127.0.0.1:7303
METRICS=127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203
NOMAT=(--materialize-interval 24h --materialize-bytes 1000000000000)
BANK=(--endpoints "$EP" --clients 16 --conns 4 --accounts 1000 --warmup 2s --progress 0)

make -s build
WORK=$(mktemp -d /tmp/cutkv-bench-snap.XXXXXX)
go build -C bench -o "$WORK/benchckpt" ./cmd/benchckpt
go build -C bench -o "$WORK/benchsnap" ./cmd/benchsnap
B=$WORK/benchckpt
S=$WORK/benchsnap
STORE=file://$WORK/store
mkdir -p "$WORK/store"
SRC=$WORK/src

# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh
now_ms() { date +%s%3N; }
log() { echo "$(date -u +%H:%M:%S) $*" >&2; }

# bg CMD...: runs a helper in the background (BG_PID); bg_stop sends it
# SIGTERM and waits.
bg() {
	"$@" &
	BG_PID=$!
}
bg_stop() {
	kill -TERM "$BG_PID"
	wait "$BG_PID"
	BG_PID=""
}

# snap LABEL FILE [FLAGS]: one snapshot; its JSON line goes to FILE. A
# failed attempt is recorded in SNAP_FAILS (printed under part 1's table)
# and the snapshot is asked for again, up to SNAP_TRIES attempts in all;
# then the script stops.
SNAP_TRIES=${SNAP_TRIES:-3}
SNAP_FAILS=()
snap() {
	local label=$1 file=$2 try
	shift 2
	for try in $(seq "$SNAP_TRIES"); do
		if "$S" create -endpoints "$EP" "$@" >"$file"; then
			log "snapshot $label: $(cat "$file")"
			return
		fi
		echo "snapshot \"$label\" failed (attempt $try of $SNAP_TRIES): $(cat "$file")" >&2
		SNAP_FAILS+=("$label, attempt $try: $(jq -r .error "$file" 2>/dev/null || cat "$file")")
		sleep 1
	done
	exit 1
}

# snap_row LABEL FILE: a row of part 1's table.
snap_row() {
	jq -r '[.id, .cut, .duration_ms / 1000, .cut_s * 1000, .bytes_uploaded / 1048576, .pieces_uploaded, .pieces_reused, .total_bytes / 1048576, .objects] | @tsv' "$2" |
		awk -F'\t' -v l="$1" '{ printf "| %s | %s (%s) | %.2f | %.0f | %.1f | %s / %s | %.1f (%s) |\n", l, $1, $2, $3, $4, $5, $6, $7, $8, $9 }'
}

# bank_row RUN MODE RESULT.json EXTRA: a row of parts 3 and 4.
bank_row() {
	jq -r '[.ops_per_sec, .latency_ms.p50, .latency_ms.p99, .abort_rate * 100, .errors.total] | @tsv' "$3" |
		awk -F'\t' -v r="$1" -v m="$2" -v x="$4" '{ printf "| %s | %s | %.0f | %.1f | %.1f | %.2f | %s | %s |\n", r, m, $1, $2, $3, $4, $5, x }'
}
ops() { jq -r '.ops_per_sec | round' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b / a }'; }

# Read-only git: no index refresh (another checkout user may hold the lock).
echo "cutkv: commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(git --no-optional-locks status --porcelain 2>/dev/null | wc -l) paths changed or untracked"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load average $(loadavg) at the start ($(date -u '+%Y-%m-%d %H:%M UTC')); $(df -h --output=avail /tmp | tail -n 1 | tr -d ' ') free in /tmp"
echo

# --- setup: KEYS keys of 1 KiB, one checkpoint ---
# NODE_FLAGS: more kvnode flags for the source cluster, e.g.
# NODE_FLAGS="--snapshot-upload-rate 16777216".
read -ra NODE_EXTRA <<<"${NODE_FLAGS:-}"
SRCFLAGS=(--snapshot-store "$STORE" "${NODE_EXTRA[@]}")
start_cluster "$SRC" "$SRC/start.events" "" -- "${NOMAT[@]}" "${SRCFLAGS[@]}"
# Groups often change leader in the first seconds after "ready"; a write
# caught in that gets "outcome unknown" and the preload does not retry it.
sleep 5
log "loading $KEYS keys"
bin/kvbench get --endpoints "$EP" --clients 64 --conns 4 --keyspace "$KEYS" --value-size 1024 --total 1 \
	--progress 0 --seed 1 --out "$WORK/load.json" >"$WORK/load.txt" 2>&1
LOAD=$(jq -r '"\(.preload.keys) keys of 1 KiB written in \(.preload.seconds | round) s (\(.preload.keys / .preload.seconds | round) keys/s, \(.preload.errors) errors)"' "$WORK/load.json")
log "$LOAD; load average $(loadavg)"
CK=$("$B" checkpoint -endpoints "$EP")
log "checkpoint: $CK"
SIZES="on disk after the load and a checkpoint, sum of the 3 nodes: WAL $(mib "$(bytes "$SRC"/n*/wal)") MiB, materializations $(mib "$(bytes "$SRC"/n*/materializations)") MiB"
log "$SIZES"

if [[ $PARTS == *1* ]]; then
# --- 1. Full vs incremental ---
P1=$WORK/p1
mkdir -p "$P1"
snap full "$P1/full.json" -full
snap "incremental right after" "$P1/incr.json"
if [[ $PARTS == *2* ]]; then "$S" digest -endpoints "$EP" >"$P1/digest-full.json"; log "digest: $(cat "$P1/digest-full.json")"; fi
bin/kvbench put --endpoints "$EP" --clients 16 --conns 4 --keyspace "$KEYS" --value-size 1024 --total "$CHANGE" \
	--progress 0 --seed 2 --out "$P1/change.json" >"$P1/change.txt" 2>&1
snap "incremental after the change" "$P1/changed.json"
if [[ $PARTS == *2* ]]; then "$S" digest -endpoints "$EP" >"$P1/digest-changed.json"; log "digest: $(cat "$P1/digest-changed.json")"; fi
CK2=$("$B" checkpoint -endpoints "$EP")
log "checkpoint: $CK2"
snap "incremental after a checkpoint" "$P1/last.json"
cp "$P1/digest-changed.json" "$P1/digest-last.json" 2>/dev/null || true
echo "### Full vs incremental snapshots ($KEYS keys of 1 KiB)"
echo
echo "Setup: $LOAD; checkpoint: $CK; $SIZES. Change: $(jq -r '"\(.ops) puts of 1 KiB to random existing keys (\(.ops * 1024 / 1048576 * 10 | round / 10) MiB), \(.ops_per_sec | round) puts/s"' "$P1/change.json"). Snapshot store: a directory on the same disk (file://). Took: the node's measure (cut, prepare, upload, manifest); cut: from the call to the end of the cut phase; objects: bases and log pieces."
echo
echo "| step | snapshot (cut) | took s | cut ms | MiB uploaded | objects uploaded / reused | snapshot MiB (objects) |"
echo "|---|---|--:|--:|--:|--:|--:|"
snap_row "full (--full), after a checkpoint" "$P1/full.json"
snap_row "incremental, right after" "$P1/incr.json"
snap_row "incremental, after $CHANGE puts" "$P1/changed.json"
snap_row "incremental, after a checkpoint ($CK2)" "$P1/last.json"
echo
if [ "${#SNAP_FAILS[@]}" -gt 0 ]; then
	echo "Failed attempts, each followed by a new CreateSnapshot call:"
	echo
	printf -- '- %s\n' "${SNAP_FAILS[@]}"
	echo
fi
echo "Store after part 1: $(mib "$(bytes "$WORK/store")") MiB in $(find "$WORK/store" -type f | wc -l) files."
echo
fi

if [[ $PARTS == *2* ]]; then
# --- 2. Restore ---
stop_cluster
echo "### Restore"
echo
echo "Source cluster stopped. Each node's data dir restored one after the other with \`kvnode restore\` (it checks every object of the snapshot, then rebuilds the node's groups: all 16 partitions and group 0 with 3 nodes), then the 3 restored nodes started together on the same addresses. Seconds per node (n1 / n2 / n3): restore, the whole process; node started and ready, from the start of the restored nodes. Keys: the key-values the restore wrote per node (its log); scanned: every key-value read from the restored cluster, its digest compared with the source's scan at the snapshot."
echo
echo "| snapshot | restore s | keys written | MiB checked / read (n1) | node started s | ready s | keys scanned | scan s | same as source |"
echo "|---|---|---|--:|---|---|--:|--:|---|"
for which in $RESTORE; do
	id=$(jq -r .id "$P1/$which.json")
	R=$WORK/restore-$which
	mkdir -p "$R"
	for n in n1 n2 n3; do
		log "restore $which ($id) $n"
		t0=$(date +%s%N)
		if ! bin/kvnode restore --store "$STORE" --snapshot "$id" --data-dir "$R/$n" --id "$n" --initial-cluster "$IC" \
			>"$R/restore-$n.txt" 2>"$R/restore-$n.log"; then
			echo "kvnode restore of $id on $n failed:" >&2
			tail -n 20 "$R/restore-$n.log" >&2
			exit 1
		fi
		echo $((($(date +%s%N) - t0) / 1000000)) >"$R/took-$n"
	done
	times=$(cat "$R"/took-n1 "$R"/took-n2 "$R"/took-n3 | awk '{ printf "%s%.2f", (NR > 1 ? " / " : ""), $1 / 1000 }')
	keys=$(for n in n1 n2 n3; do sed -n 's/.*msg="restore done".* keys=\([0-9]*\).*/\1/p' "$R/restore-$n.log"; done | paste -sd/ | sed 's|/| / |g')
	checked=$(sed -n 's/.*msg="checking every piece of the snapshot".* bytes=\([0-9]*\).*/\1/p' "$R/restore-n1.log")
	rbytes=$(sed -n 's/.*msg="restore done".* bytes_read=\([0-9]*\).*/\1/p' "$R/restore-n1.log")
	rd="$(mib "$checked") / $(mib "$rbytes")"
	start_cluster "$R" "$R/start.events" "" -- "${NOMAT[@]}"
	"$S" digest -endpoints "$EP" >"$R/digest.json"
	stop_cluster
	want=$(jq -r .sha256 "$P1/digest-$which.json")
	got=$(jq -r .sha256 "$R/digest.json")
	same="yes"
	if [ "$want" != "$got" ]; then
		same="**no**: $(jq -r .keys "$P1/digest-$which.json") keys at the source"
		echo "restore of $which ($id): the restored cluster differs from the source: source $(cat "$P1/digest-$which.json"), restored $(cat "$R/digest.json")" >&2
	fi
	echo "| $which: $id (cut $(jq -r .cut "$P1/$which.json")) | $times | $keys | $rd | $(node_times "$R/start.events" open) | $(node_times "$R/start.events" ready) | $(jq -r .keys "$R/digest.json") | $(jq -r .took_s "$R/digest.json" | awk '{ printf "%.1f", $1 }') | $same |"
	if [ "${KEEP:-0}" != 1 ]; then rm -rf "$R"/n*; fi
done
echo
start_cluster "$SRC" "$SRC/restart.events" "" -- "${NOMAT[@]}" "${SRCFLAGS[@]}"
fi

if [[ $PARTS == *3* ]]; then
# --- 3. Bank throughput: none / full snapshot / incremental every second ---
P3=$WORK/p3
mkdir -p "$P3"
echo "### Bank throughput while snapshots are taken"
echo
echo "kvbench bank, 16 clients, 4 connections, 1000 accounts, $RUN measured after 2 s warm-up, on the cluster holding the $KEYS keys (automatic materialization off). A: no snapshot; B: full snapshots back to back from the start of kvbench (the one in flight at its end completes before the next run); C: an incremental snapshot started every second. Snapshots: completed (failed), wall time p50 / max, MiB uploaded in all."
echo
echo "| round | snapshots | transfers/s | p50 ms | p99 ms | abort % | errors | snapshots |"
echo "|---|---|--:|--:|--:|--:|--:|---|"
declare -A SUM=([A]=0 [B]=0 [C]=0)
PAIRR=""
for i in $(seq "$PAIRS"); do
	declare -A OPS=()
	for mode in A B C; do
		out=$P3/r$i-$mode.json
		cell="-"
		case $mode in
		B) bg "$S" loop -endpoints "$EP" -full -every 0 -for 1h >"$P3/snaps-$i-B.jsonl" ;;
		C) bg "$S" loop -endpoints "$EP" -every 1s -for 1h >"$P3/snaps-$i-C.jsonl" ;;
		esac
		bin/kvbench bank "${BANK[@]}" --duration "$RUN" --seed "$i" --out "$out" >"$P3/r$i-$mode.txt" 2>&1 || {
			echo "kvbench bank (round $i, $mode) failed:" >&2
			tail -n 20 "$P3/r$i-$mode.txt" >&2
			exit 1
		}
		if [ "$mode" != A ]; then
			bg_stop
			cell=$("$S" loopcell "$P3/snaps-$i-$mode.jsonl")
		fi
		label=$(case $mode in A) echo "A: none" ;; B) echo "B: full" ;; C) echo "C: incremental every 1 s" ;; esac)
		bank_row "$i" "$label" "$out" "$cell"
		OPS[$mode]=$(ops "$out")
		SUM[$mode]=$((SUM[$mode] + OPS[$mode]))
		log "round $i $mode: $(ops "$out") transfers/s; $cell; load average $(loadavg)"
	done
	PAIRR="$PAIRR${PAIRR:+, }$(ratio "${OPS[A]}" "${OPS[B]}") / $(ratio "${OPS[A]}" "${OPS[C]}")"
done
echo
echo "B / A and C / A (sums of transfers/s over the $PAIRS rounds): ${SUM[B]} / ${SUM[A]} = **$(ratio "${SUM[A]}" "${SUM[B]}")**, ${SUM[C]} / ${SUM[A]} = **$(ratio "${SUM[A]}" "${SUM[C]}")** (per round, B/A / C/A: $PAIRR)."
echo
fi

if [[ $PARTS == *4* ]]; then
# --- 4. Automatic snapshots every second under bank load ---
P4=$WORK/p4
mkdir -p "$P4"
[ -n "$CL_PID" ] && stop_cluster
ROWS=()
STATS=()
CHECKS=()
for j in $(seq "$AUTO_PAIRS"); do
	for mode in none auto; do
		flags=("${SRCFLAGS[@]}")
		[ "$mode" = auto ] && flags+=(--snapshot-interval 1s --snapshot-keep 30)
		start_cluster "$SRC" "$P4/start-$j-$mode.events" "" -- "${flags[@]}"
		if [ "$mode" = auto ]; then
			t0=$(now_ms)
			bg "$S" watch -endpoints "$EP" -every 5s -out "$P4/snaps-$j.json"
			# The run starts once the first automatic snapshot is stored.
			for _ in $(seq 1200); do
				[ -s "$P4/snaps-$j.json" ] && [ "$(jq --argjson t "$t0" '[.[] | select(.time_unix_ms >= $t)] | length' "$P4/snaps-$j.json")" -gt 0 ] && break
				sleep 0.5
			done
		fi
		from=$(now_ms)
		bin/kvbench bank "${BANK[@]}" --duration "$AUTO_RUN" --seed "$((10 + j))" --out "$P4/r$j-$mode.json" >"$P4/r$j-$mode.txt" 2>&1 || {
			echo "kvbench bank (part 4, $j, $mode) failed:" >&2
			tail -n 20 "$P4/r$j-$mode.txt" >&2
			exit 1
		}
		to=$(now_ms)
		extra="-"
		if [ "$mode" = auto ]; then
			bg_stop
			STATS+=("$("$S" autostats -snapshots "$P4/snaps-$j.json" -from "$from" -to "$to" -data "$SRC" -label "$j" -detail "$P4/detail-$j.md")")
			if "$S" check -endpoints "$EP" >"$P4/check-$j.json"; then
				CHECKS+=("$(jq -r '"after run '"$j"': \(.id) ok, \(.objects) objects, \(.bytes / 1048576 | floor) MiB read in \(.took_s * 10 | round / 10) s"' "$P4/check-$j.json")")
			else
				CHECKS+=("after run $j: **failed**: $(cat "$P4/check-$j.json")")
			fi
			extra=$("$S" metric -urls "$METRICS")
			log "part 4 run $j: $extra"
			extra="metrics since the start: ${extra#cutkv_snapshot_interval_seconds: }"
		fi
		ROWS+=("$(bank_row "$j" "$([ "$mode" = auto ] && echo "every 1 s" || echo none)" "$P4/r$j-$mode.json" "$extra")")
		log "part 4 run $j $mode: $(ops "$P4/r$j-$mode.json") transfers/s; load average $(loadavg)"
		stop_cluster
	done
done
echo "### Automatic snapshots every second under bank load"
echo
echo "The cluster of parts 1-3 restarted with the default materialization settings (interval 1 m, 64 MiB), and with --snapshot-interval 1s --snapshot-keep 30 for the \"every 1 s\" runs, which start once the first automatic snapshot is stored. kvbench bank as in part 3 for $AUTO_RUN. Gaps: between the cut times of successive snapshots in the run (manifests, ListSnapshots polled every 5 s); took and MiB: the leader's \"snapshot created\" log lines."
echo
echo "| run | automatic snapshots | transfers/s | p50 ms | p99 ms | abort % | errors | snapshot metrics |"
echo "|---|---|--:|--:|--:|--:|--:|---|"
printf '%s\n' "${ROWS[@]}"
echo
echo "| run | snapshots | gap p50 / p99 / max s | took p50 / p99 / max s | MiB uploaded p50 / max / sum | failures logged |"
echo "|---|--:|---|---|---|--:|"
printf '%s\n' "${STATS[@]}"
echo
echo "CheckSnapshot (Cluster API: every object read and verified) of the newest snapshot, automatic snapshots still running: $(printf '%s; ' "${CHECKS[@]}" | sed 's/; $//')."
echo
echo "Each snapshot of run 1:"
echo
cat "$P4/detail-1.md"
echo
fi

if [[ $PARTS == *5* ]]; then
# --- 5. Bytes uploaded per minute: snapshots every second, slow uniform changes ---
P5=$WORK/p5
mkdir -p "$P5"
[ -n "$CL_PID" ] && stop_cluster
STATE=(cutkv_wal_bytes_total cutkv_state_flushes_total cutkv_state_compactions_total cutkv_state_disk_bytes cutkv_state_sst_bytes)
# scrape_sum FILE NAME: NAME summed over the nodes and its labels.
scrape_sum() { jq --arg n "$2" '[.nodes[].samples | to_entries[] | select(.key == $n or (.key | startswith($n + "{"))) | .value] | add // 0' "$1"; }
# writes EVENTS: the kvnode processes' /proc write_bytes, summed.
writes() {
	local t=0 pid
	for pid in $(sed -n 's/^started n[0-9]* pid=\([0-9]*\).*/\1/p' "$1"); do
		t=$((t + $(awk '$1 == "write_bytes:" { print $2 }' "/proc/$pid/io")))
	done
	echo "$t"
}
# fobjs: the checkpoint file objects in the store (not the file://
# driver's .attrs sidecars), count and bytes (%.0f: mawk's %d stops at 2^31).
fobjs() { find "$WORK/store" -name 'f-*' ! -name '*.attrs' -type f -printf '%s\n' | awk '{ n++; b += $1 } END { printf "%d %.0f\n", n, b }'; }
P5ROWS=()
P5MIN=()
P5WA=()
P5RES=()
for spec in $P5_MAT; do
	mat=${spec%%:*}
	run=$P5_RUN
	[[ $spec == *:* ]] && run=${spec#*:}
	ev=$P5/start-$mat.events
	start_cluster "$SRC" "$ev" "" -- "${SRCFLAGS[@]}" --materialize-interval "$mat" --snapshot-interval 1s
	t0=$(now_ms)
	for _ in $(seq 1200); do
		[ "$("$S" uploads -data "$SRC" -from "$t0" -to "$(now_ms)" | jq .snapshots)" -gt 0 ] && break
		sleep 0.5
	done
	read -r f0 fb0 < <(fobjs)
	"$S" scrape -urls "$METRICS" -names "$(IFS=,; echo "${STATE[*]}")" >"$P5/m0-$mat.json"
	w0=$(writes "$ev")
	bg "$S" sstwatch -data "$SRC" -every 1s >"$P5/sst-$mat.json"
	from=$(now_ms)
	log "part 5, --materialize-interval $mat: kvbench put --rate $P5_RATE for $run"
	bin/kvbench put --endpoints "$EP" --clients 16 --conns 4 --keyspace "$KEYS" --value-size 1024 --rate "$P5_RATE" \
		--duration "$run" --progress 0 --seed 5 --out "$P5/put-$mat.json" >"$P5/put-$mat.txt" 2>&1 || {
		echo "kvbench put (part 5, $mat) failed:" >&2
		tail -n 20 "$P5/put-$mat.txt" >&2
		exit 1
	}
	to=$(now_ms)
	bg_stop
	w1=$(writes "$ev")
	"$S" scrape -urls "$METRICS" -names "$(IFS=,; echo "${STATE[*]}")" >"$P5/m1-$mat.json"
	read -r f1 fb1 < <(fobjs)
	"$S" uploads -data "$SRC" -from "$from" -to "$to" -bucket 1m >"$P5/up-$mat.json"
	log "part 5 $mat: $(cat "$P5/up-$mat.json"); SSTs $(cat "$P5/sst-$mat.json"); load average $(loadavg)"
	secs=$(awk -v a="$from" -v b="$to" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
	ops=$(jq .ops "$P5/put-$mat.json")
	changed=$((ops * 1024))
	d() { awk -v a="$(scrape_sum "$P5/m0-$mat.json" "$1")" -v b="$(scrape_sum "$P5/m1-$mat.json" "$1")" 'BEGIN { printf "%.0f", b - a }'; }
	wal=$(d cutkv_wal_bytes_total)
	sst=$(jq .bytes "$P5/sst-$mat.json")
	U=$P5/up-$mat.json
	P5ROWS+=("$(jq -r --arg m "$mat" --arg s "$secs" --argjson ops "$ops" --argjson ch "$changed" --argjson nf "$((f1 - f0))" --argjson nb "$((fb1 - fb0))" \
		'"| \($m) | \($s) | \($ops) (\($ch / 1048576 * 10 | round / 10)) | \(.snapshots) | \(.bytes_uploaded / 1048576 * 10 | round / 10) | \(.other_bytes / 1048576 * 10 | round / 10) | \(.base_file_bytes / 1048576 * 10 | round / 10) (\(.with_files) snapshots) | \($nf) (\($nb / 1048576 * 10 | round / 10) MiB) / \(.base_files_reused) (\(.base_bytes_reused / 1048576 * 10 | round / 10) MiB) | \(.bytes_uploaded / ($s | tonumber) * 60 / 1048576 * 10 | round / 10) | **\(.bytes_uploaded / $ch * 100 | round / 100)** | \(.took_p50_s * 100 | round / 100) / \(.took_max_s * 100 | round / 100) |"' "$U")")
	P5MIN+=("- --materialize-interval $mat: $(jq -r '[.per_bucket[] / 1048576 * 10 | round / 10 | tostring] | join(" / ")' "$U") MiB")
	P5WA+=("| $mat | $(mib "$wal") | $(mib "$sst") ($(jq .files "$P5/sst-$mat.json") files) | $(d cutkv_state_flushes_total) / $(d cutkv_state_compactions_total) | $(mib $((w1 - w0))) | $(awk -v w="$wal" -v s="$sst" -v c="$changed" 'BEGIN { printf "%.1f / %.1f", w / (3 * c), (w + s) / (3 * c) }') | $(mib "$(scrape_sum "$P5/m1-$mat.json" cutkv_state_disk_bytes)") |")
	stop_cluster
	if [ "$P5_RESTORE" = 1 ]; then
		id=$(jq -r .newest "$U")
		R=$P5/restore-$mat
		mkdir -p "$R"
		log "part 5 $mat: restore $id on n1"
		t1=$(date +%s%N)
		if ! bin/kvnode restore --store "$STORE" --snapshot "$id" --data-dir "$R/n1" --id n1 --initial-cluster "$IC" \
			>"$R/restore.txt" 2>"$R/restore.log"; then
			echo "kvnode restore of $id on n1 failed:" >&2
			tail -n 20 "$R/restore.log" >&2
			exit 1
		fi
		took=$((($(date +%s%N) - t1) / 1000000))
		checked=$(sed -n 's/.*msg="checking every piece of the snapshot".* bytes=\([0-9]*\).*/\1/p' "$R/restore.log")
		rbytes=$(sed -n 's/.*msg="restore done".* bytes_read=\([0-9]*\).*/\1/p' "$R/restore.log")
		P5RES+=("| $mat | $id | $(awk -v t="$took" 'BEGIN { printf "%.2f", t / 1000 }') | $(mib "${checked:-0}") / $(mib "${rbytes:-0}") |")
		rm -rf "$R/n1"
	fi
done
echo "### Bytes uploaded per minute: snapshots every second, $P5_RATE puts/s of 1 KiB"
echo
echo "The cluster holding the $KEYS keys restarted with --snapshot-interval 1s (no pruning) and each --materialize-interval below (--materialize-bytes at its default, 64 MiB); once the first automatic snapshot was stored, kvbench put --rate $P5_RATE (16 clients, 1 KiB values, random existing keys) for the window. Changed: puts x 1 KiB. Snapshots: the \"snapshot created\" lines logged in the window; uploaded: all they wrote to the store, split into changelog pieces plus the bases' manifests, and checkpoint (SST) files; files: f-* objects new in the store in the window (their bytes) / files the window's snapshots found already stored (summed over snapshots)."
echo
echo "| --materialize-interval | window s | puts (MiB changed) | snapshots | MiB uploaded | changelog + base manifests MiB | SST files MiB (snapshots with files) | files uploaded / reused | MiB uploaded per minute | uploaded / changed | took p50 / max s |"
echo "|---|--:|--:|--:|--:|--:|--:|---|--:|--:|---|"
printf '%s\n' "${P5ROWS[@]}"
echo
echo "MiB uploaded in each minute of the window (the last one may be shorter):"
echo
printf '%s\n' "${P5MIN[@]}"
echo
echo "What the 3 nodes wrote to their disks in the window: WAL bytes (cutkv_wal_bytes_total), new SST files in the Pebble state dirs (flush and compaction outputs, last size seen), Pebble flushes / compactions (cutkv_state_*), every byte the processes wrote (/proc/PID/io write_bytes: WAL, Pebble, materializations and the snapshot store's files together). Amplification: per replica, WAL / changed and (WAL + SSTs) / changed. State on disk: cutkv_state_disk_bytes at the end, 3 nodes."
echo
echo "| --materialize-interval | WAL MiB | Pebble SSTs written MiB | flushes / compactions | process writes MiB | WAL / changed, (WAL + SSTs) / changed | state on disk MiB |"
echo "|---|--:|--:|--:|--:|---|--:|"
printf '%s\n' "${P5WA[@]}"
echo
if [ "${#P5RES[@]}" -gt 0 ]; then
	echo "Restore of n1 from the window's newest snapshot, cluster stopped (kvnode restore, whole process):"
	echo
	echo "| --materialize-interval | snapshot | restore s (n1) | MiB checked / read |"
	echo "|---|---|--:|--:|"
	printf '%s\n' "${P5RES[@]}"
	echo
fi
fi

[ -n "$CL_PID" ] && stop_cluster
echo "load average at the end: $(loadavg) ($(date -u '+%H:%M UTC'))"
