package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/topology"
)

// Errors about the data dir.
var (
	ErrDataDirLocked = errors.New("server: data dir is in use by another process")
	ErrWrongCluster  = errors.New("server: data dir belongs to another cluster")
	ErrNoBootstrap   = errors.New("server: empty data dir and no --initial-cluster")
	// ErrNoIdentity: the data dir holds a WAL or materializations but no
	// cluster.json.
	ErrNoIdentity = errors.New("server: data dir has no identity file")
	// ErrRestoreIncomplete: the data dir holds RestoreMarkerFile, left by
	// a kvnode restore that did not finish.
	ErrRestoreIncomplete = errors.New("server: data dir is an unfinished restore")
)

const (
	lockFile     = "LOCK"
	identityFile = "cluster.json"
	walDir       = WALDir
)

// MaterializeDir is the directory of the groups' materialization files
// inside a data dir.
const MaterializeDir = checkpoint.DirName

// RestoreMarkerFile is the file a restore (package restore) creates in a
// data dir before it writes anything else there and removes once the data
// dir is complete, the identity file written. A node refuses to start
// from a data dir that holds it (ErrRestoreIncomplete): a restore that
// failed or was killed half-way never passes for a node's data.
const RestoreMarkerFile = "RESTORING"

// WALDir is the node WAL's directory inside a data dir (tools that read a
// stopped node's WAL, like the cut verifier, find it there).
const WALDir = "wal"

// dataDir is a locked node data directory.
type dataDir struct {
	path string
	lock *os.File
}

