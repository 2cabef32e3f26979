package raftstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/command"
)

// TestReadEntriesAcrossWALAndMemory reads a group's committed log back
// after a materialization compacted raft's in-memory log: the older
// entries come from the node WAL, the newer from memory, and each is the
// entry that was applied at its index.
func TestReadEntriesAcrossWALAndMemory(t *testing.T) {
	c := newTestCluster(t, clusterOptions{nodes: 1, groups: 1, config: func(id uint64, cfg *Config) {
		cfg.MaterializeDir = filepath.Join(t.TempDir(), "mat")
		cfg.CatchUpEntries = 5
	}})
	c.waitLeader(1)
	s := c.store(1)
	idx := map[uint64]string{}
	for i := range 40 {
		v := fmt.Sprintf("v%d", i)
		idx[c.put(1, fmt.Sprintf("k%d", i), v)] = v
	}
	m, err := s.Materialize(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := 40; i < 50; i++ {
		v := fmt.Sprintf("v%d", i)
		idx[c.put(1, fmt.Sprintf("k%d", i), v)] = v
	}
	// The loop publishes its status between rounds, so it can trail the
	// apply that acknowledged the last put: wait until it shows every put
	// committed.
	var last uint64
	for i := range idx {
		last = max(last, i)
	}
	st, _ := s.Status(1)
	for deadline := time.Now().Add(waitTimeout); st.Commit < last; st, _ = s.Status(1) {
		if time.Now().After(deadline) {
			t.Fatalf("status shows commit %d, the last put was applied at %d", st.Commit, last)
		}
		time.Sleep(pollInterval)
	}
	first, _ := s.groups[1].storage.FirstIndex()
	if first <= 2 || first > m {
		t.Fatalf("in-memory log starts at %d after materializing at %d: the test needs it compacted", first, m)
	}
	from, err := s.LogFrom(1)
	if err != nil || from != 1 {
		t.Fatalf("LogFrom = %d, %v; want 1 (the WAL holds the whole log)", from, err)
	}
	ents, err := s.ReadEntries(1, 1, st.Commit)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(ents)) != st.Commit {
		t.Fatalf("%d entries for [1, %d]", len(ents), st.Commit)
	}
	found := 0
	for i, e := range ents {
		if e.GetIndex() != uint64(i+1) {
			t.Fatalf("entry %d has index %d", i+1, e.GetIndex())
		}
		want, ok := idx[e.GetIndex()]
		if !ok {
			continue
		}
		cmd, isCmd, err := command.Decode(e)
		if err != nil || !isCmd || string(cmd.GetPut().GetValue()) != want {
			t.Fatalf("entry %d: %v %v %v, want a put of %q", e.GetIndex(), cmd, isCmd, err, want)
		}
		found++
	}
	if found != 50 {
		t.Fatalf("found %d of the 50 puts", found)
	}
	if _, err := s.ReadEntries(1, st.Commit, st.Commit+10); err == nil {
		t.Fatal("reading past the commit index succeeded")
	}
	// Truncate everything behind the materialization: the WAL's entries go.
	if err := s.cfg.WAL.TruncateFront(s.cfg.WAL.LastIndex() + 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadEntries(1, 1, 3); !errors.Is(err, ErrLogGone) {
		t.Fatalf("reading truncated entries: %v, want ErrLogGone", err)
	}
}
