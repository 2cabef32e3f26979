package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
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
	// needs is what the armed node must be or do to reach the point.
	needs crashNeed
	// within is how long the armed node has to reach it.
	within time.Duration
}

// crashNeed is what brings an armed node to its crash point.
type crashNeed int

const (
	// needLoad: the round's load alone (any node).
	needLoad crashNeed = iota
	// needPartitionLeader: leading a partition. A restarted node leads
	// none until raftstore's balance hands back the groups it prefers,
	// which under load can take longer than within: the kind then
	// moves leadership to it (nudgeLeadership).
	needPartitionLeader
	// needMetaLeader: leading group 0 (the armed node is its leader when
	// armed, and leadership is moved back to it as above).
	needMetaLeader
	// needCheckpoint: a materialization. A node takes them every
	// --materialize-interval (45 s) from its start, so the kind asks for
	// them (kvctl checkpoint) while it waits.
	needCheckpoint
)

// crashPoints are every crash point a round reaches (issue 17: the
// workloads' single and cross-partition transactions, a cut every
// 500 ms, a snapshot every 5 s, materializations).
var crashPoints = []crashPoint{
	{name: failpoint.WALBeforeSync, maxAfter: 20, needs: needLoad, within: 6 * time.Second},
	{name: failpoint.RaftBeforeSave, maxAfter: 20, needs: needLoad, within: 6 * time.Second},
	{name: failpoint.RaftAfterSave, maxAfter: 20, needs: needLoad, within: 6 * time.Second},
	{name: failpoint.RaftBeforeSend, maxAfter: 20, needs: needLoad, within: 6 * time.Second},
	{name: failpoint.RaftBeforeApply, maxAfter: 20, needs: needLoad, within: 6 * time.Second},
	// The coordinator is the node a transaction was sent to: any.
	{name: failpoint.TxnAfterPrepare, maxAfter: 3, needs: needLoad, within: 10 * time.Second},
	{name: failpoint.TxnAfterDecide, maxAfter: 3, needs: needLoad, within: 10 * time.Second},
	{name: failpoint.TxnBeforeVote, maxAfter: 3, needs: needPartitionLeader, within: 15 * time.Second},
	{name: failpoint.TxnInFinishBatch, maxAfter: 0, needs: needPartitionLeader, within: 15 * time.Second},
	{name: failpoint.CutAfterStart, maxAfter: 3, needs: needPartitionLeader, within: 15 * time.Second},
	{name: failpoint.CutAfterFinish, maxAfter: 3, needs: needPartitionLeader, within: 15 * time.Second},
	{name: failpoint.SnapshotBeforeManifest, maxAfter: 0, needs: needMetaLeader, within: 15 * time.Second},
	{name: failpoint.MaterializeBeforeCheckpoint, maxAfter: 3, needs: needCheckpoint, within: 10 * time.Second},
	{name: failpoint.MaterializeBeforeRename, maxAfter: 3, needs: needCheckpoint, within: 10 * time.Second},
	// Truncation needs two materializations past a WAL segment.
	{name: failpoint.WALBeforeTruncate, maxAfter: 0, needs: needCheckpoint, within: 12 * time.Second},
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

// leastArmed returns the points of points armed the fewest times in
// schedule (the nemesis's record: a crash-point entry names its arming
// as "(name=exit@N)"), so that a round arms every point before any
// twice.
func leastArmed(points []crashPoint, schedule []string) []crashPoint {
	armed := map[string]int{}
	for _, e := range schedule {
		if !strings.Contains(e, " "+string(CrashPoint)+" ") {
			continue
		}
		if _, rest, ok := strings.Cut(e, "("); ok {
			if name, _, ok := strings.Cut(rest, "=exit@"); ok {
				armed[name]++
			}
		}
	}
	fewest := -1
	for _, p := range points {
		if fewest < 0 || armed[p.name] < fewest {
			fewest = armed[p.name]
		}
	}
	var out []crashPoint
	for _, p := range points {
		if armed[p.name] == fewest {
			out = append(out, p)
		}
	}
	return out
}

// pickCrashArm draws a crash point from points, its count and its node
// (of nodes) from r; metaLeader is group 0's leader, -1 if unknown, which
// a point reached only there needs (false: nothing to arm).
func pickCrashArm(r *rand.Rand, points []crashPoint, nodes, metaLeader int) (crashArm, bool) {
	p := points[r.IntN(len(points))]
	a := crashArm{point: p, after: r.IntN(p.maxAfter + 1), node: r.IntN(nodes)}
	if p.needs == needMetaLeader {
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

// Pacing of the help the kind gives an armed node to reach its point.
const (
	crashPokeEvery = 2500 * time.Millisecond // between asks for a checkpoint
	crashNudgeWait = 4 * time.Second         // after the armed start or a move, before leadership is moved
	crashNudgeHold = 3 * time.Second         // bound on the pause that moves it
	crashNudges    = 2                       // moves at most, each won about half the time
	// crashCheckpointAsks bounds the checkpoints asked for per fault:
	// every ask lets the WAL be truncated, and asks every 2.5 s (round
	// seed 604493699726623826) truncated logs of 16 completed cuts before
	// the live verifier, slowed to a minute a pass, had copied them.
	crashCheckpointAsks = 1
	// crashAskBound bounds how long an armed node waits for its asked-for
	// checkpoint to be sent: the ask first waits for a verifier pass,
	// which took up to 75 s in a round of 8 minutes on tmpfs (round seed
	// 10843351665710126561), and a point's within counts from the send.
	crashAskBound = 2 * time.Minute
)

// injectCrashPoint kills a node, starts it armed to exit at a crash
// point, and waits for it to exit there: proven when it exited with the
// failpoint's status and its log says which point. The node is then
// left killed, for heal to start without the point armed. A node that
// did not reach the point in time is killed and started unarmed at once
// (not proven); one that exited otherwise is left killed, its log's end
// in the proof.
func (n *nemesis) injectCrashPoint(ctx context.Context) (target string, proven bool, proof string) {
	c := n.c
	meta, _ := c.leaderOf(ctx, 0, nil)
	a, ok := pickCrashArm(n.r, leastArmed(crashPoints, n.schedule), len(c.nodes), meta)
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
	nd.mu.Lock()
	p := nd.proc
	nd.mu.Unlock()

	began := time.Now()
	deadline := began.Add(a.point.within)
	var helped []string
	var asks sync.WaitGroup
	defer asks.Wait()
	nextPoke, nudges, lastNudge, checkpoints := began.Add(time.Second), 0, began, 0
	// sent carries when an asked-for checkpoint went out; until it has,
	// the point cannot have been reached for want of one.
	sent, asking := make(chan time.Time, crashCheckpointAsks), false
	exited, code := false, -1
	for !exited && ctx.Err() == nil && (time.Now().Before(deadline) || asking && time.Since(began) < crashAskBound) {
		exited, code = p.Wait(100 * time.Millisecond)
		select {
		case at := <-sent:
			asking = false
			if d := at.Add(a.point.within); d.After(deadline) {
				deadline = d
			}
		default:
		}
		if exited || time.Now().Before(nextPoke) {
			continue
		}
		nextPoke = time.Now().Add(crashPokeEvery)
		switch a.point.needs {
		case needCheckpoint:
			if checkpoints >= crashCheckpointAsks {
				break
			}
			checkpoints++
			asks.Add(1)
			asking = true
			go func() { defer asks.Done(); n.askCheckpoint(ctx, a.node, sent) }()
		case needPartitionLeader, needMetaLeader:
			if nudges < crashNudges && time.Since(lastNudge) >= crashNudgeWait && !n.leads(ctx, a.node, a.point.needs) {
				nudges++
				helped = append(helped, n.nudgeLeadership(ctx, a.node, a.point.needs))
				lastNudge = time.Now()
			}
		}
	}
	took := time.Since(began).Round(time.Millisecond)
	if a.point.needs == needCheckpoint {
		h := fmt.Sprintf("%d checkpoint asked for", checkpoints)
		if asking {
			h += ", not sent yet: a verifier pass held it"
		}
		helped = append(helped, h)
	}
	help := ""
	if len(helped) > 0 {
		help = " (" + strings.Join(helped, "; ") + ")"
	}
	if !exited {
		proof = fmt.Sprintf("%s not reached within %v%s; killed and started unarmed", a.spec(), took, help)
		if err := c.kill(a.node); err != nil {
			return target, false, proof + ": " + err.Error()
		}
		if err := c.start(a.node); err != nil {
			return target, false, proof + ": " + err.Error()
		}
		return target, false, proof
	}
	nd.mu.Lock()
	if nd.proc == p {
		nd.proc, nd.state = nil, "killed" // heal starts it, unarmed
	}
	nd.mu.Unlock()
	if code == failpoint.ExitCode && strings.Contains(logSince(nd.log, logFrom), "failpoint "+a.point.name+": exiting") {
		return target, true, fmt.Sprintf("exited with status %d at %s after %d calls passed, %v after the armed start%s", code, a.point.name, a.after, took, help)
	}
	return target, false, fmt.Sprintf("exited by itself with status %d %v after the armed start, not at %s%s; its log %s ends:\n%s",
		code, took, a.point.name, help, nd.log, tail(nd.log, 10))
}

// askCheckpoint asks, through a node other than i, for every partition
// of every node to be materialized now (kvctl checkpoint), and puts on
// sent when it sends the ask; the answer does not matter: node i may die
// in it.
func (n *nemesis) askCheckpoint(ctx context.Context, i int, sent chan<- time.Time) {
	j := (i + 1) % len(n.c.nodes)
	// The checkpoint truncates the logs at once: as in the catch-up kind,
	// cuts and snapshots wait and a verifier pass copies the logs first.
	if n.calls != nil {
		_, release := n.calls.hold(10 * time.Second)
		defer release()
	}
	if n.verifyNow != nil {
		if err := n.verifyNow(ctx); err != nil {
			n.logf("verifier pass before the crash point's checkpoint: %v", err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sent <- time.Now()
	_, _ = kvrpc.NewClusterClient(n.c.conns[j]).Checkpoint(cctx, &kvpb.CheckpointRequest{})
}

// leads says whether node i, as it sees itself, leads group 0 (need
// needMetaLeader) or some partition.
func (n *nemesis) leads(ctx context.Context, i int, need crashNeed) bool {
	st, err := n.c.status(ctx, i)
	if err != nil {
		return false
	}
	for _, row := range st.GetGroups() {
		if row.GetLeader() == n.c.nodes[i].id && (row.GetId() == 0) == (need == needMetaLeader) {
			return true
		}
	}
	return false
}

// nudgeLeadership moves leadership to node i: it pauses (SIGSTOP) the
// node leading group 0 (need needMetaLeader) or the most partitions, so
// that the groups it leads elect again among the others, until node i
// leads what it needs or crashNudgeHold passed, then resumes it. With
// three nodes node i wins about half of those elections. It says what it
// did.
func (n *nemesis) nudgeLeadership(ctx context.Context, i int, need crashNeed) string {
	c := n.c
	y := -1
	if need == needMetaLeader {
		y, _ = c.leaderOf(ctx, 0, n.others(i))
	} else if st, err := c.status(ctx, i); err == nil {
		led := map[string]int{}
		for _, row := range st.GetGroups() {
			if row.GetId() != 0 {
				led[row.GetLeader()]++
			}
		}
		for _, j := range n.others(i) {
			if led[c.nodes[j].id] > 0 && (y < 0 || led[c.nodes[j].id] > led[c.nodes[y].id]) {
				y = j
			}
		}
	}
	if y < 0 || y == i {
		return "no other leader known to move leadership from"
	}
	began := time.Now()
	if ok, err := c.pause(y); !ok || err != nil {
		_ = c.resume(y) // not paused any more: nothing to undo
		return fmt.Sprintf("pausing %s to move leadership failed: %v", c.nodes[y].id, err)
	}
	won := false
	for !won && time.Since(began) < crashNudgeHold && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		won = n.leads(ctx, i, need)
	}
	_ = c.resume(y) // not paused any more: nothing to undo
	what := "a partition"
	if need == needMetaLeader {
		what = "group 0"
	}
	return fmt.Sprintf("%s paused %v to move leadership: %s leads %s: %v", c.nodes[y].id, time.Since(began).Round(time.Millisecond), c.nodes[i].id, what, won)
}
