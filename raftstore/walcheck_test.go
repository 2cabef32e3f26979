package raftstore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

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
