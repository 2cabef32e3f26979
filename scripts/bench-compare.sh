#!/usr/bin/env bash
# Measures cutkv side by side with etcd (make bench-compare): for each
# workload, four runs alternating A B A B (A = a 3-node cutkv cluster,
# B = a 3-member etcd cluster, both on loopback, both fsyncing). Each
# run starts its system fresh (new data directories) and stops it after,
# so only the system being measured runs. Then it measures what cutkv's
# own features cost (COSTS, below), and bench/cmd/benchplot writes the Markdown
# section (the etcd comparison and one subsection per cost part) and one
# SVG chart per workload and per cost part.
#
# Environment:
#   RUN        duration of each measured run (default 20s)
#   WORKLOADS  workloads to run against etcd, among put get txn bank
#              (default "put get txn"; "" or none: skip the comparison)
#   COSTS      cost parts to run, in this order (default all five:
#              "ab cuts upload restart memory"; "" or none: skip them):
#     ab       throughput with cuts and snapshots (B) vs without (A):
#              cutkv alone, A B A B per workload, each run on a fresh
#              run-local.sh cluster; A: --cut-interval 0; B: the nodes
#              with --snapshot-interval SNAP_EVERY --snapshot-keep 100
#              (into run-local.sh's shared --snapshot-store) and kvbench
#              --cut-interval CUT_EVERY. After each B run: the nodes'
#              snapshot metrics and kvctl snapshot list.
#              AB_WORKLOADS (default "put txn"; txn: --txn-keys cross),
#              AB_PAIRS (default 2), CUT_EVERY (default 1s),
#              SNAP_EVERY (default 10s); the kvbench flags of the etcd
#              comparison (RUN, 64 clients, 4 conns, 256 B values).
#     cuts     cut completion on an idle fresh cluster: IDLE_CUTS cuts
#              (default 20), one a second (benchsnap cuts). The table
#              also shows the B runs' cuts.
#     upload   bytes uploaded per incremental snapshot vs bytes written:
#              one cluster (automatic materialization off), UPLOAD_KEYS
#              keys of 1 KiB (default 16384), a full snapshot, then for
#              each X of UPLOAD_SIZES (MiB, default "0 1 4 16 64") X MiB
#              of 1 KiB values written to existing keys and an
#              incremental snapshot (benchsnap create).
#     restart  time to ready after N writes, for each N of
#              RESTART_WRITES (default "25000 50000 100000 200000"): a
#              fresh cluster with the default materialization settings,
#              kvbench put --total N, all nodes stopped and restarted
#              (bench/cmd/benchckpt cluster times them).
#     memory   heap in use and RSS per node after a forced GC, on one
#              cluster, empty and then holding each N of MEM_KEYS keys
#              (increasing; default "125000 250000 500000 1000000";
#              MEM_KEY_SIZE default 16, MEM_VALUE_SIZE default 256 bytes;
#              written once each by benchsnap fill).
#   DOC        the Markdown file whose section "Side by side with etcd
#              (make bench-compare)" benchplot replaces, or appends if it
#              is missing (default docs/benchmarks.md)
#   IMGDIR     where the SVG charts go (default docs/img)
#   KEEP       if set (not 0), the results directory (JSON, logs, data)
#              is kept; it is also kept when a step fails
#
# A quick try (about 3 minutes): RUN=3s WORKLOADS=put AB_WORKLOADS=put
# AB_PAIRS=1 IDLE_CUTS=5 UPLOAD_KEYS=1000 UPLOAD_SIZES="0 1 2"
# RESTART_WRITES="2000 4000" MEM_KEYS="5000 10000" DOC=/tmp/b.md
# IMGDIR=/tmp/img scripts/bench-compare.sh
#
# Runs etcd as built by make etcd (bin/etcd: the v3.7.x server that
# bench/go.mod requires, from the Go module proxy) when WORKLOADS is not
# empty; ETCD=/path/to/etcd runs another build. Not part of make test or CI: the comparison
# takes about 2 minutes per workload, the cost parts with their defaults
# about 15 minutes on a 2-core machine (ab 4, cuts 0.5, upload 1,
# restart 3, memory 6; memory and restart scale with the write rate).
# Needs the ports 7001-7003, 7101-7103, 7201-7203 (and etcd's 2379-2380,
# 22379-22380, 32379-32380) free, and checks first. Where other people
# run clusters on those ports, a network namespace of its own avoids
# both sides' failures (as root):
#   unshare -n sh -c 'ip link set lo up && scripts/bench-compare.sh'
# Each long step prints a progress line (kvbench and benchsnap fill every
# 10 s); on a failure the script says which step failed, shows the end of
# its output and keeps the results directory.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${RUN:-20s}
WORKLOADS=${WORKLOADS-put get txn}
COSTS=${COSTS-ab cuts upload restart memory}
[ "$WORKLOADS" = none ] && WORKLOADS=""
[ "$COSTS" = none ] && COSTS=""
AB_WORKLOADS=${AB_WORKLOADS:-put txn}
AB_PAIRS=${AB_PAIRS:-2}
CUT_EVERY=${CUT_EVERY:-1s}
SNAP_EVERY=${SNAP_EVERY:-10s}
SNAP_KEEP=100
IDLE_CUTS=${IDLE_CUTS:-20}
UPLOAD_KEYS=${UPLOAD_KEYS:-16384}
UPLOAD_SIZES=${UPLOAD_SIZES:-0 1 4 16 64}
UPLOAD_VALUE=1024
RESTART_WRITES=${RESTART_WRITES:-25000 50000 100000 200000}
MEM_KEYS=${MEM_KEYS:-125000 250000 500000 1000000}
MEM_KEY_SIZE=${MEM_KEY_SIZE:-16}
MEM_VALUE_SIZE=${MEM_VALUE_SIZE:-256}
IMGDIR=${IMGDIR:-docs/img}
DOC=${DOC:-docs/benchmarks.md}
case ${KEEP:-} in "" | 0) KEEP=0 ;; *) KEEP=1 ;; esac
COMMON=(--duration "$RUN" --warmup 2s --clients 64 --conns 4 --progress 0)

