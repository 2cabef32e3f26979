// Package clustertest runs in-process cutkv clusters for tests: real
// nodes (WAL, raft, gRPC, gossip) on free loopback ports, each in its own
// data dir under t.TempDir(), that a test can kill, stop and restart.
package clustertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/server"
)

// Options shape a test cluster.
type Options struct {
	Partitions uint32        // default 4
	Tick       time.Duration // raft tick; default 50ms
	// Configure edits each node's config before start.
	Configure func(i int, cfg *server.Config)
	// Prepare, if set, runs for every node once all configs are final and
	// before any node starts: e.g. to restore a snapshot into its data
	// dir (cfg.InitialCluster names every node's address).
	Prepare func(i int, cfg server.Config) error
	// Verbose sends node logs to stderr (also with CUTKV_TEST_LOG=1).
	Verbose bool
}

// Cluster is a set of in-process nodes.
type Cluster struct {
	t     testing.TB
	opts  Options
	mu    sync.Mutex
	cfgs  []server.Config
	nodes []*server.Node // nil while a node is down
	conns map[string]*grpc.ClientConn
}

// Start starts n nodes and waits until each is ready.
func Start(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if opts.Partitions == 0 {
		opts.Partitions = 4
	}
	if opts.Tick == 0 {
		opts.Tick = 50 * time.Millisecond
	}
	c := &Cluster{t: t, opts: opts, conns: map[string]*grpc.ClientConn{}}
	base := t.TempDir()
	grpcAddrs := make([]string, n)
	peerAddrs := make([]string, n)
	gossipAddrs := make([]string, n)
	for i := 0; i < n; i++ {
		grpcAddrs[i] = FreeAddr(t)
		peerAddrs[i] = FreeAddr(t)
		gossipAddrs[i] = FreeAddr(t)
	}
	var initial []string
	for i := 0; i < n; i++ {
		initial = append(initial, fmt.Sprintf("n%d=%s", i+1, peerAddrs[i]))
	}
	// One snapshot store for the whole cluster, as a real deployment
	// configures: every node uploads its partitions there.
	storeDir := filepath.Join(base, "snapshots")
	if err := os.MkdirAll(storeDir, 0o750); err != nil {
		t.Fatal(err)
	}
	store := (&url.URL{Scheme: "file", Path: storeDir}).String()
	for i := 0; i < n; i++ {
		var join []string
		for j := 0; j < n; j++ {
			if j != i {
				join = append(join, gossipAddrs[j])
			}
		}
		cfg := server.Config{
			ID:                  fmt.Sprintf("n%d", i+1),
			DataDir:             filepath.Join(base, fmt.Sprintf("n%d", i+1)),
			GRPCAddr:            grpcAddrs[i],
			PeerAddr:            peerAddrs[i],
			GossipAddr:          gossipAddrs[i],
			SnapshotStore:       store,
			Join:                join,
			InitialCluster:      strings.Join(initial, ","),
			InitialClusterToken: "test",
			Partitions:          opts.Partitions,
			TickInterval:        opts.Tick,
			ShutdownTimeout:     5 * time.Second,
			WALSegmentSize:      4 << 20,
		}
		if opts.Configure != nil {
			opts.Configure(i, &cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
		c.nodes = append(c.nodes, nil)
	}
	t.Cleanup(c.Close)
	if opts.Prepare != nil {
		for i, cfg := range c.cfgs {
			if err := opts.Prepare(i, cfg); err != nil {
				t.Fatalf("clustertest: prepare n%d: %v", i+1, err)
			}
		}
	}
	for i := 0; i < n; i++ {
		c.startNode(i)
	}
	for i := 0; i < n; i++ {
		c.WaitReady(i)
	}
	return c
}

// FreeAddr returns 127.0.0.1:port with a port free for TCP and UDP now,
// below the ephemeral port range (so no outgoing connection can take it
// between this check and the node's bind, nor while a killed node is
// down), and not handed out before by this process.
func FreeAddr(t testing.TB) string {
	t.Helper()
	lo := 32768 // Linux's default start of the ephemeral range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				lo = v
			}
		}
	}
	first := max(lo-10000, 10000)
	if lo-first < 1000 {
		first, lo = 61000, 65535 // a low ephemeral range: use the top instead
	}
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.used == nil {
		ports.used = map[int]bool{}
		ports.rng = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	}
	for tries := 0; tries < 1000; tries++ {
		p := first + ports.rng.IntN(lo-first)
		if ports.used[p] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		ports.used[p] = true
		return addr
	}
	t.Fatalf("clustertest: no free port in [%d, %d)", first, lo)
	return ""
}

