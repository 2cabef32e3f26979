package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cutkv/cutkv/client"
)

// The JSON shape of kvctl checkpoint (docs/cli.md), decoded independently
// of kvctl's own types.
type (
	jGroupCheckpoint struct {
		Node              string `json:"node"`
		Group             uint64 `json:"group"`
		MaterializedIndex uint64 `json:"materialized_index"`
		Error             string `json:"error"`
		NotAsked          bool   `json:"not_asked"`
	}
	jCheckpoint struct {
		Header jHeader            `json:"header"`
		Groups []jGroupCheckpoint `json:"groups"`
	}
)

// groupCheckpointFields is the field set of docs/cli.md ("error" only
// when set).
var groupCheckpointFields = []string{"group", "materialized_index", "node"}

// checkpointFlags make a node's WAL roll over every 64 KiB, so that a few
// thousand writes fill several segments a checkpoint can truncate, and
// keep the background materializer out of the way: materializations come
// only from kvctl checkpoint.
var checkpointFlags = []string{"--wal-segment-size", "65536", "--materialize-interval", "1h"}

// writeVia is runWriters with every writer's client knowing only the
// given endpoints.
func writeVia(ctx context.Context, t testing.TB, c *Cluster, endpoints []string, n int, prefix string, log *writeLog) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		cl := c.ClientOf(endpoints...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("%s/w%d/%07d", prefix, w, i)
				value := fmt.Sprintf("%s@%d", key, time.Now().UnixNano())
				octx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := cl.Put(octx, []byte(key), []byte(value))
				cancel()
				if err != nil && ctx.Err() != nil {
					if errors.Is(err, client.ErrOutcomeUnknown) {
						log.record(key, value, err)
					}
					return
				}
				log.record(key, value, err)
			}
		}()
	}
	return wg.Wait
}

// waitAcked waits up to d until log holds at least n acknowledged writes.
func waitAcked(t testing.TB, log *writeLog, n int, d time.Duration) {
	t.Helper()
	began := time.Now()
	ok, _ := WaitFor(d, func() (bool, string) {
		a, _, _ := log.counts()
		return a >= n, ""
	})
	acked, unknown, refused := log.counts()
	if !ok {
		t.Fatalf("%d writes acknowledged within %v, want %d (%d unknown, %d refused)", acked, d, n, unknown, refused)
	}
	t.Logf("%d writes acknowledged in %v", acked, time.Since(began).Round(time.Millisecond))
}

// checkpointJSON runs kvctl -o json checkpoint against endpoints and
// checks the JSON against docs/cli.md.
func checkpointJSON(t testing.TB, endpoints []string) (jCheckpoint, kvctlResult) {
	t.Helper()
	began := time.Now()
	r := runKvctl(t, nil, nil, "--endpoints", strings.Join(endpoints, ","), "-o", "json", "checkpoint")
	t.Logf("kvctl checkpoint: exit %d in %v", r.code, time.Since(began).Round(time.Millisecond))
	var ck jCheckpoint
	raw := decodeJSON(t, r, &ck)
	checkFields(t, "checkpoint", mustMarshal(t, raw), []string{"groups", "header"})
	checkFields(t, "checkpoint.header", raw["header"], headerFields)
	var items []json.RawMessage
	if err := json.Unmarshal(raw["groups"], &items); err != nil {
		t.Fatalf("checkpoint.groups: %v", err)
	}
	for i, it := range items {
		fields := groupCheckpointFields
		if ck.Groups[i].Error != "" {
			fields = []string{"error", "group", "materialized_index", "node"}
		}
		if ck.Groups[i].NotAsked {
			fields = []string{"error", "group", "materialized_index", "node", "not_asked"}
		}
		checkFields(t, fmt.Sprintf("checkpoint.groups[%d]", i), it, fields)
	}
	return ck, r
}

// statusJSON runs kvctl -o json status against endpoints.
func statusJSON(t testing.TB, endpoints []string) (jStatus, kvctlResult) {
	t.Helper()
	r := runKvctl(t, nil, nil, "--endpoints", strings.Join(endpoints, ","), "-o", "json", "status")
	var st jStatus
	if r.code == 0 {
		decodeJSON(t, r, &st)
	}
	return st, r
}

// materializedIndexes maps node/group to the index a checkpoint reported.
func materializedIndexes(ck jCheckpoint) map[string]uint64 {
	m := map[string]uint64{}
	for _, g := range ck.Groups {
		m[fmt.Sprintf("%s/%d", g.Node, g.Group)] = g.MaterializedIndex
	}
	return m
}

