# stop_sys, shared by the bench scripts that start the system under test
# as one process group (setsid) and keep its pid in SYS_PID: it stops the
# whole group (SIGTERM, then SIGKILL after 10 s), waits for it, and
# removes $OUT/data.
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

# log MSG: a line on stdout with the UTC time.
log() { echo "$(date -u +%H:%M:%S) $*"; }

# fail WHAT [FILE...]: says what failed (prefixed with the script's name),
# shows the end of each FILE, exits 1.
fail() {
	echo "$(basename "$0" .sh): $1" >&2
	shift
	local f
	for f in "$@"; do
		if [ -s "$f" ]; then
			echo "last lines of $f:" >&2
			tail -n 20 "$f" >&2
		fi
	done
	exit 1
}
