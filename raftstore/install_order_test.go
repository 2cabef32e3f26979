package raftstore

import (
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/wal"
)

// TestInstallMarkPrecedesItsEntries: a batch that installs a raft
// snapshot and appends the entries after it writes the install's mark
// before those entries, so the WAL replays as an installed snapshot
// followed by its log. With the mark written after them (a chaos round's
// verifier met this in a live node's WAL), replay found the new entries
// right after the old log, "gap in the log", and the node could not start.
func TestInstallMarkPrecedesItsEntries(t *testing.T) {
	dir := t.TempDir()
	matDir := filepath.Join(dir, "mat")
	if err := os.MkdirAll(matDir, 0o755); err != nil {
		t.Fatal(err)
	}
	const g, m, term = 1, 5, 2

	// The leader's materialization at m, as a fetched or own file.
	src := partition.New(g)
	for i := uint64(1); i <= m; i++ {
		if _, err := src.ApplyCommand(i, putCmd("k", "v")); err != nil {
			t.Fatal(err)
		}
	}
	img := src.Image()
	if _, _, _, err := (checkpoint.Files{FS: checkpoint.OS}).Write(matDir, checkpoint.Meta{Partition: g, Index: m, Term: term}, img.Encode); err != nil {
		t.Fatal(err)
	}
	img.Close()

	p := newPersister(&Store{cfg: Config{MaterializeDir: matDir}})
	grp := &group{id: g, sm: partition.New(g)}
	snap := &raftpb.Snapshot{Data: snapshotData(g, m), Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(m)), Term: new(uint64(term))}}
	msg := &raftpb.Message{Snapshot: snap, Entries: []*raftpb.Entry{
		{Index: new(uint64(m + 1)), Term: new(uint64(term))}, {Index: new(uint64(m + 2)), Term: new(uint64(term))},
	}}
	recs, _, installs, sync, err := p.records([]appendReq{{g: grp, m: msg}})
	if err != nil {
		t.Fatal(err)
	}
	if !sync || installs[msg] == nil {
		t.Fatalf("sync %v, install %v: a snapshot's batch must be written", sync, installs[msg])
	}
	if got := grp.sm.(*partition.Partition).Applied(); got != m {
		t.Fatalf("the state machine is at %d after loading the snapshot, want %d", got, m)
	}

	// The node's WAL: the old log (entries 1 and 2), then the batch.
	w, err := wal.Open(filepath.Join(dir, "wal"), wal.Options{Logger: quietLogger, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var old []wal.Record
	for i := uint64(1); i <= 2; i++ {
		data, _ := proto.Marshal(&raftpb.Entry{Index: new(i), Term: new(uint64(1))})
		old = append(old, wal.Record{Type: wal.RecordEntry, Group: g, Data: data})
	}
	if _, _, err := w.Append(old); err != nil {
		t.Fatal(err)
	}
	// Every prefix of the batch must replay: a crash may end it anywhere.
	for n := 1; n <= len(recs); n++ {
		if _, _, err := w.Append(recs[n-1 : n]); err != nil {
			t.Fatal(err)
		}
		logs, err := ReadLogs(w)
		if err != nil {
			t.Fatalf("the WAL after %d of the batch's %d records does not replay: %v", n, len(recs), err)
		}
		if l := logs[g]; n == len(recs) && (l.Installed.GetIndex() != m || len(l.Entries) != 2 || l.Entries[0].GetIndex() != m+1) {
			t.Fatalf("replayed: installed %v, %d entries", l.Installed, len(l.Entries))
		}
	}
	w.Close()
}
