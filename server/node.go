package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/datadir"
	"github.com/cutkv/cutkv/discovery"
	"github.com/cutkv/cutkv/engine"
	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/internal/synclog"
	"github.com/cutkv/cutkv/meta"
	"github.com/cutkv/cutkv/node"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/raftstore"
	"github.com/cutkv/cutkv/rpc"
	"github.com/cutkv/cutkv/snapshot"
	"github.com/cutkv/cutkv/topology"
	"github.com/cutkv/cutkv/wal"
)

// Version is the server's version string.
var Version = "0.1.0-dev"

// Addrs are the addresses a node actually bound.
type Addrs struct {
	GRPC   string // client listener
	Peer   string // peer listener
	Gossip string
	HTTP   string
}

// Node is a running kvnode.
type Node struct {
	cfg    Config
	log    *slog.Logger
	dir    *dataDir
	id     datadir.Identity
	self   topology.Member
	layout *topology.Layout

	wal        *wal.WAL
	store      *raftstore.Store
	meta       *meta.State
	clock      *cut.Clock
	partitions map[uint64]*partition.Partition
	env        *engine.Env // the partitions' Pebble resources; nil: --storage=memory
	transport  *rpc.Transport
	pool       *rpc.Pool
	disc       *discovery.Discovery
	grpcSrv    *grpc.Server // client listener
	peerSrv    *grpc.Server // peer listener
	httpSrv    *http.Server
	health     *health.Server
	reg        *prometheus.Registry
	trust      *trust

	grpcLis net.Listener
	peerLis net.Listener
	httpLis net.Listener
	addrs   Addrs
	// advertised is what other members and clients are told: the
	// --advertise-* values, else the bound addresses.
	advertised Addrs

	caughtUp atomic.Bool            // applied up to the commit index seen at start (readyz)
	lagging  atomic.Pointer[string] // while not caught up: which groups lag

	ready    chan struct{}
	draining atomic.Bool
	inflight inflight
	fatal    chan error             // receives the first fatal error
	fatalMsg atomic.Pointer[string] // that error's text, for /readyz
	// stateOpen is set once Start has opened every partition's state
	// (onEngineStopped).
	stateOpen atomic.Bool
	fatalOne  sync.Once
	bgCancel  context.CancelFunc
	bgWG      sync.WaitGroup
	stopOnce  sync.Once
}

