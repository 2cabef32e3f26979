#!/usr/bin/env bash
# A 3-node cutkv cluster on 127.0.0.1 (make run, make node-stop/node-start).
#
#   scripts/run-local.sh               start the 3 nodes and watch them in the
#                                      foreground; Ctrl-C (or SIGTERM) stops them
#   scripts/run-local.sh stop  [nN...] stop nodes (default: all), gracefully
#   scripts/run-local.sh start [nN...] start nodes (default: all that are down)
#                                      in the background, and wait until ready
#   scripts/run-local.sh status        which nodes run, with their pids
#
# Client gRPC 7001-7003, peer 7301-7303, gossip 7101-7103, HTTP 7201-7203
# (CUTKV_PORT_OFFSET=N adds N to every port), data under ./data/n1..n3, logs
# in ./data/nN/kvnode.log, the node's stdout (its ready line) in
# ./data/nN/kvnode.out, its pid in ./data/nN/kvnode.pid while it runs and
# its last exit status in ./data/nN/kvnode.exit (and every one, with the
# pid, in ./data/nN/kvnode.exits). The nodes take a
# consistent cut every 10s (--cut-interval; flags in $CUTKV_RUN_FLAGS come
# after it and win, e.g. CUTKV_RUN_FLAGS="--cut-interval 0" turns it off).
#
# In the foreground, a node that exits is reported with its exit status and
# the end of its log, and the others keep running: stop and start single
# nodes from another terminal to try failover. Ctrl-C stops every node
# running from the data dir (also ones started with `start`); a second
# Ctrl-C kills them at once. Running it again reuses the data.
#
# CUTKV_TLS=1 (make run-secure) makes a CA, node, client and gossip keys
# under $CUTKV_DATA/certs once, and runs with TLS everywhere: mutual TLS
# between peers, client certificates with roles, encrypted gossip. The
# settings of the last foreground run (TLS, flags, ports) are kept in
# $CUTKV_DATA/run-local.env, which stop and start read, so that
# `CUTKV_DATA=./data-secure scripts/run-local.sh start n2` starts n2 as
# make run-secure did.
set -u
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."
BIN=${BIN:-./bin}
DATA=${CUTKV_DATA:-./data}
NODES="1 2 3"
# How long stop waits for a node's graceful shutdown (kvnode's
# --shutdown-timeout is 10s) and start for its ready line.
STOP_WAIT=${CUTKV_STOP_WAIT:-20}
START_WAIT=${CUTKV_START_WAIT:-60}

cmd=${1:-run}
[ $# -gt 0 ] && shift

# The settings: a foreground run records them, stop and start read them.
envfile="$DATA/run-local.env"
if [ "$cmd" = run ]; then
	TLS=${CUTKV_TLS:-0}
	EXTRA_FLAGS=${CUTKV_RUN_FLAGS:-}
	OFFSET=${CUTKV_PORT_OFFSET:-0}
else
	saved_tls=0 saved_flags="" saved_offset=0
	if [ -f "$envfile" ]; then
		# shellcheck disable=SC1090
		. "$envfile"
	fi
	TLS=${CUTKV_TLS:-$saved_tls}
	EXTRA_FLAGS=${CUTKV_RUN_FLAGS:-$saved_flags}
	OFFSET=${CUTKV_PORT_OFFSET:-$saved_offset}
fi
port() { echo $(($1 + OFFSET)); }
initial="n1=127.0.0.1:$(port 7301),n2=127.0.0.1:$(port 7302),n3=127.0.0.1:$(port 7303)"
certs="$DATA/certs"

pidfile() { echo "$DATA/n$1/kvnode.pid"; }

# pid_of I: the pid of node I when it runs, else nothing (and status 1).
pid_of() {
	local p
	p=$(cat "$(pidfile "$1")" 2>/dev/null) || return 1
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null || return 1
	echo "$p"
}

# describe_status RC: "0", "1", "143 (killed by SIGTERM)".
describe_status() {
	if [ "$1" -gt 128 ] 2>/dev/null; then
		echo "$1 (killed by SIG$(kill -l $(($1 - 128)) 2>/dev/null || echo "?"))"
	else
		echo "$1"
	fi
}

# node_index nN: the index of a node name; fails naming the choices.
node_index() {
	case "$1" in
	n1 | 1) echo 1 ;; n2 | 2) echo 2 ;; n3 | 3) echo 3 ;;
	*)
		echo "run-local.sh: unknown node \"$1\": want n1, n2 or n3" >&2
		return 1
		;;
	esac
}

