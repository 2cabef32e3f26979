# Functions shared by the bench scripts that run a local 3-node cluster
# under bench/cmd/benchckpt's supervisor. Source it after setting WORK (the
# temporary directory) and B (the benchckpt binary). start_cluster sets
# CL_PID, stop_cluster clears it; a helper a script runs in the background
# goes in BG_PID. On exit the cluster and the helper are stopped and WORK
# is removed, unless KEEP=1 or the script failed.
CL_PID=""
BG_PID=""

cleanup() {
	rc=$?
	if [ -n "$BG_PID" ]; then
		kill -TERM "$BG_PID" 2>/dev/null
		wait "$BG_PID" 2>/dev/null
	fi
	if [ -n "$CL_PID" ] && kill -0 "$CL_PID" 2>/dev/null; then
		kill -TERM "$CL_PID"
		wait "$CL_PID" 2>/dev/null || true
	fi
	if [ "$rc" != 0 ] || [ "${KEEP:-0}" = 1 ]; then
		echo "data and logs kept in $WORK" >&2
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
# bytes DIR...: apparent size of the files under the directories.
bytes() { du -scb "$@" 2>/dev/null | tail -n 1 | cut -f1; }

# start_cluster DATA EVENTS [TARGETS] -- KVNODE FLAGS: starts the nodes in
# the background and waits until the supervisor prints all-ready. With
# KVNODE set, the supervisor runs that binary instead of bin/kvnode (a
# copy under another name survives a `pkill kvnode` meant for another
# cluster on a shared machine).
start_cluster() {
	local data=$1 events=$2 targets=$3
	shift 4
	mkdir -p "$data"
	"$B" cluster -data "$data" -bin bin ${KVNODE:+-node "$KVNODE"} ${targets:+-targets "$targets"} -- "$@" >"$events" 2>>"$data/cluster.err" &
	CL_PID=$!
	until grep -qs '^all-ready' "$events"; do
		if ! kill -0 "$CL_PID" 2>/dev/null; then
			wait "$CL_PID" || true
			CL_PID=""
			echo "cluster did not start; $events:" >&2
			cat "$events" "$data/cluster.err" >&2
			exit 1
		fi
		sleep 0.1
	done
}

# stop_cluster: SIGTERM to the supervisor, which stops every node
# gracefully; fails if a node did not exit 0.
stop_cluster() {
	kill -TERM "$CL_PID"
	local rc=0
	wait "$CL_PID" || rc=$?
	CL_PID=""
	if [ "$rc" != 0 ]; then
		echo "a node did not stop cleanly (status $rc)" >&2
		exit 1
	fi
}

# node_times EVENTS KIND: "a / b / c" seconds for n1..n3 ("-" if absent).
node_times() {
	local out=""
	for n in n1 n2 n3; do
		t=$(awk -v k="$2" -v n="$n" '$1 == k && $2 == n { printf "%.2f", $3 }' "$1")
		out="${out:+$out / }${t:--}"
	done
	echo "$out"
}
