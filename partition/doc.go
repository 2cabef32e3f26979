// Package partition is the state machine of one data partition: an ordered
// map of committed key-values, changed only by applying raft entries in
// index order. It is a plain value driven by method calls (Apply, Get,
// Scan); the raft loop owns the order of calls, readers take the read lock.
//
// The map is a copy-on-write B-tree so that a consistent copy at an exact
// applied index can be taken inside the apply loop in O(1) and written out
// in the background (DESIGN.md, "Checkpoints").
package partition
