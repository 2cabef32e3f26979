// Package txn holds the pure pieces of cutkv's transactions (DESIGN.md,
// "Transactions (2PC)"): validating a Txn and splitting it into
// per-partition shares, evaluating compares, and the lock table that
// prepared transactions hold until Finish. validate.go holds the checks
// the services' doors run on a client's Txn and on the participant
// service's requests (DESIGN.md, "Trust"); the partition state machine
// assumes what they check.
//
// Everything here is a plain value driven by method calls, with no I/O and
// no goroutines: the partition state machine owns a LockTable and changes
// it only while applying raft entries, so every replica holds the same
// locks at the same index.
//
// Lock policy: a prepare takes all its locks or none (no-wait); it never
// waits inside the state machine, so no deadlock can form. Waiting, when
// it happens, is wait-die and lives outside (the RPC layer): an older
// transaction may wait a bounded time for younger lock holders, a younger
// one aborts at once.
package txn
