#!/usr/bin/env bash
# What trust costs and what a connection flood does (docs/benchmarks.md,
# "Trust: TLS cost and connection floods"), in two parts, on 127.0.0.1
# only, each cluster with data directories of its own under a temporary
# directory and ports of its own:
#
#   tls    Put throughput, latency and the nodes' CPU per Put of a 3-node
#          cluster in plaintext (A) and one with TLS everywhere (B: peer
#          mutual TLS, client TLS with client certificates required,
#          encrypted gossip), alternating A B A B (PAIRS pairs), each run
#          on a fresh cluster that is stopped after it: kvbench put with
#          the flags of the put comparison in docs/benchmarks.md (64
#          clients, 4 connections, 256 B values) and --metrics-url on the
#          three nodes.
#   flood  One node (a 1-node cluster, plaintext) with --max-connections
#          MAX_CONNS: bench/cmd/benchtrust flood times the Puts of a client
#          connected before, during and after a flood of FLOOD_CONNS
#          connection slots on its client port and as many on its peer
#          port (each held open until the node closes it, then dialed
#          again), reads /metrics (open and rejected connections) and
#          /healthz all along; then the script checks that the node is
#          still running and stops it (SIGTERM: it must exit 0).
#
# Then bench/cmd/benchtrust section writes the tables into DOC, between the
# markers of the section (appended with the next run number if missing;
# the text after the end marker is written by hand and kept).
#
# Environment:
#   RUN           measured duration of each kvbench run (default 20s)
#   WARMUP        kvbench warm-up (default 2s)
#   PAIRS         A B pairs in part tls (default 2)
#   PARTS         parts to run (default "tls flood")
#   MAX_CONNS     the flooded node's --max-connections (default 100)
#   FLOOD_CONNS   connection slots per flooded port (default 10 × MAX_CONNS)
#   FLOOD_PHASE   length of each flood phase: before, during, after (default
#                 15s: longer than the node's 10 s handshake timeout, so the
#                 connections it took are closed and dialed again once)
#   FLOOD_WORKERS Put workers of the client measured in the flood (default 8)
#   PORT_BASE     ports: plaintext cluster PORT_BASE+1..3 (client),
#                 +101.. (gossip), +201.. (HTTP), +301.. (peer); TLS
#                 cluster the same +1000, flooded node +2000 (default 17000,
#                 below the ports the Go tests pick, 22768-32767)
#   DOC           Markdown file for the section (default docs/benchmarks.md;
#                 none: do not write one)
#   KEEP          if set (not 0), keep the results directory (JSON, logs,
#                 data, certificates); it is also kept when a step fails
#
# It starts every process itself and stops each by its pid (a trap on
# EXIT stops whatever is still running). About 3 minutes with the
# defaults (4 runs of 22 s plus cluster starts and stops, 47 s of flood).
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${RUN:-20s}
WARMUP=${WARMUP:-2s}
PAIRS=${PAIRS:-2}
PARTS=${PARTS-tls flood}
MAX_CONNS=${MAX_CONNS:-100}
FLOOD_CONNS=${FLOOD_CONNS:-$((10 * MAX_CONNS))}
FLOOD_PHASE=${FLOOD_PHASE:-15s}
FLOOD_WORKERS=${FLOOD_WORKERS:-8}
PORT_BASE=${PORT_BASE:-17000}
DOC=${DOC:-docs/benchmarks.md}
case ${KEEP:-} in "" | 0) KEEP=0 ;; *) KEEP=1 ;; esac
CLIENTS=64 # the put comparison's (bench-compare.sh COMMON)
CONNS=4
VALUE=256

usage_error() {
	echo "bench-trust: $*" >&2
	exit 2
}
positive() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -gt 0 ]; }
for v in "$PAIRS" "$MAX_CONNS" "$FLOOD_CONNS" "$FLOOD_WORKERS" "$PORT_BASE"; do
	positive "$v" || usage_error "not a positive whole number: $v (PAIRS, MAX_CONNS, FLOOD_CONNS, FLOOD_WORKERS, PORT_BASE)"
