// Package node runs a cutkv node's background work: the loops that
// nobody's request starts and that must run as long as the node does.
//
//   - recovery: the intents of partitions this node leads that outlived
//     their coordinator are settled from the record partition and the
//     participants' logs (DESIGN.md, "Transactions"; the decisions are
//     txn.Recover's), and each partition's transaction horizon is raised;
//   - the cut agent: CutStart and CutFinish proposed where the partitions
//     this node leads need them (consistent cut rules 2 and 6; the
//     decision is partition.CutProposal's);
//   - group 0's cut runs: a cut left running by a previous leader is
//     taken over (rule 7) and periodic cuts are taken;
//   - the admission of cut versions announced by gossip (rule 1, through
//     the same check as a request's marker);
//   - automatic snapshots and their pruning.
//
// It drives the node through rpc.Node: its state (store, partitions,
// clock, group 0's state, the cut driver) and its peer calls
// (rpc.CallParticipant, ReadRecord). rpc does not import node (an import
// rule, internal/importrules): the services there are the request path,
// and what they keep between requests — the marker merge, wait-die's
// queues, the Finish batches, the batches of records to forget, the
// snapshot pins a PrepareSnapshot leaves for its UploadSnapshot — is
// request-path state that stays with them. server wires an rpc.Node and
// runs one Node beside its listeners.
package node