// TestKvctlCheckpoint: kvctl checkpoint materializes every group on every
// node and the WAL is truncated behind; kvctl status shows it; a cluster
// stopped with SIGTERM and started again (from the materializations and
// the WAL tail) keeps every acknowledged write, and its replicas agree.
func TestKvctlCheckpoint(t *testing.T) {
	const partitions = 4
	c := NewCluster(t, Spec{Bin: bin.Kvnode, Partitions: partitions, Configure: func(n *Node) {
		n.Flags = append(n.Flags, checkpointFlags...)
	}})
	eps := c.Endpoints()
	groups := len(c.Nodes) * (partitions + 1) // every node holds every group

	// Round 1: a few thousand writes, then a checkpoint.
	log1 := newWriteLog()
	ctx, stop := context.WithCancel(context.Background())
	wait := writeVia(ctx, t, c, eps, 4, "ckpt1", log1)
	defer func() { stop(); wait() }()
	waitAcked(t, log1, 3000, 20*time.Second)
	stop()
	wait()
	ck1, r := checkpointJSON(t, eps)
	if r.code != 0 || len(ck1.Groups) != groups {
		t.Fatalf("first checkpoint: want exit 0 and %d groups; %v", groups, r)
	}
	for _, g := range ck1.Groups {
		if g.Error != "" || g.MaterializedIndex == 0 {
			t.Errorf("first checkpoint: %+v; want an index and no error", g)
		}
	}

	// Round 2: more writes, a second checkpoint, in text this time.
	log2 := newWriteLog()
	ctx, stop = context.WithCancel(context.Background())
	wait = writeVia(ctx, t, c, eps, 4, "ckpt2", log2)
	waitAcked(t, log2, 1000, 20*time.Second)
	stop()
	wait()
	r = c.Kvctl(t, "checkpoint")
	if wantLine := fmt.Sprintf("\n%d of %d groups materialized on 3 nodes\n", groups, groups); r.code != 0 ||
		!strings.HasPrefix(r.stdout, "NODE  GROUP  MATERIALIZED  ERROR\n") || !strings.HasSuffix(r.stdout, wantLine) {
		t.Fatalf("second checkpoint (text): want exit 0, the table and %q; %v", wantLine, r)
	}
	// A third one in JSON: the partitions' indexes moved on since the
	// first (group 0 had nothing new to materialize: the same index).
	ck2, r := checkpointJSON(t, eps)
	if r.code != 0 {
		t.Fatalf("third checkpoint: %v", r)
	}
	first := materializedIndexes(ck1)
	for _, g := range ck2.Groups {
		k := fmt.Sprintf("%s/%d", g.Node, g.Group)
		if g.Error != "" || g.MaterializedIndex < first[k] || (g.Group > 0 && g.MaterializedIndex <= first[k]) {
			t.Errorf("checkpoint after more writes: %s at %d, first checkpoint %d; want a later index for a partition", k, g.MaterializedIndex, first[k])
		}
	}

	// status: every group materialized, every node's WAL truncated. A
	// node publishes a group's new materialized index at the group's next
	// raft step (a heartbeat at the latest), so poll.
	var st jStatus
	ok, last := WaitFor(10*time.Second, func() (bool, string) {
		var r kvctlResult
		st, r = statusJSON(t, eps)
		if r.code != 0 {
			return false, r.String()
		}
		for _, g := range st.Groups {
			if g.MaterializedIndex == 0 || g.MaterializedIndex > g.AppliedIndex || g.Materializations == 0 {
				return false, fmt.Sprintf("group %+v", g)
			}
		}
		for _, n := range st.Nodes {
			if n.WALFirstIndex <= 1 || n.Error != "" {
				return false, fmt.Sprintf("node %+v", n)
			}
		}
		return true, ""
	})
	if !ok {
		t.Fatalf("status after checkpoints: want materialized_index > 0 on every group and wal_first_index > 1 on every node; last: %s", last)
	}
	for _, g := range st.Groups {
		t.Logf("group %d: applied %d, materialized %d, %d files, WAL tail %d entries %d bytes", g.ID, g.AppliedIndex, g.MaterializedIndex, g.Materializations, g.WALTailEntries, g.WALTailBytes)
	}
	for _, n := range st.Nodes {
		t.Logf("%s: WAL %d bytes, indexes %d to %d", n.ID, n.WALBytes, n.WALFirstIndex, n.WALLastIndex)
	}
	r = c.Kvctl(t, "status")
	if !strings.Contains(r.stdout, "GROUP  LEADER  TERM  COMMIT  APPLIED  MATERIALIZED  MATS  WAL TAIL") {
		t.Errorf("status text lacks the checkpoint columns: %v", r)
	}

	// Stop every node with SIGTERM at once, start them again.
	for _, n := range c.Nodes {
		n.Signal(syscall.SIGTERM)
	}
	for _, n := range c.Nodes {
		if code, desc := n.WaitExit(15 * time.Second); code != 0 {
			t.Errorf("%s: %s after SIGTERM, want exit status 0; stderr:\n%s", n.ID, desc, Tail(n.Stderr(), 20))
		}
	}
	began := time.Now()
	c.StartAll()
	t.Logf("all nodes ready again in %v", time.Since(began).Round(time.Millisecond))
	rng := NewRand(t)
	checkWrites(t, c, "ckpt1", log1, rng, 5)
	checkWrites(t, c, "ckpt2", log2, rng, 5)
	if r := c.Kvctl(t, "check"); r.code != 0 {
		t.Errorf("check after the restart: %v", r)
	}
	// The nodes started from their materializations.
	ok, last = WaitFor(10*time.Second, func() (bool, string) {
		st, r := statusJSON(t, eps)
		if r.code != 0 {
			return false, r.String()
		}
		for _, g := range st.Groups {
			if g.MaterializedIndex == 0 {
				return false, fmt.Sprintf("group %+v", g)
			}
		}
		return true, ""
	})
	if !ok {
		t.Errorf("status after the restart: want materialized_index > 0 on every group; last: %s", last)
	}
}

