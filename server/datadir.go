package server

import (
	"github.com/cutkv/cutkv/checkpoint"

	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/topology"
)

// Errors about the data dir.
var (
	ErrDataDirLocked = errors.New("server: data dir is in use by another process")
	ErrWrongCluster  = errors.New("server: data dir belongs to another cluster")
	ErrNoBootstrap   = errors.New("server: empty data dir and no --initial-cluster")
)

const (
	lockFile     = "LOCK"
	identityFile = "cluster.json"
	walDir       = WALDir
)

// MaterializeDir is the directory of the groups' materialization files
// inside a data dir.
const MaterializeDir = checkpoint.DirName

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
}

// loadOrCreateIdentity returns the data dir's identity. An existing one
// must match the node id and, when cfg names an initial cluster, that
// cluster; a missing one is created from cfg's initial cluster. fresh
// reports whether it was created now.
func (d *dataDir) loadOrCreateIdentity(cfg *Config) (id identity, fresh bool, err error) {
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
		l, err := topology.FromProto(rec.GetLayout())
		if err != nil {
			return identity{}, false, fmt.Errorf("server: %s: %w", file, err)
		}
		if rec.GetNodeId() != cfg.ID {
			return identity{}, false, fmt.Errorf("%w: %s holds node %q, started as %q", ErrWrongCluster, d.path, rec.GetNodeId(), cfg.ID)
		}
		if want != nil && want.ClusterID != l.ClusterID {
			return identity{}, false, fmt.Errorf("%w: %s holds cluster %s, but --initial-cluster/--initial-cluster-token/--partitions describe cluster %s; refusing to join it",
				ErrWrongCluster, d.path, topology.FormatClusterID(l.ClusterID), topology.FormatClusterID(want.ClusterID))
		}
		return identity{NodeID: rec.GetNodeId(), Layout: l}, false, nil
	case !errors.Is(err, os.ErrNotExist):
		return identity{}, false, fmt.Errorf("server: read %s: %w", file, err)
	}
	if want == nil {
		return identity{}, false, fmt.Errorf("%w: %s holds no cluster; start with --initial-cluster to bootstrap a new one", ErrNoBootstrap, d.path)
	}
	if _, ok := want.Member(cfg.ID); !ok {
		return identity{}, false, fmt.Errorf("%w: node %q is not in --initial-cluster %q", ErrConfig, cfg.ID, cfg.InitialCluster)
	}
	rec := &internalpb.NodeIdentity{NodeId: cfg.ID, Layout: want.Proto()}
	out, err := protojson.MarshalOptions{Multiline: true}.Marshal(rec)
	if err != nil {
		return identity{}, false, fmt.Errorf("server: encode identity: %w", err)
	}
	if err := writeFileAtomic(file, out); err != nil {
		return identity{}, false, err
	}
	return identity{NodeID: cfg.ID, Layout: want}, true, nil
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
