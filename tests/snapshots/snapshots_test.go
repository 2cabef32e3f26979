package snapshots

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/cut/verify"
	"github.com/cutkv/cutkv/datadir"
	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/restore"
	"github.com/cutkv/cutkv/server"
	"github.com/cutkv/cutkv/tests/bank"
	"github.com/cutkv/cutkv/tests/process"
)

// Shape of the run (doc.go).
const (
	nodes           = 3
	partitions      = 4
	accounts        = 20
	initialBalance  = 100
	transferClients = 8
	readers         = 2

	snapshotEvery = time.Second
	// minSnapshots: completed work the run must show, whatever the speed.
	minSnapshots = 5
	settleBound  = 15 * time.Second
)

// TestSnapshotsUnderBankLoadRestore takes an incremental snapshot every
// second of a 3-node cluster under the bank load for CUTKV_SOAK, then
// restores several of them into fresh clusters of 1, 3 and 5 nodes. Each
// restored cluster must hold exactly the state cut/verify rebuilds from
// the source's WALs for that cut (rule 5), with the bank's total, and
// must run: take writes and cuts above the snapshot's version.
func TestSnapshotsUnderBankLoadRestore(t *testing.T) {
	soak := process.SoakDuration(t)
	rng := process.NewRand(t)
	storeDir := filepath.Join(t.TempDir(), "store")
	if err := os.MkdirAll(storeDir, 0o750); err != nil {
		t.Fatal(err)
	}
	store := (&url.URL{Scheme: "file", Path: storeDir}).String()
	c := clustertest.Start(t, nodes, clustertest.Options{Partitions: partitions, Configure: func(_ int, cfg *server.Config) {
		// Materializations every few seconds give the snapshots bases;
		// segments large enough that the WALs keep the whole log for the
		// verifier.
		cfg.MaterializeInterval = 3 * time.Second
		cfg.WALSegmentSize = 1 << 30
		cfg.SnapshotStore = store
	}})
	r, err := bank.NewRouter(c.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := bank.NewBank(r, partitions, accounts, initialBalance)
	if err := b.Init(rng.Uint64()); err != nil {
		t.Fatal(err)
	}
	stopLoad := make(chan struct{})
	waitLoad := b.Run(stopLoad, transferClients, readers, rng.Uint64())
	loadStopped := false
	defer func() {
		if !loadStopped {
			close(stopLoad)
			waitLoad()
		}
	}()

	// One incremental snapshot a second, through a random node.
	began := time.Now()
	var taken []*kvpb.CreateSnapshotResult
	var failures []error
	var slowest time.Duration
	for next := began; time.Since(began) < soak || len(taken) < minSnapshots && time.Since(began) < soak+30*time.Second; next = next.Add(snapshotEvery) {
		time.Sleep(time.Until(next))
		start := time.Now()
		res, err := createSnapshot(c, rng.IntN(nodes), &kvpb.CreateSnapshotRequest{Store: store})
		if err != nil {
			failures = append(failures, err)
			continue
		}
		slowest = max(slowest, time.Since(start))
		taken = append(taken, res)
	}
	close(stopLoad)
	waitLoad()
	loadStopped = true
	var up, reused, pieces uint64
	if len(taken) == 0 {
		t.Fatalf("no snapshot taken; failures: %v", failures)
	}
	for _, s := range taken[1:] {
		up += s.GetBytesUploaded()
		reused += uint64(s.GetPiecesReused())
		pieces += uint64(s.GetPiecesUploaded())
	}
	t.Logf("%d snapshots in %v (slowest %v; %d failed); after the first: %d bytes, %d pieces uploaded, %d reused",
		len(taken), time.Since(began).Round(time.Millisecond), slowest.Round(time.Millisecond), len(failures), up, pieces, reused)
	for _, err := range failures {
		t.Logf("snapshot failed: %v", err)
	}
	if len(taken) < minSnapshots {
		t.Fatalf("only %d snapshots completed; want at least %d", len(taken), minSnapshots)
	}
	took, err := b.Settle(time.Now().Add(settleBound), rng.Uint64())
	if err != nil {
		t.Fatalf("bank did not settle: %v", err)
	}
	t.Logf("bank settled in %v; %s", took.Round(time.Millisecond), b.Summary())
	for _, e := range b.Check() {
		t.Error(e)
	}

	// The cuts behind the snapshots, as group 0 recorded them.
	cuts := map[uint64]*kvpb.CutInfo{}
	cl := kvrpc.NewClusterClient(c.Conn(0))
	for _, s := range taken {
		v := s.GetSnapshot().GetCutVersion()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := cl.GetCut(ctx, &kvpb.GetCutRequest{Version: v})
		cancel()
		if err != nil {
			t.Fatalf("cut %d: %v", v, err)
		}
		cuts[v] = resp.GetCut()
		if ck := checkSnapshot(t, c, store, s.GetSnapshot().GetId()); !ck.GetOk() {
			t.Fatalf("snapshot %s does not check: %v", s.GetSnapshot().GetId(), ck)
		}
	}

	// Stop the source and rebuild each snapshot's cut from its WALs.
	dirs := map[string]string{}
	for i := 0; i < nodes; i++ {
		c.Stop(i)
		dirs[c.Config(i).ID] = filepath.Join(c.Config(i).DataDir, datadir.WALDir)
	}
	picks := []struct {
		snap  *kvpb.CreateSnapshotResult
		nodes int
	}{
		{taken[0], 3},
		{taken[len(taken)/2], 3},
		{taken[len(taken)-1], 1},
		{taken[len(taken)-1], 5},
	}
	var vcuts []*kvpb.CutInfo
	for _, p := range picks {
		if ci := cuts[p.snap.GetSnapshot().GetCutVersion()]; !slices.Contains(vcuts, ci) {
			vcuts = append(vcuts, ci)
		}
	}
	rep, err := verify.Verify(verify.WALSource{Dirs: dirs}, verify.Options{
		Cuts:      vcuts,
		Invariant: func(_ uint64, state map[string][]byte) error { return b.CheckTotal(state) },
	})
	if err != nil {
		t.Fatalf("the verifier rejects the snapshots' cuts: %v", err)
	}
	want := map[uint64]map[string][]byte{}
	replicas, err := verify.WALSource{Dirs: dirs}.Replicas()
	if err != nil {
		t.Fatal(err)
	}
	for _, ci := range vcuts {
		want[ci.GetVersion()] = cutState(t, replicas, ci)
	}
	t.Logf("verifier: %v", rep)

	for _, p := range picks {
		id, v := p.snap.GetSnapshot().GetId(), p.snap.GetSnapshot().GetCutVersion()
		t.Run(fmt.Sprintf("%s-onto-%d", id, p.nodes), func(t *testing.T) {
			restoreAndCompare(t, store, id, v, p.nodes, want[v], b)
		})
	}
}

// cutState is the committed key-values of the whole cluster at cut ci,
// rebuilt per partition from a replica that holds its CutFinish.
func cutState(t *testing.T, replicas []*verify.Replica, ci *kvpb.CutInfo) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, cp := range ci.GetPartitions() {
		var errs []error
		var st *verify.PartitionState
		for _, r := range replicas {
			if r.Group != cp.GetPartition() {
				continue
			}
			s, err := verify.Rebuild(r, ci.GetVersion(), cp)
			if err == nil {
				st = s
				break
			}
			errs = append(errs, err)
		}
		if st == nil {
			t.Fatalf("cut %d partition %d: no replica rebuilds it: %v", ci.GetVersion(), cp.GetPartition(), errors.Join(errs...))
		}
		for k, v := range st.KVs {
			out[k] = v
		}
	}
	return out
}

