package server_test

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/datadir"
	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/raftstore"
	"github.com/cutkv/cutkv/server"
	"github.com/cutkv/cutkv/wal"
)

// smallCheckpoints makes WAL segments small so truncation is visible, and
// turns periodic materialization off (tests trigger it).
func smallCheckpoints(i int, cfg *server.Config) {
	cfg.WALSegmentSize = 64 << 10
	cfg.MaterializeInterval = time.Hour
	cfg.MaterializeBytes = 1 << 40
	cfg.CatchUpEntries = 10
}

// writeMany writes n keys through the nodes named (all when none).
func writeMany(t *testing.T, c *clustertest.Cluster, prefix string, n int, via ...int) map[string]string {
	t.Helper()
	if len(via) == 0 {
		for i := 0; i < c.N(); i++ {
			via = append(via, i)
		}
	}
	want := map[string]string{}
	for i := 0; i < n; i++ {
		k, v := fmt.Sprintf("%s-%04d", prefix, i), fmt.Sprintf("v%d-%s", i, strings.Repeat("x", 100))
		put(t, c, via[i%len(via)], k, v)
		want[k] = v
	}
	return want
}

func checkpointAll(t *testing.T, c *clustertest.Cluster, via int) *kvpb.CheckpointResponse {
	t.Helper()
	resp, err := kvrpc.NewClusterClient(c.Conn(via)).Checkpoint(ctxT(t, 30*time.Second), &kvpb.CheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range resp.GetGroups() {
		if g.GetError() != "" || g.GetMaterializedIndex() == 0 {
			t.Fatalf("checkpoint: node %s group %d: index %d error %q", g.GetNode(), g.GetGroup(), g.GetMaterializedIndex(), g.GetError())
		}
	}
	return resp
}

func readAll(t *testing.T, c *clustertest.Cluster, via int, want map[string]string) {
	t.Helper()
	for k, v := range want {
		clustertest.Eventually(t, 10*time.Second, func() error {
			r, err := c.KV(via).Get(ctxT(t, 2*time.Second), &kvpb.GetRequest{Key: []byte(k)})
			if err != nil {
				return err
			}
			if string(r.GetKv().GetValue()) != v {
				return fmt.Errorf("%s = %q, want %q", k, r.GetKv().GetValue(), v)
			}
			return nil
		})
	}
}

func requireConsistent(t *testing.T, c *clustertest.Cluster, via int) {
	t.Helper()
	clustertest.Eventually(t, 20*time.Second, func() error {
		chk, err := kvrpc.NewClusterClient(c.Conn(via)).Check(ctxT(t, 15*time.Second), &kvpb.CheckRequest{})
		if err != nil {
			return err
		}
		for _, p := range chk.GetPartitions() {
			if !p.GetConsistent() {
				return fmt.Errorf("partition %d not consistent: %v", p.GetPartition(), p)
			}
		}
		return nil
	})
}

func walFirstIndex(t *testing.T, c *clustertest.Cluster, via int) map[string]uint64 {
	t.Helper()
	st, err := kvrpc.NewClusterClient(c.Conn(via)).Status(ctxT(t, 10*time.Second), &kvpb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, n := range st.GetNodes() {
		out[n.GetId()] = n.GetWalFirstIndex()
	}
	return out
}

// TestCheckpointTruncatesAndRestarts: a checkpoint materializes every
// group on every node and truncates the WALs; nodes restarted from
// materialization plus WAL tail serve the same data, with replicas
// identical at the same index; the status shows the checkpoint.
func TestCheckpointTruncatesAndRestarts(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Configure: smallCheckpoints})
	want := writeMany(t, c, "a", 600)
	checkpointAll(t, c, 0)
	more := writeMany(t, c, "b", 300)
	checkpointAll(t, c, 1)
	for k, v := range more {
		want[k] = v
	}
	tail := writeMany(t, c, "c", 100) // only in the WAL tail
	for k, v := range tail {
		want[k] = v
	}
	firsts := walFirstIndex(t, c, 0)
	for id, f := range firsts {
		if f <= 1 {
			t.Errorf("node %s: WAL still starts at %d after two checkpoints", id, f)
		}
	}
	st, err := kvrpc.NewClusterClient(c.Conn(0)).Status(ctxT(t, 10*time.Second), &kvpb.StatusRequest{LocalOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range st.GetGroups() {
		if g.GetMaterializedIndex() == 0 || g.GetMaterializations() < 1 || (g.GetId() != 0 && g.GetMaterializations() != 2) {
			t.Errorf("group %d: materialized %d, files %d", g.GetId(), g.GetMaterializedIndex(), g.GetMaterializations())
		}
	}
	for i := 0; i < 3; i++ {
		c.Stop(i)
	}
	for i := 0; i < 3; i++ {
		c.StartNode(i)
	}
	for i := 0; i < 3; i++ {
		c.WaitReady(i)
	}
	readAll(t, c, 2, want)
	requireConsistent(t, c, 1)
	// And a kill -9 restart of one node while the others write.
	c.Kill(0)
	extra := writeMany(t, c, "d", 50, 1, 2)
	c.Restart(0)
	for k, v := range extra {
		want[k] = v
	}
	readAll(t, c, 0, want)
	requireConsistent(t, c, 0)
}

// TestLaggingFollowerGetsSnapshot: a node down while the others write and
// compact their logs behind a materialization catches up from the
// leader's materialization (a raft snapshot streamed in chunks).
func TestLaggingFollowerGetsSnapshot(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Configure: smallCheckpoints})
	want := writeMany(t, c, "a", 50)
	c.Stop(2)
	for k, v := range writeMany(t, c, "b", 400, 0, 1) {
		want[k] = v
	}
	// Two nodes up: materialize them (the third is unreachable: refused).
	resp, err := kvrpc.NewClusterClient(c.Conn(0)).Checkpoint(ctxT(t, 30*time.Second), &kvpb.CheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, g := range resp.GetGroups() {
		if g.GetError() == "" && g.GetMaterializedIndex() > 0 {
			done++
		}
	}
	if done == 0 {
		t.Fatalf("checkpoint with a node down: %v", resp.GetGroups())
	}
	for k, v := range writeMany(t, c, "c", 50, 0, 1) {
		want[k] = v
	}
	c.Restart(2)
	requireConsistent(t, c, 2)
	readAll(t, c, 2, want)
	// The catch-up shows in the counters behind cutkv_raft_snapshots_*:
	// sent by a leader, installed by the lagging node.
	var sent, installed uint64
	for i := range 3 {
		st := c.Node(i).Store()
		for _, g := range st.Groups() {
			cn, _ := st.Counters(g)
			sent += cn.SnapshotsSent
			if i == 2 {
				installed += cn.SnapshotsInstalled
			}
		}
	}
	if sent == 0 || installed == 0 {
		t.Fatalf("raft snapshots: %d sent by the leaders, %d installed by the lagging node; want both > 0", sent, installed)
	}
	dir := filepath.Join(c.Config(2).DataDir, datadir.MaterializeDir)
	mats, err := checkpoint.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(mats) == 0 {
		t.Fatalf("the lagging node holds no materialization: it did not catch up from a snapshot")
	}
	// Partitions on Pebble: what was installed is the leader's checkpoint
	// directory, shipped file by file, not an image.
	for g, ms := range mats {
		if g == 0 {
			continue
		}
		for _, m := range ms {
			if !m.Dir {
				t.Fatalf("partition %d installed %s: an image file, not the leader's checkpoint", g, m.Name())
			}
			if _, _, err := checkpoint.VerifyDir(filepath.Join(dir, m.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	// It restarts from the installed checkpoints.
	c.Stop(2)
	c.Restart(2)
	readAll(t, c, 2, want)
}

// TestDamagedMaterialization: a node whose newest materialization of a
// group is damaged, and whose state must be loaded from one (its Pebble
// directory lost), falls back to the older one (the WAL is kept from
// there); with every materialization of a group damaged and the WAL
// truncated, it is seeded from a peer's materialization, or, with its
// peers down, refuses to start and names the files.
func TestDamagedMaterialization(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Configure: func(i int, cfg *server.Config) {
		smallCheckpoints(i, cfg)
		cfg.WALSegmentSize = 16 << 10
	}})
	want := writeMany(t, c, "a", 300)
	checkpointAll(t, c, 0)
	for k, v := range writeMany(t, c, "b", 300) {
		want[k] = v
	}
	checkpointAll(t, c, 0)
	c.Stop(1)
	dir := filepath.Join(c.Config(1).DataDir, datadir.MaterializeDir)
	mats, err := checkpoint.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := uint64(1)
	if len(mats[g]) != 2 {
		t.Fatalf("group %d keeps %d materializations, want 2", g, len(mats[g]))
	}
	done := map[string]bool{}
	flip := func(m checkpoint.Materialization) string {
		p := filepath.Join(dir, m.Name())
		name := p
		if m.Dir {
			// A checkpoint directory: damage its own copy of Pebble's
			// MANIFEST. (Its SSTs are hard links of the live state's:
			// damage there is damage to the live state too, which stops
			// the partition when read: TestPebbleErrorStops.)
			_, files, err := checkpoint.ReadManifest(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if strings.HasPrefix(f.Name, "MANIFEST-") {
					p = filepath.Join(p, f.Name)
					break
				}
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if done[p] {
			return name // damaged already: a second flip would repair it
		}
		done[p] = true
		b[len(b)/2] ^= 0x40
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return name
	}
	// A partition on Pebble whose state is past a damaged checkpoint
	// keeps its state (the damage shows when the checkpoint is read:
	// an upload, a follower's install); one that lost its state must
	// install a checkpoint, and falls back to the older one.
	loseState := func(g uint64) {
		if err := os.RemoveAll(filepath.Join(c.Config(1).DataDir, datadir.StateDir, fmt.Sprintf("p%04d", g))); err != nil {
			t.Fatal(err)
		}
	}
	flip(mats[g][1])
	loseState(g)
	c.Restart(1)
	readAll(t, c, 1, want)
	requireConsistent(t, c, 1)

	c.Stop(1)
	// Damage every materialization of a group whose log the WAL no longer
	// holds from its first entry.
	g = groupWithTruncatedLog(t, c.Config(1))
	mats, _ = checkpoint.List(dir)
	var damaged []string
	for _, m := range mats[g] {
		damaged = append(damaged, flip(m))
	}
	loseState(g)
	// With its peers down it cannot be seeded: it refuses, naming the
	// damaged files.
	c.Stop(0)
	c.Stop(2)
	_, err = server.Start(c.Config(1), slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("node started with every materialization of a group damaged, its log truncated and its peers down")
	}
	named := false
	for _, p := range damaged {
		named = named || strings.Contains(err.Error(), filepath.Base(p))
	}
	if !named || !strings.Contains(err.Error(), "refusing to start") {
		t.Fatalf("refusal does not name the damaged files: %v", err)
	}
	// With its peers up it is seeded from one's materialization and
	// serves everything.
	c.StartNode(0)
	c.StartNode(2)
	c.WaitReady(0)
	c.WaitReady(2)
	c.Restart(1)
	readAll(t, c, 1, want)
	requireConsistent(t, c, 1)
}

// TestKillDuringMaterialization kills a node at random moments while its
// groups are being materialized under writes; every acknowledged write is
// there after each restart.
func TestKillDuringMaterialization(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Configure: smallCheckpoints})
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	want := map[string]string{}
	var mu sync.Mutex
	for round := 0; round < 4; round++ {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k, v := fmt.Sprintf("r%d-%05d", round, i), fmt.Sprintf("v%d", i)
				// Through node 1 or 2: node 0 is the one killed.
				if _, err := c.KV(1+i%2).Put(ctxT(t, 2*time.Second), &kvpb.PutRequest{Key: []byte(k), Value: []byte(v)}); err == nil {
					mu.Lock()
					want[k] = v
					mu.Unlock()
				}
			}
		}()
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				raftSrv := kvrpc.NewClusterClient(c.Conn(1))
				_, _ = raftSrv.Checkpoint(ctxT(t, 5*time.Second), &kvpb.CheckpointRequest{})
			}
		}()
		// Kill at a random moment, once this round has some acknowledged
		// writes (slow under -race).
		time.Sleep(time.Duration(200+rng.IntN(600)) * time.Millisecond)
		clustertest.Eventually(t, 20*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if n := len(want); n < 25*(round+1) {
				return fmt.Errorf("%d writes acknowledged", n)
			}
			return nil
		})
		c.Kill(0)
		close(stop)
		wg.Wait()
		c.Restart(0)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(want) < 100 {
		t.Fatalf("only %d writes acknowledged", len(want))
	}
	readAll(t, c, 0, want)
	requireConsistent(t, c, 0)
}