make_certs() {
	[ "$TLS" = 1 ] && [ ! -f "$certs/ca.crt" ] || return 0
	echo "making a local CA and certificates in $certs"
	"$BIN/kvctl" cert create-ca --dir "$certs" >/dev/null || return 1
	for i in $NODES; do
		"$BIN/kvctl" cert create-node "n$i" --hosts 127.0.0.1,localhost --dir "$certs" --ca-dir "$certs" >/dev/null || return 1
	done
	for role in admin write read; do
		"$BIN/kvctl" cert create-client "$role" --role "$role" --dir "$certs" --ca-dir "$certs" >/dev/null || return 1
	done
	head -c 32 /dev/urandom | base64 >"$certs/gossip.key"
	chmod 600 "$certs/gossip.key"
}

# launch I: starts node I detached from this script, in a session of its
# own (so neither a terminal's Ctrl-C nor the end of a `start` reaches
# it; the foreground run forwards Ctrl-C as SIGTERM), under a small
# watcher (this script's _node mode) that records its exit status and
# removes its pid file when it exits.
launch() {
	local i=$1
	mkdir -p "$DATA/n$i"
	rm -f "$(pidfile "$i")" "$DATA/n$i/kvnode.exit"
	CUTKV_DATA=$DATA BIN=$BIN CUTKV_TLS=$TLS CUTKV_RUN_FLAGS=$EXTRA_FLAGS CUTKV_PORT_OFFSET=$OFFSET \
		setsid "$SELF" _node "$i" </dev/null >/dev/null 2>&1 &
	# The pid file is there once the node is.
	for _ in $(seq 100); do
		[ -s "$(pidfile "$i")" ] && return 0
		[ -f "$DATA/n$i/kvnode.exit" ] && return 0
		sleep 0.05
	done
}

# run_node I: _node mode: runs node I, then records how it ended.
run_node() {
	local i=$1 join="" tls_flags="" j p rc
	for j in $NODES; do [ "$j" != "$i" ] && join="${join:+$join,}127.0.0.1:$(port $((7100 + j)))"; done
	if [ "$TLS" = 1 ]; then
		tls_flags="--peer-cert-file $certs/n$i.crt --peer-key-file $certs/n$i.key --peer-trusted-ca-file $certs/ca.crt"
		tls_flags="$tls_flags --cert-file $certs/n$i.crt --key-file $certs/n$i.key --trusted-ca-file $certs/ca.crt"
		tls_flags="$tls_flags --gossip-key-file $certs/gossip.key"
	fi
	# shellcheck disable=SC2086
	"$BIN/kvnode" --id "n$i" --data-dir "$DATA/n$i" \
		--grpc-addr "127.0.0.1:$(port $((7000 + i)))" --peer-addr "127.0.0.1:$(port $((7300 + i)))" \
		--gossip-addr "127.0.0.1:$(port $((7100 + i)))" --http-addr "127.0.0.1:$(port $((7200 + i)))" \
		--join "$join" --initial-cluster "$initial" --cut-interval 10s --snapshot-store "$store" $tls_flags $EXTRA_FLAGS \
		</dev/null >>"$DATA/n$i/kvnode.out" 2>>"$DATA/n$i/kvnode.log" &
	p=$!
	echo "$p" >"$(pidfile "$i").tmp" && mv "$(pidfile "$i").tmp" "$(pidfile "$i")"
	wait "$p"
	rc=$?
	echo "$rc" >"$DATA/n$i/kvnode.exit"
	echo "$p $rc" >>"$DATA/n$i/kvnode.exits"
	rm -f "$(pidfile "$i")"
}

