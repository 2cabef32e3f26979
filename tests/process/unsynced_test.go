package process

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/synclog"
)

// stopWithUnsynced SIGSTOPs n at a moment its files hold bytes written
// but not fsynced (as its synced-length log tells), trying up to tries
// times; it returns those files, or nil with n stopped all the same.
func stopWithUnsynced(t *testing.T, n *Node, logPath string, tries int) []synclog.Loss {
	t.Helper()
	for i := 0; i < tries; i++ {
		n.Signal(syscall.SIGSTOP)
		time.Sleep(2 * time.Millisecond) // the stop lands (/proc state T)
		pending, err := synclog.Unsynced(n.DataDir, logPath)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) > 0 || i == tries-1 {
			return pending
		}
		n.Signal(syscall.SIGCONT)
		time.Sleep(time.Duration(3+i%20) * time.Millisecond)
	}
	return nil
}

// TestLoseUnsyncedWrites: nodes of the failpoints build record what they
// fsync (internal/synclog); killed, their files are cut back to it, as
// after a power failure. First one node (then another killed, so that
// the first one's recovered log is needed for the quorum), then all three
// at once: no acknowledged write is lost, and the nodes start again.
func TestLoseUnsyncedWrites(t *testing.T) {
	rng := NewRand(t)
	logs := map[string]string{}
	c := NewCluster(t, Spec{Bin: bin.KvnodeFailpoints, Configure: func(n *Node) {
		logs[n.ID] = filepath.Join(t.TempDir(), n.ID+".synced")
		n.Env = []string{synclog.EnvVar + "=" + logs[n.ID]}
	}})
	log := newWriteLog()
	ctx, stop := context.WithCancel(context.Background())
	wait := runWriters(ctx, t, c, 4, "unsynced", log)
	defer func() { stop(); wait() }()
	waitAcked(t, log, 200, 30*time.Second)

	cut := func(n *Node) int64 {
		t.Helper()
		lost, err := synclog.Truncate(n.DataDir, logs[n.ID])
		if err != nil {
			t.Fatal(err)
		}
		var bytes int64
		for _, l := range lost {
			bytes += l.Lost()
		}
		t.Logf("%s: %d files cut to their fsynced length, %d bytes lost: %v", n.ID, len(lost), bytes, lost)
		return bytes
	}

	victim := c.Nodes[rng.IntN(len(c.Nodes))]
	pending := stopWithUnsynced(t, victim, logs[victim.ID], 200)
	victim.Kill9()
	if lost := cut(victim); len(pending) == 0 || lost == 0 {
		t.Fatalf("%s: no unsynced bytes found in 200 stops under writes (%d pending): the synced-length log records nothing useful", victim.ID, len(pending))
	}
	acked, _, _ := log.counts()
	waitAcked(t, log, acked+100, 30*time.Second) // the two others go on
	victim.Restart()
	for _, n := range c.Nodes {
		if n != victim {
			n.Kill9()
			t.Logf("%s restarted; %s SIGKILLed: the quorum needs %s's recovered log", victim.ID, n.ID, victim.ID)
			acked, _, _ := log.counts()
			waitAcked(t, log, acked+100, 30*time.Second)
			n.Restart()
			break
		}
	}
	acked, _, _ = log.counts()
	waitAcked(t, log, acked+100, 30*time.Second)

	// All three at once.
	var total int64
	for _, n := range c.Nodes {
		stopWithUnsynced(t, n, logs[n.ID], 50)
	}
	c.Kill9All()
	for _, n := range c.Nodes {
		total += cut(n)
	}
	t.Logf("a power failure of the whole cluster lost %d unsynced bytes", total)
	c.StartAll()
	acked, _, _ = log.counts()
	waitAcked(t, log, acked+100, 60*time.Second)
	stop()
	wait()
	checkWrites(t, c, "unsynced", log, rng, 5)
}
