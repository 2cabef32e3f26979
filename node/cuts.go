package node

import (
	"context"
	"sync"
	"time"

	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/rpc"
)

// Timing of the cut agent.
const (
	// cutAgentTick is how often the agent re-checks every partition it
	// leads (it is also woken at once by a raised clock or a ready cut): a
	// dropped or overwritten CutStart or CutFinish is proposed again.
	cutAgentTick = 50 * time.Millisecond
	// cutProposeWait bounds one CutStart or CutFinish proposal.
	cutProposeWait = 2 * time.Second
)

// runCutAgent proposes, until ctx ends, what the partitions this node
// leads need for cuts (rules 2 and 6; the decision is the partition's,
// CutProposal): CutStart(known) in a partition whose log has not reached
// the known version (an idle one, one whose CutStart was dropped or
// overwritten, one whose leader just changed), and the pending CutFinish
// of a partition whose active set emptied. One proposal is in flight per
// partition.
func (n *Node) runCutAgent(ctx context.Context) {
	rn := n.rn
	t := time.NewTicker(cutAgentTick)
	defer t.Stop()
	var mu sync.Mutex
	inflight := map[uint64]bool{}
	for {
		changed := rn.Clock.Changed()
		for p, part := range rn.Partitions {
			if st, ok := rn.Store.Status(p); !ok || !st.IsLeader {
				continue
			}
			cmd := part.CutProposal(rn.Clock.Load())
			if cmd == nil {
				continue
			}
			mu.Lock()
			busy := inflight[p]
			inflight[p] = true
			mu.Unlock()
			if busy {
				continue
			}
			go func(p uint64) {
				pctx, cancel := context.WithTimeout(ctx, cutProposeWait)
				defer cancel()
				_, err := rn.Store.Propose(pctx, p, cmd)
				// Applied here, nothing more proposed yet: an "exit" leaves
				// the rest of the cut to the next leader.
				if err == nil && cmd.GetCutFinish() != nil {
					err = failpoint.Inject(failpoint.CutAfterFinish)
				} else if err == nil {
					err = failpoint.Inject(failpoint.CutAfterStart)
				}
				mu.Lock()
				delete(inflight, p)
				mu.Unlock()
				if err == nil {
					rn.PokeCuts() // a CutStart may leave a CutFinish to propose at once
				}
			}(p)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-n.poke:
		case <-t.C:
		}
	}
}

// runCuts runs, until ctx ends, group 0's side of cuts on this node:
// while it leads group 0 it takes over a cut left running by a previous
// leader (rule 7) and, every Config.CutInterval (0: never), takes a cut.
func (n *Node) runCuts(ctx context.Context) {
	rn, interval := n.rn, n.cfg.CutInterval
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var next time.Time
	if interval > 0 {
		next = time.Now().Add(interval)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if rn.Meta == nil {
			return
		}
		if st, ok := rn.Store.Status(0); !ok || !st.IsLeader {
			continue
		}
		if c, ok := rn.Meta.RunningCut(); ok {
			if !rn.Cuts.Driving(c.GetVersion()) {
				rn.Cuts.Ensure(rn.Background, c)
			}
			continue
		}
		if interval > 0 && !time.Now().Before(next) {
			next = time.Now().Add(interval)
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, _ = rpc.StartCut(cctx, rn)
			cancel()
		}
	}
}

// runGossipVersions admits, until ctx ends, the highest version gossip
// announced (rpc.Node.LearnGossip takes them without blocking memberlist)
// through the same admission as a request's marker.
func (n *Node) runGossipVersions(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.rn.GossipLearned():
		}
		if v, err := n.rn.AdmitGossiped(ctx); err != nil {
			n.logger().Warn("cut version from gossip refused", "version", v, "err", err)
		}
	}
}