var ports struct {
	mu   sync.Mutex
	used map[int]bool
	rng  *rand.Rand
}

func (c *Cluster) logger(i int) *slog.Logger {
	var w io.Writer = io.Discard
	if c.opts.Verbose || os.Getenv("CUTKV_TEST_LOG") != "" {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test_node", i+1)
}

func (c *Cluster) startNode(i int) {
	c.t.Helper()
	n, err := server.Start(c.cfgs[i], c.logger(i))
	if err != nil {
		c.t.Fatalf("start node %d: %v", i+1, err)
	}
	c.mu.Lock()
	c.nodes[i] = n
	c.mu.Unlock()
}

// N returns the number of nodes.
func (c *Cluster) N() int { return len(c.cfgs) }

// Config returns node i's config (0-based).
func (c *Cluster) Config(i int) server.Config { return c.cfgs[i] }

// Node returns node i, nil while it is down.
func (c *Cluster) Node(i int) *server.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// WaitReady waits up to 20s for node i to report SERVING.
func (c *Cluster) WaitReady(i int) {
	c.t.Helper()
	n := c.Node(i)
	select {
	case <-n.Ready():
	case err := <-n.Fatal():
		c.t.Fatalf("node %d failed: %v", i+1, err)
	case <-time.After(20 * time.Second):
		c.t.Fatalf("node %d not ready within 20s", i+1)
	}
}

// Endpoints returns the gRPC addresses of all nodes, up or down.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, cfg := range c.cfgs {
		eps = append(eps, cfg.GRPCAddr)
	}
	return eps
}

// Kill stops node i abruptly (no hand-off, no gossip leave).
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n != nil {
		n.Kill()
	}
}

// Stop shuts node i down gracefully.
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		c.t.Errorf("shutdown node %d: %v", i+1, err)
	}
}

// Reconfigure changes node i's configuration for its next start (stop it
// first).
func (c *Cluster) Reconfigure(i int, change func(*server.Config)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	change(&c.cfgs[i])
}

// Restart starts a stopped or killed node again from its data dir and
// waits until it is ready.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.startNode(i)
	c.WaitReady(i)
}

// StartNode starts a stopped or killed node without waiting for it to be
// ready (it may need others to come back first).
func (c *Cluster) StartNode(i int) {
	c.t.Helper()
	c.startNode(i)
}

// Conn returns a client connection to node i's gRPC address.
func (c *Cluster) Conn(i int) *grpc.ClientConn {
	c.t.Helper()
	addr := c.cfgs[i].GRPCAddr
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc := c.conns[addr]; cc != nil {
		return cc
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	c.conns[addr] = cc
	return cc
}

// KV returns a KV client for node i.
func (c *Cluster) KV(i int) kvrpc.KVClient { return kvrpc.NewKVClient(c.Conn(i)) }

// Close kills every node still up.
func (c *Cluster) Close() {
	for i := range c.cfgs {
		c.Kill(i)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, cc := range c.conns {
		cc.Close()
		delete(c.conns, a)
	}
}

// Eventually polls cond every 20ms until it returns nil or the deadline
// passes, then fails with cond's last error.
func Eventually(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SoakDuration is how long a soak test runs: CUTKV_SOAK (a Go duration),
// 10s when unset (make test; make e2e sets minutes).
func SoakDuration(t testing.TB) time.Duration {
	t.Helper()
	s := os.Getenv("CUTKV_SOAK")
	if s == "" {
		return 10 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("CUTKV_SOAK=%q: want a positive duration such as 10s or 5m (%v)", s, err)
	}
	return d
}