// Start opens the data dir, replays the WAL and starts serving. It returns
// once the node listens; Ready is closed when the node's groups all know
// their leader and health reports SERVING. A member's first start waits
// for the cluster id (see bootstrap.go).
func Start(cfg Config, log *slog.Logger) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	// n is not the named result: "return nil, err" would set that to nil
	// before the deferred cleanup, whose closures use n.
	n := &Node{cfg: cfg, log: log.With("node", cfg.ID), ready: make(chan struct{}), fatal: make(chan error, 1),
		partitions: map[uint64]*partition.Partition{}, health: health.NewServer()}
	cleanup := []func(){}
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()

	if n.dir, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, n.dir.unlock)
	var fresh bool
	if n.id, fresh, err = n.dir.loadIdentity(&n.cfg); err != nil {
		return nil, err
	}
	if fresh {
		// A first start that fails leaves an empty data dir behind, so
		// that the corrected retry bootstraps again.
		cleanup = append(cleanup, func() {
			if rerr := n.dir.removeFresh(); rerr != nil {
				n.log.Error("removing what the failed first start wrote", "data_dir", cfg.DataDir, "err", rerr)
			}
		})
	}
	n.layout = n.id.Layout
	n.self, _ = n.layout.Member(cfg.ID)
	if n.self.RaftID == 0 {
		return nil, fmt.Errorf("%w: node %q is not a member of cluster %s", ErrConfig, cfg.ID, topology.FormatClusterID(n.layout.ClusterID))
	}
	var tables int
	if n.cfg.MaxConnections, tables, err = fileLimitConns(cfg.MaxConnections, len(n.layout.GroupsOf(n.self.RaftID)), cfg.Storage == StoragePebble, n.log); err != nil {
		return nil, err
	}
	cfg = n.cfg
	if n.trust, err = loadTrust(&n.cfg, n.log); err != nil {
		return nil, err
	}

	// Bind every port first so a busy one fails before anything else.
	n.reg = prometheus.NewRegistry()
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	connMetrics := newConnMetrics(n.reg)
	if n.grpcLis, err = listen("grpc", cfg.GRPCAddr); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { n.grpcLis.Close() })
	if n.peerLis, err = listen("peer", cfg.PeerAddr); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { n.peerLis.Close() })
	if cfg.HTTPAddr != "" {
		if n.httpLis, err = listen("http", cfg.HTTPAddr); err != nil {
			return nil, err
		}
		cleanup = append(cleanup, func() { n.httpLis.Close() })
	}
	n.addrs.GRPC, n.addrs.Peer = n.grpcLis.Addr().String(), n.peerLis.Addr().String()
	if n.httpLis != nil {
		n.addrs.HTTP = n.httpLis.Addr().String()
	}
	n.advertised = Addrs{GRPC: cmp.Or(cfg.AdvertiseGRPC, n.addrs.GRPC), Peer: cmp.Or(cfg.AdvertisePeer, n.addrs.Peer), HTTP: n.addrs.HTTP}
	if n.httpLis != nil {
		n.advertised.HTTP = cmp.Or(cfg.AdvertiseHTTP, n.addrs.HTTP)
	}
	if cfg.AdvertisePeer != "" && cfg.AdvertisePeer != n.self.PeerAddr {
		return nil, fmt.Errorf("%w: --advertise-peer %s differs from the peer address cluster %s knows for %s (%s, from --initial-cluster at bootstrap), which members dial: "+
			"give --advertise-peer %s (membership changes are not supported)",
			ErrConfig, cfg.AdvertisePeer, topology.FormatClusterID(n.layout.ClusterID), cfg.ID, n.self.PeerAddr, n.self.PeerAddr)
	}
	for _, a := range []struct{ name, listen, advertise string }{
		{"grpc", n.addrs.GRPC, cfg.AdvertiseGRPC}, {"http", n.addrs.HTTP, cfg.AdvertiseHTTP},
	} {
		if a.listen != "" && a.advertise == "" && listensEverywhere(a.listen) {
			n.log.Warn("listening on every interface without --advertise-"+a.name+": members and kvctl members are told "+a.listen+", which no other host can dial; give --advertise-"+a.name+" host:port",
				a.name+"_addr", a.listen)
		}
	}
	n.grpcLis = rpc.LimitListener(n.grpcLis, cfg.MaxConnections, connMetrics.rejected("client"))
	n.peerLis = rpc.LimitListener(n.peerLis, cfg.MaxConnections, connMetrics.rejected("peer"))
	connMetrics.watch(n.reg, map[string]net.Listener{"client": n.grpcLis, "peer": n.peerLis})
	if cfg.TrustedCAFile != "" && !cfg.peerTLS() {
		n.log.Warn("client certificates are required but the peer listener is plaintext: a process that reaches the peer port can forward calls as any role; give --peer-cert-file/--peer-key-file/--peer-trusted-ca-file",
			"peer_addr", n.addrs.Peer)
	}
	if !cfg.clientTLS() && !isLoopback(n.addrs.GRPC) {
		n.log.Warn("the client listener is not on loopback and speaks plaintext: anyone who reaches it reads and writes every key; give --cert-file/--key-file/--trusted-ca-file",
			"grpc_addr", n.addrs.GRPC)
	}

	limits := cfg.Limits
	n.pool = rpc.NewPool(rpc.PoolConfig{MaxMsgSize: limits.MaxRequestSize(), TLS: n.trust.peerClient(), ClusterID: func() uint64 { return n.layout.ClusterID }})
	cleanup = append(cleanup, n.pool.Close)
	if n.id.Pending() {
		if err := n.settleClusterID(); err != nil {
			return nil, err
		}
	}
	if fresh || n.id.RestoredFrom != "" {
		if err := n.dir.save(n.id); err != nil {
			return nil, err
		}
	}

	walMetrics := newWALMetrics(n.reg)
	walOpts := wal.Options{SegmentSize: cfg.WALSegmentSize, Logger: n.log, OnSync: walMetrics.observe, NodeID: cfg.ID}
	walDir := filepath.Join(cfg.DataDir, datadir.WALDir)
	if failpoint.Enabled {
		walOpts.Hooks.BeforeSync = func(string) error { return failpoint.Inject(failpoint.WALBeforeSync) }
	}
	if synclog.Enabled {
		walOpts.Hooks.AfterSync = func(string) { synclog.RecordDir(walDir) }
	}
	n.wal, err = wal.Open(walDir, walOpts)
	if err != nil {
		return nil, fmt.Errorf("server: open WAL in %s: %w", walDir, err)
	}
	cleanup = append(cleanup, func() { n.wal.Close() })

	n.meta = meta.New()
	n.clock = cut.NewClock()
	if cfg.Storage == StoragePebble {
		if fresh {
			// A state left by an earlier cluster in this directory is not
			// this one's.
			if err := os.RemoveAll(filepath.Join(cfg.DataDir, datadir.StateDir)); err != nil {
				return nil, fmt.Errorf("server: %w", err)
			}
		}
		if n.env, err = engine.NewEnv(engine.EnvConfig{CacheSize: cfg.CacheSize, MaxOpenFiles: tables, Logger: n.log,
			FS: synclog.WrapFS(vfs.Default), Stopped: n.onEngineStopped, Fatal: n.onEngineFatal}); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		cleanup = append(cleanup, n.closeState)
	}
	var groups []raftstore.GroupConfig
	for _, g := range n.layout.GroupsOf(n.self.RaftID) {
		var sm raftstore.StateMachine = n.meta
		if g != 0 {
			p := partition.New(g)
			if n.env != nil {
				dir := filepath.Join(cfg.DataDir, datadir.StateDir, fmt.Sprintf("p%04d", g))
				if p, err = partition.Open(n.env, dir, g); err != nil {
					return nil, fmt.Errorf("server: open partition %d's state: %w", g, err)
				}
			}
			n.partitions[g] = p
			sm = p
		}
		groups = append(groups, raftstore.GroupConfig{ID: g, Peers: n.layout.Groups[g], SM: sm})
	}
	n.stateOpen.Store(true)

	n.transport = rpc.NewTransport(n.self.RaftID, n.layout.ClusterID, n.resolveRaftAddr, n.pool, limits.MaxRequestSize()/2, n.log)
	cleanup = append(cleanup, n.transport.Close)
	peerRejected := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cutkv_peer_rejected_total",
		Help: "Raft messages from peers dropped before they reached raft, by reason.",
	}, []string{"reason"})
	n.reg.MustRegister(peerRejected)
	for _, r := range raftstore.RejectReasons() {
		peerRejected.WithLabelValues(r) // every reason shows, at 0
	}
	n.store, err = raftstore.Open(raftstore.Config{
		RaftID:        n.self.RaftID,
		Groups:        groups,
		WAL:           n.wal,
		Transport:     n.transport,
		Bootstrap:     true, // only groups with an empty log; bootstrap entries are identical on every replica
		TickInterval:  cfg.TickInterval,
		ElectionTicks: cfg.ElectionTicks,
		Clock:         n.clock,
		Logger:        n.log,

		MaterializeDir:      filepath.Join(cfg.DataDir, datadir.MaterializeDir),
		MaterializeInterval: cfg.MaterializeInterval,
		MaterializeBytes:    cfg.MaterializeBytes,
		CatchUpEntries:      cfg.CatchUpEntries,
		Fetch: func(ctx context.Context, from, group, index uint64, path string, dirOK bool) error {
			m, ok := n.layout.MemberByRaftID(from)
			if !ok {
				return fmt.Errorf("server: no member with raft id %d", from)
			}
			return rpc.FetchMaterialization(ctx, n.pool, m.ID, n.peerAddr(m.ID), n.layout.ClusterID, group, index, path, dirOK)
		},
		OnFatal:       n.onFatal,
		Rejected:      func(reason string) { peerRejected.WithLabelValues(reason).Inc() },
		OnMaterialize: newMaterializeMetrics(n.reg).observe,
	})
	if err != nil {
		return nil, fmt.Errorf("server: open raft groups from %s: %w", n.wal.Dir(), err)
	}
	n.transport.SetReceiver(n.store)
	n.reg.MustRegister(raftCollector{n.store})
	// The commit indexes of the log at start, before the loop runs: what
	// /readyz waits for this node to apply.
	catchUp := newCatchUp(n.groupStatuses())

	bg, cancel := context.WithCancel(context.Background())
	n.bgCancel = cancel
	cleanup = append(cleanup, cancel)
	metrics := rpc.NewNodeMetrics(n.reg)
	rn := &rpc.Node{
		Self: n.self, Layout: n.layout, Store: n.store, Partitions: n.partitions, Pool: n.pool, Limits: limits,
		Cluster: rpcHost{n}, Host: rpcHost{n}, Gossip: rpcHost{n},
		Clock: n.clock, Background: bg, Log: n.log, Metrics: metrics,
	}
	// Replies are merged into rn's clock from the first peer call on.
	n.pool.SetMarker(rn)
	// Made before gossip can deliver anything: it wires the cut agent's
	// wake-up into rn.
	loops := node.New(rn, node.Config{
		CutInterval: cfg.CutInterval,
		Snapshots: node.SnapshotSchedule{Interval: cfg.SnapshotInterval, Store: cfg.SnapshotStore, Keep: cfg.SnapshotKeep,
			Metrics: node.NewSnapshotMetrics(n.reg)},
	})
	gossipAdvertise := ""
	if cfg.AdvertiseGossip != "" {
		if gossipAdvertise, err = systemResolver().resolveAdvertise(cfg.AdvertiseGossip, advertiseResolveWait, advertiseStaleWait, n.log); err != nil {
			return nil, err
		}
	}
	n.disc, err = discovery.Start(discovery.Config{
		OnMessage: func(msg []byte) {
			if v, ok := cut.DecodeGossip(msg); ok {
				rn.LearnGossip(v)
			}
		},
		BindAddr:      cfg.GossipAddr,
		AdvertiseAddr: gossipAdvertise,
		Meta:          discovery.Meta{ID: cfg.ID, ClusterID: n.layout.ClusterID, GRPCAddr: n.advertised.GRPC, HTTPAddr: n.advertised.HTTP},
		Join:          cfg.Join,
		Logger:        n.log,
		Keys:          n.trust.gossipKeys,
	})
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { n.disc.Close() })
	n.addrs.Gossip = n.disc.Addr()
	n.advertised.Gossip = n.disc.Addr()
	n.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "cutkv_gossip_rejected_total",
		Help: "Gossip peers and messages of another cluster id refused.",
	}, func() float64 { return float64(n.disc.Refused()) }))

	rn.Snapshots = &rpc.Snapshots{
		DefaultStore: cfg.SnapshotStore,
		DefaultDir:   filepath.Join(cfg.DataDir, SnapshotDir),
		Allowed:      cfg.SnapshotStoreAllow,
		TmpDir:       filepath.Join(cfg.DataDir, snapshotTmpDir),
		UploadRate:   snapshot.NewRateLimit(cfg.SnapshotUploadRate),
		Log:          n.log.With("component", "snapshot"),
		OnStoreError: metrics.StoreError,
	}
	_ = os.RemoveAll(rn.Snapshots.TmpDir) // full-snapshot builds of a previous run
	cleanup = append(cleanup, rn.Snapshots.Close)
	if _, ok := n.store.Status(0); ok {
		rn.Meta = n.meta
	}
	cutLog := n.log.With("component", "cut")
	rn.Cuts = cut.NewDriver(rpc.NewCutEnv(rn), cfg.CutTimeout, cutLog.Info)
	rn.Cuts.OnEnd(metrics.CutEnded)
	for _, p := range n.partitions {
		p.SetCutReady(func(uint64) { rn.PokeCuts() })
	}
	if n.env != nil {
		n.reg.MustRegister(stateCollector{n.partitions})
	}
	n.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cutkv_txn_records",
		Help: "Transaction records held by this node's replicas: kept until every participant finished, then dropped in batches.",
	}, func() float64 { return float64(n.TxnRecords()) }))
	n.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cutkv_txn_finished_ids",
		Help: "Finished transaction ids this node's replicas remember (against late prepares); dropped once the horizon passes their prepare time.",
	}, func() float64 { return float64(n.FinishedTxnIDs()) }))
	grpcMetrics := rpc.NewMetrics(n.reg)
	conns := rpc.ConnLimits{MaxConnections: cfg.MaxConnections, IdleTimeout: cfg.IdleTimeout}

	// The client listener: KV, Cluster, health, reflection.
	clientAuth := rpc.ClientAuth{RequireCerts: cfg.TrustedCAFile != ""}
	n.grpcSrv = grpc.NewServer(append(rpc.ServerOptions(limits, conns), n.trust.clientServerOption(),
		grpc.ChainUnaryInterceptor(n.inflight.interceptor(), grpcMetrics.UnaryInterceptor(), clientAuth.Unary(), rpc.MarkerInterceptor(rn)),
		grpc.ChainStreamInterceptor(clientAuth.Stream()))...)
	n.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	rpc.RegisterClientServices(n.grpcSrv, rn, n.health)

	// The peer listener: members only.
	peerAuth := rpc.PeerAuth{Layout: n.layout, RequireCerts: cfg.peerTLS(), Metrics: metrics}
	n.peerSrv = grpc.NewServer(append(rpc.ServerOptions(limits, conns), n.trust.peerServerOption(func() { metrics.PeerRejected(rpc.PeerRejectTLS) }),
		grpc.ChainUnaryInterceptor(n.inflight.interceptor(), grpcMetrics.UnaryInterceptor(), peerAuth.Unary(), rpc.MarkerInterceptor(rn)),
		grpc.ChainStreamInterceptor(peerAuth.Stream()))...)
	raftSrv := rpc.NewRaftServer(n.layout, n.self.RaftID, n.store, n.log)
	raftSrv.SetStore(n.store)
	rpc.RegisterPeerServices(n.peerSrv, rn, raftSrv)

	n.store.Start()
	for _, srv := range []struct {
		s    *grpc.Server
		l    net.Listener
		name string
	}{{n.grpcSrv, n.grpcLis, "client " + n.addrs.GRPC}, {n.peerSrv, n.peerLis, "peer " + n.addrs.Peer}} {
		go func() {
			if err := srv.s.Serve(srv.l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				n.onFatal(fmt.Errorf("server: gRPC server on %s: %w", srv.name, err))
			}
		}()
	}
	if n.httpLis != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", n.serveHealthz)
		mux.HandleFunc("/readyz", n.serveReadyz)
		mux.Handle("/livez", livezHandler(n.liveness))
		mux.Handle("/ui/", n.dashboard(rn)) // "/ui" redirects here
		if cfg.Pprof {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		n.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(n.log.With("component", "http").Handler(), slog.LevelDebug)}
		lis := n.httpLis
		if tc := n.trust.httpTLS(); tc != nil {
			lis = tls.NewListener(lis, tc) // the client listener's certificate; no client certificate asked
		}
		go func() { _ = n.httpSrv.Serve(lis) }()
	}
	n.bgWG.Add(3)
	go func() {
		defer n.bgWG.Done()
		n.store.RunMaterializer(bg)
	}()
	go n.watchReady(bg, catchUp)
	go func() {
		defer n.bgWG.Done()
		loops.Run(bg)
	}()
	n.log.Info("node started", "cluster", topology.FormatClusterID(n.layout.ClusterID), "raft_id", n.self.RaftID,
		"groups", len(groups), "new_cluster", fresh, "wal_records", n.wal.LastIndex(), "grpc", n.addrs.GRPC, "peer", n.addrs.Peer,
		"gossip", n.addrs.Gossip, "http", n.addrs.HTTP, "http_tls", n.trust.client != nil && n.httpLis != nil,
		"advertised", fmt.Sprintf("grpc=%s peer=%s gossip=%s http=%s", n.advertised.GRPC, n.advertised.Peer, n.advertised.Gossip, n.advertised.HTTP),
		"peer_tls", cfg.peerTLS(), "client_tls", cfg.clientTLS(),
		"client_certs", cfg.TrustedCAFile != "", "gossip_encrypted", len(n.trust.gossipKeys) > 0)
	return n, nil
}