usage_error() {
	echo "bench-compare: $*" >&2
	exit 2
}
for w in $WORKLOADS; do
	case $w in put | get | txn | bank) ;; *) usage_error "unknown workload $w in WORKLOADS (want put, get, txn or bank)" ;; esac
done
for p in $COSTS; do
	case $p in ab | cuts | upload | restart | memory) ;; *) usage_error "unknown part $p in COSTS (want ab, cuts, upload, restart or memory)" ;; esac
done
for w in $AB_WORKLOADS; do
	case $w in put | txn) ;; *) usage_error "unknown workload $w in AB_WORKLOADS (want put or txn)" ;; esac
done
positive() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -gt 0 ]; }
for v in "$AB_PAIRS" "$IDLE_CUTS" "$UPLOAD_KEYS" "$MEM_KEY_SIZE" "$MEM_VALUE_SIZE" $RESTART_WRITES $MEM_KEYS; do
	positive "$v" || usage_error "not a positive whole number: $v (AB_PAIRS, IDLE_CUTS, UPLOAD_KEYS, RESTART_WRITES, MEM_KEYS, MEM_KEY_SIZE, MEM_VALUE_SIZE)"
done
for v in $UPLOAD_SIZES; do
	[[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage_error "not a size in MiB: $v (UPLOAD_SIZES)"
done
prev=0
for n in $MEM_KEYS; do
	[ "$n" -gt "$prev" ] || usage_error "MEM_KEYS must increase: $MEM_KEYS"
	prev=$n
done
has_cost() { [[ " $COSTS " == *" $1 "* ]]; }

ETCD=${ETCD:-}
ETCD_BUILD="ETCD=$ETCD"
if [ -n "$WORKLOADS" ] && [ -z "$ETCD" ]; then
	ETCD_BUILD="built by \`make etcd\` from the Go module proxy"
	echo "building etcd from the Go module proxy (make etcd)"
	make -s etcd || { echo "bench-compare: make etcd failed (it needs the Go module proxy); or give ETCD=/path/to/etcd" >&2; exit 1; }
	ETCD=$PWD/bin/etcd
fi
export ETCD # start_etcd runs it in a shell of its own

# check_ports PORT...: fails, naming them, when some are taken (another
# cluster is running on this machine).
check_ports() {
	local p busy=""
	for p in "$@"; do
		if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then busy+=" $p"; fi
	done
	if [ -n "$busy" ]; then
		echo "bench-compare: ports in use on 127.0.0.1:$busy (another cluster is running?); stop it and retry" >&2
		exit 1
	fi
}
check_ports 7001 7002 7003 7101 7102 7103 7201 7202 7203
[ -z "$WORKLOADS" ] || check_ports 2379 2380 22379 22380 32379 32380

make -s build
OUT=$(mktemp -d /tmp/cutkv-bench-compare.XXXXXX)
SYS_PID=""
# The cost parts run their clusters under bench/cmd/benchckpt's supervisor
# with scripts/lib/cluster.sh (WORK and B are its inputs); its cleanup
# stops them and removes WORK (= OUT) unless KEEP=1 or a step failed.
WORK=$OUT
B=$OUT/benchckpt
S=$OUT/benchsnap
# shellcheck source=scripts/lib/cluster.sh
. scripts/lib/cluster.sh

# shellcheck source=scripts/lib/sys.sh
. scripts/lib/sys.sh
compare_cleanup() {
	local rc=$?
	set +e # a failing step here must not end the cleanup
	stop_sys
	(exit "$rc")
	cleanup # scripts/lib/cluster.sh's, with the script's exit status
}
trap compare_cleanup EXIT

# log and fail: scripts/lib/sys.sh, sourced above.

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
METRICS=127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203
ETCD_EP=127.0.0.1:2379,127.0.0.1:22379,127.0.0.1:32379
ETCD_CLUSTER=e1=http://127.0.0.1:2380,e2=http://127.0.0.1:22380,e3=http://127.0.0.1:32380

# start_cutkv [FLAGS]: scripts/run-local.sh's 3 nodes with
# CUTKV_RUN_FLAGS=FLAGS (default "--cut-interval 0": no cuts).
start_cutkv() {
	mkdir -p "$OUT/data"
	CUTKV_DATA="$OUT/data" CUTKV_RUN_FLAGS="${1:---cut-interval 0}" setsid scripts/run-local.sh >"$OUT/data/run.log" 2>&1 &
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
			"$ETCD" --name "e$i" --data-dir "$0/e$i" \
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
	local ep=$CUTKV_EP metrics=127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203
	[ "$t" = etcd ] && ep=$ETCD_EP metrics=127.0.0.1:2379,127.0.0.1:22379,127.0.0.1:32379
	"start_$t"
	echo "$(date -u +%H:%M:%S) $w $t run $i"
	if ! bin/kvbench "$w" --target "$t" --endpoints "$ep" --metrics-url "$metrics" "${COMMON[@]}" "${args[@]}" --seed "$i" \
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

# ---- The cost parts (COSTS). Results go to $C, as bench/cmd/benchplot's type
# Costs describes; each part writes the commands it ran to
# $C/PART/command.txt.
C=$OUT/costs
NOMAT=(--materialize-interval 24h --materialize-bytes 1000000000000)

# kvbench_to FILE WHAT ARGS...: bin/kvbench ARGS with its JSON result in
# FILE.json, its output in FILE.txt and its stderr (progress lines, if
# any, are also shown) in FILE.err.
kvbench_to() {
	local f=$1 what=$2
	shift 2
	if ! bin/kvbench "$@" --out "$f.json" >"$f.txt" 2> >(tee "$f.err" | sed -u 's/^/    /' >&2); then
		fail "$what: kvbench failed" "$f.txt" "$f.err"
	fi
}
# helper_to FILE WHAT CMD...: a helper's stdout to FILE, its stderr shown
# (and kept in FILE.err); a failure stops the script.
helper_to() {
	local f=$1 what=$2
	shift 2
	if ! "$@" >"$f" 2> >(tee "$f.err" | sed -u 's/^/    /' >&2); then
		fail "$what failed (its messages are above); output: $(cat "$f" 2>/dev/null)"
	fi
}
note_cmd() { # PART LINE: one line of the part's command.txt
	echo "$2" >>"$C/$1/command.txt"
}

cost_ab() {
	local D=$C/ab w i m f flags args
	mkdir -p "$D"
	note_cmd ab "# per workload W in: $AB_WORKLOADS; A then B, $AB_PAIRS times, each run on a fresh cluster"
	note_cmd ab "A: CUTKV_RUN_FLAGS=\"--cut-interval 0\" scripts/run-local.sh"
	note_cmd ab "B: CUTKV_RUN_FLAGS=\"--cut-interval 0 --snapshot-interval $SNAP_EVERY --snapshot-keep $SNAP_KEEP\" scripts/run-local.sh"
	note_cmd ab "bin/kvbench W --target cutkv ${COMMON[*]} --value-size 256 --seed PASS [--txn-keys cross for txn] [B: --cut-interval $CUT_EVERY]"
	note_cmd ab "after B: benchsnap scrape -names cutkv_snapshot_duration_seconds,cutkv_snapshot_uploaded_bytes; bin/kvctl snapshot list -o json"
	for w in $AB_WORKLOADS; do
		for i in $(seq "$AB_PAIRS"); do
			for m in A B; do
				f=$D/$w-$i-$m
				flags="--cut-interval 0"
				args=(--value-size 256)
				[ "$w" = txn ] && args+=(--txn-keys cross)
				if [ "$m" = B ]; then
					flags+=" --snapshot-interval $SNAP_EVERY --snapshot-keep $SNAP_KEEP"
					args+=(--cut-interval "$CUT_EVERY")
				fi
				start_cutkv "$flags" || fail "costs ab: cutkv did not start ($w pass $i $m)"
				log "costs ab: $w pass $i $m"
				kvbench_to "$f" "costs ab: $w pass $i $m" "$w" --target cutkv --endpoints "$CUTKV_EP" "${COMMON[@]}" "${args[@]}" --seed "$i"
				if [ "$m" = B ]; then
					helper_to "$f.metrics.json" "costs ab: scraping the snapshot metrics ($w pass $i)" \
						"$S" scrape -urls "$METRICS" -names cutkv_snapshot_duration_seconds,cutkv_snapshot_uploaded_bytes
					helper_to "$f.snapshots.json" "costs ab: kvctl snapshot list ($w pass $i)" \
						bin/kvctl snapshot list -o json --endpoints "$CUTKV_EP"
				fi
				stop_sys
				log "costs ab: $w pass $i $m: $("$B" summary "$f.json")$([ "$m" = B ] && grep -h '^cuts every' "$f.txt" | sed 's/^/; /')"
			done
		done
	done
}

cost_cuts() {
	local D=$C/cuts
	mkdir -p "$D"
	note_cmd cuts "benchckpt cluster (3 fresh nodes, default flags); sleep 5"
	note_cmd cuts "benchsnap cuts -n $IDLE_CUTS -every 1s"
	start_cluster "$D/data" "$D/start.events" "" --
	# Groups often change leader in the first seconds after "ready".
	sleep 5
	log "costs cuts: $IDLE_CUTS cuts on an idle cluster"
	helper_to "$D/idle.json" "costs cuts: cuts on the idle cluster" "$S" cuts -endpoints "$CUTKV_EP" -n "$IDLE_CUTS" -every 1s
	stop_cluster
	log "costs cuts: $(cat "$D/idle.json")"
	[ "$KEEP" = 1 ] || rm -rf "$D/data"
}

cost_upload() {
	local D=$C/upload x n seed=2
	mkdir -p "$D"
	local put=(--endpoints "$CUTKV_EP" --clients 64 --conns 4 --keyspace "$UPLOAD_KEYS" --value-size "$UPLOAD_VALUE" --progress 10s)
	note_cmd upload "benchckpt cluster -- ${NOMAT[*]} --snapshot-store file://STORE; sleep 5"
	note_cmd upload "bin/kvbench get ${put[*]} --total 1 --seed 1    # the preload writes the $UPLOAD_KEYS keys"
	note_cmd upload "benchsnap create -full"
	note_cmd upload "for X in $UPLOAD_SIZES (MiB): bin/kvbench put ${put[*]} --total X*1024 --seed N; benchsnap create"
	mkdir -p "$D/store"
	start_cluster "$D/data" "$D/start.events" "" -- "${NOMAT[@]}" --snapshot-store "file://$D/store"
	sleep 5
	log "costs upload: writing $UPLOAD_KEYS keys of $UPLOAD_VALUE B"
	kvbench_to "$D/load" "costs upload: loading $UPLOAD_KEYS keys" get "${put[@]}" --total 1 --seed 1
	helper_to "$D/full.json" "costs upload: the full snapshot" "$S" create -endpoints "$CUTKV_EP" -full
	log "costs upload: full snapshot: $(cat "$D/full.json")"
	for x in $UPLOAD_SIZES; do
		n=$(awk -v x="$x" -v v="$UPLOAD_VALUE" 'BEGIN { printf "%d", x * 1048576 / v }')
		if [ "$n" -gt 0 ]; then
			log "costs upload: writing $x MiB ($n puts of $UPLOAD_VALUE B)"
			kvbench_to "$D/step-$x.put" "costs upload: writing $x MiB" put "${put[@]}" --total "$n" --seed "$seed"
			seed=$((seed + 1))
		fi
		helper_to "$D/step-$x.json" "costs upload: the incremental snapshot after $x MiB" "$S" create -endpoints "$CUTKV_EP"
		log "costs upload: after $x MiB: $(cat "$D/step-$x.json")"
	done
	stop_cluster
	[ "$KEEP" = 1 ] || rm -rf "$D/data" "$D/store"
}

cost_restart() {
	local D=$C/restart n data
	mkdir -p "$D"
	local put=(--endpoints "$CUTKV_EP" --clients 64 --conns 4 --keyspace 100000 --value-size 256 --progress 10s)
	note_cmd restart "for N in $RESTART_WRITES: benchckpt cluster (3 fresh nodes, default flags)"
	note_cmd restart "  bin/kvbench put ${put[*]} --total N --seed 1"
	note_cmd restart "  benchckpt applied > targets.json; stop all nodes (SIGTERM)"
	note_cmd restart "  benchckpt cluster -targets targets.json    # restart, timed per node: node started, ready, applied"
	for n in $RESTART_WRITES; do
		data=$D/data-$n
		start_cluster "$data" "$D/$n.start.events" "" --
		log "costs restart: $n writes"
		kvbench_to "$D/$n.put" "costs restart: $n writes" put "${put[@]}" --total "$n" --seed 1
		helper_to "$D/$n.targets.json" "costs restart: reading the applied indexes ($n writes)" "$B" applied -endpoints "$CUTKV_EP"
		stop_cluster
		printf 'wal %s\nmaterializations %s\n' "$(bytes "$data"/n*/wal)" "$(bytes "$data"/n*/materializations)" >"$D/$n.sizes"
		log "costs restart: $n writes: restarting"
		start_cluster "$data" "$D/$n.events" "$D/$n.targets.json" --
		stop_cluster
		log "costs restart: $n writes: ready $(node_times "$D/$n.events" ready) s, applied $(node_times "$D/$n.events" applied) s"
		[ "$KEEP" = 1 ] || rm -rf "$data"
	done
}

cost_memory() {
	local D=$C/memory n prev=0
	mkdir -p "$D"
	note_cmd memory "benchckpt cluster -- --pprof (3 fresh nodes, default flags and the pprof endpoints, which force the GC); sleep 5; benchsnap scrape -gc    # 0 keys"
	note_cmd memory "for N in $MEM_KEYS: benchsnap fill -from PREVIOUS_N -to N -key-size $MEM_KEY_SIZE -value-size $MEM_VALUE_SIZE -clients 64 -conns 4; benchsnap scrape -gc"
	start_cluster "$D/data" "$D/start.events" "" -- --pprof
	sleep 5
	helper_to "$D/0.json" "costs memory: scraping the empty cluster" "$S" scrape -urls "$METRICS" -gc
	for n in $MEM_KEYS; do
		log "costs memory: writing keys $prev to $n"
		helper_to "$D/$n.fill.json" "costs memory: writing keys $prev to $n" \
			"$S" fill -endpoints "$CUTKV_EP" -from "$prev" -to "$n" -key-size "$MEM_KEY_SIZE" -value-size "$MEM_VALUE_SIZE" -clients 64 -conns 4
		helper_to "$D/$n.json" "costs memory: scraping at $n keys" "$S" scrape -urls "$METRICS" -gc
		log "costs memory: $n keys: $(cat "$D/$n.fill.json")"
		prev=$n
	done
	stop_cluster
	[ "$KEEP" = 1 ] || rm -rf "$D/data"
}

costs_took=""
if [ -n "$COSTS" ]; then
	go build -C bench -o "$B" ./cmd/benchckpt
	go build -C bench -o "$S" ./cmd/benchsnap
	mkdir -p "$C"
	printf 'cut_interval=%s\nsnapshot_interval=%s\nsnapshot_keep=%s\nidle_cuts=%s\nidle_every=1s\n' \
		"$CUT_EVERY" "$SNAP_EVERY" "$SNAP_KEEP" "$IDLE_CUTS" >"$C/params"
	cstart=$(date +%s)
	for p in ab cuts upload restart memory; do
		has_cost "$p" || continue
		pstart=$(date +%s)
		log "costs: part $p"
		"cost_$p"
		log "costs: part $p took $(($(date +%s) - pstart))s"
	done
	costs_took="$(($(date +%s) - cstart))s"
fi

# The command lines as benchplot shows them.
knobs="WORKLOADS=\"$WORKLOADS\" COSTS=\"$COSTS\""
{ [ -n "$WORKLOADS" ] || has_cost ab; } && knobs="RUN=$RUN $knobs"
has_cost ab && knobs+=" AB_WORKLOADS=\"$AB_WORKLOADS\" AB_PAIRS=$AB_PAIRS CUT_EVERY=$CUT_EVERY SNAP_EVERY=$SNAP_EVERY"
has_cost cuts && knobs+=" IDLE_CUTS=$IDLE_CUTS"
has_cost upload && knobs+=" UPLOAD_KEYS=$UPLOAD_KEYS UPLOAD_SIZES=\"$UPLOAD_SIZES\""
has_cost restart && knobs+=" RESTART_WRITES=\"$RESTART_WRITES\""
has_cost memory && knobs+=" MEM_KEYS=\"$MEM_KEYS\" MEM_KEY_SIZE=$MEM_KEY_SIZE MEM_VALUE_SIZE=$MEM_VALUE_SIZE"
cmds="$knobs make bench-compare"
[ -n "$WORKLOADS" ] && cmds+="; each run: bin/kvbench WORKLOAD --target cutkv|etcd --metrics-url NODES ${COMMON[*]} --value-size 256 --seed N (txn on cutkv: --txn-keys cross)"
etcd_version=""
[ -n "$WORKLOADS" ] && etcd_version=$("$ETCD" --version | sed -n 's/^etcd Version: //p')
# The commit measured, and whether the work tree differed from it.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "unknown (not a git checkout)")
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	commit+=" with uncommitted changes in $(git status --porcelain --untracked-files=no | awk '{print $2}' | paste -sd, -)"
fi
plot=(--results "$OUT" --doc "$DOC" --imgdir "$IMGDIR" --etcd-version "$etcd_version" --etcd-build "$ETCD_BUILD" --commands "$cmds" --took "${took}s" --run "$RUN" --commit "$commit")
[ -n "$COSTS" ] && plot+=(--costs "$C" --costs-took "$costs_took")
bin/benchplot "${plot[@]}" || fail "benchplot could not write the section (results in $OUT)"
echo "bench-compare: section in $DOC, charts in $IMGDIR (measured runs took ${took}s${costs_took:+, cost parts $costs_took})"