// restoreAndCompare restores snapshot id onto a fresh cluster of n nodes
// and compares everything it serves with want.
func restoreAndCompare(t *testing.T, store, id string, v uint64, n int, want map[string][]byte, b *bank.Bank) {
	began := time.Now()
	c := clustertest.Start(t, n, clustertest.Options{Partitions: partitions, Prepare: func(i int, cfg server.Config) error {
		errs := &errorLog{}
		if _, err := restore.Run(context.Background(), restore.Options{
			StoreURL: store, Snapshot: id, DataDir: cfg.DataDir, NodeID: cfg.ID, InitialCluster: cfg.InitialCluster,
			Logger: slog.New(errs),
		}); err != nil {
			return err
		}
		if m := errs.messages(); len(m) > 0 {
			return fmt.Errorf("%s: restore succeeded but logged errors: %v", cfg.ID, m)
		}
		// Partitions rebuilt on Pebble are kept as checkpoint
		// directories, which the node clones: no image is encoded.
		mats, err := checkpoint.List(filepath.Join(cfg.DataDir, datadir.MaterializeDir))
		if err != nil {
			return err
		}
		for g, ms := range mats {
			for _, m := range ms {
				if g != 0 && !m.Dir {
					return fmt.Errorf("%s: partition %d restored as the image file %s, not as a checkpoint directory", cfg.ID, g, m.Name())
				}
			}
		}
		return nil
	}})
	t.Logf("restored %s (cut %d, %d keys) onto %d nodes and started them in %v", id, v, len(want), n, time.Since(began).Round(time.Millisecond))
	got := scanAll(t, c, 0)
	if err := b.CheckTotal(got); err != nil {
		t.Errorf("restored bank: %v", err)
	}
	var diffs []string
	for k, w := range want {
		if g, ok := got[k]; !ok || !bytes.Equal(g, w) {
			diffs = append(diffs, fmt.Sprintf("%q: restored %q, cut state %q", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q: restored %q, not in the cut state", k, g))
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		t.Fatalf("restored state differs from the cut's in %d keys:\n%v", len(diffs), diffs[:min(len(diffs), 20)])
	}
	// The new cluster runs: writes, and cuts above the snapshot's.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.KV(n-1).Put(ctx, &kvpb.PutRequest{Key: []byte("after-restore"), Value: []byte("yes")}); err != nil {
		t.Fatalf("write to the restored cluster: %v", err)
	}
	cut, err := kvrpc.NewClusterClient(c.Conn(0)).CreateCut(ctx, &kvpb.CreateCutRequest{})
	if err != nil || cut.GetCut().GetState() != kvpb.CutState_CUT_STATE_COMPLETED || cut.GetCut().GetVersion() <= v {
		t.Fatalf("cut on the restored cluster: %v, %v (want completed, version > %d)", cut, err, v)
	}
	if c.Node(0).ClusterID() == 0 {
		t.Fatal("no cluster id")
	}
}

// scanAll reads every key the cluster serves.
func scanAll(t *testing.T, c *clustertest.Cluster, via int) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	var start []byte
	for {
		var resp *kvpb.ScanResponse
		clustertest.Eventually(t, 20*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var err error
			resp, err = c.KV(via).Scan(ctx, &kvpb.ScanRequest{Start: start, Limit: 1000})
			return err
		})
		for _, kv := range resp.GetKvs() {
			out[string(kv.GetKey())] = kv.GetValue()
			start = append(slices.Clone(kv.GetKey()), 0)
		}
		if !resp.GetMore() {
			return out
		}
	}
}

func createSnapshot(c *clustertest.Cluster, via int, req *kvpb.CreateSnapshotRequest) (*kvpb.CreateSnapshotResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream, err := kvrpc.NewClusterClient(c.Conn(via)).CreateSnapshot(ctx, req)
	if err != nil {
		return nil, err
	}
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return nil, errors.New("stream ended without a result")
		}
		if err != nil {
			return nil, err
		}
		if m.GetResult() != nil {
			return m.GetResult(), nil
		}
	}
}

func checkSnapshot(t *testing.T, c *clustertest.Cluster, store, id string) *kvpb.CheckSnapshotResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := kvrpc.NewClusterClient(c.Conn(0)).CheckSnapshot(ctx, &kvpb.CheckSnapshotRequest{Store: store, Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// errorLog is a slog.Handler that keeps the messages of ERROR records.
type errorLog struct {
	mu   sync.Mutex
	msgs []string
}

func (h *errorLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }

func (h *errorLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, b.String())
	return nil
}

func (h *errorLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *errorLog) WithGroup(string) slog.Handler      { return h }

func (h *errorLog) messages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.msgs)
}
