// Package topology fixes where data lives: the key-hash function that maps
// a key to one of a fixed number of partitions, the cluster's members and
// their raft ids, and the placement of each raft group's replicas on
// distinct nodes. Everything here is a pure function of the bootstrap
// settings, so every node derives the same layout without talking to the
// others; group 0 (metadata) then records it (DESIGN.md, "Data, partitions,
// replication").
package topology
