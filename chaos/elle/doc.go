// Package elle is a list-append workload for cutkv and a checker of its
// histories for serializability, in the style of Jepsen's Elle: every
// transaction reads lists and appends unique elements to them, so a read
// shows not only a value but the order of every write before it, and the
// checker can rebuild the dependencies between transactions and look for
// cycles. Bank totals (tests/bank) miss anomalies that keep sums intact;
// these do not.
//
// # The model
//
// A key holds a list of integers. A transaction is a list of micro-ops,
// each append(k, v) or read(k); an element v is appended to a key at most
// once in a history (the workload hands out 1, 2, 3, … across all keys).
// A read returns the whole list, oldest element first; a read after the
// transaction's own appends to the key includes them.
//
// # The workload
//
// cutkv has no append, so Workload runs a transaction as an optimistic
// read-modify-write, with two Txns:
//
//  1. A read-only Txn of Gets of every key the transaction touches; the
//     values are lists encoded as comma-separated decimals ("3,17,22"),
//     an absent key the empty list.
//  2. A Txn whose compares pin every touched key's version (Version(k) =
//     the version read, 0 for absent), whose success branch puts the new
//     list of each appended key (what was read plus the transaction's
//     elements) and gets the keys it only reads, and whose failure branch
//     is empty. A read micro-op of an appended key is answered inside the
//     transaction: what was read plus its own earlier appends.
//
// A transaction of reads only is the first Txn alone. The outcome of the
// commit decides the op recorded: success, ok (its reads are what the
// commit returned); compares failed, or an error that says "not applied"
// (ErrConflict, ErrUnavailable, any error but ErrOutcomeUnknown), fail,
// and the transaction is tried again with a fresh read and fresh elements,
// at most Config.MaxAttempts commits; ErrOutcomeUnknown (or an error the
// client did not classify), info: maybe applied, reads unknown, never
// retried, and the client continues as a new process, since the op may
// still be in flight. Every attempt thus has its own elements, so a
// "not applied" attempt whose elements show up is caught (G1a).
//
// Lists stay short: a key is named prefix-slot-generation, and when a
// transaction's appends would take a non-empty key past
// Config.MaxAppendsPerKey elements, the slot moves to its next generation
// (a new, empty key) and the transaction starts again. The read is
// recorded as a read-only op, and so is a final read of every current key
// after the clients stop, so the last appends are observed.
//
// Op times are monotonic nanoseconds since the workload started: Invoke
// just before the commit Txn was sent, Complete just after its answer.
//
// # History format
//
// History.Encode (or json.Marshal of a History) writes one JSON object:
//
//	{"format":"cutkv-elle-1","start":"2026-12-01T10:00:00Z","ops":[
//	  {"index":0,"process":1,"type":"ok","invoke":1200,"complete":5300,
//	   "mops":[["append","elle-3-0",7],["r","elle-5-0",[2,4]]]},
//	  {"index":1,"process":2,"type":"info","invoke":1300,"complete":9100,
//	   "mops":[["r","elle-3-0",null]],"error":"..."}]}
//
// An append is ["append", key, element], a read ["r", key, list] with
// null for an unknown result (fail and info ops) and [] for an empty list.
// DecodeHistory (or json.Unmarshal) reads it back and validates it
// (History.Validate).
//
// # Dependencies
//
// Check infers each key's version order from the reads of ok ops: the
// longest read is the order, and every other read must be a prefix of it.
// The graph's nodes are the ok ops and the info ops whose appends some
// read shows (those committed). Between them, for each key:
//
//   - ww: T1 appended the element right before T2's in the order.
//   - wr: T2's external read of the key (its first read of it, without its
//     own earlier appends) ends with T1's element.
//   - rw: T1's external read ends right before T2's element
//     (anti-dependency: T2 overwrote what T1 read).
//
// An ok op's element that no read shows was applied, so it comes after
// every element some read shows: ww from the writer of the last element
// shown, and rw from every read that shows the whole order. With
// Options.ProcessOrder (Check's default), each ok op precedes the later
// ops of its process; with Options.RealTime, each ok op precedes every op
// invoked after it completed (strict serializability; only the edges the
// transitive closure needs are added). Info ops never precede anything.
//
// Cycles are found with Tarjan's strongly connected components, then a
// breadth-first search for a shortest cycle in each. Each component is
// searched under growing sets of edge types, and reported under the
// first set that has a cycle, so the weakest anomaly is named.
//
// # What is detected
//
//   - G0: a cycle of ww edges (write cycle: two transactions' appends
//     interleaved in opposite orders on two keys).
//   - G1c: a cycle of ww and wr edges with at least one wr (circular
//     information flow: each saw the other's write).
//   - G2-item: a cycle with at least one rw edge (write skew, lost update:
//     serializability broken by anti-dependencies). The detail counts
//     the rw edges (one: Adya's G-single).
//   - G0-process, G1c-process, G2-item-process: such a cycle that needs a
//     process-order edge: a process's later transaction serialized before
//     its earlier one.
//   - G0-realtime, G1c-realtime, G2-item-realtime (Options.RealTime): one
//     that needs a real-time edge, e.g. a stale read: a read that missed
//     a write committed before it began.
//   - G1a (aborted read): an ok read shows an element appended by a fail
//     op.
//   - G1b (intermediate read): an ok op's external read of a key ends with
//     an element another op appended to that key before appending more to
//     it.
//   - garbage-read: an ok read shows an element no op appended (including
//     a value that does not decode, recorded as element 0).
//   - duplicate-elements: an ok read shows an element more than once.
//   - incompatible-order: two ok reads of a key, neither a prefix of the
//     other (the second is the key's longest read): no single order of
//     appends explains both. Such reads give no wr or rw edges.
//   - internal: an ok op's read contradicts the op itself: it differs from
//     the op's earlier read of the key plus its appends since; or, with
//     no earlier read, it does not end with the op's appends so far; or it
//     holds one of the op's later appends.
//   - lost-append: an ok op appended an element that no read shows,
//     although some ok read of that key was invoked after the op
//     completed. This needs real time whatever the Options: a
//     serializable-only store may serve that read from the past, but no
//     store that acknowledges a commit once durable and serves reads from
//     the current state may. An info op's appends are exempt: it may not
//     have applied. (A read that misses an element another read shows is
//     not a lost append but a stale read, G2-item-realtime.)
//   - invalid-history: Validate refused the history; nothing else is
//     checked.
//
// Fail ops take no part beyond G1a, and info ops' reads are ignored.
// Check needs no network and no clock.
package elle
