package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// fault is one fault the nemesis injected, as the round records it.
type fault struct {
	Kind   Kind   `json:"kind"`
	At     string `json:"at"`     // since the round's start
	Target string `json:"target"` // which nodes, which group
	// Proven: the fault was seen to take effect (Proof says how); a
	// fault that was not is counted as not run.
	Proven bool   `json:"proven"`
	Proof  string `json:"proof"`
	Held   string `json:"held"`
	// RecoveryMs is from the heal until a cut completed again, -1 when
	// none did within the bound.
	RecoveryMs int64 `json:"recovery_ms"`
}

// nemesis injects faults of the round's kinds on a seeded schedule.
type nemesis struct {
	c     *cluster
	r     *rand.Rand
	kinds []Kind
	cuts  *cutter
	coord func(i int) int64 // multi-partition transactions node i coordinated so far
	// verifyNow runs a live verifier pass (copies of the logs as they
	// are now): a fault that truncates the logs on purpose calls it
	// first, so that the cuts completed just before stay verifiable.
	verifyNow func(ctx context.Context) error
	calls     *gate         // the cutter's and snapshotter's calls
	bound     time.Duration // recovery bound
	start     time.Time
	logf      func(format string, args ...any)
	schedule  []string // what was done, in order, for the replay file
}

// run injects faults until until, each held 2-6 s, healed, and followed
// by a gap of 1-3 s once a cut completed again.
func (n *nemesis) run(ctx context.Context, until time.Time) []fault {
	var out []fault
	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	if !sleep(3 * time.Second) { // let the workloads start
		return out
	}
	for len(n.kinds) > 0 && ctx.Err() == nil && time.Until(until) > 8*time.Second {
		k := n.kinds[n.r.IntN(len(n.kinds))]
		hold := time.Duration(2000+n.r.IntN(4000)) * time.Millisecond
		f := fault{Kind: k, At: time.Since(n.start).Round(time.Millisecond).String(), RecoveryMs: -1}
		f.Target, f.Proven, f.Proof = n.inject(ctx, k)
		n.schedule = append(n.schedule, fmt.Sprintf("%s %s %s hold=%v", f.At, k, f.Target, hold))
		n.logf("fault %s on %s: proven=%v (%s)", k, f.Target, f.Proven, f.Proof)
		held := time.Now()
		sleep(hold)
		f.Held = time.Since(held).Round(time.Millisecond).String()
		healed := time.Now()
		if err := n.c.heal(); err != nil {
			n.logf("heal after %s: %v", k, err)
		}
		if rec, ok := n.cuts.completedAfter(ctx, healed, n.bound); ok {
			f.RecoveryMs = rec.Milliseconds()
		}
		n.logf("healed %s: a cut completed %dms after the heal", k, f.RecoveryMs)
		out = append(out, f)
		if !sleep(time.Duration(1000+n.r.IntN(2000)) * time.Millisecond) {
			break
		}
	}
	return out
}