# report_exit I [STATUS]: says that node I exited, with its status (by
# default its last one) and the end of its log.
report_exit() {
	local i=$1 rc=${2:-}
	[ -n "$rc" ] || rc=$(cat "$DATA/n$i/kvnode.exit" 2>/dev/null || echo unknown)
	echo "node n$i exited with status $(describe_status "$rc"); last log lines ($DATA/n$i/kvnode.log):" >&2
	tail -n 5 "$DATA/n$i/kvnode.log" 2>/dev/null | sed 's/^/  /' >&2
}

# stop_nodes SIGNAL I...: signals the nodes that run (SIGNAL none: only
# waits) and waits up to STOP_WAIT seconds for them to exit; fails if some
# did not.
stop_nodes() {
	local sig=$1 i p left
	shift
	for i in "$@"; do
		if [ "$sig" != none ] && p=$(pid_of "$i"); then kill "-$sig" "$p" 2>/dev/null; fi
	done
	for _ in $(seq $((STOP_WAIT * 10))); do
		left=""
		for i in "$@"; do pid_of "$i" >/dev/null && left="$left n$i"; done
		[ -z "$left" ] && return 0
		sleep 0.1
	done
	echo "run-local.sh: still running after ${STOP_WAIT}s:$left (kill -KILL \$(cat $DATA/nN/kvnode.pid) stops one at once)" >&2
	return 1
}

# wait_ready I SIZE: waits for node I's ready line past byte SIZE of its
# stdout, and prints it; fails, with the log's tail, if the node exits or
# START_WAIT seconds pass.
wait_ready() {
	local i=$1 size=$2 line
	for _ in $(seq $((START_WAIT * 10))); do
		line=$(tail -c +$((size + 1)) "$DATA/n$i/kvnode.out" 2>/dev/null | grep -m1 '^ready ')
		if [ -n "$line" ]; then
			echo "$line"
			return 0
		fi
		if ! pid_of "$i" >/dev/null && [ -f "$DATA/n$i/kvnode.exit" ]; then
			report_exit "$i"
			return 1
		fi
		sleep 0.1
	done
	echo "run-local.sh: n$i not ready after ${START_WAIT}s; see $DATA/n$i/kvnode.log" >&2
	return 1
}

out_size() { stat -c %s "$DATA/n$1/kvnode.out" 2>/dev/null || echo 0; }

# nodes_of ARGS...: the indexes named (default: all).
nodes_of() {
	if [ $# -eq 0 ]; then
		echo "$NODES"
		return 0
	fi
	local n out=""
	for n in "$@"; do out="$out $(node_index "$n")" || return 1; done
	echo "$out"
}

mkdir -p "$DATA/snapshots"
# One snapshot store for the whole local cluster: whichever node leads
# group 0 writes there, and every node uploads its partitions there.
store="file://$(cd "$DATA/snapshots" && pwd)"

case "$cmd" in
_node)
	i=$(node_index "${1:-}") || exit 2
	run_node "$i"
	exit 0
	;;
stop)
	idx=$(nodes_of "$@") || exit 2
	rc=0
	for i in $idx; do
		if ! p=$(pid_of "$i"); then
			echo "n$i is not running"
			continue
		fi
		echo "stopping n$i (pid $p)..."
		if stop_nodes TERM "$i"; then
			echo "n$i stopped with status $(describe_status "$(cat "$DATA/n$i/kvnode.exit" 2>/dev/null || echo unknown)")"
		else
			rc=1
		fi
	done
	exit $rc
	;;
start)
	idx=$(nodes_of "$@") || exit 2
	make_certs || exit 1
	rc=0
	for i in $idx; do
		if p=$(pid_of "$i"); then
			echo "n$i is running already (pid $p)"
			continue
		fi
		size=$(out_size "$i")
		launch "$i"
		echo "started n$i (pid $(cat "$(pidfile "$i")" 2>/dev/null || echo "?"); log $DATA/n$i/kvnode.log)"
		wait_ready "$i" "$size" || rc=1
	done
	exit $rc
	;;
