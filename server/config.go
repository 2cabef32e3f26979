package server

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/cutkv/cutkv/rpc"
	"github.com/cutkv/cutkv/topology"
)

// ErrConfig is returned for an invalid configuration.
var ErrConfig = errors.New("server: bad configuration")

// Config is everything a node needs to start. Every field maps to a kvnode
// flag of the same name in kebab case (see cmd/kvnode).
type Config struct {
	// ID is the node's id, e.g. "n1"; it must appear in the initial cluster.
	ID string
	// DataDir holds the node's WAL, its cluster identity and a lock file.
	// Default: data/<ID>.
	DataDir string
	// GRPCAddr is the host:port the gRPC server listens on (":0" picks a
	// free port). Default 127.0.0.1:7001.
	GRPCAddr string
	// GossipAddr is the host:port memberlist listens on (TCP and UDP).
	// Default 127.0.0.1:7101.
	GossipAddr string
	// HTTPAddr is the host:port of the HTTP server (metrics, health,
	// pprof); empty disables it. Default 127.0.0.1:7201.
	HTTPAddr string
	// Join lists gossip addresses of other nodes to join.
	Join []string
	// InitialCluster ("n1=host:port,n2=host:port,...", gRPC addresses)
	// bootstraps a new cluster when the data dir is empty. With existing
	// data it must describe the same cluster or be empty.
	InitialCluster string
	// InitialClusterToken makes the cluster id unique among clusters with
	// the same members. Default "cutkv".
	InitialClusterToken string
	// Partitions is the number of data partitions, fixed at bootstrap.
	// Default 16.
	Partitions uint32
	// Limits bound request sizes (default key 4 KiB, value 1 MiB).
	Limits rpc.Limits
	// ShutdownTimeout bounds a graceful shutdown (drain, leadership hand
	// off, gossip leave). Default 10s.
	ShutdownTimeout time.Duration
	// TickInterval is the raft tick; default 100ms.
	TickInterval time.Duration
	// ElectionTicks is raft's election timeout in ticks; default 10.
	ElectionTicks int
	// WALSegmentSize is the WAL segment file size; default 64 MiB.
	WALSegmentSize int
	// MaterializeInterval materializes each group at least this often
	// (when it changed); default 1m.
	MaterializeInterval time.Duration
	// MaterializeBytes materializes a group whose WAL tail passed it;
	// default 64 MiB.
	MaterializeBytes int64
	// CatchUpEntries are kept in memory behind a materialization for slow
	// followers (raftstore.Config); default 5000.
	CatchUpEntries uint64
	// CutInterval takes a consistent cut this often while the node leads
	// group 0; 0 (the default) takes cuts only on request.
	CutInterval time.Duration
	// CutTimeout fails a cut not finished in every partition by then;
	// default rpc.DefaultCutTimeout.
	CutTimeout time.Duration
	// SnapshotStore is the blob store URL (file://, s3://) snapshot
	// requests without one use, and where automatic snapshots go. Empty:
	// file:// + DataDir/snapshots. Nodes that upload to a file:// store
	// must all see that directory (one machine, or a shared file system).
	SnapshotStore string
	// SnapshotInterval takes a snapshot (of a new cut) this often while
	// the node leads group 0; 0 (the default) takes them on request only.
	SnapshotInterval time.Duration
	// SnapshotKeep prunes automatic snapshots beyond the newest this many;
	// 0 keeps them all.
	SnapshotKeep int
	// SnapshotUploadRate bounds the bytes per second this node uploads
	// to snapshot stores, and reads and writes building full snapshots'
	// images, all at once together; 0 (the default) does not limit. A full snapshot, or the new bases after a
	// materialization round, otherwise take the disk and CPU the node
	// serves writes with.
	SnapshotUploadRate int64
}

// SnapshotDir is the default file:// snapshot store inside a data dir.
const SnapshotDir = "snapshots"

// snapshotTmpDir holds materializations built for full snapshots until
// they are uploaded; emptied at start.
const snapshotTmpDir = "snapshot-tmp"

// Validate checks the configuration and fills defaults.
func (c *Config) Validate() error {
	if c.ID == "" {
		return fmt.Errorf("%w: --id is required", ErrConfig)
	}
	if c.DataDir == "" {
		c.DataDir = filepath.Join("data", c.ID)
	}
	if c.GRPCAddr == "" {
		c.GRPCAddr = "127.0.0.1:7001"
	}
	if c.GossipAddr == "" {
		c.GossipAddr = "127.0.0.1:7101"
	}
	for name, a := range map[string]string{"grpc-addr": c.GRPCAddr, "gossip-addr": c.GossipAddr, "http-addr": c.HTTPAddr} {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("%w: --%s %q: %v", ErrConfig, name, a, err)
		}
	}
	if c.InitialClusterToken == "" {
		c.InitialClusterToken = "cutkv"
	}
	if c.Partitions == 0 {
		c.Partitions = topology.DefaultPartitions
	}
	if c.Partitions > topology.MaxPartitions {
		return fmt.Errorf("%w: --partitions %d exceeds %d", ErrConfig, c.Partitions, topology.MaxPartitions)
	}
	c.Limits.Validate()
	if c.Limits.MaxKeySize > 64<<10 || c.Limits.MaxValueSize > 64<<20 {
		return fmt.Errorf("%w: key limit %d (max 64 KiB) or value limit %d (max 64 MiB) too large", ErrConfig, c.Limits.MaxKeySize, c.Limits.MaxValueSize)
	}
	if c.CutInterval < 0 {
		return fmt.Errorf("%w: cut interval %v is negative", ErrConfig, c.CutInterval)
	}
	if c.CutTimeout <= 0 {
		c.CutTimeout = rpc.DefaultCutTimeout
	}
	if c.SnapshotInterval < 0 || c.SnapshotKeep < 0 || c.SnapshotUploadRate < 0 {
		return fmt.Errorf("%w: snapshot interval %v, keep %d and upload rate %d must not be negative", ErrConfig, c.SnapshotInterval, c.SnapshotKeep, c.SnapshotUploadRate)
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = 10
	}
	if c.WALSegmentSize <= 0 {
		c.WALSegmentSize = 64 << 20
	}
	return nil
}
