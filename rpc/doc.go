// Package rpc holds cutkv's gRPC side: the public KV and Cluster services,
// the node-to-node services (participant, cut, snapshot partitions, raft
// transport), the peer connection pool, the interceptors (roles and
// members, request limits, the marker merge) and the one place
// (errors.go) that maps internal errors to gRPC status codes.
//
// Any node answers any request. A KV request for a partition this node
// does not lead is forwarded once to the leader (marked with the
// forwardedKey metadata so it is never forwarded twice); a scan is split
// per partition and merged in key order.
//
// The cut marker of everything that arrives from outside is merged into
// the node's clock by one pair of interceptors (marker.go):
// MarkerInterceptor on both listeners for requests, the pool's reply
// merge (Pool.SetMarker) on every connection for replies; both admit a
// version only once group 0 allocated it (cutgate.go). No handler merges by hand.
//
// The node's background loops (recovery, the cut agent, group 0's cut
// runs, gossiped versions, automatic snapshots) are package node's; they
// drive an rpc.Node through its exported state and the few calls they
// need (CallParticipant, Node.ReadRecord, Node.AdmitGossiped). This
// package never imports node (internal/importrules).
package rpc