done
for v in "$RUN" "$WARMUP" "$FLOOD_PHASE"; do
	[[ $v =~ ^[0-9]+(ms|s|m)$ ]] || usage_error "not a duration like 20s: $v (RUN, WARMUP, FLOOD_PHASE)"
done
for p in $PARTS; do
	case $p in tls | flood) ;; *) usage_error "unknown part $p in PARTS (want tls or flood)" ;; esac
done
has_part() { [[ " $PARTS " == *" $1 "* ]]; }
[ "$((PORT_BASE + 2303))" -lt 32768 ] || usage_error "PORT_BASE $PORT_BASE: its ports would reach the ephemeral range (32768 and up)"
PLAIN_BASE=$PORT_BASE
TLS_BASE=$((PORT_BASE + 1000))
FLOOD_BASE=$((PORT_BASE + 2000))

# The flood holds 2 × FLOOD_CONNS connections; Go raises the soft file
# limit to the hard one, so the hard limit is what counts.
ULIMIT_SOFT=$(ulimit -n)
ULIMIT_HARD=$(ulimit -Hn)
echo "ulimit -n: $ULIMIT_SOFT (hard $ULIMIT_HARD)"
if has_part flood && [ "$ULIMIT_HARD" != unlimited ] && [ "$ULIMIT_HARD" -lt $((2 * FLOOD_CONNS + FLOOD_WORKERS + 128)) ]; then
	echo "bench-trust: the flood needs $((2 * FLOOD_CONNS + FLOOD_WORKERS + 128)) file descriptors, the hard limit is $ULIMIT_HARD (ulimit -Hn): lower FLOOD_CONNS or raise it" >&2
	exit 1
fi

# check_ports BASE COUNT: fails, naming them, when a port of those nodes
# is taken.
check_ports() {
	local base=$1 count=$2 i off busy=""
	for i in $(seq "$count"); do
		for off in 0 100 200 300; do
			if (exec 3<>"/dev/tcp/127.0.0.1/$((base + off + i))") 2>/dev/null; then busy+=" $((base + off + i))"; fi
		done
	done
	if [ -n "$busy" ]; then
		echo "bench-trust: ports in use on 127.0.0.1:$busy; stop what uses them or set PORT_BASE" >&2
		exit 1
	fi
}
has_part tls && check_ports "$PLAIN_BASE" 3 && check_ports "$TLS_BASE" 3
has_part flood && check_ports "$FLOOD_BASE" 1

make build
OUT=$(mktemp -d /tmp/cutkv-bench-trust.XXXXXX)
go build -C bench -o "$OUT/benchtrust" ./cmd/benchtrust
START_EPOCH=$(date +%s)
STARTED=$(date -u '+%Y-%m-%d %H:%M')
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

PIDS=()     # every node started and not yet waited for
FLOOD_PID="" # benchtrust flood while it runs

# stop_pids PID...: SIGTERM to each, SIGKILL to those still running after
# 20 s; sets STOP_STATUS to the exit statuses ("0 0 0").
stop_pids() {
	local p
	STOP_STATUS=""
	for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
	for _ in $(seq 200); do
		local alive=0
		for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ "$alive" = 0 ] && break
		sleep 0.1
	done
	for p in "$@"; do
		if kill -0 "$p" 2>/dev/null; then
			echo "bench-trust: pid $p did not stop within 20 s: SIGKILL" >&2
			kill -KILL "$p" 2>/dev/null || true
		fi
	done
	for p in "$@"; do
		local rc=0
		wait "$p" 2>/dev/null || rc=$?
		STOP_STATUS+="${STOP_STATUS:+ }$rc"
	done
	local keep=()
	for p in "${PIDS[@]}"; do
		[[ " $* " == *" $p "* ]] || keep+=("$p")
	done
	PIDS=("${keep[@]}")
}

