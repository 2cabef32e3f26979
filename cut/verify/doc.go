// Package verify checks consistent cuts against the logs that produced
// them (DESIGN.md, "Consistent cut" rules 1-8 and "Invariants that tests
// must check" 4). It is a test and admin tool: it reads the raft logs of
// a stopped cluster, rebuilds every partition's state at every completed
// cut exactly as rule 5 defines it, and reports what breaks the rules.
//
// # Rebuilding a partition at cut v
//
// Group 0's log says which cuts completed and, per partition p, where cut v
// fell: pos, the first entry of p's log with version >= v, and
// finish_index, the index of the CutFinish(v) entry that closed the cut in
// p (kvpb.CutInfo). The state of p at v is rebuilt from one replica of p
// whose entry at finish_index is CutFinish(v) (the one with the highest
// commit index, the reference replica):
//
//  1. start from the replica's base: an empty partition.Partition, or a
//     materialization at index m < pos (see Source);
//  2. apply every entry with m < index < pos, in order: a normal entry
//     with a command through ApplyCommand, any other through SetApplied;
//  3. ResolveAtCut(before), before being the before set the CutFinish(v)
//     entry carries: the writes of the transactions active at pos and
//     committed with a stamp < v are applied, every other intent, lock and
//     record is dropped;
//  4. keep the committed key-values.
//
// Rebuild returns the key-values; RebuildPartition returns the resolved
// partition itself, which package restore writes out as a
// materialization of a new cluster.
//
// A 2PC transaction T is included in p's state at v when an entry of
// step 2 finished T with commit while p held T's intent (checked with
// IntentOf before the entry applies; a finish naming another prepare
// time is another transaction's and applies nothing), or when T is in
// the before set. The entries that finish a transaction
// (command.Finishes):
//
//   - a TxnFinish;
//   - a TxnFinishes batch: each of its finishes applies as a TxnFinish
//     entry at that index would (the first finish of an id in the batch
//     is the one that can take effect);
//   - on T's record partition, a TxnDecide with finish set (parallel
//     commits: the decision and the record partition's own finish share
//     an entry), with the recorded decision, not necessarily the op's:
//     the first decision recorded wins. A TxnDecide without finish, as
//     every one written before parallel commits, only records.
//
// A TxnStatus entry (it settles a transaction's effective prepare and
// changes no key-value, at most leaving a tombstone) and a refused
// prepare (it leaves a tombstone) include nothing: step 2 applies them
// like any entry.
//
// # Decisions
//
// A transaction's decision is its record in its record partition as
// first decided there: by a TxnDecide, or, under parallel commits, by a
// finish of the record partition's own intent (TxnFinish, a TxnFinishes
// batch or a TxnDecide with finish), which decides the STAGING record
// that partition's prepare wrote. A STAGING record is no decision: a
// record still STAGING at the end of a log, in a base or in
// Options.Known counts as no record, and never enters
// Report.Decisions.
//
// # What is checked
//
// For every completed cut v:
//
//   - atomicity (ErrTorn): every committed 2PC transaction, as its
//     decision says (see Decisions; the record's participants list names
//     its partitions), is included in all its participants' states or in
//     none; a transaction included anywhere must have a commit decision,
//     run the decided branch and be one of the decision's participants;
//   - classification (ErrStamp, rule 4): a committed transaction is
//     included exactly when its stamp is below v. This follows from rules
//     2-4: a transaction stamped below v was prepared before pos in every
//     participant, so it either finished there before pos or was active at
//     pos and joined the before set; one stamped at or above v finishes
//     after pos everywhere;
//   - the cut's bookkeeping (ErrCutFinish): the entry at pos is the first
//     command entry with version >= v, the CutFinish(v) entry at
//     finish_index is the one that closed the cut in the state machine, and
//     the sets it carries equal the state machine's own (cut.Progress);
//   - replicas (ErrReplicas): every replica whose entry at finish_index is
//     CutFinish(v) rebuilds the same key-values and the same included
//     transactions as the reference replica;
//   - the caller's Invariant (ErrInvariant) on the whole cluster's state at
//     v (the union of the partitions' key-values), e.g. a bank's total.
//
// A cut whose state cannot be rebuilt (no replica holds CutFinish(v) at
// finish_index, an undecodable entry, a before-set transaction without an
// intent) is reported with ErrLog. Failed cuts are never used (rule 7) and
// are only listed in the Report.
//
// # Sources
//
// A Source yields Replicas: one node's copy of one group's log as a base
// state plus the entries after it. WALSource reads the node WALs of a
// stopped cluster: a group whose WAL still starts at entry 1 has an empty
// base and its whole log; one whose WAL front was truncated behind a
// materialization starts from the oldest intact materialization the log
// continues (a partition at an applied index m, with its intent table,
// records and cut progress) and replays only what follows m. A partition's
// materialization is a Pebble checkpoint directory, which the verifier
// never opens: each rebuild replays onto a hard-link clone of it made
// beside the node's data directory (a scratch Pebble,
// partition.OpenCheckpointScratch), removed when the rebuild is done.
// With a base, a transaction that finished inside the base is invisible in
// the entries; the atomicity checks count such a participant as unknown
// and skip it (never as "not included"), and the decisions recorded inside
// the base are found through the base's transaction records.
//
// Group 0 is read from its entries alone (its replicas must have base 0),
// unless Options.Cuts names the cuts to verify.
//
// Every cut is rebuilt from its replicas' bases, so a verification costs
// about cuts × log length × replicas entry applications (a 30 s bank soak
// with ~90 cuts and 3 replicas: ~10 s on two cores). The partitions of a
// cut are rebuilt in parallel (Options.Parallel); Options.Cuts narrows
// the cuts verified.
//
// Everything here is computation over the logs handed in, besides
// WALSource's reading of the WAL directories and the scratch clones its
// bases are replayed on. Verify does not modify the Replicas; it may read
// them from several goroutines.
package verify
