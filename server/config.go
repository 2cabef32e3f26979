package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cutkv/cutkv/rpc"
	"github.com/cutkv/cutkv/topology"
	"github.com/cutkv/cutkv/wal"
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
	// GRPCAddr is the host:port the client listener takes (KV, Cluster,
	// health, reflection; ":0" picks a free port). Default 127.0.0.1:7001.
	GRPCAddr string
	// PeerAddr is the host:port of the peer listener: raft, 2PC, cuts,
	// snapshots, and requests other nodes forward for clients. Other
	// members reach it at the address --initial-cluster names. Default
	// 127.0.0.1:7301.
	PeerAddr string
	// GossipAddr is the host:port memberlist listens on (TCP and UDP).
	// Default 127.0.0.1:7101.
	GossipAddr string
	// HTTPAddr is the host:port of the HTTP server (metrics, health,
	// pprof); empty disables it. Default 127.0.0.1:7201.
	HTTPAddr string
	// AdvertiseGRPC, AdvertisePeer, AdvertiseGossip and AdvertiseHTTP are
	// the host:port values other members and clients reach this node at,
	// announced instead of the listen addresses (which may be 0.0.0.0, or
	// an address behind NAT or a container's network). Empty: announce the
	// bound address. AdvertisePeer must be this node's address in
	// --initial-cluster, which is what members dial; AdvertiseGossip may
	// name a host, resolved to an IP address at start (memberlist
	// announces IPs; one of this machine's preferred, see
	// resolveAdvertise), e.g. a Kubernetes pod's stable DNS name.
	AdvertiseGRPC, AdvertisePeer, AdvertiseGossip, AdvertiseHTTP string
	// Join lists gossip addresses of other nodes to join.
	Join []string
	// InitialCluster ("n1=host:port,n2=host:port,...", peer addresses)
	// bootstraps a new cluster when the data dir is empty. With existing
	// data it must describe the same cluster or be empty.
	InitialCluster string
	// InitialClusterToken tells apart clusters bootstrapped with the same
	// members: members agree on the (random) cluster id only with members
	// that have the same token, members and partitions. Default "cutkv".
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
	// WALSegmentSize is the WAL segment file size; default
	// wal.DefaultSegmentSize (16 MiB).
	WALSegmentSize int
	// MaterializeInterval materializes each group at least this often
	// (when it changed); default 1m.
	MaterializeInterval time.Duration
	// MaterializeBytes materializes a group whose WAL tail passed it;
	// default 64 MiB.
	MaterializeBytes int64
	// Storage is where partition state lives: "pebble" (the default), on
	// disk under <DataDir>/state, or "memory", held in memory and rebuilt
	// from the materializations and the WAL at each start (for tests and
	// small data sets).
	Storage string
	// CacheSize bounds the memory of the partitions' Pebble (block cache,
	// memtables included); 0: a quarter of the memory limit (cgroup
	// memory.max, else the machine's memory), at least 64 MiB.
	CacheSize int64
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
	// SnapshotStoreAllow lists the stores, besides SnapshotStore, that a
	// snapshot request (kvctl --store) may name. Any other URL is refused.
	SnapshotStoreAllow []string

	// TLS between peers (etcd's flag names): this node's certificate and
	// key, and the cluster CA that every member's certificate comes from.
	// All three or none. With them the peer listener requires mutual TLS
	// from members only.
	PeerCertFile, PeerKeyFile, PeerTrustedCAFile string
	// InsecurePeer allows a peer listener on a non-loopback address
	// without TLS (any host that reaches it can then act as a member).
	InsecurePeer bool
	// TLS on the client listener: the server certificate and key, and
	// optionally a CA, which makes client certificates required (their
	// role, package pki, is checked on every call).
	CertFile, KeyFile, TrustedCAFile string
	// GossipKeyFile holds the gossip encryption keys, one base64 key (16,
	// 24 or 32 bytes) a line, the first one used to encrypt. Reloaded on
	// SIGHUP with the certificates.
	GossipKeyFile string

	// MaxConnections bounds the connections each listener holds open. At
	// start it must fit the file descriptor limit, with room for the WAL
	// and storage. 0 (the default): 1024, or less when the descriptor
	// limit is lower (logged).
	MaxConnections int
	// IdleTimeout closes a connection idle that long; default 5m.
	IdleTimeout time.Duration
	// Pprof serves /debug/pprof on the HTTP address.
	Pprof bool

	// FatalExit ends the process when the node must stop at once and
	// cannot even shut down: a partition's Pebble failed in a way it
	// cannot return (engine.ErrFatal: a MANIFEST write that failed, on a
	// full disk say) and holds the locks that closing it needs. The node
	// has reported NOT_SERVING and logged err (which names the file) when
	// it is called, possibly on a Pebble goroutine. It must not return;
	// kvnode prints err and exits with status 1, and the node restarts
	// from its WAL as after a crash. nil: a panic (in-process tests).
	FatalExit func(err error)
}

// peerTLS reports whether peer TLS is configured.
func (c *Config) peerTLS() bool { return c.PeerCertFile != "" }

// clientTLS reports whether the client listener speaks TLS.
func (c *Config) clientTLS() bool { return c.CertFile != "" }