// groupWithTruncatedLog returns a partition whose log in a stopped
// node's WAL no longer starts at entry 1.
func groupWithTruncatedLog(t *testing.T, cfg server.Config) uint64 {
	t.Helper()
	w, err := wal.Open(filepath.Join(cfg.DataDir, datadir.WALDir), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	logs, err := raftstore.ReadLogs(w)
	if err != nil {
		t.Fatal(err)
	}
	for g := uint64(1); g < uint64(len(logs)); g++ {
		if l := logs[g]; l != nil && len(l.Entries) > 0 && l.Entries[0].GetIndex() > 1 {
			return g
		}
	}
	t.Fatalf("no partition's log was truncated in the WAL (WAL from record %d)", w.FirstIndex())
	return 0
}

// TestBackgroundMaterializationBoundsWAL: with no checkpoint asked for,
// groups whose WAL tail passes --materialize-bytes are materialized in the
// background and the WAL front is truncated while writes go on.
func TestBackgroundMaterializationBoundsWAL(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Configure: func(i int, cfg *server.Config) {
		smallCheckpoints(i, cfg)
		cfg.MaterializeBytes = 16 << 10
	}})
	want := map[string]string{}
	var firsts map[string]uint64
	for round := 0; round < 20; round++ {
		for k, v := range writeMany(t, c, fmt.Sprintf("r%02d", round), 150) {
			want[k] = v
		}
		firsts = walFirstIndex(t, c, 0)
		done := true
		for _, f := range firsts {
			done = done && f > 1
		}
		if done {
			break
		}
	}
	for id, f := range firsts {
		if f <= 1 {
			t.Fatalf("node %s: WAL never truncated by background materialization (first index %d)", id, f)
		}
	}
	readAll(t, c, 1, want)
	requireConsistent(t, c, 2)
}

