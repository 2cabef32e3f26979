// Package clock is the wall clock of the node's protocol decisions: the
// prepare time of a transaction, the finished-ids horizon, which intents
// are stale enough for recovery, the bounds on a peer's times and a
// client's priority, a cut's start. Durations and timeouts are measured
// with time.Now and time.Since (the monotonic clock), never with Now.
//
// In a normal build Now is time.Now. Built with `-tags failpoints`, Now
// adds an offset that a test harness changes while the process runs (a
// Go process's clock cannot be changed from outside): when the
// environment variable CUTKV_CLOCK_SKEW_FILE names a file, a goroutine
// reads it every PollInterval. The file holds one duration in Go's syntax
// ("-7m30s", "15m"); a missing or empty file means no offset, and a file
// that does not parse is logged and leaves the offset as it was. Each
// change of the offset is logged once through slog.Default, at Info:
//
//	clock skew set offset=-7m30s file=/path/to/file
//
// so a harness can prove that the skew took effect. The chaos harness's
// clock-skew fault (chaos/clockskew.go) writes the file.
package clock

// SkewFileEnv names the environment variable that names the skew file
// (failpoints build only).
const SkewFileEnv = "CUTKV_CLOCK_SKEW_FILE"
