package node

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cutkv/cutkv/rpc"
)

// Config is what the node's loops are given besides the rpc.Node.
type Config struct {
	// CutInterval is how often group 0's leader takes a cut (0: never;
	// cuts are still taken on request and taken over from a previous
	// leader).
	CutInterval time.Duration
	// Snapshots is the automatic snapshot policy (Interval 0: none).
	Snapshots SnapshotSchedule
}

// Node runs the background loops of one cutkv node over the state and
// peer calls of its rpc.Node. Make it with New before the node serves
// or gossip delivers anything; Run starts the loops.
type Node struct {
	rn   *rpc.Node
	cfg  Config
	poke chan struct{} // wakes the cut agent; rn.PokeCuts sends on it
}

// New returns the node running rn's loops, and makes rn's PokeCuts wake
// its cut agent.
func New(rn *rpc.Node, cfg Config) *Node {
	n := &Node{rn: rn, cfg: cfg, poke: make(chan struct{}, 1)}
	rn.SetCutPoke(n.poke)
	return n
}

// Run runs the node's loops until ctx ends, and returns once every one
// of them has stopped: recovery of stale intents, the cut agent, group
// 0's cut runs, the admission of gossiped versions and the automatic
// snapshots.
func (n *Node) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){
		n.runRecovery,
		n.runCutAgent,
		n.runCuts,
		n.runGossipVersions,
		n.runSnapshots,
	} {
		wg.Go(func() { loop(ctx) })
	}
	wg.Wait()
}

func (n *Node) logger() *slog.Logger {
	if n.rn.Log != nil {
		return n.rn.Log
	}
	return slog.Default()
}