// isLoopback says whether a listen address only takes connections from
// this machine: an IP in 127.0.0.0/8 or ::1, or "localhost".
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
	if c.PeerAddr == "" {
		c.PeerAddr = "127.0.0.1:7301"
	}
	for name, a := range map[string]string{"grpc-addr": c.GRPCAddr, "peer-addr": c.PeerAddr, "gossip-addr": c.GossipAddr, "http-addr": c.HTTPAddr} {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("%w: --%s %q: %v", ErrConfig, name, a, err)
		}
	}
	for _, a := range []flagValue{{"--advertise-grpc", c.AdvertiseGRPC}, {"--advertise-peer", c.AdvertisePeer},
		{"--advertise-gossip", c.AdvertiseGossip}, {"--advertise-http", c.AdvertiseHTTP}} {
		if a.value == "" {
			continue
		}
		if err := checkAdvertise(a.value); err != nil {
			return fmt.Errorf("%w: %s %q: %v", ErrConfig, a.name, a.value, err)
		}
	}
	if c.AdvertiseHTTP != "" && c.HTTPAddr == "" {
		return fmt.Errorf("%w: --advertise-http %s is set but --http-addr is empty (HTTP disabled): give --http-addr or drop --advertise-http", ErrConfig, c.AdvertiseHTTP)
	}
	if c.AdvertisePeer != "" && c.InitialCluster != "" {
		if ms, err := topology.ParseInitialCluster(c.InitialCluster); err == nil {
			for _, m := range ms {
				if m.ID == c.ID && m.PeerAddr != c.AdvertisePeer {
					return fmt.Errorf("%w: --advertise-peer %s differs from %s's address in --initial-cluster (%s), which is the one members dial: make them the same",
						ErrConfig, c.AdvertisePeer, c.ID, m.PeerAddr)
				}
			}
		} // a malformed --initial-cluster is reported where it is read (loadIdentity)
	}
	if c.InitialClusterToken == "" {
		c.InitialClusterToken = "cutkv"
	}
	switch c.Storage {
	case "":
		c.Storage = StoragePebble
	case StoragePebble, StorageMemory:
	default:
		return fmt.Errorf("%w: --storage %q: want %s or %s", ErrConfig, c.Storage, StoragePebble, StorageMemory)
	}
	if c.CacheSize < 0 {
		return fmt.Errorf("%w: --cache-size %d is negative", ErrConfig, c.CacheSize)
	}
	if c.CacheSize == 0 {
		c.CacheSize = defaultCacheSize()
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
	if miss := unset(flagValue{"--peer-cert-file", c.PeerCertFile}, flagValue{"--peer-key-file", c.PeerKeyFile}, flagValue{"--peer-trusted-ca-file", c.PeerTrustedCAFile}); len(miss) > 0 && len(miss) < 3 {
		return fmt.Errorf("%w: peer TLS needs all of --peer-cert-file, --peer-key-file and --peer-trusted-ca-file; missing %s", ErrConfig, strings.Join(miss, " and "))
	}
	if !c.peerTLS() && !c.InsecurePeer && !isLoopback(c.PeerAddr) {
		return fmt.Errorf("%w: --peer-addr %s is not a loopback address and peer TLS is not configured: any host that reaches it could act as a member. "+
			"Give --peer-cert-file, --peer-key-file and --peer-trusted-ca-file (kvctl cert create-node makes them), or --insecure-peer to accept the risk",
			ErrConfig, c.PeerAddr)
	}
	if miss := unset(flagValue{"--cert-file", c.CertFile}, flagValue{"--key-file", c.KeyFile}); len(miss) == 1 || (len(miss) == 2 && c.TrustedCAFile != "") {
		return fmt.Errorf("%w: client TLS needs --cert-file and --key-file (and optionally --trusted-ca-file, which requires client certificates); missing %s", ErrConfig, strings.Join(miss, " and "))
	}
	if c.MaxConnections < 0 || (c.MaxConnections > 0 && c.MaxConnections < 16) {
		return fmt.Errorf("%w: --max-connections %d: at least 16 (peers hold a few connections each)", ErrConfig, c.MaxConnections)
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 5 * time.Minute
	}
	if c.IdleTimeout < 0 {
		return fmt.Errorf("%w: --idle-timeout %v is negative", ErrConfig, c.IdleTimeout)
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
		c.WALSegmentSize = wal.DefaultSegmentSize
	}
	return nil
}

// checkAdvertise checks an --advertise-* value: host:port with a host
// others can dial (not empty, not 0.0.0.0 or ::) and a port in 1-65535
// (an advertised port is never "pick one").
func checkAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port, e.g. kvnode-0.kvnode-peer.default.svc:7301 or 10.0.0.1:7301 (%v)", err)
	}
	if host == "" {
		return errors.New("the host is empty: name the host or IP address others dial")
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%s is the listen-everywhere address, which nobody can dial: name this node's reachable host or IP address", host)
	}
	if ip := net.ParseIP(host); ip == nil && !validHostname(host) {
		return fmt.Errorf("host %q is neither an IP address nor a DNS name (letters, digits, '-' and '.')", host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q is not a number in 1-65535", port)
	}
	return nil
}

// validHostname accepts a DNS name: dot-separated labels of 1-63 letters,
// digits and '-' (not first or last; '_' is tolerated as resolvers do),
// 253 bytes at most.
func validHostname(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// flagValue is a flag's name and the value it was given.
type flagValue struct{ name, value string }

// unset returns the names of the flags that were given no value.
func unset(flags ...flagValue) []string {
	var names []string
	for _, f := range flags {
		if f.value == "" {
			names = append(names, f.name)
		}
	}
	return names
}

// Storage kinds (Config.Storage).
const (
	StoragePebble = "pebble"
	StorageMemory = "memory"
)

// defaultCacheSize is a quarter of the memory this process may use (as
// CockroachDB's --cache=.25), at least 64 MiB.
func defaultCacheSize() int64 {
	return max(memoryLimit()/4, 64<<20)
}

// memoryLimit is the cgroup's memory.max when one is set, else the
// machine's memory (MemTotal), else 4 GiB.
func memoryLimit() int64 {
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 {
			return v
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb > 0 {
					return kb << 10
				}
			}
		}
	}
	return 4 << 30
}
