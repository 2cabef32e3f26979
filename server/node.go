package server

import (
	"context"
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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/discovery"
	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/meta"
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
	GRPC   string
	Gossip string
	HTTP   string
}

// Node is a running kvnode.
type Node struct {
	cfg    Config
	log    *slog.Logger
	dir    *dataDir
	id     identity
	self   topology.Member
	layout *topology.Layout

	wal        *wal.WAL
	store      *raftstore.Store
	meta       *meta.State
	clock      *cut.Clock
	partitions map[uint64]*partition.Partition
	transport  *rpc.Transport
	pool       *rpc.Pool
	disc       *discovery.Discovery
	grpcSrv    *grpc.Server
	httpSrv    *http.Server
	health     *health.Server
	reg        *prometheus.Registry

	grpcLis net.Listener
	httpLis net.Listener
	addrs   Addrs

	ready    chan struct{}
	draining atomic.Bool
	inflight inflight
	fatal    chan error // receives the first fatal error
	fatalOne sync.Once
	bgCancel context.CancelFunc
	bgWG     sync.WaitGroup
	stopOnce sync.Once
}

// Start opens the data dir, replays the WAL and starts serving. It returns
// once the node listens; Ready is closed when the node's groups all know
// their leader and health reports SERVING.
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
		partitions: map[uint64]*partition.Partition{}}
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
	if n.id, fresh, err = n.dir.loadOrCreateIdentity(&n.cfg); err != nil {
		return nil, err
	}
	n.layout = n.id.Layout
	n.self, _ = n.layout.Member(cfg.ID)
	if n.self.RaftID == 0 {
		return nil, fmt.Errorf("%w: node %q is not a member of cluster %s", ErrConfig, cfg.ID, topology.FormatClusterID(n.layout.ClusterID))
	}

	// Bind every port first so a busy one fails before anything else.
	if n.grpcLis, err = listen("grpc", cfg.GRPCAddr); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { n.grpcLis.Close() })
	if cfg.HTTPAddr != "" {
		if n.httpLis, err = listen("http", cfg.HTTPAddr); err != nil {
			return nil, err
		}
		cleanup = append(cleanup, func() { n.httpLis.Close() })
	}
	n.addrs.GRPC = n.grpcLis.Addr().String()
	if n.httpLis != nil {
		n.addrs.HTTP = n.httpLis.Addr().String()
	}

	n.reg = prometheus.NewRegistry()
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	walMetrics := newWALMetrics(n.reg)

	walOpts := wal.Options{SegmentSize: cfg.WALSegmentSize, Logger: n.log, OnSync: walMetrics.observe}
	if failpoint.Enabled {
		walOpts.Hooks.BeforeSync = func(string) error { return failpoint.Inject(failpoint.WALBeforeSync) }
	}
	n.wal, err = wal.Open(filepath.Join(cfg.DataDir, walDir), walOpts)
	if err != nil {
		return nil, fmt.Errorf("server: open WAL in %s: %w", filepath.Join(cfg.DataDir, walDir), err)
	}
	cleanup = append(cleanup, func() { n.wal.Close() })

	n.meta = meta.New()
	n.clock = cut.NewClock()
	var groups []raftstore.GroupConfig
	for _, g := range n.layout.GroupsOf(n.self.RaftID) {
		var sm raftstore.StateMachine = n.meta
		if g != 0 {
			p := partition.New(g)
			n.partitions[g] = p
			sm = p
		}
		groups = append(groups, raftstore.GroupConfig{ID: g, Peers: n.layout.Groups[g], SM: sm})
	}

	limits := cfg.Limits
	n.pool = rpc.NewPool(limits.MaxRequestSize())
	cleanup = append(cleanup, n.pool.Close)
	n.transport = rpc.NewTransport(n.self.RaftID, n.layout.ClusterID, n.resolveRaftAddr, n.pool, limits.MaxRequestSize()/2, n.log)
	cleanup = append(cleanup, n.transport.Close)
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

		MaterializeDir:      filepath.Join(cfg.DataDir, MaterializeDir),
		MaterializeInterval: cfg.MaterializeInterval,
		MaterializeBytes:    cfg.MaterializeBytes,
		CatchUpEntries:      cfg.CatchUpEntries,
		Fetch: func(ctx context.Context, from, group, index uint64, path string) error {
			addr, ok := n.resolveRaftAddr(from)
			if !ok {
				return fmt.Errorf("server: no address for raft id %d", from)
			}
			return rpc.FetchMaterialization(ctx, n.pool, addr, n.layout.ClusterID, group, index, path)
		},
		OnFatal: n.onFatal,
	})
	if err != nil {
		return nil, fmt.Errorf("server: open raft groups from %s: %w", n.wal.Dir(), err)
	}
	n.transport.SetReceiver(n.store)

	pokeCuts := make(chan struct{}, 1) // set before gossip can deliver anything
	n.disc, err = discovery.Start(discovery.Config{
		OnMessage: func(msg []byte) {
			if v, ok := rpc.DecodeCutGossip(msg); ok && n.clock.Raise(v) {
				select {
				case pokeCuts <- struct{}{}:
				default:
				}
			}
		},
		BindAddr: cfg.GossipAddr,
		Meta:     discovery.Meta{ID: cfg.ID, ClusterID: n.layout.ClusterID, GRPCAddr: n.addrs.GRPC, HTTPAddr: n.addrs.HTTP},
		Join:     cfg.Join,
		Logger:   n.log,
	})
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { n.disc.Close() })
	n.addrs.Gossip = n.disc.Addr()

	bg, cancel := context.WithCancel(context.Background())
	n.bgCancel = cancel
	cleanup = append(cleanup, cancel)
	rn := &rpc.Node{
		Self: n.self, Layout: n.layout, Store: n.store, Partitions: n.partitions, Pool: n.pool, Limits: limits,
		Addr: n.memberAddr, Members: n.members, LocalStatus: n.localStatus, Draining: n.draining.Load,
		Clock: n.clock, Background: bg,
		Announce: func(v uint64) { n.disc.BroadcastKeyed("cut", rpc.EncodeCutGossip(v)) },
	}
	rn.Snapshots = &rpc.Snapshots{
		DefaultStore: cfg.SnapshotStore,
		DefaultDir:   filepath.Join(cfg.DataDir, SnapshotDir),
		TmpDir:       filepath.Join(cfg.DataDir, snapshotTmpDir),
		UploadRate:   snapshot.NewRateLimit(cfg.SnapshotUploadRate),
		Log:          n.log.With("component", "snapshot"),
	}
	_ = os.RemoveAll(rn.Snapshots.TmpDir) // full-snapshot builds of a previous run
	cleanup = append(cleanup, rn.Snapshots.Close)
	rn.SetCutPoke(pokeCuts)
	if _, ok := n.store.Status(0); ok {
		rn.Meta = n.meta
	}
	cutLog := n.log.With("component", "cut")
	rn.Cuts = cut.NewDriver(rpc.NewCutEnv(rn), cfg.CutTimeout, cutLog.Info)
	for _, p := range n.partitions {
		p.SetCutReady(func(uint64) { rn.PokeCuts() })
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
	n.grpcSrv = grpc.NewServer(append(rpc.ServerOptions(limits),
		grpc.ChainUnaryInterceptor(n.inflight.interceptor(), grpcMetrics.UnaryInterceptor(), rpc.MarkerInterceptor(rn)))...)
	kvpb.RegisterKVServer(n.grpcSrv, rpc.NewKVServer(rn))
	kvpb.RegisterClusterServer(n.grpcSrv, rpc.NewClusterServer(rn))
	raftSrv := rpc.NewRaftServer(n.layout.ClusterID, n.self.RaftID, n.store, n.log)
	raftSrv.SetStore(n.store)
	internalpb.RegisterRaftServer(n.grpcSrv, raftSrv)
	internalpb.RegisterParticipantServer(n.grpcSrv, rpc.NewParticipantServer(rn))
	internalpb.RegisterCutServiceServer(n.grpcSrv, rpc.NewCutServer(rn))
	internalpb.RegisterSnapshotPartitionsServer(n.grpcSrv, rpc.NewSnapshotPartitionsServer(rn))
	n.health = health.NewServer()
	n.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(n.grpcSrv, n.health)
	reflection.Register(n.grpcSrv)

	n.store.Start()
	go func() {
		if err := n.grpcSrv.Serve(n.grpcLis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			n.onFatal(fmt.Errorf("server: gRPC server on %s: %w", n.addrs.GRPC, err))
		}
	}()
	if n.httpLis != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", n.serveHealthz)
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		n.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = n.httpSrv.Serve(n.httpLis) }()
	}
	n.bgWG.Add(6)
	go func() {
		defer n.bgWG.Done()
		n.store.RunMaterializer(bg)
	}()
	go n.watchReady(bg)
	go func() {
		defer n.bgWG.Done()
		rpc.RunRecovery(bg, rn)
	}()
	go func() {
		defer n.bgWG.Done()
		rpc.RunCutAgent(bg, rn)
	}()
	go func() {
		defer n.bgWG.Done()
		rpc.RunCuts(bg, rn, cfg.CutInterval)
	}()
	go func() {
		defer n.bgWG.Done()
		rpc.RunSnapshots(bg, rn, rpc.SnapshotSchedule{Interval: cfg.SnapshotInterval, Store: cfg.SnapshotStore, Keep: cfg.SnapshotKeep, Metrics: rpc.NewSnapshotMetrics(n.reg)})
	}()
	n.log.Info("node started", "cluster", topology.FormatClusterID(n.layout.ClusterID), "raft_id", n.self.RaftID,
		"groups", len(groups), "new_cluster", fresh, "wal_records", n.wal.LastIndex(), "grpc", n.addrs.GRPC,
		"gossip", n.addrs.Gossip, "http", n.addrs.HTTP)
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

