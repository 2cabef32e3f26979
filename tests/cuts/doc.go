// Package cuts holds the consistent-cut tests under load (DESIGN.md,
// "Consistent cut" and "Invariants that tests must check" 4 and 5).
//
// Each test runs the bank workload (tests/bank) on an in-process 3-node
// cluster with 4 partitions for CUTKV_SOAK while a cutter takes a cut
// through the public CreateCut every 100-500 ms (drawn at random), on a
// random node. Traffic never stops for a cut. When the soak has passed
// and at least minCompletedCuts cuts have completed (the load goes on a
// little past the soak if needed, within a bound), traffic stops; then
// Check must find every partition's replicas equal, the bank must settle
// (no lock outlives the run, every read and the final state show the
// initial total, the history is serializable), and, with every node
// stopped so that the WALs are quiescent, cut/verify rebuilds the state of
// every completed cut from the node WALs: each must verify (all-or-nothing
// transactions, stamps on the right side, replicas equal, the accounts
// summing to the initial total).
//
//   - TestCutsUnderBankLoad: no failures.
//   - TestCutsUnderBankLoadWithKill: a node is killed (no clean stop) a
//     third into the soak and restarted a third later. Cuts may fail while
//     a partition has no leader; failed cuts are logged, never used.
//
// Knobs: CUTKV_SOAK (default 10s) and CUTKV_SEED, as in tests/bank.
package cuts