// lockDataDir creates path if needed and takes an exclusive lock on it
// for the life of the process.
func lockDataDir(path string) (*dataDir, error) {
	if err := os.MkdirAll(path, 0o750); err != nil {
		return nil, fmt.Errorf("server: create data dir %s: %w", path, err)
	}
	f, err := os.OpenFile(filepath.Join(path, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("server: open lock file in %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s (is another kvnode running with this --data-dir?)", ErrDataDirLocked, path)
	}
	return &dataDir{path: path, lock: f}, nil
}

func (d *dataDir) unlock() {
	if d.lock != nil {
		_ = syscall.Flock(int(d.lock.Fd()), syscall.LOCK_UN)
		d.lock.Close()
		d.lock = nil
	}
}

// identity is what a data dir remembers: which node of which cluster it is.
type identity struct {
	NodeID string
	Layout *topology.Layout
	// RestoredFrom names the snapshot a restored data dir came from.
	RestoredFrom string
}

// pending says whether the cluster id is still to be agreed (a new
// cluster, or a restored data dir before its first start).
func (id identity) pending() bool { return id.Layout.ClusterID == 0 }

// loadIdentity returns the data dir's identity. An existing one must
// match the node id and, when cfg names an initial cluster, that cluster;
// a missing one is made from cfg's initial cluster, with its cluster id
// still to be agreed (fresh), and is not written yet: see Start.
//
// A restored data dir (its identity says RestoredFrom) belongs to a
// cluster whose digest comes from a restore token, not from
// cfg.InitialClusterToken, so it also accepts an initial cluster with the
// same members (ids, order and addresses) and partition count: the same
// cluster except for the token.
func (d *dataDir) loadIdentity(cfg *Config) (id identity, fresh bool, err error) {
	if _, err := os.Stat(filepath.Join(d.path, RestoreMarkerFile)); err == nil {
		return identity{}, false, fmt.Errorf("%w: %s holds %s: a kvnode restore into it did not finish; delete the directory and run kvnode restore again",
			ErrRestoreIncomplete, d.path, RestoreMarkerFile)
	} else if !errors.Is(err, os.ErrNotExist) {
		return identity{}, false, fmt.Errorf("server: data dir %s: %w", d.path, err)
	}
	var want *topology.Layout
	if cfg.InitialCluster != "" {
		ms, err := topology.ParseInitialCluster(cfg.InitialCluster)
		if err != nil {
			return identity{}, false, fmt.Errorf("%w: --initial-cluster: %v", ErrConfig, err)
		}
		if want, err = topology.New(cfg.InitialClusterToken, ms, cfg.Partitions); err != nil {
			return identity{}, false, fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	file := filepath.Join(d.path, identityFile)
	data, err := os.ReadFile(file)
	switch {
	case err == nil:
		var rec internalpb.NodeIdentity
		if err := protojson.Unmarshal(data, &rec); err != nil {
			return identity{}, false, fmt.Errorf("server: %s is damaged: %v (restore the file or wipe the data dir)", file, err)
		}
		l, err := topology.FromProtoPending(rec.GetLayout())
		if err != nil {
			return identity{}, false, fmt.Errorf("server: %s: %w", file, err)
		}
		if l.ClusterID == 0 && rec.GetRestoredFrom() == "" {
			return identity{}, false, fmt.Errorf("server: %s: %w: no cluster id", file, topology.ErrBadLayout)
		}
		if rec.GetNodeId() != cfg.ID {
			return identity{}, false, fmt.Errorf("%w: %s holds node %q, started as %q", ErrWrongCluster, d.path, rec.GetNodeId(), cfg.ID)
		}
		if want != nil && !sameBootstrap(want, l) {
			from := rec.GetRestoredFrom()
			switch {
			case from != "" && sameShape(want, l):
				// A restored cluster: its digest comes from the restore token.
			case from != "":
				return identity{}, false, fmt.Errorf("%w: %s was restored from snapshot %s as a cluster with %d partitions and members %s, but --initial-cluster/--partitions describe another cluster; start it with the same --initial-cluster and --partitions %d, or without --initial-cluster",
					ErrWrongCluster, d.path, from, l.Partitions, describeMembers(l), l.Partitions)
			default:
				return identity{}, false, fmt.Errorf("%w: %s holds cluster %s (members %s, %d partitions), but --initial-cluster/--initial-cluster-token/--partitions describe another cluster; refusing to join it",
					ErrWrongCluster, d.path, topology.FormatClusterID(l.ClusterID), describeMembers(l), l.Partitions)
			}
		}
		return identity{NodeID: rec.GetNodeId(), Layout: l, RestoredFrom: rec.GetRestoredFrom()}, false, nil
	case !errors.Is(err, os.ErrNotExist):
		return identity{}, false, fmt.Errorf("server: read %s: %w", file, err)
	}
	// No identity: refuse a data dir that holds a node's data anyway
	// (starting would bootstrap a new cluster over the old log).
	for _, sub := range []string{walDir, MaterializeDir} {
		if entries, err := os.ReadDir(filepath.Join(d.path, sub)); err == nil && len(entries) > 0 {
			return identity{}, false, fmt.Errorf("%w: %s holds %s/ but no %s: the file that says which cluster and node this data belongs to is missing. "+
				"Put back %s from a backup of this data dir; to rejoin as an empty node instead, move the data dir away (its data is then lost on this node)",
				ErrNoIdentity, d.path, sub, identityFile, identityFile)
		}
	}
	if want == nil {
		return identity{}, false, fmt.Errorf("%w: %s holds no cluster; start with --initial-cluster to bootstrap a new one", ErrNoBootstrap, d.path)
	}
	if _, ok := want.Member(cfg.ID); !ok {
		return identity{}, false, fmt.Errorf("%w: node %q is not in --initial-cluster %q", ErrConfig, cfg.ID, cfg.InitialCluster)
	}
	want.ClusterID = 0 // agreed with the other members at start
	return identity{NodeID: cfg.ID, Layout: want}, true, nil
}

// sameBootstrap says whether a layout l read from a data dir is the one
// want (from the flags) describes: the same digest, or, for data dirs
// written before digests, the same derived cluster id.
func sameBootstrap(want, l *topology.Layout) bool {
	if l.Digest != 0 {
		return want.Digest == l.Digest
	}
	return want.Digest == l.ClusterID
}

// save writes the identity file crash-atomically.
func (d *dataDir) save(id identity) error {
	return writeIdentity(d.path, id.NodeID, id.Layout, id.RestoredFrom)
}

// removeFresh removes what a first start that failed wrote into the data
// dir (identity, WAL, materializations), so that the corrected retry
// starts from an empty data dir again.
func (d *dataDir) removeFresh() error {
	var errs []error
	for _, p := range []string{identityFile, walDir, MaterializeDir, snapshotTmpDir} {
		if err := os.RemoveAll(filepath.Join(d.path, p)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sameShape says whether a and b have the same members (ids, raft ids and
// addresses) and partition count, and so the same placement: the same
// cluster but for the token its id was derived from.
func sameShape(a, b *topology.Layout) bool {
	return a.Partitions == b.Partitions && slices.Equal(a.Members, b.Members) &&
		slices.EqualFunc(a.Groups, b.Groups, func(x, y []uint64) bool { return slices.Equal(x, y) })
}

// describeMembers renders l's members as --initial-cluster does.
func describeMembers(l *topology.Layout) string {
	parts := make([]string, len(l.Members))
	for i, m := range l.Members {
		parts[i] = m.ID + "=" + m.PeerAddr
	}
	return strings.Join(parts, ",")
}

// WriteIdentity writes the identity file (cluster.json) of node nodeID of
// the cluster laid out by l into dataDir, exactly as a node bootstrapping
// a new cluster does, crash-atomically. restoredFrom, when not empty,
// names the snapshot the data dir was restored from ("<source cluster
// hex>/<snapshot id>"); the node then also accepts an --initial-cluster
// with the same members and partition count but another token (see
// loadIdentity), and l's cluster id may be 0: the restored cluster's
// members agree on a new one at their first start. It refuses a data dir
// that already has an identity, and a node that is not one of l's members.
func WriteIdentity(dataDir, nodeID string, l *topology.Layout, restoredFrom string) error {
	file := filepath.Join(dataDir, identityFile)
	if _, err := os.Stat(file); err == nil {
		return fmt.Errorf("server: %s exists: a data dir's identity is never replaced", file)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("server: %s: %w", file, err)
	}
	if _, ok := l.Member(nodeID); !ok {
		return fmt.Errorf("%w: node %q is not a member of cluster %s (%s)", ErrConfig, nodeID, topology.FormatClusterID(l.ClusterID), describeMembers(l))
	}
	return writeIdentity(dataDir, nodeID, l, restoredFrom)
}

// writeIdentity writes the identity file of nodeID, a member of l.
func writeIdentity(dataDir, nodeID string, l *topology.Layout, restoredFrom string) error {
	rec := &internalpb.NodeIdentity{NodeId: nodeID, Layout: l.Proto(), RestoredFrom: restoredFrom}
	out, err := protojson.MarshalOptions{Multiline: true}.Marshal(rec)
	if err != nil {
		return fmt.Errorf("server: encode identity: %w", err)
	}
	return writeFileAtomic(filepath.Join(dataDir, identityFile), out)
}

// writeFileAtomic writes data to path crash-atomically: temp file, fsync,
// rename, fsync of the directory.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("server: write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("server: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("server: fsync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("server: close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("server: rename to %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("server: open dir %s: %w", dir, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("server: fsync dir %s: %w", dir, err)
	}
	return nil
}