status)
	for i in $NODES; do
		if p=$(pid_of "$i"); then
			echo "n$i running (pid $p, client 127.0.0.1:$(port $((7000 + i))))"
		elif [ -f "$DATA/n$i/kvnode.exit" ]; then
			echo "n$i stopped (last exit status $(describe_status "$(cat "$DATA/n$i/kvnode.exit")"))"
		else
			echo "n$i stopped"
		fi
	done
	exit 0
	;;
run) ;;
*)
	echo "usage: run-local.sh [run] | stop [nN...] | start [nN...] | status" >&2
	exit 2
	;;
esac

# The foreground run.
[ $# -eq 0 ] || {
	echo "usage: run-local.sh [run] | stop [nN...] | start [nN...] | status" >&2
	exit 2
}
for i in $NODES; do
	if p=$(pid_of "$i"); then
		echo "run-local.sh: n$i runs already from $DATA (pid $p): 'scripts/run-local.sh stop' first" >&2
		exit 1
	fi
done
make_certs || exit 1
printf 'saved_tls=%q\nsaved_flags=%q\nsaved_offset=%q\n' "$TLS" "$EXTRA_FLAGS" "$OFFSET" >"$envfile"

declare -A seen exits pids
exit_count() {
	if [ -f "$DATA/n$1/kvnode.exits" ]; then wc -l <"$DATA/n$1/kvnode.exits"; else echo 0; fi
}
stop_all() {
	trap - INT TERM
	echo "stopping cluster..."
	trap 'echo "second signal: killing nodes"; stop_nodes KILL $NODES; exit 1' INT TERM
	# As long as they take: a second SIGTERM would make a node exit at
	# once, so it is sent only on a second Ctrl-C (the trap above).
	stop_nodes TERM $NODES || until stop_nodes none $NODES 2>/dev/null; do :; done
	report_exits quiet
	echo "cluster stopped"
	exit 0
}
trap stop_all INT TERM

# report_exits [quiet]: reports the exits recorded since the last call
# (quiet: one line each, without the log).
report_exits() {
	local i n p rc
	for i in $NODES; do
		n=$(exit_count "$i")
		[ "$n" -gt "${exits[$i]}" ] || continue
		while read -r p rc; do
			if [ "${1:-}" = quiet ]; then
				echo "node n$i exited with status $(describe_status "$rc")"
			else
				report_exit "$i" "$rc"
				echo "the other nodes keep running; start it again with: scripts/run-local.sh start n$i" >&2
			fi
		done < <(tail -n +$((exits[$i] + 1)) "$DATA/n$i/kvnode.exits" | head -n $((n - exits[$i])))
		exits[$i]=$n
	done
}

for i in $NODES; do
	seen[$i]=$(out_size "$i")
	exits[$i]=$(exit_count "$i")
	launch "$i"
	pids[$i]=$(pid_of "$i")
done
echo "starting 3 nodes (logs: $DATA/n1/kvnode.log ...); Ctrl-C stops them"
echo "stop or start one from another terminal: scripts/run-local.sh stop n2, scripts/run-local.sh start n2 (make node-stop N=2, make node-start N=2)"
if [ "$TLS" = 1 ]; then
	echo "TLS everywhere. Use kvctl with a client certificate (roles: admin, write, read):"
	echo "  export CUTKV_CACERT=$certs/ca.crt CUTKV_CERT=$certs/admin.crt CUTKV_KEY=$certs/admin.key"
	echo "  $BIN/kvctl put greeting hello"
	echo "or: $BIN/kvctl --cacert $certs/ca.crt --cert $certs/read.crt --key $certs/read.key get greeting"
fi

# Watch the nodes: report every exit (the watchers record each one), a
# node started again with `start`, and print the nodes' ready lines; the
# other nodes keep running.
while true; do
	report_exits
	for i in $NODES; do
		if p=$(pid_of "$i") && [ "$p" != "${pids[$i]}" ]; then
			echo "node n$i runs again (pid $p)"
			pids[$i]=$p
		fi
		size=$(out_size "$i")
		if [ "$size" -gt "${seen[$i]}" ]; then
			tail -c +$((seen[$i] + 1)) "$DATA/n$i/kvnode.out" | head -c $((size - seen[$i]))
			seen[$i]=$size
		fi
	done
	sleep 0.5 &
	wait $! 2>/dev/null
done
