package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/cutkv/cutkv/internal/failpoint"
)

// The crash-point kind (issue 17) kills a node and starts it again armed
// to exit at one named crash point (internal/failpoint) after a few
// calls: a kill -9 at that line of code rather than at a random moment.
// The harness builds kvnode with the failpoints tag; only that one start
// has the point armed, and heal restarts the node without it.

// crashPoint is a crash point a chaos round reaches, and how the kind
// arms it.
type crashPoint struct {
	name string
	// maxAfter bounds N in name=exit@N: the point fires after 0..maxAfter
	// calls passed, so that frequent points crash at a varying moment.
	maxAfter int
	// metaLeader: only group 0's leader reaches the point; the node armed
	// is that one.
	metaLeader bool
	// within is how long the armed node has to reach it. Points on a
	// partition's leader wait for the restarted node to be handed back
	// the groups it prefers (raftstore's balance, every 3 s).
	within time.Duration
}

// crashPoints are every crash point a round's load reaches (the
// workloads' single and cross-partition transactions, a cut every
// 500 ms, a snapshot every 5 s, and the materializations every group
// takes at a node's start, as it has none since then).
var crashPoints = []crashPoint{
	{name: failpoint.WALBeforeSync, maxAfter: 20, within: 6 * time.Second},
	{name: failpoint.RaftBeforeSave, maxAfter: 20, within: 6 * time.Second},
	{name: failpoint.RaftAfterSave, maxAfter: 20, within: 6 * time.Second},
	{name: failpoint.RaftBeforeSend, maxAfter: 20, within: 6 * time.Second},
	{name: failpoint.RaftBeforeApply, maxAfter: 20, within: 6 * time.Second},
	{name: failpoint.WALBeforeTruncate, maxAfter: 0, within: 12 * time.Second},
	{name: failpoint.MaterializeBeforeCheckpoint, maxAfter: 3, within: 10 * time.Second},
	{name: failpoint.MaterializeBeforeRename, maxAfter: 3, within: 10 * time.Second},
	// The coordinator is the node a transaction was sent to: any.
	{name: failpoint.TxnAfterPrepare, maxAfter: 3, within: 10 * time.Second},
	{name: failpoint.TxnAfterDecide, maxAfter: 3, within: 10 * time.Second},
	// On a partition's leader.
	{name: failpoint.TxnBeforeVote, maxAfter: 3, within: 12 * time.Second},
	{name: failpoint.TxnInFinishBatch, maxAfter: 0, within: 12 * time.Second},
	{name: failpoint.CutAfterStart, maxAfter: 3, within: 12 * time.Second},
	{name: failpoint.CutAfterFinish, maxAfter: 3, within: 12 * time.Second},
	// On group 0's leader, once it leads group 0 again and a snapshot runs.
	{name: failpoint.SnapshotBeforeManifest, maxAfter: 0, metaLeader: true, within: 15 * time.Second},
}

// crashArm is one arming of a crash point: which, after how many calls,
// on which node.
type crashArm struct {
	point crashPoint
	after int
	node  int
}

// spec is the arming in the failpoint package's syntax.
func (a crashArm) spec() string { return fmt.Sprintf("%s=exit@%d", a.point.name, a.after) }

// env is the variable that arms it in a node's environment.
func (a crashArm) env() string { return failpoint.EnvVar + "=" + a.spec() }

// pickCrashArm draws a crash point from points, its count and its node
// (of nodes) from r; metaLeader is group 0's leader, -1 if unknown, which
// a point reached only there needs (false: nothing to arm).
func pickCrashArm(r *rand.Rand, points []crashPoint, nodes, metaLeader int) (crashArm, bool) {
	p := points[r.IntN(len(points))]
	a := crashArm{point: p, after: r.IntN(p.maxAfter + 1), node: r.IntN(nodes)}
	if p.metaLeader {
		if metaLeader < 0 {
			return a, false
		}
		a.node = metaLeader
	}
	return a, true
}

// withEnv returns base with extra ("NAME=value") set: a variable of base
// that extra names is replaced, the others kept in order. base is not
// changed.
func withEnv(base, extra []string) []string {
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		replaced := false
		for _, x := range extra {
			if xn, _, _ := strings.Cut(x, "="); xn == name {
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// injectCrashPoint kills a node, starts it armed to exit at a crash
// point, and waits for it to exit there: proven when it exited with the
// failpoint's status and its log says which point. The node is then
// left killed, for heal to start without the point armed. A node that
// did not reach the point in time is killed and started unarmed at once
// (not proven); one that exited otherwise is left killed, its log's end
// in the proof.
func (n *nemesis) injectCrashPoint(ctx context.Context) (target string, proven bool, proof string) {
	c := n.c
	meta := -1
	if l, _ := c.leaderOf(ctx, 0, nil); l >= 0 {
		meta = l
	}
	a, ok := pickCrashArm(n.r, crashPoints, len(c.nodes), meta)
	if !ok {
		return a.spec(), false, "no leader of group 0 known to arm " + a.point.name + " on; nothing done"
	}
	nd := c.nodes[a.node]
	target = fmt.Sprintf("%s (%s)", nd.id, a.spec())
	var logFrom int64 // the armed start's log begins there
	if st, err := os.Stat(nd.log); err == nil {
		logFrom = st.Size()
	}
	if err := c.kill(a.node); err != nil {
		return target, false, err.Error()
	}
	if err := c.startWith(a.node, []string{a.env()}); err != nil {
		return target, false, err.Error() // left killed: heal starts it
	}
	began := time.Now()
	exited, code := c.awaitExit(ctx, a.node, a.point.within)
	took := time.Since(began).Round(time.Millisecond)
	fired := "failpoint " + a.point.name + ": exiting"
	switch {
	case !exited:
		proof = fmt.Sprintf("%s not reached within %v; killed and started unarmed", a.spec(), a.point.within)
		if err := c.kill(a.node); err != nil {
			return target, false, proof + ": " + err.Error()
		}
		if err := c.start(a.node); err != nil {
			return target, false, proof + ": " + err.Error()
		}
		return target, false, proof
	case code == failpoint.ExitCode && strings.Contains(logSince(nd.log, logFrom), fired):
		return target, true, fmt.Sprintf("exited with status %d at %s after %d calls passed, %v after the armed start", code, a.point.name, a.after, took)
	}
	return target, false, fmt.Sprintf("exited by itself with status %d %v after the armed start, not at %s; its log %s ends:\n%s",
		code, took, a.point.name, nd.log, tail(nd.log, 10))
}

// awaitExit waits up to within for node i's process to exit by itself,
// and then marks the node killed (heal starts it again). code is the
// exit status, -1 for a signal.
func (c *cluster) awaitExit(ctx context.Context, i int, within time.Duration) (exited bool, code int) {
	nd := c.nodes[i]
	nd.mu.Lock()
	p := nd.proc
	nd.mu.Unlock()
	if p == nil {
		return false, -1
	}
	deadline := time.Now().Add(within)
	for !exited && ctx.Err() == nil && time.Now().Before(deadline) {
		exited, code = p.Wait(min(100*time.Millisecond, time.Until(deadline)))
	}
	if exited {
		nd.mu.Lock()
		if nd.proc == p {
			nd.proc, nd.state = nil, "killed"
		}
		nd.mu.Unlock()
	}
	return exited, code
}

// logSince returns what the file at path holds from offset on ("" if it
// cannot be read).
func logSince(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, offset, 1<<40))
	if err != nil {
		return ""
	}
	return string(b)
}