// watchReady waits until every group held knows a leader, then reports
// SERVING; it also proposes the layout into group 0 once, from group 0's
// leader.
func (n *Node) watchReady(ctx context.Context) {
	defer n.bgWG.Done()
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	isReady := false
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
		if isReady && n.meta.Layout() != nil {
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
		n.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
		n.log.Error("fatal: node stops serving", "err", err)
		n.fatal <- err
	})
}

// resolveRaftAddr maps a raft id to the peer's current gRPC address.
func (n *Node) resolveRaftAddr(raftID uint64) (string, bool) {
	m, ok := n.layout.MemberByRaftID(raftID)
	if !ok {
		return "", false
	}
	return n.memberAddr(m.ID), true
}

// memberAddr prefers the address a member gossips over the bootstrap one.
func (n *Node) memberAddr(id string) string {
	if n.disc != nil {
		if m, ok := n.disc.Member(id); ok && m.GRPCAddr != "" && m.State != discovery.StateLeft {
			return m.GRPCAddr
		}
	}
	if id == n.self.ID {
		return n.addrs.GRPC
	}
	m, _ := n.layout.Member(id)
	return m.GRPCAddr
}

func (n *Node) members() []*kvpb.Member {
	var out []*kvpb.Member
	for _, lm := range n.layout.Members {
		pm := &kvpb.Member{Id: lm.ID, RaftId: lm.RaftID, GrpcAddr: lm.GRPCAddr, State: kvpb.MemberState_MEMBER_STATE_UNKNOWN}
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
	n.store.Stop()
	n.transport.Close()
	_ = n.disc.Close()
	n.pool.Close()
	err := n.wal.Close()
	n.dir.unlock()
	n.log.Info("stopped")
	if err != nil {
		return fmt.Errorf("server: close WAL: %w", err)
	}
	return nil
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
