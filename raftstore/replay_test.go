package raftstore

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/wal"
)

// rec is one hand-written WAL record: an entry (index, term, tag in its
// data) or, with hs set, a hard state.
type rec struct {
	group       uint64
	index, term uint64
	tag         string
	hs          *raftpb.HardState
}

func ent(g, index, term uint64, tag string) rec {
	return rec{group: g, index: index, term: term, tag: tag}
}

func hardState(g, term, commit uint64) rec {
	return rec{group: g, hs: &raftpb.HardState{Term: &term, Commit: &commit, Vote: new(uint64(1))}}
}

func (r rec) record(t *testing.T) wal.Record {
	t.Helper()
	if r.hs != nil {
		data, err := proto.Marshal(r.hs)
		if err != nil {
			t.Fatal(err)
		}
		return wal.Record{Type: wal.RecordHardState, Group: r.group, Data: data}
	}
	e := &raftpb.Entry{Index: &r.index, Term: &r.term, Type: raftpb.EntryNormal.Enum(), Data: []byte(r.tag)}
	data, err := proto.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return wal.Record{Type: wal.RecordEntry, Group: r.group, Data: data}
}

// writeWAL writes recs to a new WAL, one Append each (as separate rounds of
// the store would), and returns it open.
func writeWAL(t *testing.T, recs []rec) *wal.WAL {
	t.Helper()
	w, err := wal.Open(t.TempDir(), wal.Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	for _, r := range recs {
		if _, _, err := w.Append([]wal.Record{r.record(t)}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// entryTags renders entries as "index/tag ...".
func entryTags(ents []*raftpb.Entry) string {
	var b strings.Builder
	for i, e := range ents {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d/%s", e.GetIndex(), e.GetData())
	}
	return b.String()
}

// TestReplayOverwrite checks the WAL replay rule: a later record for
// (group, i) supersedes the earlier records for (group, >= i), as raft
// overwrote an uncommitted tail; and a gap in a group's log is an error.
func TestReplayOverwrite(t *testing.T) {
	cases := []struct {
		name string
		recs []rec
		want map[uint64]string // group → entries after replay
		hs   map[uint64]uint64 // group → term of the hard state kept
		err  string            // substring of the expected error
	}{
		{
			name: "tail overwritten",
			recs: []rec{ent(1, 1, 1, "a"), ent(1, 2, 1, "b"), ent(1, 3, 1, "c"), ent(1, 2, 2, "B")},
			want: map[uint64]string{1: "1/a 2/B"},
		},
		{
			name: "same index rewritten",
			recs: []rec{ent(1, 1, 1, "a"), ent(1, 2, 1, "b"), ent(1, 2, 2, "B")},
			want: map[uint64]string{1: "1/a 2/B"},
		},
		{
			name: "overwrite then extend",
			recs: []rec{ent(1, 1, 1, "a"), ent(1, 2, 1, "b"), ent(1, 3, 1, "c"), ent(1, 2, 2, "B"), ent(1, 3, 2, "C"), ent(1, 4, 2, "D")},
			want: map[uint64]string{1: "1/a 2/B 3/C 4/D"},
		},
		{
			name: "whole log replaced",
			recs: []rec{ent(1, 1, 1, "a"), ent(1, 2, 1, "b"), ent(1, 1, 3, "A")},
			want: map[uint64]string{1: "1/A"},
		},
		{
			name: "groups are independent",
			recs: []rec{
				ent(1, 1, 1, "a"), ent(2, 1, 1, "x"), ent(1, 2, 1, "b"), ent(2, 2, 1, "y"),
				ent(2, 3, 1, "z"), ent(1, 3, 1, "c"), ent(2, 2, 2, "Y"), hardState(2, 2, 1),
			},
			want: map[uint64]string{1: "1/a 2/b 3/c", 2: "1/x 2/Y"},
			hs:   map[uint64]uint64{2: 2},
		},
		{
			name: "later hard state wins",
			recs: []rec{ent(1, 1, 1, "a"), hardState(1, 1, 1), ent(1, 2, 2, "b"), hardState(1, 2, 2)},
			want: map[uint64]string{1: "1/a 2/b"},
			hs:   map[uint64]uint64{1: 2},
		},
		{
			name: "gap",
			recs: []rec{ent(1, 1, 1, "a"), ent(1, 3, 1, "c")},
			err:  "gap",
		},
		{
			name: "gap after an overwrite",
			recs: []rec{ent(1, 1, 1, "a"), ent(1, 2, 1, "b"), ent(1, 2, 2, "B"), ent(1, 4, 2, "D")},
			err:  "gap",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := writeWAL(t, tc.recs)
			logs, err := replay(w)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("replay: %v, want an error about %q", err, tc.err)
				}
				if !strings.Contains(err.Error(), "group 1") {
					t.Fatalf("replay error %q does not name the group", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			for g, want := range tc.want {
				if got := entryTags(logs[g].Entries); got != want {
					t.Errorf("group %d: replayed %q, want %q", g, got, want)
				}
			}
			for g, term := range tc.hs {
				if hs := logs[g].HardState; hs == nil || hs.GetTerm() != term {
					t.Errorf("group %d: hard state %v, want term %d", g, hs, term)
				}
			}
		})
	}
}

// TestOpenAfterOverwrite opens a Store over a hand-written WAL whose tail
// was overwritten and checks what its raft storage holds; a gap makes Open
// fail.
func TestOpenAfterOverwrite(t *testing.T) {
	open := func(w *wal.WAL) (*Store, error) {
		return Open(Config{
			RaftID: 1, WAL: w, Transport: newTestNet().transport(1), Logger: quietLogger,
			Groups: []GroupConfig{
				{ID: 1, Peers: []uint64{1, 2, 3}, SM: partition.New(1)},
				{ID: 2, Peers: []uint64{1, 2, 3}, SM: partition.New(2)},
			},
		})
	}
	w := writeWAL(t, []rec{
		ent(1, 1, 1, "a"), ent(1, 2, 1, "b"), ent(1, 3, 1, "c"), hardState(1, 1, 1),
		ent(2, 1, 1, "x"),
		ent(1, 2, 2, "B"), hardState(1, 2, 1),
	})
	s, err := open(w)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Stop()
	check := func(g uint64, want string) {
		t.Helper()
		st := s.groups[g].storage
		first, _ := st.FirstIndex()
		last, _ := st.LastIndex()
		ents, err := st.Entries(first, last+1, 1<<30)
		if err != nil {
			t.Fatalf("group %d: entries: %v", g, err)
		}
		if got := entryTags(ents); got != want {
			t.Fatalf("group %d: storage holds %q, want %q", g, got, want)
		}
	}
	check(1, "1/a 2/B")
	check(2, "1/x")
	hs, _, err := s.groups[1].storage.InitialState()
	if err != nil || hs.GetTerm() != 2 || hs.GetCommit() != 1 {
		t.Fatalf("group 1 hard state %v (%v), want term 2 commit 1", hs, err)
	}
	if st, ok := s.Status(1); !ok || st.Term != 2 || st.Commit != 1 || !slices.Equal(st.Peers, []uint64{1, 2, 3}) {
		t.Fatalf("Status(1) = %+v, %v", st, ok)
	}

	gap := writeWAL(t, []rec{ent(1, 1, 1, "a"), ent(1, 3, 1, "c")})
	if _, err := open(gap); err == nil || !strings.Contains(err.Error(), "gap") {
		t.Fatalf("Open over a log with a gap: %v, want a gap error", err)
	}
}

func TestPositionsFollowEntryIndexes(t *testing.T) {
	p := newPersister(&Store{order: []uint64{1}})
	batch := func(first uint64, idxs ...uint64) {
		var recs []wal.Record
		var ents []entryRec
		for _, i := range idxs {
			ents = append(ents, entryRec{rec: len(recs), raft: i})
			recs = append(recs, wal.Record{Type: wal.RecordEntry, Group: 1, Data: make([]byte, 10)})
			recs = append(recs, wal.Record{Type: wal.RecordHardState, Group: 1})
		}
		p.notePositions(recs, ents, first)
	}
	batch(1, 7, 8, 9) // WAL records 1..6, entries at 1, 3, 5
	if n, b := p.tail(1, 7); n != 2 || b != 20 {
		t.Fatalf("after 7: %d entries, %d bytes; want 2, 20", n, b)
	}
	batch(7, 8) // raft overwrote 8 and 9 with a new 8
	if n, _ := p.tail(1, 7); n != 1 {
		t.Fatalf("after the overwrite: %d entries after 7, want 1", n)
	}
	p.keep[1] = 7
	if need, holder := p.needLocked(); need != 7 || holder != 1 {
		t.Fatalf("need WAL index %d (holder %d), want 7 (group 1)", need, holder)
	}
}