func listen(what, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("server: %s address %s is already in use (another kvnode running? pick another port with --%s-addr)", what, addr, what)
		}
		return nil, fmt.Errorf("server: listen on %s address %s: %w", what, addr, err)
	}
	return l, nil
}

// Addrs returns the bound addresses.
func (n *Node) Addrs() Addrs { return n.addrs }

// Advertised returns the addresses this node announces to members and
// clients: the --advertise-* values, else the bound addresses (Gossip:
// the IP address an --advertise-gossip host resolved to).
func (n *Node) Advertised() Addrs { return n.advertised }

// ClusterID returns the node's cluster id.
func (n *Node) ClusterID() uint64 { return n.layout.ClusterID }

// Ready is closed once the node serves (health SERVING).
func (n *Node) Ready() <-chan struct{} { return n.ready }

// Fatal delivers the error that stopped the node for good (a WAL failure).
func (n *Node) Fatal() <-chan error { return n.fatal }

// Store exposes the raft store (tests and status).
func (n *Node) Store() *raftstore.Store { return n.store }

// TxnRecords returns how many transaction records this node's replicas
// hold (the cutkv_txn_records gauge).
func (n *Node) TxnRecords() int {
	total := 0
	for _, p := range n.partitions {
		total += p.RecordCount()
	}
	return total
}

