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
