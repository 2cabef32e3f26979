// Package cut is cutkv's consistent cut (DESIGN.md, "Consistent cut"): the
// Chandy–Lamport snapshot of Apache Ignite's IEP-89, adapted to raft groups.
//
// Colours become versions. Every node holds a Clock, the highest cut
// version it has seen (rule 1); every raft entry carries its proposer's
// version (rule 2), so versions never decrease along a group's log and the
// cut v falls, in each partition, at pos(v): the first entry whose version
// is at least v. Transactions prepared before pos and still unfinished there
// form the active set; each is classified by its decision's stamp when its
// Finish applies: stamp < v puts it before the cut, stamp >= v after it
// (rule 4). When the active set is empty the partition's leader proposes
// CutFinish(v, before, after), which closes the cut in that partition.
//
// Progress is that per-partition bookkeeping, kept in the partition's
// state machine so that it is the same on every replica at every index and
// survives leader changes. It is a plain value driven by method calls from
// the apply loop; it does no I/O and takes no locks of its own.
//
// Driver is group 0's side (rule 7): it allocates a version, announces it,
// asks every partition to start and waits until each has committed
// CutFinish, then records the cut Completed, or Failed after a timeout. The
// environment (raft proposals, RPCs, gossip) reaches it through the Env
// interface, so the driver runs in tests without a network.
//
// The state of a partition at a completed cut v is: every entry before
// pos(v) applied, keeping committed key-values only, plus the writes of the
// before set (rule 5). A transaction is then in all its partitions' states
// or in none.
package cut