// TestPinHoldsWAL: a pin (a snapshot upload in progress) keeps a group's
// WAL entries after its index through checkpoints; released, the next
// checkpoint truncates.
func TestPinHoldsWAL(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Configure: smallCheckpoints})
	release := make([]func(), 3)
	for i := range release {
		release[i] = c.Node(i).Store().Pin(1, 0)
	}
	writeMany(t, c, "a", 600)
	checkpointAll(t, c, 0)
	writeMany(t, c, "b", 600)
	checkpointAll(t, c, 0)
	for id, f := range walFirstIndex(t, c, 0) {
		if f != 1 {
			t.Fatalf("node %s: WAL truncated to %d while group 1 was pinned at 0", id, f)
		}
	}
	for _, r := range release {
		r()
	}
	writeMany(t, c, "c", 100)
	checkpointAll(t, c, 0)
	writeMany(t, c, "d", 100)
	checkpointAll(t, c, 0)
	clustertest.Eventually(t, 10*time.Second, func() error {
		for id, f := range walFirstIndex(t, c, 0) {
			if f <= 1 {
				return fmt.Errorf("node %s: WAL not truncated after the pin was released", id)
			}
		}
		return nil
	})
}

// TestCorruptStateRebuilt: a node whose partition state is damaged on
// disk (its SSTs, which its checkpoint shares by hard link) moves the
// state aside at start, refuses the damaged checkpoint, rebuilds the
// partition from its WAL, and serves everything written, consistent with
// the other replicas.
func TestCorruptStateRebuilt(t *testing.T) {
	t.Run("from the WAL", func(t *testing.T) { testCorruptStateRebuilt(t, false) })
	t.Run("from a peer", func(t *testing.T) { testCorruptStateRebuilt(t, true) })
}