cleanup() {
	local rc=$?
	set +e
	if [ -n "$FLOOD_PID" ]; then
		kill -TERM "$FLOOD_PID" 2>/dev/null
		wait "$FLOOD_PID" 2>/dev/null
	fi
	[ "${#PIDS[@]}" -gt 0 ] && stop_pids "${PIDS[@]}"
	if [ "$rc" != 0 ] || [ "$KEEP" = 1 ]; then
		echo "results, logs and data kept in $OUT" >&2
	else
		rm -rf "$OUT"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# log and fail
# shellcheck source=scripts/lib/sys.sh
. scripts/lib/sys.sh

CERTS=$OUT/certs
make_certs() {
	bin/kvctl cert create-ca --dir "$CERTS" >/dev/null
	for i in 1 2 3; do
		bin/kvctl cert create-node "n$i" --hosts 127.0.0.1,localhost --dir "$CERTS" --ca-dir "$CERTS" >/dev/null
	done
	bin/kvctl cert create-client bench --role write --dir "$CERTS" --ca-dir "$CERTS" >/dev/null
	head -c 32 /dev/urandom | base64 >"$CERTS/gossip.key"
	chmod 600 "$CERTS/gossip.key"
}

# start_nodes NAME BASE COUNT MODE [FLAGS...]: nodes n1..nCOUNT of a new
# cluster in $OUT/NAME (MODE plain or tls), ports as PORT_BASE says,
# with FLAGS; waits until every node printed "ready". Sets NODE_PIDS.
start_nodes() {
	local name=$1 base=$2 count=$3 mode=$4
	shift 4
	local dir=$OUT/$name i j join initial=""
	for i in $(seq "$count"); do initial+="${initial:+,}n$i=127.0.0.1:$((base + 300 + i))"; done
	NODE_PIDS=()
	for i in $(seq "$count"); do
		join=""
		for j in $(seq "$count"); do
			if [ "$j" != "$i" ]; then join+="${join:+,}127.0.0.1:$((base + 100 + j))"; fi
		done
		mkdir -p "$dir/n$i"
		local f=(--id "n$i" --data-dir "$dir/n$i"
			--grpc-addr "127.0.0.1:$((base + i))" --peer-addr "127.0.0.1:$((base + 300 + i))"
			--gossip-addr "127.0.0.1:$((base + 100 + i))" --http-addr "127.0.0.1:$((base + 200 + i))"
			--initial-cluster "$initial" --initial-cluster-token "bench-trust-$name" --cut-interval 0)
		[ -n "$join" ] && f+=(--join "$join")
		if [ "$mode" = tls ]; then
			f+=(--peer-cert-file "$CERTS/n$i.crt" --peer-key-file "$CERTS/n$i.key" --peer-trusted-ca-file "$CERTS/ca.crt"
				--cert-file "$CERTS/n$i.crt" --key-file "$CERTS/n$i.key" --trusted-ca-file "$CERTS/ca.crt"
				--gossip-key-file "$CERTS/gossip.key")
		fi
		bin/kvnode "${f[@]}" "$@" >"$dir/n$i.out" 2>"$dir/n$i.log" &
		PIDS+=("$!")
		NODE_PIDS+=("$!")
	done
	for _ in $(seq 300); do
		local ready=0
		for i in $(seq "$count"); do
			grep -qs '^ready' "$dir/n$i.out" && ready=$((ready + 1))
			kill -0 "${NODE_PIDS[$((i - 1))]}" 2>/dev/null || fail "node n$i of $name exited while starting" "$dir/n$i.log"
		done
		[ "$ready" = "$count" ] && return 0
		sleep 0.2
	done
	fail "$name: not every node was ready within 60 s" "$dir/n1.log"
}

endpoints() { # BASE COUNT OFFSET: 127.0.0.1:BASE+OFFSET+1,...
	local i s=""
	for i in $(seq "$2"); do s+="${s:+,}127.0.0.1:$(($1 + $3 + i))"; done
	echo "$s"
}

KVBENCH_FLAGS=(--clients "$CLIENTS" --conns "$CONNS" --value-size "$VALUE" --duration "$RUN" --warmup "$WARMUP" --progress 0)
TLS_CONFIRMED=""

part_tls() {
	make_certs
	local i kind base dir
	for i in $(seq "$PAIRS"); do
		for kind in plain tls; do
			base=$PLAIN_BASE
			[ "$kind" = tls ] && base=$TLS_BASE
			dir=$OUT/$kind-$i
			start_nodes "$kind-$i" "$base" 3 "$kind"
			# The nodes say what they run with in their "node started" line.
			local n on=0 want=false
			[ "$kind" = tls ] && want=true
			for n in 1 2 3; do
				grep -q "msg=\"node started\".*peer_tls=$want client_tls=$want client_certs=$want gossip_encrypted=$want" "$dir/n$n.log" && on=$((on + 1))
			done
			[ "$on" = 3 ] || fail "$kind-$i: not every node logged peer_tls=$want client_tls=$want client_certs=$want gossip_encrypted=$want" "$dir/n1.log"
			TLS_CONFIRMED="every B node logged \`peer_tls=true client_tls=true client_certs=true gossip_encrypted=true\`, every A node the same \`=false\`"
			local tls_flags=() metrics
			metrics=$(endpoints "$base" 3 200)
			if [ "$kind" = tls ]; then
				tls_flags=(--cacert "$CERTS/ca.crt" --cert "$CERTS/bench.crt" --key "$CERTS/bench.key")
				metrics=$(echo "$metrics" | sed 's|[^,]*|https://&|g') # client TLS makes the HTTP port TLS too
			fi
			log "tls part: pass $i $kind"
			if ! bin/kvbench put --endpoints "$(endpoints "$base" 3 0)" --metrics-url "$metrics" \
				"${KVBENCH_FLAGS[@]}" --seed "$i" "${tls_flags[@]}" --out "$OUT/$kind-$i.json" >"$OUT/$kind-$i.txt" 2>&1; then
				fail "kvbench put on $kind-$i failed" "$OUT/$kind-$i.txt" "$dir/n1.log"
			fi
			stop_pids "${NODE_PIDS[@]}"
			[ "$STOP_STATUS" = "0 0 0" ] || echo "bench-trust: warning: $kind-$i nodes exited with $STOP_STATUS" >&2
			log "tls part: pass $i $kind: $(grep -E '^put ' "$OUT/$kind-$i.txt" | tr -s ' ') (op ops ops/s p50 p90 p99 ...); $(grep '^node CPU' "$OUT/$kind-$i.txt")"
			[ "$KEEP" = 1 ] || rm -rf "$dir"/n[0-9]*/ # the data dirs; the logs stay until the end
		done
	done
}

FLOOD_ALIVE="" FLOOD_EXIT="" FLOOD_LOG="" FLOOD_CMD=""
part_flood() {
	local dir=$OUT/flood
	start_nodes flood "$FLOOD_BASE" 1 plain --max-connections "$MAX_CONNS"
	local pid=${NODE_PIDS[0]}
	local args=(flood -client "127.0.0.1:$((FLOOD_BASE + 1))" -peer "127.0.0.1:$((FLOOD_BASE + 301))" -http "127.0.0.1:$((FLOOD_BASE + 201))"
		-conns "$FLOOD_CONNS" -phase "$FLOOD_PHASE" -workers "$FLOOD_WORKERS")
	FLOOD_CMD="benchtrust ${args[*]}"
	log "flood part: $FLOOD_CMD"
	"$OUT/benchtrust" "${args[@]}" >"$OUT/flood.json" 2> >(tee "$OUT/flood.err" | sed -u 's/^/    /' >&2) &
	FLOOD_PID=$!
	local rc=0
	wait "$FLOOD_PID" || rc=$?
	FLOOD_PID=""
	[ "$rc" = 0 ] || fail "benchtrust flood failed (status $rc)" "$OUT/flood.err" "$dir/n1.log"
	if kill -0 "$pid" 2>/dev/null; then
		FLOOD_ALIVE="still running (pid $pid checked once the flood ended)"
	else
		FLOOD_ALIVE="**not running**"
	fi
	stop_pids "$pid"
	if [ "$STOP_STATUS" = 0 ]; then
		FLOOD_EXIT="exit status 0, log line \"stopped\" (WAL closed)"
		grep -q 'msg=stopped' "$dir/n1.log" || FLOOD_EXIT="exit status 0, but no \"stopped\" line in its log"
	else
		FLOOD_EXIT="**exit status $STOP_STATUS**"
	fi
	local errors warns
	errors=$(grep -c 'level=ERROR' "$dir/n1.log" || true)
	warns=$(grep -c 'level=WARN' "$dir/n1.log" || true)
	FLOOD_LOG="$errors ERROR and $warns WARN lines"
	if [ "$errors" != 0 ]; then
		FLOOD_LOG+=" (first ERROR: \`$(grep -m1 'level=ERROR' "$dir/n1.log" | cut -c1-200 | tr '|`' '/ ')\`)"
	fi
	if grep -qi 'level=ERROR.*wal\|wal.*level=ERROR' "$dir/n1.log"; then FLOOD_LOG+=", some about the WAL"; else FLOOD_LOG+=", none about the WAL"; fi
	log "flood part: node $FLOOD_ALIVE; $FLOOD_EXIT; log: $FLOOD_LOG"
}

has_part tls && part_tls
has_part flood && part_flood

dirty=$(git diff --name-only HEAD 2>/dev/null | paste -sd, - | sed 's/,/, /g')
{
	echo "started=$STARTED"
	echo "ended=$(date -u '+%H:%M')"
	echo "command=RUN=$RUN PAIRS=$PAIRS PARTS=\"$PARTS\" MAX_CONNS=$MAX_CONNS FLOOD_CONNS=$FLOOD_CONNS FLOOD_PHASE=$FLOOD_PHASE scripts/bench-trust.sh"
	echo "commit=$(git rev-parse --short HEAD)"
	echo "dirty=$dirty"
	echo "nproc=$(nproc)"
	echo "cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
	echo "kernel=$(uname -r)"
	echo "load_start=$LOAD_START"
	echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)"
	echo "ulimit_soft=$ULIMIT_SOFT"
	echo "ulimit_hard=$ULIMIT_HARD"
	echo "part_tls=$(has_part tls && echo 1 || echo 0)"
	echo "part_flood=$(has_part flood && echo 1 || echo 0)"
	echo "pairs=$PAIRS"
	echo "clients=$CLIENTS"
	echo "kvbench=bin/kvbench put ${KVBENCH_FLAGS[*]} --metrics-url NODES --seed PASS"
	echo "plain_client=$(endpoints "$PLAIN_BASE" 3 0 | sed 's/,/, /g')"
	echo "tls_client=$(endpoints "$TLS_BASE" 3 0 | sed 's/,/, /g')"
	echo "tls_confirmed=$TLS_CONFIRMED"
	echo "max_conns=$MAX_CONNS"
	echo "flood_cmd=$FLOOD_CMD"
	echo "flood_alive=$FLOOD_ALIVE"
	echo "flood_exit=$FLOOD_EXIT"
	echo "flood_log=$FLOOD_LOG"
} >"$OUT/meta.txt"
log "all parts took $(($(date +%s) - START_EPOCH))s"

if [ "$DOC" != none ]; then
	"$OUT/benchtrust" section -results "$OUT" -doc "$DOC" || fail "benchtrust section could not write $DOC"
	sed -n '/^<!-- bench-trust:begin -->$/,/^<!-- bench-trust:end -->$/p' "$DOC"
fi
