// Package bank holds the transaction correctness tests: the bank workload
// and an all-or-nothing, serializability checker (DESIGN.md, "Invariants
// that tests must check" 3; issue 3, "Tests").
//
// # The workload
//
// Twenty accounts, five in each of four partitions, start with 100 each in
// one transaction. Eight transfer clients loop: read two random accounts
// (a Txn of two Gets, or two plain Gets), then a Txn that compares both
// versions and, if they hold, puts both new balances (never negative) and
// two marker keys tx/<id>/..., one in each account's partition; its
// failure branch reads both accounts. Every value names the transaction
// that wrote it ("balance/id"). Two readers loop over a Txn of twenty
// Gets with no compares. About four transfers in five span two
// partitions (two-phase commit), the rest take the one-partition path.
//
// Requests go over raw kvpb clients, with the retry loop of the server's
// contract (classify, Bank.commit): Aborted and Unavailable with a
// cutkv.io ErrorInfo were not applied and are retried with a new txn_id
// and the first attempt's priority; InvalidArgument is never retried;
// anything else after sending leaves the outcome unknown and is never
// resent. A request is only sent on a ready connection, so one that found
// no node was certainly not sent. The raw clients, not client.Txn, because
// the failure tests must choose the coordinator (the node a Txn is sent
// to), which the client library picks itself.
//
// # What is checked (History.Check)
//
// All or nothing, on the markers: a transfer seen committed has both, one
// definitely not applied (or whose failure branch ran) has neither, one
// with an unknown outcome has both or neither. Beyond that, every account
// version must be written by exactly one applied transfer that compared
// the version before and read the balance it holds; the order the
// versions impose must have no cycle (serializable); every read must be
// closed under that order (a read that sees one write of a transfer sees
// all of them) and every read of all accounts, and the final state, must
// sum to the initial total. history_test.go shows each violation caught.
//
// # Tests
//
//   - TestBankInProcess: the workload on an in-process cluster
//     (internal/clustertest) for CUTKV_SOAK.
//   - TestBankUnderFailures: three kvnode processes (n1 the failpoints
//     build); for CUTKV_SOAK a nemesis SIGKILLs and restarts one node at a
//     time; then, for CUTKV_SOAK/2 each, every Txn goes to n1 while it
//     runs with txnAfterPrepare=exit@N and then txnAfterDecide=exit@N, N
//     drawn from the measured rate to fire mid-phase.
//   - TestFinishBatchLeaderDeath: every node armed with
//     txnInFinishBatch=exit@N under 16 transfer clients: a partition
//     leader dies with several committed transactions' Finishes
//     unproposed, is restarted without failpoints, and the bank checks
//     (and no lock outliving the run) must hold.
//   - TestCoordinatorDeathIsRecovered: one transaction at each crash
//     point: after Prepare, the participants abort it and the keys become
//     writable within seconds; after the decision, recovery finishes the
//     commit and both writes appear.
//
// In the workload tests at least 50 transfers and 5 reads of every
// account must commit (counts, never speed), and no lock may outlive the
// run: once traffic stops, a Txn that compares and rewrites every account
// commits, and every account reads back through every node, within 10 s.
//
// Knobs (environment):
//
//	CUTKV_SOAK      how long the workload runs, a Go duration; default 10s
//	CUTKV_SEED      seed of the clients' and the nemesis' choices; default random
//
// The real-process harness is tests/process's (process.NewCluster).
package bank
