// Package linearizability checks DESIGN.md invariant 2 ("single-key
// operations are linearizable") against real clusters: its workload,
// recorder and checker are used by TestLinearizable here, against an
// in-process cluster whose leaders a nemesis kills, and by the chaos
// harness, against kvnode processes under network faults. Both run the
// same code, so both hold the server to the same contract.
//
// # Workload
//
// A Workload (workload.go) runs concurrent clients doing Get, Put and
// Delete on a few keys (PickKeys spreads them over every partition)
// through one kvrpc.KVClient per node, which the caller dials (DialOptions
// gives the short reconnect back-off a restarted node needs). Every Put
// writes a value no other Put writes, so a value read names the write
// that produced it. Each operation is recorded with its call and return
// time on one clock (Workload.Now, also the clock for annotating faults).
//
// The history is built from the server's error contract (proto/kvpb,
// rpc/errors.go): a write refused with Unavailable plus a cutkv.io
// ErrorInfo was certainly not applied and is left out; any other failed
// write may or may not have been applied, so it stays in the history as
// an operation that never returns and whose output is unknown (Prepare
// then drops such a Put if nobody saw its value, and closes it at its
// first observer otherwise). Failed reads are left out. Once the faults
// stop, Workload.FinalReads reads every key once more, so a lost
// acknowledged write (invariant 1) fails the check too. Stats counts the
// outcomes by error label, and the errors outside the contract apart.
//
// # Check
//
// Check (check.go) hands the history to porcupine with the key-value
// model in model.go, partitioned by key. Only porcupine.Ok passes: a
// check that runs out of time (porcupine.Unknown) is a failure
// (ErrUndecided), since the history is then not known to be right. A
// failing check names the guilty keys with the end of their longest
// linearization, and writes porcupine's HTML visualization, with the
// faults as annotations, where the caller asks.
//
// The model is checked against hand-made illegal histories too
// (model_test.go), and the workload against fake nodes that fail in each
// documented way or lose acknowledged writes (workload_test.go), so a
// green run means the checker looked, not that it was blind.
//
// # TestLinearizable
//
// Knobs (environment):
//
//	CUTKV_SOAK            how long the clients run, a Go duration; default 10s
//	CUTKV_SEED            seed of the clients' and the nemesis' choices; default random
//	CUTKV_PORCUPINE_OUT   where the HTML visualization of a failed check goes
//	                      (a file, or an existing directory); default os.TempDir()
package linearizability