// testCorruptStateRebuilt: with truncated, the WAL no longer holds the
// log from its start (two checkpoints, small segments), so the damaged
// checkpoints leave nothing local to rebuild from: the node is seeded
// from a peer's materialization.
func testCorruptStateRebuilt(t *testing.T, truncated bool) {
	c := clustertest.Start(t, 3, clustertest.Options{Configure: func(i int, cfg *server.Config) {
		smallCheckpoints(i, cfg)
		if truncated {
			cfg.WALSegmentSize = 16 << 10
		}
	}})
	want := writeMany(t, c, "a", 200)
	checkpointAll(t, c, 0)
	for k, v := range writeMany(t, c, "b", 50) {
		want[k] = v
	}
	if truncated {
		for k, v := range writeMany(t, c, "c", 250) {
			want[k] = v
		}
		checkpointAll(t, c, 0)
	}
	c.Stop(1)
	g := uint64(1)
	if truncated {
		g = groupWithTruncatedLog(t, c.Config(1))
	}
	state := filepath.Join(c.Config(1).DataDir, datadir.StateDir, fmt.Sprintf("p%04d", g))
	ssts, _ := filepath.Glob(filepath.Join(state, "*.sst"))
	if len(ssts) == 0 {
		t.Fatalf("no SST in %s", state)
	}
	for _, f := range ssts {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i := 64; i < len(b)/2; i += 97 {
			b[i] ^= 0x55
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if truncated {
		// Its checkpoints may hold SSTs a compaction since removed from
		// the live state (not damaged with it): damage their own copies
		// of Pebble's MANIFEST, so that none is usable.
		dir := filepath.Join(c.Config(1).DataDir, datadir.MaterializeDir)
		mats, err := checkpoint.List(dir)
		if err != nil || len(mats[g]) == 0 {
			t.Fatalf("materializations of group %d: %v %v", g, mats[g], err)
		}
		for _, m := range mats[g] {
			ms, _ := filepath.Glob(filepath.Join(dir, m.Name(), "MANIFEST-*"))
			for _, f := range ms {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				b[len(b)/2] ^= 0x40
				if err := os.WriteFile(f, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// Without a peer's materialization, this start would refuse (the
	// refusal is TestDamagedMaterialization's).
	c.Restart(1)
	readAll(t, c, 1, want)
	requireConsistent(t, c, 1)
	if aside, _ := filepath.Glob(state + ".corrupt-*"); len(aside) != 1 {
		t.Fatalf("the damaged state was not kept aside: %v", aside)
	}
}
