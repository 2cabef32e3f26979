// Package process holds the end-to-end tests that run real kvnode and
// kvctl processes: the binaries are built once per test run (TestMain)
// into a temporary directory, nodes listen on free loopback ports and keep
// their data under t.TempDir(), and a test kills them with SIGKILL, stops
// them with SIGTERM and restarts them on the same data.
//
// The harness itself (harness.go: Build, NewCluster, Node, FreeAddr,
// SoakDuration, NewRand, WaitFor) is exported for the other end-to-end
// test packages under tests/, such as tests/bank; it is the package's only
// non-test code.
//
// What the tests check (DESIGN.md, "Invariants that tests must check",
// and README.md):
//
//   - TestNoAckedWriteLostAcrossKill9: invariant 1 under a nemesis that
//     SIGKILLs one node at a time and, once, all three.
//   - TestKvctl: every kvctl command, its JSON output and its exit codes
//   - TestKvctlCuts: periodic cuts (--cut-interval), kvctl cut create /
//     list / show and kvctl check on a real cluster, and check's exit code
//     with a node down
//     (docs/cli.md) against a live cluster, with members reporting
//     failed and left nodes.
//   - TestGracefulShutdown, TestSecondSignalExitsAtOnce: SIGTERM drains and
//     leaves (others see "left"), restart without bootstrap flags keeps the
//     data; a second signal exits at once.
//   - TestKvnodeHelp, TestKvnodeConfigFile, TestKvnodeRefusals: --help and
//     bad flags, the YAML config file, refusals (busy ports, a data dir in
//     use, another cluster's or another node's data dir).
//   - TestWALSyncFailureIsSticky, TestCrashAfterSave: failpoints
//     (-tags failpoints) make a WAL fsync fail or crash a node right after a
//     durable save; no acknowledged write is lost.
//   - TestKvctlCheckpoint: kvctl checkpoint materializes every group and
//     truncates the WAL (kvctl status shows both); a SIGTERM restart keeps
//     every acknowledged write.
//   - TestCrashDuringCheckpoint: a node crashes in a checkpoint before a
//     materialization's rename or before the WAL truncation; restarted, it
//     loses nothing, agrees with the others and leaves no temporary file.
//   - TestKvctlSnapshotsAndRestore: kvctl snapshot create (the second reuses
//     the first's pieces), list and check on a cluster sharing one file://
//     store; a flipped byte makes check exit 9 and kvnode restore refuse,
//     naming the piece, leaving the data dir empty; repaired, the snapshot
//     restores onto one node that serves every key and takes writes.
//
// Knobs (environment):
//
//	CUTKV_SOAK      how long the kill -9 soak runs, a Go duration; default 10s
//	CUTKV_SEED      seed of the nemesis' and writers' choices; default random
//
// The binaries are built with the go command on PATH; GOFLAGS is honoured
// because the go command reads it itself.
package process