// FinishedTxnIDs returns how many finished transaction ids this node's
// replicas remember (the cutkv_txn_finished_ids gauge).
func (n *Node) FinishedTxnIDs() int {
	total := 0
	for _, p := range n.partitions {
		c, _ := p.FinishedCount()
		total += c
	}
	return total
}

// TxnHorizons returns the transaction horizon (Unix ms) of each
// partition this node holds.
func (n *Node) TxnHorizons() map[uint64]int64 {
	out := map[uint64]int64{}
	for g, p := range n.partitions {
		_, out[g] = p.FinishedCount()
	}
	return out
}

// watchReady waits until every group held knows a leader, then reports
// SERVING; it also proposes the layout into group 0 once, from group 0's
// leader, and follows the groups until they applied what was committed
// when the node started (catch-up: /readyz).
func (n *Node) watchReady(ctx context.Context, c *catchUp) {
	defer n.bgWG.Done()
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	isReady, caughtUp, started := false, false, time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !isReady && n.allLeadersKnown() {
			isReady = true
			n.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
			close(n.ready)
		}
		if st, ok := n.store.Status(0); ok && st.IsLeader && n.meta.Layout() == nil {
			cmd := &internalpb.Command{Op: &internalpb.Command_Bootstrap{Bootstrap: &internalpb.BootstrapOp{Layout: n.layout.Proto()}}}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			res, err := n.store.Propose(pctx, 0, cmd)
			cancel()
			if rerr, _ := res.(error); rerr != nil {
				n.onFatal(fmt.Errorf("server: group 0 refused this node's layout: %w", rerr))
				return
			}
			if err != nil {
				n.log.Debug("recording layout in group 0", "err", err)
			}
		}
		if !caughtUp {
			caughtUp = n.watchCatchUp(c, started)
		}
		if isReady && caughtUp && n.meta.Layout() != nil {
			return
		}
	}
}

