// Package restore builds the data dirs of a new cluster from a snapshot in
// the blob store (DESIGN.md, "Snapshots": restore, and "Consistent cut"
// rule 5). It is what `kvnode restore` runs, once per node of the new
// cluster, before the nodes start.
//
// # The idea
//
// A snapshot holds, per partition p, the state at cut v as a base
// materialization at m plus the committed entries m+1 … End, End being
// the CutFinish(v) entry that carries the before set. Restore turns that
// into exactly the state rule 5 defines, with cut/verify's rebuild
// (verify.RebuildPartition): the base, the entries before pos_p(v), the
// before set's writes, every other intent, lock and record dropped. The
// result is a partition at applied index pos_p(v)-1, which restore writes
// as a materialization, the same form a running node writes now and then:
// a checkpoint directory when it was rebuilt on Pebble (a checkpoint base,
// or no base), an image file when the base is one (a snapshot of the
// in-memory version). A node whose data dir holds a materialization and no WAL starts
// from it (raftstore's restoreBase): the raft group's log begins right
// after it and the new cluster's writes follow. So a restored data dir is
// just a data dir whose WAL was truncated behind its materializations.
//
// The new cluster may have any number of nodes; the partition count is
// the snapshot's (the key-hash maps keys to that many partitions). Every
// node of the new cluster computes the same layout from --initial-cluster,
// the partition count and a token, and rebuilds the groups the layout
// places on it. Every replica of a partition writes the same state (the
// same bytes for a file; a checkpoint's SSTs may differ).
//
// # Invariants
//
//  1. The materialization of partition p holds exactly the key-values that
//     verify.Rebuild computes for p at v (DESIGN.md, invariant 4); it is at
//     index pos_p(v)-1 with term 1, so the indexes of the key-values
//     (create and mod index) keep their meaning, and the new raft group,
//     which starts from it with an empty log and elects its first leader
//     at term 1, appends entries with terms no lower than the snapshot's.
//  2. Group 0 starts from a materialization at index 1, term 1, holding
//     the new layout and last cut v, so that the new cluster's cut
//     versions start above v. The partitions carry no cut progress
//     (verify.RebuildPartition): the first cut of the new cluster starts
//     there as in a new partition.
//  3. The new cluster has a new cluster id: the token defaults to one
//     derived from the source cluster and the snapshot id, which every
//     node derives alike; an id equal to the source's is refused, so
//     restored nodes and the source cluster's nodes never take each
//     other's raft messages.
//  4. A damaged or incomplete snapshot is refused before anything is
//     written (snapshot.Store.Check reads every piece); the error names
//     the piece (*snapshot.CheckError).
//  5. A restore that fails leaves no data dir a node would start from: the
//     data dir must be absent or empty; restore creates
//     datadir.RestoreMarkerFile in it first and removes it last, after the
//     identity file (cluster.json) is written, and a node refuses to start
//     while the marker exists. On an error, restore removes what it wrote
//     (and the data dir, when it created it).
//
// # Cost
//
// Restore reads the whole snapshot once to check it, then, for every
// partition the node holds, the base and the pieces again; it holds one
// partition's entries m+1 … End in memory at a time, its state in a scratch
// Pebble beside the data dir (only an image base is held in memory).
package restore
