package raftstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/wal"
)

// matOptions gives every node a materialization directory that survives
// its restarts and small WAL segments, so that truncation and lost
// segments show; more adjusts each node's config further.
func matOptions(t *testing.T, nodes, groups int, more func(id uint64, cfg *Config)) clusterOptions {
	base := t.TempDir()
	return clusterOptions{
		nodes: nodes, groups: groups,
		walOptions: func(uint64) wal.Options {
			return wal.Options{Logger: quietLogger, SegmentSize: 4 << 10}
		},
		config: func(id uint64, cfg *Config) {
			cfg.MaterializeDir = filepath.Join(base, fmt.Sprintf("mat%d", id))
			cfg.CatchUpEntries = 5
			if more != nil {
				more(id, cfg)
			}
		},
	}
}

// openErr opens node id's store as start does and returns Open's error
// (nil after stopping the store it opened).
func (c *testCluster) openErr(id uint64) error {
	cfg, _ := c.config(id, c.openWAL(id))
	s, err := Open(cfg)
	if err == nil {
		s.Stop()
	}
	return err
}

// putMany writes n keys of about 100 bytes to group g, returning the last
// index.
func (c *testCluster) putMany(g uint64, prefix string, n int) uint64 {
	var idx uint64
	for i := range n {
		idx = c.put(g, fmt.Sprintf("%s%04d", prefix, i), strings.Repeat("v", 100))
	}
	return idx
}

func materialize(t *testing.T, s *Store, g uint64) uint64 {
	t.Helper()
	m, err := s.Materialize(context.Background(), g)
	if err != nil || m == 0 {
		t.Fatalf("Materialize(%d) = %d, %v", g, m, err)
	}
	return m
}

