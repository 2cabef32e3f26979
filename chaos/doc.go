// Package chaos is cutkv's fault harness: clusters of real kvnode
// processes (the failpoints build), each on a host of its own (a Linux
// network namespace on a bridge, package chaos/hosts), under a seeded
// schedule of faults — network partitions, clogged links, one-way and
// random packet loss, delays of peer links (a userspace proxy), kill -9,
// SIGSTOP, a whole cluster killed at once, a follower caught up by a raft
// snapshot, a crash that loses what was not fsynced, a full disk, a
// skewed clock, and the kinds docs/reliability.md lists with their proofs
// — while three workloads run and every history is checked.
//
// A run is a sequence of rounds. A round starts a fresh cluster of 3 or 5
// nodes (peer mutual TLS from a CA made for the round, encrypted gossip,
// WAL truncation behind materializations every few seconds), then runs,
// until its share of CUTKV_SOAK has passed:
//
//   - a register workload (Get/Put/Delete on a few keys), checked for
//     linearizability with porcupine (tests/linearizability): a write that
//     returned an error counts as maybe-applied, and an Unknown verdict (a
//     checker timeout) fails the round;
//   - the bank workload with its history checker (tests/bank);
//   - a list-append workload checked for serializability in the style of
//     Elle (chaos/elle);
//   - a consistent cut every 500 ms and an incremental snapshot every 5 s;
//   - a live verifier: every few seconds it copies the nodes' WALs and
//     materializations and rebuilds every cut completed since (cut/verify)
//     — later, WAL truncation erases the log a cut needs; a pass with 8
//     or more cuts to verify rebuilds one replica per partition, not
//     all, so that it catches up (the replicas are compared at the end);
//   - the nemesis: faults of the kinds the seed picked, each held a few
//     seconds, each proved to have taken effect (a leader change seen, a
//     connection timing out across the cut link, the process state 'T')
//     or counted as not run, each healed and followed by the time until a
//     cut completes again.
//
// Every node's data dir is a tmpfs of its own (chaos/hosts MountDisk,
// 512 MiB), so that the disk-full fault can fill one node's disk: the node
// must exit with status 1 naming the file that failed (its WAL's or its
// Pebble's), and heal frees the disk and restarts it. The tmpfs's files
// are copied onto the disk under it when the round ends, so a failed
// round keeps its data dirs.
//
// After the last fault every round heals everything and measures how long
// the cluster takes to be healthy and complete a cut (bounded by the test
// flag -chaos.recovery, make chaos RECOVERY=..., default 30s), then checks: porcupine and the
// append checker, the bank's all-or-nothing and totals, replica hashes
// (kvctl check), every completed cut verified, the last three snapshots
// restored into fresh clusters and equal to the verifier's state of their
// cuts, every acknowledged write present (final reads). A failed round
// keeps its logs, data dirs, schedule, histories and seeds under
// CUTKV_CHAOS_OUT and prints the command that replays its schedule.
//
// Every round appends a line to docs/reliability/journal.jsonl and
// rewrites docs/reliability.md from the whole journal, so totals
// accumulate across runs (commit both after a run you want counted).
//
// Knobs (environment): CUTKV_CHAOS=1 enables TestChaos (make chaos sets
// it; it needs root); CUTKV_SOAK the run's length (default 5m);
// CUTKV_SEED or SEED the seed (default: derived from the commit);
// CUTKV_CHAOS_KINDS a comma-separated list of fault kinds instead of the
// seed's pick ("all" for every kind); CUTKV_CHAOS_NODES 3 or 5 to run
// rounds of one size only; CUTKV_CHAOS_RECOVERY the recovery bound (the
// flag -chaos.recovery wins);
// CUTKV_CHAOS_OUT where rounds keep their files (default a directory
// under os.TempDir(), removed when every round passed);
// CUTKV_CHAOS_JOURNAL the journal path ("-": none).
package chaos
