package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/meta"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/raftstore"
	"github.com/cutkv/cutkv/wal"
)

// Replica is one node's copy of one raft group's log: a base state at
// index BaseIndex and the entries after it.
type Replica struct {
	// Node names the replica in reports (a node id or a directory).
	Node string
	// Group is the raft group: 0 for the metadata group, else a partition.
	Group uint64
	// BaseIndex is the index the base state is at; 0: an empty partition.
	BaseIndex uint64
	// Start returns a new partition holding the base state: Applied() ==
	// BaseIndex, with the committed key-values, the intent table, the
	// transaction records and the cut progress at that index
	// (a materialization). The caller owns and changes it, and closes it
	// (a base read from a checkpoint directory is a scratch Pebble); every
	// call returns a fresh one. nil means BaseIndex is 0 and the base is
	// partition.New(Group).
	Start func() (*partition.Partition, error)
	// StartMeta is Start for group 0 (the metadata state); nil means
	// BaseIndex is 0.
	StartMeta func() (*meta.State, error)
	// Entries follow the base in index order without gaps, starting at
	// BaseIndex+1. Entries above Commit may be uncommitted (and differ
	// from other replicas). Verify only reads them.
	Entries []*raftpb.Entry
	// Commit is the replica's commit index as last made durable (0:
	// unknown). It may lag behind the group's.
	Commit uint64
}

// first returns a fresh base partition.
func (r *Replica) first() (*partition.Partition, error) {
	if r.Start == nil {
		if r.BaseIndex != 0 {
			return nil, fmt.Errorf("%w: %s group %d: base index %d without a base", ErrLog, r.Node, r.Group, r.BaseIndex)
		}
		return partition.New(r.Group), nil
	}
	p, err := r.Start()
	if err != nil {
		return nil, fmt.Errorf("%w: %s group %d: base at %d: %v", ErrLog, r.Node, r.Group, r.BaseIndex, err)
	}
	if p.Applied() != r.BaseIndex {
		p.Close()
		return nil, fmt.Errorf("%w: %s group %d: base applied at %d, said %d", ErrLog, r.Node, r.Group, p.Applied(), r.BaseIndex)
	}
	return p, nil
}

// Source yields the replicas the verifier reads.
type Source interface {
	// Replicas returns every replica of every group the source holds
	// (group 0 included), in any order. The caller must not change them.
	Replicas() ([]*Replica, error)
}

// Static is a Source of replicas already in memory (tests, tools).
type Static []*Replica

// Replicas returns s.
func (s Static) Replicas() ([]*Replica, error) { return s, nil }

// WALSource reads the node WALs of a stopped cluster. Every replica it
// yields has an empty base and the group's whole log.
type WALSource struct {
	// Dirs maps a node's name to its WAL directory (<data-dir>/wal). The
	// nodes must be stopped: opening a WAL cuts a torn final record off,
	// as a restart would.
	Dirs map[string]string
	// Logger receives the WAL's repair warnings; nil discards them.
	Logger *slog.Logger
}

// Replicas reads every WAL in Dirs, in the order of the nodes' names.
func (s WALSource) Replicas() ([]*Replica, error) {
	nodes := make([]string, 0, len(s.Dirs))
	for n := range s.Dirs {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var out []*Replica
	for _, n := range nodes {
		rs, err := ReadWAL(n, s.Dirs[n], s.Logger)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// ReadWAL reads one stopped node's WAL in dir and returns a replica per
// group it holds, in group order. logger (nil: discard) receives the
// WAL's repair warnings.
func ReadWAL(node, dir string, logger *slog.Logger) ([]*Replica, error) {
	if logger == nil {
		logger = discard
	}
	w, err := wal.Open(dir, wal.Options{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("verify: node %s: open wal %s: %w", node, dir, err)
	}
	logs, err := raftstore.ReadLogs(w)
	if cerr := w.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("verify: node %s: read wal %s: %w", node, dir, err)
	}
	out := make([]*Replica, 0, len(logs))
	mats, err := checkpoint.List(filepath.Join(filepath.Dir(dir), checkpoint.DirName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("verify: node %s: %w", node, err)
	}
	for g, l := range logs {
		r := &Replica{Node: node, Group: g, Entries: l.Entries, Commit: l.HardState.GetCommit()}
		if first := firstIndex(l); first > 1 {
			// The WAL front was truncated behind a materialization: start
			// from the newest one the log continues.
			if err := withBase(r, filepath.Join(filepath.Dir(dir), checkpoint.DirName), mats[g], first); err != nil {
				return nil, fmt.Errorf("verify: node %s: group %d: %w", node, g, err)
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

// firstIndex is the index the WAL's log of a group starts at (the
// installed snapshot's successor when the log is empty after one).
func firstIndex(l *raftstore.GroupLog) uint64 {
	if len(l.Entries) > 0 {
		return l.Entries[0].GetIndex()
	}
	if l.Installed != nil {
		return l.Installed.GetIndex() + 1
	}
	return 1
}

// withBase sets r's base to the oldest intact materialization the log
// continues from (index >= first-1), so that as many cuts as possible lie
// after it, and drops the entries inside it.
func withBase(r *Replica, dir string, mats []checkpoint.Materialization, first uint64) error {
	for _, m := range mats {
		if m.Index+1 < first {
			continue
		}
		last := m.Index
		if n := len(r.Entries); n > 0 {
			last = max(last, r.Entries[n-1].GetIndex())
		}
		if m.Index > last {
			continue
		}
		path := filepath.Join(dir, m.Name())
		if m.Dir {
			if _, _, err := checkpoint.VerifyDir(path); err != nil || r.Group == 0 {
				continue
			}
		} else if _, err := checkpoint.Verify(path); err != nil {
			continue
		}
		k := 0
		for k < len(r.Entries) && r.Entries[k].GetIndex() <= m.Index {
			k++
		}
		r.Entries, r.BaseIndex = r.Entries[k:], m.Index
		g := r.Group
		if g == 0 {
			r.StartMeta = func() (*meta.State, error) {
				f, err := checkpoint.Open(path)
				if err != nil {
					return nil, err
				}
				defer f.Close()
				s := meta.New()
				return s, s.LoadImage(f)
			}
		} else {
			r.Start = func() (*partition.Partition, error) {
				if m.Dir {
					return openCheckpoint(g, path)
				}
				f, err := checkpoint.Open(path)
				if err != nil {
					return nil, err
				}
				defer f.Close()
				return partition.Decode(g, f)
			}
		}
		return nil
	}
	return fmt.Errorf("%w: the WAL holds the log from entry %d and no intact materialization covers what is before", ErrLog, first)
}

// openCheckpoint opens partition g's checkpoint directory path as a
// scratch Pebble: a hard-link clone made beside the node's data directory
// (partition.OpenCheckpointScratch), which closing the partition removes.
// Entries are replayed onto the clone; the checkpoint itself is never
// opened.
func openCheckpoint(g uint64, path string) (*partition.Partition, error) {
	// A fresh name beside the data directory: made, then removed for the
	// clone to make.
	scratch, err := os.MkdirTemp(filepath.Dir(filepath.Dir(filepath.Dir(path))), fmt.Sprintf("scratch-p%04d-", g))
	if err != nil {
		return nil, err
	}
	if err := os.Remove(scratch); err != nil {
		return nil, err
	}
	return partition.OpenCheckpointScratch(path, scratch, g, discard)
}

// discard drops log messages: a WAL's repair warnings nobody asked for,
// and Pebble's about the verifier's scratch states.
var discard = slog.New(slog.DiscardHandler)
