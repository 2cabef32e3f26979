package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/cutkv/cutkv/datadir"
	"github.com/cutkv/cutkv/topology"
)

// Errors about the data dir.
var (
	// ErrDataDirLocked: another process holds the data dir's lock.
	ErrDataDirLocked = datadir.ErrLocked
	ErrWrongCluster  = errors.New("server: data dir belongs to another cluster")
	ErrNoBootstrap   = errors.New("server: empty data dir and no --initial-cluster")
	// ErrNoIdentity: the data dir holds a WAL or materializations but no
	// cluster.json.
	ErrNoIdentity = errors.New("server: data dir has no identity file")
	// ErrRestoreIncomplete: the data dir holds datadir.RestoreMarkerFile,
	// left by a kvnode restore that did not finish.
	ErrRestoreIncomplete = errors.New("server: data dir is an unfinished restore")
)

// dataDir is a locked node data directory.
type dataDir struct {
	path string
	lock *datadir.Lock
}

// lockDataDir creates path if needed and takes an exclusive lock on it
// for the life of the process.
func lockDataDir(path string) (*dataDir, error) {
	l, err := datadir.LockDir(path)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return &dataDir{path: path, lock: l}, nil
}

func (d *dataDir) unlock() { d.lock.Unlock() }

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
func (d *dataDir) loadIdentity(cfg *Config) (id datadir.Identity, fresh bool, err error) {
	if _, err := os.Stat(filepath.Join(d.path, datadir.RestoreMarkerFile)); err == nil {
		return datadir.Identity{}, false, fmt.Errorf("%w: %s holds %s: a kvnode restore into it did not finish; delete the directory and run kvnode restore again",
			ErrRestoreIncomplete, d.path, datadir.RestoreMarkerFile)
	} else if !errors.Is(err, os.ErrNotExist) {
		return datadir.Identity{}, false, fmt.Errorf("server: data dir %s: %w", d.path, err)
	}
	var want *topology.Layout
	if cfg.InitialCluster != "" {
		ms, err := topology.ParseInitialCluster(cfg.InitialCluster)
		if err != nil {
			return datadir.Identity{}, false, fmt.Errorf("%w: --initial-cluster: %v", ErrConfig, err)
		}
		if want, err = topology.New(cfg.InitialClusterToken, ms, cfg.Partitions); err != nil {
			return datadir.Identity{}, false, fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	have, ok, err := datadir.ReadIdentity(d.path)
	if err != nil {
		return datadir.Identity{}, false, fmt.Errorf("server: %w", err)
	}
	if ok {
		l := have.Layout
		if have.NodeID != cfg.ID {
			return datadir.Identity{}, false, fmt.Errorf("%w: %s holds node %q, started as %q", ErrWrongCluster, d.path, have.NodeID, cfg.ID)
		}
		if want != nil && !sameBootstrap(want, l) {
			from := have.RestoredFrom
			switch {
			case from != "" && sameShape(want, l):
				// A restored cluster: its digest comes from the restore token.
			case from != "":
				return datadir.Identity{}, false, fmt.Errorf("%w: %s was restored from snapshot %s as a cluster with %d partitions and members %s, but --initial-cluster/--partitions describe another cluster; start it with the same --initial-cluster and --partitions %d, or without --initial-cluster",
					ErrWrongCluster, d.path, from, l.Partitions, l.DescribeMembers(), l.Partitions)
			default:
				return datadir.Identity{}, false, fmt.Errorf("%w: %s holds cluster %s (members %s, %d partitions), but --initial-cluster/--initial-cluster-token/--partitions describe another cluster; refusing to join it",
					ErrWrongCluster, d.path, topology.FormatClusterID(l.ClusterID), l.DescribeMembers(), l.Partitions)
			}
		}
		return have, false, nil
	}
	// No identity: refuse a data dir that holds a node's data anyway
	// (starting would bootstrap a new cluster over the old log).
	for _, sub := range []string{datadir.WALDir, datadir.MaterializeDir} {
		if entries, err := os.ReadDir(filepath.Join(d.path, sub)); err == nil && len(entries) > 0 {
			return datadir.Identity{}, false, fmt.Errorf("%w: %s holds %s/ but no %s: the file that says which cluster and node this data belongs to is missing. "+
				"Put back %s from a backup of this data dir; to rejoin as an empty node instead, move the data dir away (its data is then lost on this node)",
				ErrNoIdentity, d.path, sub, datadir.IdentityFile, datadir.IdentityFile)
		}
	}
	if want == nil {
		return datadir.Identity{}, false, fmt.Errorf("%w: %s holds no cluster; start with --initial-cluster to bootstrap a new one", ErrNoBootstrap, d.path)
	}
	if _, ok := want.Member(cfg.ID); !ok {
		return datadir.Identity{}, false, fmt.Errorf("%w: node %q is not in --initial-cluster %q", ErrConfig, cfg.ID, cfg.InitialCluster)
	}
	want.ClusterID = 0 // agreed with the other members at start
	return datadir.Identity{NodeID: cfg.ID, Layout: want}, true, nil
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
func (d *dataDir) save(id datadir.Identity) error {
	return datadir.WriteIdentity(d.path, id)
}

// removeFresh removes what a first start that failed wrote into the data
// dir (identity, WAL, materializations), so that the corrected retry
// starts from an empty data dir again.
func (d *dataDir) removeFresh() error {
	var errs []error
	for _, p := range []string{datadir.IdentityFile, datadir.WALDir, datadir.MaterializeDir, datadir.StateDir, snapshotTmpDir} {
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
