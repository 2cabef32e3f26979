// Package rpc holds cutkv's gRPC side: the public KV and Cluster services,
// the node-to-node raft transport, the peer connection pool, interceptors
// and request limits, and the one place (errors.go) that maps internal
// errors to gRPC status codes.
//
// Any node answers any request. A KV request for a partition this node
// does not lead is forwarded once to the leader (marked with the
// forwardedKey metadata so it is never forwarded twice); a scan is split
// per partition and merged in key order.
package rpc