// others lists the node indexes but i.
func (n *nemesis) others(i int) []int {
	var out []int
	for j := range n.c.nodes {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

// cutOff says whether every node of from fails to connect to to's peer
// port (the link is cut), and how many did.
func (n *nemesis) cutOff(from []int, to int) (bool, string) {
	failed := 0
	for _, j := range from {
		if !n.c.net.Reachable(j+1, to+1, peerPort, 700*time.Millisecond) {
			failed++
		}
	}
	return failed == len(from), fmt.Sprintf("%d of %d connections to n%d's peer port timed out", failed, len(from), to+1)
}

// newLeader waits, asking only the nodes in ask, for group g's leader to
// be someone other than old.
func (n *nemesis) newLeader(ctx context.Context, g uint64, old int, ask []int, within time.Duration) (int, bool) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if l, _ := n.c.leaderOf(ctx, g, ask); l >= 0 && l != old {
			return l, true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return -1, false
}

// inject starts one fault of kind k and proves it took effect.
func (n *nemesis) inject(ctx context.Context, k Kind) (target string, proven bool, proof string) {
	c := n.c
	nodes := len(c.nodes)
	switch k {
	case IsolateNode:
		i := n.r.IntN(nodes)
		if err := c.net.Isolate(i + 1); err != nil {
			return c.nodes[i].id, false, err.Error()
		}
		ok, why := n.cutOff(n.others(i), i)
		return c.nodes[i].id, ok, why
	case IsolateLeader, IsolateMetaLeader:
		g := uint64(0)
		if k == IsolateLeader {
			g = uint64(1 + n.r.IntN(partitions))
		}
		l, term := c.leaderOf(ctx, g, nil)
		if l < 0 {
			return fmt.Sprintf("group %d", g), false, "no leader known"
		}
		target = fmt.Sprintf("%s (leader of group %d, term %d)", c.nodes[l].id, g, term)
		if err := c.net.Isolate(l + 1); err != nil {
			return target, false, err.Error()
		}
		ok, why := n.cutOff(n.others(l), l)
		nl, changed := n.newLeader(ctx, g, l, n.others(l), 10*time.Second)
		if changed {
			why += fmt.Sprintf("; the others elected %s", c.nodes[nl].id)
		} else {
			why += "; no new leader seen within 10s"
		}
		return target, ok && changed, why
	case Split23, Split14:
		if nodes != 5 {
			return "", false, "needs 5 nodes"
		}
		p := n.r.Perm(nodes)
		small := 2
		if k == Split14 {
			small = 1
		}
		a, b := p[:small], p[small:]
		if err := c.net.Partition(plus1(a), plus1(b)); err != nil {
			return "", false, err.Error()
		}
		target = fmt.Sprintf("%s | %s", names(c, a), names(c, b))
		cut := !c.net.Reachable(a[0]+1, b[0]+1, peerPort, 700*time.Millisecond)
		within := c.net.Reachable(b[0]+1, b[1]+1, peerPort, 2*time.Second)
		return target, cut && within, fmt.Sprintf("n%d->n%d timed out: %v; n%d->n%d connected: %v", a[0]+1, b[0]+1, cut, b[0]+1, b[1]+1, within)
	case OneWay:
		p := n.r.Perm(nodes)
		from, to := p[0], p[1]
		if err := c.net.DropOneWay(from+1, to+1); err != nil {
			return "", false, err.Error()
		}
		cut := !c.net.Reachable(from+1, to+1, peerPort, 700*time.Millisecond)
		return fmt.Sprintf("%s -> %s dropped", c.nodes[from].id, c.nodes[to].id), cut,
			fmt.Sprintf("a connection %s->%s timed out: %v", c.nodes[from].id, c.nodes[to].id, cut)
	case RandomLoss:
		i := n.r.IntN(nodes)
		pct := 20 + n.r.IntN(30)
		if err := c.net.Loss(i+1, pct); err != nil {
			return c.nodes[i].id, false, err.Error()
		}
		failed, tries := 0, 20
		for t := 0; t < tries; t++ {
			if !c.net.Reachable(n.others(i)[t%(nodes-1)]+1, i+1, peerPort, 300*time.Millisecond) {
				failed++
			}
		}
		return fmt.Sprintf("%s, %d%% of its packets", c.nodes[i].id, pct), failed > 0, fmt.Sprintf("%d of %d connections to it failed", failed, tries)
	case KillRestart:
		i := n.r.IntN(nodes)
		if err := c.kill(i); err != nil {
			return c.nodes[i].id, false, err.Error()
		}
		return c.nodes[i].id, true, "SIGKILL; the process was reaped"
	case Delay:
		return n.injectDelay(ctx)
	case PauseLeader:
		g := uint64(1 + n.r.IntN(partitions))
		l, _ := c.leaderOf(ctx, g, nil)
		if l < 0 {
			return fmt.Sprintf("group %d", g), false, "no leader known"
		}
		ok, err := c.pause(l)
		return fmt.Sprintf("%s (leader of group %d)", c.nodes[l].id, g), ok, pauseProof(ok, err)
	case PauseCoordinator:
		// The node that coordinated the most multi-partition
		// transactions over the last second.
		before := make([]int64, nodes)
		for i := range before {
			before[i] = n.coord(i)
		}
		time.Sleep(time.Second)
		best, most := 0, int64(-1)
		for i := range before {
			if d := n.coord(i) - before[i]; d > most {
				best, most = i, d
			}
		}
		ok, err := c.pause(best)
		proof := pauseProof(ok, err) + fmt.Sprintf("; it coordinated %d multi-partition transactions in the second before", most)
		return c.nodes[best].id, ok && most > 0, proof
	case ClockSkew:
		return n.injectClockSkew(ctx)
	case CrashPoint:
		return n.injectCrashPoint(ctx)
	case PauseMetaMidCut:
		l, _ := c.leaderOf(ctx, 0, nil)
		if l < 0 {
			return "group 0", false, "no leader known"
		}
		inFlight := n.cuts.waitInFlight(ctx, 3*time.Second)
		ok, err := c.pause(l)
		proof := pauseProof(ok, err) + fmt.Sprintf("; a CreateCut was in flight: %v", inFlight)
		return fmt.Sprintf("%s (leader of group 0)", c.nodes[l].id), ok && inFlight, proof
	case Swizzle:
		return n.injectSwizzle(ctx)
	case SnapshotCatchUp:
		return n.injectSnapshotCatchUp(ctx)
	case LoseUnsynced:
		return n.injectLoseUnsynced(ctx)
	case RestartAll:
		for i := range c.nodes {
			if err := c.kill(i); err != nil {
				return "every node", false, err.Error()
			}
		}
		return "every node", true, fmt.Sprintf("SIGKILL of all %d nodes; every process was reaped; the heal starts them together", nodes)
	case DiskFull:
		return n.injectDiskFull(ctx)
	}
	return "", false, "unknown kind"
}

func pauseProof(ok bool, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case ok:
		return "SIGSTOP; /proc shows the process stopped (T)"
	}
	return "SIGSTOP sent but /proc does not show the process stopped"
}

func plus1(xs []int) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = x + 1
	}
	return out
}

func names(c *cluster, xs []int) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += ","
		}
		s += c.nodes[x].id
	}
	return s
}
