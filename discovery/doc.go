// Package discovery tells each kvnode who else is in the cluster, how to
// reach them, and when one of them is gone. It wraps hashicorp/memberlist,
// an implementation of the SWIM gossip protocol with the Lifeguard
// refinements (DESIGN.md, "Layout": discovery/).
//
// # The idea
//
// Every node runs one memberlist instance named by its node id. Members
// find each other through seed addresses (Config.Join), then keep a shared,
// eventually consistent view by gossip: each node probes one other member
// per probe interval over UDP, asks others to probe on its behalf when
// that fails, and spreads "suspect", "dead" and "alive" rumours on top of
// its probes and on a faster gossip tick. A suspected member that is in
// fact alive refutes the rumour with a higher incarnation number; a member
// that stays silent past the suspicion timeout is declared dead. The
// suspicion and probe timeouts are why detection takes seconds: Timing and
// the pure functions in timing.go derive the worst case (3.1 s for three
// members with LocalTiming; the table test keeps it under 5 s).
//
// Each member advertises a small Meta (id, cluster id, gRPC and HTTP
// addresses) in memberlist's node metadata, encoded compactly (wire.go)
// and far under memberlist's 512-byte limit. A random instance number
// rides along, so that two runs of the same node id are told apart.
//
// # States
//
// memberlist reports only "joined", "updated" and "gone" (dead or left,
// without saying which) and keeps its suspicions to itself. Discovery
// derives the four States from those events in a plain, I/O-free member
// table (table.go):
//
//   - StateAlive when memberlist reports the member joined or updated.
//   - StateFailed when memberlist reports it gone and no departure notice
//     for that instance is known.
//   - StateLeft when it is gone and a departure notice is known. Leave
//     sends the notice over TCP to every live member and by gossip before
//     memberlist's own leave message, and push/pull exchanges the notices
//     a member may have missed. A notice that arrives after the failure
//     verdict (gossip does not keep order) turns it into StateLeft. Notices
//     name the instance, so a stale one never applies to a restarted node.
//   - StateSuspect, advisory, when this node's own direct probes of the
//     member have gone unanswered for longer than a probe cycle
//     (suspectAfter) while memberlist still holds it alive.
//
// The table never forgets a member: Members lists failed and left ones
// too, and a restarted member (same id, new instance) returns to
// StateAlive — memberlist's refutation makes the cluster accept it at the
// same address, and DeadNodeReclaimTime lets it come back at a new one.
//
// # Cluster isolation
//
// A member that advertises another cluster id is refused twice: by the
// merge delegate when a whole foreign cluster tries to join, and by the
// alive delegate for every single alive message, gossiped or merged
// (memberlist documents that the merge check alone lets passive merges
// through). Refused members never reach the table. User messages carry the
// sender's cluster id as well and are dropped on a mismatch.
//
// # Broadcasts
//
// Broadcast and BroadcastKeyed queue small messages (MaxBroadcastSize) on a
// memberlist TransmitLimitedQueue; memberlist piggybacks them on its probes
// and gossip, sending each a few times (RetransmitMult × log n) to random
// members. Delivery is best effort: a message can arrive more than once, in
// any order, or not at all, so receivers must be idempotent — the cut
// version markers it is meant for are (a node keeps the highest version
// seen; DESIGN.md, "Consistent cut", rule 1). A keyed message replaces a
// queued older one with the same key.
//
// # Concurrency
//
// memberlist calls the delegates (delegate.go) from its own goroutines,
// several of them under its node lock. They only update the table under
// Discovery.mu and queue callbacks; one goroutine delivers OnChange and
// OnMessage in order with no lock held. Lock order: memberlist's locks,
// then Discovery.mu, which is a leaf.
package discovery
