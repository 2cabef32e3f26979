// Package keyspace is how keys map to partitions: the key-hash function
// and the key whose partition holds a transaction's record. The client
// routes by it and the node places data by it, so both must compute it
// alike; it depends on nothing but the public wire types (proto/kvpb).
package keyspace
