// Package datadir is the layout of a node's data directory: the names of
// what lives there, its lock, and the identity file that says which node
// of which cluster the data belongs to. The node (package server) and the
// offline tools that write or read a data dir (restore, the cut verifier,
// the fault harness) share it, so that the tools need none of the node's
// wiring.
package datadir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/topology"
)

// What lives in a data dir.
const (
	// LockFile is locked (flock) by the process that owns the data dir.
	LockFile = "LOCK"
	// IdentityFile says which node of which cluster the data dir is.
	IdentityFile = "cluster.json"
	// WALDir is the node WAL's directory (tools that read a stopped
	// node's WAL, like the cut verifier, find it there).
	WALDir = "wal"
	// MaterializeDir is the directory of the groups' materialization
	// files.
	MaterializeDir = checkpoint.DirName
	// StateDir holds each partition replica's state on disk, a Pebble
	// directory per partition (pNNNN).
	StateDir = "state"
	// RestoreMarkerFile is the file a restore creates in a data dir
	// before it writes anything else there and removes once the data dir
	// is complete, the identity file written. A node refuses to start
	// from a data dir that holds it: a restore that failed or was killed
	// half-way never passes for a node's data.
	RestoreMarkerFile = "RESTORING"
)

// maxIdentityBytes bounds the identity file: a layout of the most members
// and partitions a cluster can have is far smaller.
const maxIdentityBytes = 4 << 20

// Errors about a data dir.
var (
	ErrLocked = errors.New("data dir is in use by another process")
	// ErrDamaged: the identity file does not decode or is not a layout.
	ErrDamaged = errors.New("data dir identity file is damaged")
	// ErrNotMember: an identity names a node its layout does not hold.
	ErrNotMember = errors.New("node is not a member of the cluster")
)

// Lock is an exclusive lock on a data dir, held for the life of the
// process (or until Unlock).
type Lock struct{ f *os.File }

// LockDir creates path if needed and takes an exclusive lock on it.
func LockDir(path string) (*Lock, error) {
	if err := os.MkdirAll(path, 0o750); err != nil {
		return nil, fmt.Errorf("datadir: create %s: %w", path, err)
	}
	f, err := os.OpenFile(filepath.Join(path, LockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("datadir: open lock file in %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s (is another kvnode running with this --data-dir?)", ErrLocked, path)
	}
	return &Lock{f: f}, nil
}

// Unlock releases the lock; a second call does nothing.
func (l *Lock) Unlock() {
	if l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		l.f.Close()
		l.f = nil
	}
}

// Identity is what a data dir remembers: which node of which cluster it
// is.
type Identity struct {
	NodeID string
	Layout *topology.Layout
	// RestoredFrom names the snapshot a restored data dir came from
	// ("<source cluster hex>/<snapshot id>"); its layout's cluster id may
	// be 0 until the restored cluster's members agree on one.
	RestoredFrom string
}

// Pending says whether the cluster id is still to be agreed (a new
// cluster, or a restored data dir before its first start).
func (id Identity) Pending() bool { return id.Layout.ClusterID == 0 }

// ReadIdentity reads dir's identity file; ok is false when there is none.
// A file that does not decode, or holds no cluster id without being a
// restore's, is ErrDamaged naming the file.
func ReadIdentity(dir string) (id Identity, ok bool, err error) {
	file := filepath.Join(dir, IdentityFile)
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return Identity{}, false, nil
	}
	if err != nil {
		return Identity{}, false, fmt.Errorf("datadir: read %s: %w", file, err)
	}
	// At most one byte past the largest identity: whatever lies under
	// the name costs no more memory than a valid file.
	data, err := io.ReadAll(io.LimitReader(f, maxIdentityBytes+1))
	_ = f.Close() // read only
	if err != nil {
		return Identity{}, false, fmt.Errorf("datadir: read %s: %w", file, err)
	}
	if len(data) > maxIdentityBytes {
		return Identity{}, false, fmt.Errorf("%w: %s: longer than %d bytes (restore the file or wipe the data dir)", ErrDamaged, file, maxIdentityBytes)
	}
	var rec internalpb.NodeIdentity
	if err := protojson.Unmarshal(data, &rec); err != nil {
		return Identity{}, false, fmt.Errorf("%w: %s: %v (restore the file or wipe the data dir)", ErrDamaged, file, err)
	}
	l, err := topology.FromProtoPending(rec.GetLayout())
	if err != nil {
		return Identity{}, false, fmt.Errorf("%w: %s: %w", ErrDamaged, file, err)
	}
	if l.ClusterID == 0 && rec.GetRestoredFrom() == "" {
		return Identity{}, false, fmt.Errorf("%w: %s: %w: no cluster id", ErrDamaged, file, topology.ErrBadLayout)
	}
	return Identity{NodeID: rec.GetNodeId(), Layout: l, RestoredFrom: rec.GetRestoredFrom()}, true, nil
}

// WriteIdentity writes dir's identity file crash-atomically, replacing
// one that is there (a node records the cluster id its members agreed
// on).
func WriteIdentity(dir string, id Identity) error {
	rec := &internalpb.NodeIdentity{NodeId: id.NodeID, Layout: id.Layout.Proto(), RestoredFrom: id.RestoredFrom}
	out, err := protojson.MarshalOptions{Multiline: true}.Marshal(rec)
	if err != nil {
		return fmt.Errorf("datadir: encode identity: %w", err)
	}
	return WriteFileAtomic(filepath.Join(dir, IdentityFile), out)
}

// CreateIdentity writes the identity file of a data dir that has none,
// exactly as a node bootstrapping a new cluster does. It refuses a data
// dir that already has an identity (one is never replaced from outside)
// and a node that is not one of the layout's members (ErrNotMember).
func CreateIdentity(dir string, id Identity) error {
	file := filepath.Join(dir, IdentityFile)
	if _, err := os.Stat(file); err == nil {
		return fmt.Errorf("datadir: %s exists: a data dir's identity is never replaced", file)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("datadir: %s: %w", file, err)
	}
	if _, ok := id.Layout.Member(id.NodeID); !ok {
		return fmt.Errorf("%w: node %q, cluster %s (%s)", ErrNotMember, id.NodeID, topology.FormatClusterID(id.Layout.ClusterID), id.Layout.DescribeMembers())
	}
	return WriteIdentity(dir, id)
}

// WriteFileAtomic writes data to path crash-atomically: temp file, fsync,
// rename, fsync of the directory.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("datadir: write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("datadir: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("datadir: fsync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("datadir: close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("datadir: rename to %s: %w", path, err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("datadir: open dir %s: %w", dir, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("datadir: fsync dir %s: %w", dir, err)
	}
	return nil
}