func (n *Node) allLeadersKnown() bool {
	for _, g := range n.store.Groups() {
		if st, ok := n.store.Status(g); !ok || st.Leader == 0 {
			return false
		}
	}
	return true
}

func (n *Node) onFatal(err error) {
	n.fatalOne.Do(func() {
		msg := err.Error()
		n.fatalMsg.Store(&msg)
		n.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
		n.log.Error("fatal: node stops serving", "err", err)
		n.fatal <- err
	})
}

// onEngineStopped is the Env's Stopped: a partition's state failed (a
// full disk, an I/O error, corruption) and refuses every call from now
// on; like a WAL failure it stops the node for good (README: a write
// error is sticky), rather than when the next write reaches that
// partition, with /healthz saying SERVING until then.
//
// Until Start has opened every partition, a stop is Start's to handle:
// partition.Open moves a state it finds corrupt aside (closing that DB)
// and rebuilds it, and any other failure fails Start or, later, the
// apply that reaches it. A DB already closed is not in use either.
func (n *Node) onEngineStopped(db *engine.DB, err error) {
	if !n.stateOpen.Load() || db.Closed() {
		n.log.Warn("partition state stopped while it opened or closed; not in use", "err", err)
		return
	}
	n.onFatal(fmt.Errorf("server: %w", err))
}

