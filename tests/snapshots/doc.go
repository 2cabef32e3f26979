// Package snapshots holds the snapshot tests under load (DESIGN.md,
// "Snapshots" and "Invariants that tests must check" 4 and 5; issue 6).
//
// TestSnapshotsUnderBankLoadRestore runs the bank workload (tests/bank) on
// an in-process 3-node cluster with 4 partitions for CUTKV_SOAK while an
// incremental snapshot is taken every second through the public
// CreateSnapshot into a file:// store; materializations every few seconds
// give the later snapshots bases. Traffic never stops for a snapshot. The
// test then checks every snapshot in the store, stops the source cluster,
// and rebuilds the cuts of several snapshots (the first, a middle one, the
// last) from the source's WALs with cut/verify (which also checks them:
// atomicity, stamps, replicas, the bank's total). Each of those snapshots
// is restored with restore.Run into a fresh cluster — the last one onto 1
// node and onto 5 nodes, the others onto 3 — that must serve exactly the
// rebuilt state (every key and value, nothing more), sum to the bank's
// total, accept writes and complete a cut above the snapshot's version.
//
// It asserts counts of completed work (at least minSnapshots snapshots),
// never speed. Knobs: CUTKV_SOAK (default 10s) and CUTKV_SEED.
package snapshots