// readLogs reads a closed WAL dir as a restart would.
func readLogs(t *testing.T, dir string) map[uint64]*GroupLog {
	t.Helper()
	w, err := wal.Open(dir, wal.Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	logs, err := ReadLogs(w)
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

// TestOpenRefusesMaterializationAboveWAL: a node whose WAL directory was
// replaced by an older copy of itself (which the WAL's segment chain
// cannot see) after the node materialized a group, so that the WAL knows
// less of the group than the materialization, refuses to open and names
// the group, the file and what the WAL knows. The same node before the
// replacement — a crash between writing the materialization and its WAL
// mark, which here never came — opens from the materialization.
func TestOpenRefusesMaterializationAboveWAL(t *testing.T) {
	c := newTestCluster(t, matOptions(t, 1, 1, nil))
	const g = 1
	c.putMany(g, "a", 20)
	c.stop(1)
	c.closeWAL(1)
	dir := c.dirs[1]
	old := filepath.Join(t.TempDir(), "wal")
	if err := os.CopyFS(old, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	known := readLogs(t, old)[g].walKnows()

	s := c.start(1)
	s.Pin(g, 0) // keeps the whole WAL, so no mark is ever written
	c.putMany(g, "b", 50)
	m := materialize(t, s, g)
	path := s.MaterializationPath(g, m)
	c.stop(1)
	c.closeWAL(1)
	if logs := readLogs(t, dir); logs[g].Materialized != nil || logs[g].walKnows() < m || known >= m {
		t.Fatalf("the WAL holds mark %v and knows up to %d, the old copy up to %d: the test needs entry %d, no mark, and less in the copy",
			logs[g].Materialized, logs[g].walKnows(), known, m)
	}

	c.start(1) // the materialization's mark is not in the WAL: opens
	if st, _ := c.store(1).Status(g); st.Materialized != m || st.Applied < m {
		t.Fatalf("reopened: materialized %d, applied %d; want %d", st.Materialized, st.Applied, m)
	}
	c.stop(1)
	c.closeWAL(1)

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(old)); err != nil {
		t.Fatal(err)
	}
	err := c.openErr(1)
	if !errors.Is(err, ErrWALBehind) {
		t.Fatalf("Open over an older copy of the WAL: %v, want ErrWALBehind", err)
	}
	for _, want := range []string{fmt.Sprintf("group %d", g), path, fmt.Sprintf("up to index %d", known), "lost its newest part"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q: %v", want, err)
		}
	}
}

// TestOpenAfterTruncation: a group idle since its materialization holds
// no WAL entry: the WAL keeps only its mark and hard state, written again
// before every truncation — after restarts too, while other groups'
// materializations truncate the WAL past the records written before the
// restart. The node opens each time, with the group's state.
func TestOpenAfterTruncation(t *testing.T) {
	c := newTestCluster(t, matOptions(t, 3, 2, nil))
	const idle, busy = 1, 2
	c.waitConverged(idle, c.putMany(idle, "a", 30))
	c.waitConverged(busy, c.putMany(busy, "b", 30))
	// The victim follows the idle group's leader, which stays put: after
	// its restart nothing new is written for that group.
	lead := c.waitLeader(idle)
	v := c.ids[0]
	if v == lead {
		v = c.ids[1]
	}
	s := c.store(v)
	mi := materialize(t, s, idle)
	materialize(t, s, busy)
	// A first materialization keeps the whole log as its fallback: a
	// second one of the busy group, and one of the idle group that finds
	// nothing new, let it go.
	c.waitConverged(busy, c.putMany(busy, "c", 30))
	materialize(t, s, busy)
	if again := materialize(t, s, idle); again != mi {
		t.Fatalf("the idle group materialized again at %d, want %d", again, mi)
	}
	w := c.openWAL(v)
	waitFor(t, "the WAL front to be truncated", func() bool { return w.FirstIndex() > 1 })

	restart := func() {
		t.Helper()
		c.stop(v)
		c.closeWAL(v)
		logs := readLogs(t, c.dirs[v])
		if l := logs[idle]; l == nil || l.HardState == nil || l.Materialized.GetIndex() < mi {
			t.Fatalf("the WAL lost the idle group's hard state or mark: %+v", l)
		}
		c.start(v)
		if !hasKey(c.part(v, idle), "a0029", strings.Repeat("v", 100)) {
			t.Fatal("the idle group's state is not back after the restart")
		}
	}
	restart()
	before := c.openWAL(v).LastIndex() // every record of the idle group is at or below
	for round := range 4 {
		c.waitConverged(busy, c.putMany(busy, fmt.Sprintf("r%d-", round), 40))
		materialize(t, c.store(v), busy)
	}
	waitFor(t, "truncation past the records written before the restart", func() bool {
		return c.openWAL(v).FirstIndex() > before
	})
	restart()
}

// TestOpenRestoredDataDir: a data directory holding materializations and
// a new, empty WAL (what a restore writes) opens from the
// materializations and records them in the WAL, so that later restarts
// are checked against them.
func TestOpenRestoredDataDir(t *testing.T) {
	c := newTestCluster(t, matOptions(t, 1, 1, nil))
	const g = 1
	c.putMany(g, "k", 20)
	m := materialize(t, c.store(1), g)
	c.stop(1)
	c.closeWAL(1)
	c.dirs[1] = filepath.Join(t.TempDir(), "new-wal")
	c.start(1)
	if st, _ := c.store(1).Status(g); st.Materialized != m || !hasKey(c.part(1, g), "k0019", strings.Repeat("v", 100)) {
		t.Fatalf("restored node: materialized %d (want %d), or its state is missing", st.Materialized, m)
	}
	c.stop(1)
	c.closeWAL(1)
	if mk := readLogs(t, c.dirs[1])[g].Materialized; mk.GetIndex() != m {
		t.Fatalf("the new WAL records mark %v, want one at %d", mk, m)
	}
	c.start(1)
	c.put(g, "after", "1")
}

// TestOpenSettlesFetched: a materialization fetched from a leader counts
// only once its install is in the WAL. One without a recorded install is
// removed at Open (it is no base, and no refusal); one whose install mark
// was written before a crash kept it from moving into place is moved, and
// the group starts from it.
func TestOpenSettlesFetched(t *testing.T) {
	c := newTestCluster(t, matOptions(t, 1, 1, nil))
	const g = 1
	c.putMany(g, "k", 20)
	m := materialize(t, c.store(1), g)
	s := c.store(1)
	own, fetchedDir := s.MaterializationPath(g, m), s.fetchedDir()
	c.stop(1)
	c.closeWAL(1)
	data, err := os.ReadFile(own)
	if err != nil {
		t.Fatal(err)
	}

	// Fetched, never installed, far ahead of the WAL.
	stale := filepath.Join(fetchedDir, checkpoint.Materialization{Partition: g, Index: m + 1000}.Name())
	if err := os.WriteFile(stale, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c.start(1)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a fetched materialization whose install the WAL does not record is still there (%v)", err)
	}
	c.stop(1)
	c.closeWAL(1)

	// Installed (the mark is in the WAL), but the crash came before the
	// file moved into place.
	meta, err := checkpoint.Verify(own)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(own, filepath.Join(fetchedDir, filepath.Base(own))); err != nil {
		t.Fatal(err)
	}
	mark, err := proto.Marshal(&internalpb.MaterializedMark{Index: m, Term: meta.Term, Installed: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.openWAL(1).Append([]wal.Record{{Type: wal.RecordMaterialized, Group: g, Data: mark}}); err != nil {
		t.Fatal(err)
	}
	c.start(1)
	if _, err := os.Stat(own); err != nil {
		t.Fatalf("the installed materialization was not moved into place: %v", err)
	}
	if st, _ := c.store(1).Status(g); st.Materialized != m || !hasKey(c.part(1, g), "k0019", strings.Repeat("v", 100)) {
		t.Fatalf("materialized %d (want %d), or the state is missing", st.Materialized, m)
	}
	c.put(g, "after", "1")
}

// TestLaggingFollowerInstallsSnapshot: a follower that missed entries the
// others compacted away fetches the leader's materialization, installs
// it (the file moves from the fetched directory into place once the WAL
// records the install), catches up, and opens from it after a restart.
func TestLaggingFollowerInstallsSnapshot(t *testing.T) {
	var c *testCluster
	fetch := func(ctx context.Context, from, group, index uint64, path string, _ bool) error {
		src := c.store(from)
		if src == nil {
			return errors.New("node down")
		}
		b, err := os.ReadFile(src.MaterializationPath(group, index))
		if err != nil {
			return err
		}
		tmp := path + ".tmp-test"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, path)
	}
	c = newTestCluster(t, matOptions(t, 3, 1, func(_ uint64, cfg *Config) { cfg.Fetch = fetch }))
	const g = 1
	c.waitConverged(g, c.putMany(g, "a", 10))
	lead := c.waitLeader(g)
	f := c.ids[0]
	if f == lead {
		f = c.ids[1]
	}
	c.stop(f)
	c.closeWAL(f)
	idx := c.putMany(g, "b", 40)
	var ms []uint64
	for _, id := range c.running() {
		ms = append(ms, materialize(t, c.store(id), g))
	}
	c.start(f)
	c.waitConverged(g, idx)
	s := c.store(f)
	var st GroupStatus
	waitFor(t, "the follower's status to show the install", func() bool {
		st, _ = s.Status(g)
		return st.Materialized != 0
	})
	if !slices.Contains(ms, st.Materialized) {
		t.Fatalf("follower materialized at %d; it should hold a leader's materialization (at one of %v)", st.Materialized, ms)
	}
	if _, err := os.Stat(s.MaterializationPath(g, st.Materialized)); err != nil {
		t.Fatalf("installed materialization not in place: %v", err)
	}
	if left, _ := os.ReadDir(s.fetchedDir()); len(left) != 0 {
		t.Fatalf("fetched files left after the install: %v", left)
	}
	c.stop(f)
	c.closeWAL(f)
	c.start(f)
	c.waitConverged(g, c.put(g, "after", "1"))
}

// TestFirstMaterializationKeepsTheLog: where a cut is positioned before a
// group's first materialization, that one falls back to the whole log, so
// the WAL front stays until a second one lets it go: the cut (one running
// across the first materialization) can still be rebuilt and snapshotted.
// Without a cut the first materialization truncates at once
// (TestOpenAfterTruncation's idle group).
func TestFirstMaterializationKeepsTheLog(t *testing.T) {
	c := newTestCluster(t, matOptions(t, 3, 1, nil))
	const g = 1
	c.waitConverged(g, c.putMany(g, "a", 30))
	lead := c.waitLeader(g)
	ls := c.store(lead)
	ls.cfg.Clock.Raise(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := ls.Propose(ctx, g, &internalpb.Command{Op: &internalpb.Command_CutStart{CutStart: &internalpb.CutStartOp{Version: 1}}})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	c.waitConverged(g, c.putMany(g, "a2", 5))
	v := c.ids[0]
	if c.part(v, g).CutPos() == 0 {
		t.Fatal("cut 1 is not positioned in the group's log")
	}
	s := c.store(v)
	materialize(t, s, g)
	w := c.openWAL(v)
	time.Sleep(200 * time.Millisecond) // a truncation would have run by now
	if first := w.FirstIndex(); first != 1 {
		t.Fatalf("the first materialization truncated the WAL to %d", first)
	}
	c.waitConverged(g, c.putMany(g, "b", 30))
	materialize(t, s, g)
	waitFor(t, "the WAL front to be truncated after the second materialization", func() bool { return w.FirstIndex() > 1 })
}