// onEngineFatal is the Env's Fatal: Pebble cannot go on and holds the
// locks a shutdown needs, so the process ends now (Config.FatalExit)
// instead of through Fatal() and Kill. It may run on a Pebble goroutine,
// also while Start opens the partitions.
func (n *Node) onEngineFatal(err error) {
	msg := err.Error()
	n.fatalMsg.CompareAndSwap(nil, &msg)
	n.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	n.log.Error("fatal: node stops serving and exits at once", "err", err)
	if n.cfg.FatalExit != nil {
		n.cfg.FatalExit(err)
	}
	panic(msg)
}

// rpcHost is this node as its rpc.Node sees it: the members (gossip's
// view), its status and drain, and the gossip of cut versions.
type rpcHost struct{ n *Node }

func (h rpcHost) PeerAddr(id string) string     { return h.n.peerAddr(id) }
func (h rpcHost) Members() []*kvpb.Member       { return h.n.members() }
func (h rpcHost) LocalStatus() *kvpb.NodeStatus { return h.n.localStatus() }
func (h rpcHost) Draining() bool                { return h.n.draining.Load() }
func (h rpcHost) Announce(v uint64)             { h.n.disc.BroadcastKeyed("cut", cut.EncodeGossip(v)) }

// resolveRaftAddr maps a raft id to the member and its peer address.
func (n *Node) resolveRaftAddr(raftID uint64) (string, string, bool) {
	m, ok := n.layout.MemberByRaftID(raftID)
	if !ok {
		return "", "", false
	}
	return m.ID, n.peerAddr(m.ID), true
}

