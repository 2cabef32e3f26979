package process

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// failpointRun is a cluster in which one node runs the failpoints build
// with CUTKV_FAILPOINTS=spec, under writers, until that node exits.
type failpointRun struct {
	c      *Cluster
	victim *Node
	log    *writeLog
	code   int
	desc   string
}

// runUntilVictimExits starts a cluster whose node victim (index) runs
// kvnode-failpoints with spec, writes until the victim exits by itself
// (at most 60 s), then writes on for a moment with the two others.
func runUntilVictimExits(t *testing.T, victim int, spec, prefix string) *failpointRun {
	t.Helper()
	c := NewCluster(t, Spec{Bin: bin.Kvnode, Configure: func(n *Node) {
		if n.ID == fmt.Sprintf("n%d", victim+1) {
			n.Bin = bin.KvnodeFailpoints
			n.Env = []string{"CUTKV_FAILPOINTS=" + spec}
		}
	}})
	r := &failpointRun{c: c, victim: c.Nodes[victim], log: newWriteLog()}
	ctx, stop := context.WithCancel(context.Background())
	wait := runWriters(ctx, t, c, 4, prefix, r.log)
	defer func() { stop(); wait() }()

	began := time.Now()
	r.code, r.desc = r.victim.WaitExit(60 * time.Second)
	exitAcked, _, _ := r.log.counts()
	// The two others keep the quorum: writes go on without the victim.
	ok, _ := WaitFor(10*time.Second, func() (bool, string) {
		a, _, _ := r.log.counts()
		return a >= exitAcked+50, ""
	})
	stop()
	wait()
	acked, unknown, refused := r.log.counts()
	t.Logf("%s (%s) %s after %v; %d writes acknowledged by then, %d in all, %d unknown, %d refused",
		r.victim.ID, spec, r.desc, time.Since(began).Round(time.Millisecond), exitAcked, acked, unknown, refused)
	if !ok {
		t.Errorf("the two remaining nodes acknowledged fewer than 50 writes within 10s")
	}
	return r
}

// checkAfterRestart restarts the victim with the normal build and no
// failpoint, checks every acknowledged write, then kills another node so
// that the victim's recovered log is needed for the quorum, and checks
// again.
func (r *failpointRun) checkAfterRestart(t *testing.T, prefix string, rng *rand.Rand) {
	t.Helper()
	checkWrites(t, r.c, prefix, r.log, rng, 0)
	r.victim.Bin, r.victim.Env = bin.Kvnode, nil
	r.victim.Restart()
	for _, n := range r.c.Nodes {
		if n != r.victim {
			n.Kill9()
			t.Logf("%s restarted; %s SIGKILLed: %s and the third node serve", r.victim.ID, n.ID, r.victim.ID)
			break
		}
	}
	checkWrites(t, r.c, prefix, r.log, rng, 5)
}

// TestWALSyncFailureIsSticky: after a failed WAL fsync a node stops
// acknowledging and exits with status 1 naming the WAL segment file; no
// write the cluster acknowledged is lost, also once the node's recovered
// log is part of the quorum.
func TestWALSyncFailureIsSticky(t *testing.T) {
	// Enough fsyncs pass for the node to bootstrap and serve a while.
	rng := NewRand(t)
	after := 200 + rng.IntN(200)
	r := runUntilVictimExits(t, 1, fmt.Sprintf("walBeforeSync=error@%d", after), "walfail")
	stderr := r.victim.Stderr()
	if r.code != 1 {
		t.Errorf("%s: %s after a failed WAL fsync, want exit status 1; stderr:\n%s", r.victim.ID, r.desc, Tail(stderr, 20))
	}
	// The last words name a segment file in the node's WAL directory.
	walDir := filepath.Join(r.victim.DataDir, "wal") + string(filepath.Separator)
	fatal := regexp.MustCompile(`(?m)^kvnode: .*` + regexp.QuoteMeta(walDir) + `\S+`)
	if m := fatal.FindString(stderr); m == "" {
		t.Errorf("%s: no \"kvnode: ...\" line naming a file under %s; stderr:\n%s", r.victim.ID, walDir, Tail(stderr, 20))
	} else {
		t.Logf("%s said: %s", r.victim.ID, m)
	}
	if !strings.Contains(stderr, "failpoint: injected error") {
		t.Errorf("%s: the error does not carry the injected cause; stderr:\n%s", r.victim.ID, Tail(stderr, 20))
	}
	r.checkAfterRestart(t, "walfail", rng)
}

// TestCrashAfterSave: a node crashes (status 86, like kill -9) right after
// a batch is durable and before anything is sent or applied; restarted,
// it recovers and no acknowledged write is lost.
func TestCrashAfterSave(t *testing.T) {
	rng := NewRand(t)
	after := 200 + rng.IntN(200)
	r := runUntilVictimExits(t, 0, fmt.Sprintf("raftAfterSave=exit@%d", after), "aftersave")
	if r.code != 86 || !strings.Contains(r.victim.Stderr(), "failpoint raftAfterSave: exiting") {
		t.Errorf("%s: %s, want exit status 86 from the failpoint; stderr:\n%s", r.victim.ID, r.desc, Tail(r.victim.Stderr(), 20))
	}
	r.checkAfterRestart(t, "aftersave", rng)
}
