// Package linearizability checks DESIGN.md invariant 2 ("single-key
// operations are linearizable") against a real in-process cluster.
//
// TestLinearizable runs concurrent clients doing Get, Put and Delete on a
// few keys while a nemesis kills and restarts partition leaders, records
// every operation with its call and return time, and hands the history to
// porcupine with the key-value model in model.go. The history is built
// from the server's error contract (proto/kvpb, rpc/errors.go): a write
// refused with Unavailable plus a cutkv.io ErrorInfo was certainly not
// applied and is left out; any other failed write may or may not have
// been applied, so it stays in the history as an operation that never
// returns and whose output is unknown (Prepare then drops such a Put if
// nobody saw its value, and closes it at its first observer otherwise).
// Failed reads are left out. After the nemesis stops, every key is read
// once more, so a lost acknowledged write (invariant 1) fails the check
// too.
//
// The model is checked against hand-made illegal histories too
// (model_test.go), so a green run means the checker looked, not that it
// was blind.
//
// Knobs (environment):
//
//	CUTKV_SOAK            how long the clients run, a Go duration; default 10s
//	CUTKV_SEED            seed of the clients' and the nemesis' choices; default random
//	CUTKV_PORCUPINE_OUT   where the HTML visualization of a failed check goes
//	                      (a file, or an existing directory); default os.TempDir()
package linearizability
