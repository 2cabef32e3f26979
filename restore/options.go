package restore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cutkv/cutkv/snapshot"
	"github.com/cutkv/cutkv/topology"
)

// Errors of a restore. Each is wrapped with what was wrong and what to do.
var (
	// ErrOptions: the options are incomplete or contradict each other, or
	// the store holds several clusters and none was named.
	ErrOptions = errors.New("restore: bad options")
	// ErrDataDir: the data dir exists and is not an empty directory.
	ErrDataDir = errors.New("restore: data dir not usable")
	// ErrNoSnapshot: the store holds no snapshot that fits the request
	// (no cluster, no such id, none at or before the time).
	ErrNoSnapshot = errors.New("restore: no such snapshot")
	// ErrIncompatible: the snapshot cannot become the cluster asked for
	// (another key-hash function or partition count, or a token that
	// gives the source cluster's id).
	ErrIncompatible = errors.New("restore: snapshot does not fit")
	// ErrDamaged: a piece of the snapshot is missing, damaged or does not
	// reach the cut. The error also wraps the *snapshot.CheckError (or
	// the reader's error) that names the piece.
	ErrDamaged = errors.New("restore: snapshot damaged or incomplete")
)

// Options say which snapshot to restore and which node of which new
// cluster the data dir is for. Every node of the new cluster runs a
// restore with the same options but NodeID and DataDir.
type Options struct {
	// StoreURL is the blob store holding the snapshots, as
	// snapshot.OpenStore takes it: file:///some/dir or s3://BUCKET?….
	StoreURL string
	// SourceCluster is the id of the cluster whose snapshot is restored.
	// 0: the only cluster that has snapshots in the store; when there
	// are several, Run fails with ErrOptions and lists them.
	SourceCluster uint64
	// Snapshot is the id of the snapshot to restore, or the number of
	// its cut ("7" for cut-00000000000000000007; Validate replaces it by
	// the id, snapshot.ResolveID). Exactly one of Snapshot and At is set.
	Snapshot string
	// At picks the newest snapshot (the greatest Time, then cut version)
	// whose Time, at the millisecond precision TimeFormat prints, is at
	// or before At: a time copied from a listing selects that snapshot.
	// ParseAt reads it from a command line.
	At time.Time
	// DataDir is the node's data dir to build. It must not exist, or be
	// an empty directory; it is created with its parents.
	DataDir string
	// NodeID is this node's id; it must be one of InitialCluster's.
	NodeID string
	// InitialCluster lists the new cluster's members and their gRPC
	// addresses, "n1=host:port,n2=host:port,…", as kvnode's
	// --initial-cluster (topology.ParseInitialCluster). Any number of
	// members; it need not match the source cluster's.
	InitialCluster string
	// Token makes the new cluster's id (topology.New). Default:
	// DefaultToken(source cluster, snapshot id), the same on every node,
	// so the nodes need not agree on one. The id must differ from the
	// source cluster's (ErrIncompatible).
	Token string
	// Partitions, when not 0, is the partition count the caller expects:
	// it must equal the snapshot's (ErrIncompatible). The new cluster
	// always has the snapshot's count.
	Partitions uint32
	// Logger receives progress: the snapshot picked, the check, and one
	// line per group written with its keys and the bytes read. nil
	// discards it.
	Logger *slog.Logger
}

// Validate checks the options and fills in the defaults (the Logger; the
// Token needs the snapshot and is filled in by Run).
func (o *Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case o.StoreURL == "":
		return bad("no snapshot store URL")
	case o.Snapshot == "" && o.At.IsZero():
		return bad("no snapshot: name one, or a time to restore the newest snapshot at or before it")
	case o.Snapshot != "" && !o.At.IsZero():
		return bad("both a snapshot (%s) and a time (%s): give one", o.Snapshot, o.At.UTC().Format(TimeFormat))
	case o.DataDir == "":
		return bad("no data dir")
	case o.NodeID == "":
		return bad("no node id")
	case o.InitialCluster == "":
		return bad("no initial cluster (the new cluster's members, id=host:port,…)")
	case o.Partitions > topology.MaxPartitions:
		return bad("partition count %d exceeds %d", o.Partitions, topology.MaxPartitions)
	}
	ms, err := topology.ParseInitialCluster(o.InitialCluster)
	if err != nil {
		return bad("initial cluster: %v", err)
	}
	found := false
	for _, m := range ms {
		found = found || m.ID == o.NodeID
	}
	if !found {
		return bad("node %q is not in the initial cluster %q", o.NodeID, o.InitialCluster)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o.Snapshot = snapshot.ResolveID(o.Snapshot)
	return nil
}

// TimeFormat is how snapshot times are printed wherever ParseAt reads
// them back: RFC 3339 in UTC with milliseconds, the precision At is
// compared at.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// ParseAt reads a restore time: an RFC 3339 time, with or without a
// fraction of a second (2026-03-01T12:00:00.250Z, as TimeFormat prints
// it), or a negative Go duration counted back from now ("-5m", "-1h30m").
func ParseAt(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d >= 0 {
			return time.Time{}, fmt.Errorf("%w: time %q: a relative time is a duration before now, with a minus sign (e.g. -5m)", ErrOptions, s)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: time %q: want an RFC 3339 time such as 2026-03-01T12:00:00.250Z (as --list prints it) or a duration before now such as -5m",
			ErrOptions, s)
	}
	return t, nil
}

// DefaultToken is the token of a cluster restored from snapshot id of
// cluster source when none is given: every node derives the same one,
// and two restores of different snapshots get different cluster ids.
func DefaultToken(source uint64, id string) string {
	return fmt.Sprintf("restore-%016x-%s", source, id)
}