// peerAddr is a member's peer address: the one --initial-cluster named
// (this node's own as advertised, else as bound, so that ":0" works in
// tests).
func (n *Node) peerAddr(id string) string {
	if id == n.self.ID {
		return n.advertised.Peer
	}
	m, _ := n.layout.Member(id)
	return m.PeerAddr
}

func (n *Node) members() []*kvpb.Member {
	var out []*kvpb.Member
	for _, lm := range n.layout.Members {
		pm := &kvpb.Member{Id: lm.ID, RaftId: lm.RaftID, PeerAddr: lm.PeerAddr, State: kvpb.MemberState_MEMBER_STATE_UNKNOWN}
		if lm.ID == n.self.ID {
			pm.GrpcAddr = n.advertised.GRPC
		}
		if m, ok := n.disc.Member(lm.ID); ok {
			pm.GrpcAddr, pm.GossipAddr, pm.HttpAddr = m.GRPCAddr, m.GossipAddr, m.HTTPAddr
			pm.SinceUnixMs = m.Since.UnixMilli()
			switch m.State {
			case discovery.StateAlive:
				pm.State = kvpb.MemberState_MEMBER_STATE_ALIVE
			case discovery.StateSuspect:
				pm.State = kvpb.MemberState_MEMBER_STATE_SUSPECT
			case discovery.StateFailed:
				pm.State = kvpb.MemberState_MEMBER_STATE_FAILED
			case discovery.StateLeft:
				pm.State = kvpb.MemberState_MEMBER_STATE_LEFT
			}
		}
		out = append(out, pm)
	}
	return out
}

func (n *Node) localStatus() *kvpb.NodeStatus {
	st := &kvpb.NodeStatus{
		Id: n.cfg.ID, WalBytes: n.wal.Size(), Serving: n.serving(), Version: Version,
		WalFirstIndex: n.wal.FirstIndex(), WalLastIndex: n.wal.LastIndex(),
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(n.cfg.DataDir, &fs); err == nil {
		st.DiskFreeBytes = fs.Bavail * uint64(fs.Bsize)
		st.DiskTotalBytes = fs.Blocks * uint64(fs.Bsize)
	}
	return st
}

func (n *Node) serving() bool {
	select {
	case <-n.ready:
	default:
		return false
	}
	return !n.draining.Load() && n.store.Err() == nil && n.wal.Err() == nil
}

func (n *Node) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	if n.serving() {
		fmt.Fprintln(w, "SERVING")
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintln(w, "NOT_SERVING")
}

// Shutdown stops the node gracefully within ctx: it stops taking new
// requests, hands raft leadership away, drains in-flight requests, leaves
// the gossip cluster (others see "left") and closes the WAL.
func (n *Node) Shutdown(ctx context.Context) error {
	var err error
	n.stopOnce.Do(func() {
		n.log.Info("shutting down")
		n.draining.Store(true)
		n.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
		// Hand-off is bounded by two election timeouts: when the whole
		// cluster stops at once nobody can take over, and waiting longer
		// helps nobody.
		hctx, cancel := context.WithTimeout(ctx, 2*time.Duration(n.cfg.ElectionTicks)*n.cfg.TickInterval)
		if terr := n.store.TransferLeadership(hctx); terr != nil {
			n.log.Info("leadership hand-off incomplete", "err", terr)
		}
		cancel()
		// Peers' raft streams never end on their own, so GracefulStop
		// would wait for the whole timeout: wait for the unary requests
		// in flight instead, then stop.
		if derr := n.inflight.wait(ctx); derr != nil {
			n.log.Warn("drain timed out; closing remaining requests", "in_flight", n.inflight.count())
		}
		n.grpcSrv.Stop()
		n.peerSrv.Stop()
		leave := 2 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			leave = max(min(leave, time.Until(dl)), 200*time.Millisecond)
		}
		if lerr := n.disc.Leave(leave); lerr != nil {
			n.log.Warn("gossip leave", "err", lerr)
		}
		err = n.close()
	})
	return err
}

