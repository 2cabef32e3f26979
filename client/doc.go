// Package client is the Go client of cutkv.
//
//	c, err := client.New(ctx, "10.0.0.1:7001", "10.0.0.2:7001")
//	if err != nil { ... }
//	defer c.Close()
//	err = c.Put(ctx, []byte("k"), []byte("v"))
//	kv, err := c.Get(ctx, []byte("k")) // errors.Is(err, client.ErrNotFound) when absent
//
// # What the client relies on (the server's contract)
//
// Every node serves the gRPC services cutkv.kv.v1.KV (Get, Put, Delete,
// Scan, Txn) and cutkv.kv.v1.Cluster (Members, Status, Routing), defined in
// proto/kvpb/kv.proto. A node that does not lead a key's partition forwards
// the request to the leader, so any endpoint can serve any request. Routing
// names the leader of each partition (leaders[i] leads partition i+1) and
// the members' gRPC addresses, so the client can skip that hop: it hashes
// the key with keyspace.PartitionOf and sends the request straight to the
// leader.
//
// Errors:
//
//   - InvalidArgument: empty key, key over 4 KiB (MaxKeySize), value over
//     1 MiB (MaxValueSize). Never retried.
//   - A missing key is not an error on the wire: Get answers with kv unset
//     (codes.NotFound is not used for it).
//   - Unavailable with a google.rpc.ErrorInfo detail of domain "cutkv.io"
//     means the request was definitely NOT applied. The reasons are
//     NOT_LEADER (Metadata["leader"] = the leader's node id, if known),
//     NO_LEADER, PROPOSAL_DROPPED, NOT_SERVING, SHUTTING_DOWN and LOCKED.
//   - DeadlineExceeded, Canceled, or a connection that breaks after the
//     request was sent leave a write's outcome unknown; so does Unavailable
//     without the detail, and Unknown or Internal.
//   - Aborted: a transaction conflicted with another one and was NOT
//     applied (see Transactions below).
//   - FailedPrecondition and other codes are definite refusals.
//
// Every request carries in RequestHeader.cut_version the highest cut
// version seen in any ResponseHeader (DESIGN.md, consistent cut rule 8):
// if Put(W1) returned before Put(W2) was called, no consistent cut holds
// W2 without W1.
//
// # Routing
//
// New asks all endpoints for the routing table at once and keeps the first
// answer. The table is fetched again, at most once per
// Config.RoutingRefreshInterval, when a node answers NOT_LEADER without a
// usable hint or NO_LEADER, or when a node cannot be reached. A NOT_LEADER
// hint is followed at once and recorded in the table. When a partition's
// leader is unknown, or its address failed during this operation, the
// request goes to any node: the one that answered last, then the
// configured endpoints, then the other members, skipping those that failed.
// There is one gRPC connection per address.
//
// # Retries
//
// An operation makes attempts until one succeeds, one fails definitely, or
// its ctx ends (a ctx without deadline gets Config.OperationTimeout). Each
// attempt is bounded by Config.RequestTimeout. Between attempts that must
// wait (no leader, dropped proposal, every address failed) the client
// sleeps with exponential backoff and jitter, and it never starts a sleep
// that would end past the ctx deadline: it returns ErrUnavailable instead.
//
//   - Reads (Get, Scan, Members, Status, and a Txn with no put or delete
//     in either branch) are retried on Unavailable, a timed out attempt,
//     Aborted and broken connections: a read-only Txn is never of unknown
//     outcome.
//   - Writes (Put, Delete) are retried only when they were certainly not
//     applied: the server said so (an ErrorInfo reason above, or Aborted),
//     or the request was never sent because the connection to that address
//     was not READY. Any other failure after sending returns an error
//     wrapping ErrOutcomeUnknown, and the write is not sent again.
//   - InvalidArgument is never retried (ErrInvalidArgument); the client
//     checks key and value sizes itself before sending.
//
// # Transactions
//
// Txn builds a transaction in etcd's style: compares, the ops to run when
// all hold (Then) and the ops to run otherwise (Else), on keys of any
// partitions, applied atomically and serializably (DESIGN.md,
// Transactions (2PC)):
//
//	resp, err := c.Txn(ctx).
//		If(client.Compare(client.Version(a), "=", va), client.Compare(client.Version(b), "=", vb)).
//		Then(client.OpPut(a, newA), client.OpPut(b, newB)).
//		Else(client.OpGet(a), client.OpGet(b)).
//		Commit()
//	// err == nil: resp.Succeeded says which branch ran; resp.Responses
//	// holds one OpResponse per op of that branch, reads included.
//
// Compares look at a key's Version (writes since creation; 0 when absent,
// so Version = 0 tests existence, see KeyMissing and KeyExists) or its
// Value, with =, !=, < or >. A compare on the value of an absent key is
// false. Ops are OpGet, OpPut, OpDelete and OpScan.
//
// Commit checks, before sending, what the server would refuse with
// InvalidArgument: more than Config.MaxTxnOps (default 128) compares or
// ops in a branch, an empty or oversized key, an oversized value, a
// negative scan limit, a branch that writes a key twice or reads (get or
// scan range) a key it writes.
//
// Any node coordinates a transaction; the client sends it to the leader of
// the partition of its smallest key (where its record lives) when known,
// which saves a hop. Every attempt carries a fresh 16-byte random txn_id
// and the priority of the first attempt (its Unix nanoseconds), so that
// under the server's wait-die policy a retried transaction ages and
// eventually wins. Commit retries, with backoff, within ctx's deadline:
//
//   - Aborted (a conflict; not applied) and Unavailable with a cutkv
//     reason (not applied) are retried with a new txn_id. A transaction
//     whose last attempt was still Aborted at the deadline fails with
//     ErrConflict, wrapping that Aborted error.
//   - InvalidArgument is never retried (ErrInvalidArgument).
//   - Any other failure after sending (DeadlineExceeded — including an
//     attempt cut by Config.RequestTimeout —, a broken connection, bare
//     Unavailable, Internal) leaves the outcome unknown: ErrOutcomeUnknown.
//     The transaction is not sent again; read its keys to find out.
//
// # Errors
//
// Operations return *OpError, which wraps one of ErrNotFound,
// ErrOutcomeUnknown, ErrUnavailable, ErrConflict, ErrInvalidArgument and
// ErrClosed, and the cause (a gRPC status error, a context error): use
// errors.Is. A write or transaction that failed with anything but
// ErrOutcomeUnknown was not applied.
//
// Package clienttest runs an in-process fake cluster for tests of programs
// that use this package.
package client