// TestCrashDuringCheckpoint: node n1 crashes (status 86, like kill -9)
// inside kvctl checkpoint, at a failpoint: with a materialization file
// written and synced but not renamed into place, or with the WAL's state
// records written again but its front not yet truncated. Restarted
// without the failpoint, n1 recovers: no acknowledged write is lost, its
// replicas agree with the others', it serves as part of the quorum, and
// no temporary materialization file is left.
func TestCrashDuringCheckpoint(t *testing.T) {
	for _, fp := range []string{"materializeBeforeRename", "walBeforeTruncate"} {
		t.Run(fp, func(t *testing.T) { crashDuringCheckpoint(t, fp) })
	}
}

func crashDuringCheckpoint(t *testing.T, fp string) {
	rng := NewRand(t)
	c := NewCluster(t, Spec{Bin: bin.Kvnode, Configure: func(n *Node) {
		n.Flags = append(n.Flags, checkpointFlags...)
		if n.ID == "n1" {
			n.Bin = bin.KvnodeFailpoints
			n.Env = []string{"CUTKV_FAILPOINTS=" + fp + "=exit"}
		}
	}})
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	others := []string{n2.GRPC, n3.GRPC}
	matDir := filepath.Join(n1.DataDir, "materializations")

	log := newWriteLog()
	ctx, stop := context.WithCancel(context.Background())
	wait := writeVia(ctx, t, c, others, 4, "crash", log)
	defer func() { stop(); wait() }()
	// Enough for several WAL segments: a truncation to do.
	waitAcked(t, log, 2000, 20*time.Second)

	// The checkpoint, with writes going on; n1 crashes in it.
	ck, r := checkpointJSON(t, others)
	code, desc := n1.WaitExit(20 * time.Second)
	exitAcked, _, _ := log.counts()
	if code != 86 || !strings.Contains(n1.Stderr(), "failpoint "+fp+": exiting") {
		t.Fatalf("n1: %s, want exit status 86 from the failpoint; stderr:\n%s", desc, Tail(n1.Stderr(), 20))
	}
	var n1Failed []string
	for _, g := range ck.Groups {
		if g.Node == "n1" && g.Error != "" {
			n1Failed = append(n1Failed, fmt.Sprintf("%d: %s", g.Group, g.Error))
		} else if g.Error != "" {
			t.Errorf("checkpoint: %+v; only n1 was to fail", g)
		}
	}
	t.Logf("checkpoint: exit %d; n1's failed rows: %q", r.code, n1Failed)
	switch {
	case fp == "materializeBeforeRename" && (r.code != 8 || len(n1Failed) == 0):
		// n1 died while it materialized: its rows cannot all be fine.
		t.Errorf("checkpoint with n1 crashing in it: want exit 8 and n1's rows failed; %v", r)
	case fp == "walBeforeTruncate" && r.code != 0 && r.code != 8:
		// n1 truncates after it answered, or while it answers.
		t.Errorf("checkpoint with n1 crashing after it: want exit 0 or 8; %v", r)
	}
	if fp == "materializeBeforeRename" {
		// The crash left the synced temporary file behind.
		if tmps := tempFiles(t, matDir); len(tmps) == 0 {
			t.Errorf("n1 crashed before a rename, yet %s holds no temporary file", matDir)
		} else {
			t.Logf("n1 left %s", strings.Join(tmps, ", "))
		}
	}

	// n2 and n3 keep the quorum: writes go on without n1.
	waitAcked(t, log, exitAcked+50, 10*time.Second)

	// n1 again, without the failpoint, while the writers write.
	n1.Bin, n1.Env = bin.Kvnode, nil
	began := time.Now()
	n1.Restart()
	t.Logf("n1 ready again in %v", time.Since(began).Round(time.Millisecond))
	if tmps := tempFiles(t, matDir); len(tmps) > 0 {
		t.Errorf("n1 restarted with temporary files left in %s: %s", matDir, strings.Join(tmps, ", "))
	}
	a, _, _ := log.counts()
	waitAcked(t, log, a+50, 10*time.Second)
	stop()
	wait()
	acked, unknown, refused := log.counts()
	t.Logf("%d writes acknowledged, %d unknown, %d refused", acked, unknown, refused)

	checkWrites(t, c, "crash", log, rng, 5)
	// n1's replicas hold what the others hold.
	if r := c.Kvctl(t, "check"); r.code != 0 {
		t.Errorf("check after n1's restart: %v", r)
	}
	// n1 in the quorum: with n2 gone every partition needs n1's log.
	n2.Kill9()
	checkWrites(t, c, "crash", log, rng, 5)
}

// tempFiles lists the names in dir that mark an unfinished write.
func tempFiles(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	var tmps []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			tmps = append(tmps, e.Name())
		}
	}
	return tmps
}