// Kill stops the node abruptly, as a crash would from the cluster's point
// of view: no hand-off, no gossip leave. What was fsynced stays.
func (n *Node) Kill() {
	n.stopOnce.Do(func() {
		n.grpcSrv.Stop()
		n.peerSrv.Stop()
		_ = n.close()
	})
}

func (n *Node) close() error {
	n.bgCancel()
	n.bgWG.Wait()
	if n.httpSrv != nil {
		_ = n.httpSrv.Close()
	}
	n.grpcSrv.Stop()
	n.peerSrv.Stop()
	n.store.Stop()
	n.transport.Close()
	_ = n.disc.Close()
	n.pool.Close()
	n.closeState()
	err := n.wal.Close()
	n.dir.unlock()
	n.log.Info("stopped")
	if err != nil {
		return fmt.Errorf("server: close WAL: %w", err)
	}
	return nil
}

// closeState closes the partitions' stores and their shared resources,
// once nothing applies to them any more.
func (n *Node) closeState() {
	if n.env == nil {
		return
	}
	for g, p := range n.partitions {
		if err := p.Close(); err != nil {
			n.log.Warn("closing a partition's state", "partition", g, "err", err)
		}
	}
	if err := n.env.Close(); err != nil {
		n.log.Warn("closing the partitions' storage", "err", err)
	}
	n.env = nil
}

// walMetrics observes group commits.
type walMetrics struct {
	syncs   prometheus.Counter
	records prometheus.Histogram
	bytes   prometheus.Counter
	latency prometheus.Histogram
}

func newWALMetrics(reg prometheus.Registerer) *walMetrics {
	m := &walMetrics{
		syncs: prometheus.NewCounter(prometheus.CounterOpts{Name: "cutkv_wal_fsyncs_total", Help: "WAL group commits (one fsync each)."}),
		records: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cutkv_wal_records_per_fsync", Help: "Records covered by one WAL fsync.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "cutkv_wal_bytes_total", Help: "Bytes appended to the WAL."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cutkv_wal_fsync_duration_seconds", Help: "WAL batch write+fsync latency.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}),
	}
	reg.MustRegister(m.syncs, m.records, m.bytes, m.latency)
	return m
}

func (m *walMetrics) observe(records, bytes int, took time.Duration) {
	m.syncs.Inc()
	m.records.Observe(float64(records))
	m.bytes.Add(float64(bytes))
	m.latency.Observe(took.Seconds())
}

// inflight counts unary requests being served, so shutdown can drain them.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to 0; nil while n == 0
}

func (f *inflight) interceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.n--
			if f.n == 0 && f.zero != nil {
				close(f.zero)
				f.zero = nil
			}
			f.mu.Unlock()
		}()
		return handler(ctx, req)
	}
}

func (f *inflight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// wait returns when no request is in flight or ctx ends.
func (f *inflight) wait(ctx context.Context) error {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return nil
	}
	if f.zero == nil {
		f.zero = make(chan struct{})
	}
	ch := f.zero
	f.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A partition materializes as a checkpoint directory when it is on Pebble.
var _ raftstore.Checkpointer = (*partition.Partition)(nil)
