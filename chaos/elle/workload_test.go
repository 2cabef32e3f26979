package elle

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/client/clienttest"
	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
)

func TestListEncoding(t *testing.T) {
	for _, l := range [][]int{{1}, {1, 2, 3}, {7, 123456, 9}} {
		got, ok := decodeList(encodeList(l))
		if !ok || !slices.Equal(got, l) {
			t.Errorf("%v → %q → %v, %v", l, encodeList(l), got, ok)
		}
	}
	for in, want := range map[string][]int{"": {0}, "1,,2": {1, 0, 2}, "x": {0}, "01": {0}, "-3,4": {0, 4}, "+5": {0}, "2,0": {2, 0}} {
		got, ok := decodeList([]byte(in))
		if ok || !slices.Equal(got, want) {
			t.Errorf("%q → %v, %v; want %v, false", in, got, ok, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	var c Config
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := Config{Keys: 16, MaxOpsPerTxn: 4, Clients: 4, KeyPrefix: "elle", MaxAppendsPerKey: 32, MaxAttempts: 8, TxnTimeout: 5 * time.Second}
	if c != want {
		t.Errorf("defaults %+v, want %+v", c, want)
	}
	for _, bad := range []Config{{Keys: -1}, {MaxOpsPerTxn: client.DefaultMaxTxnOps + 1}, {Clients: -2}, {TxnTimeout: -time.Second}, {KeyPrefix: strings.Repeat("k", 2000)}} {
		if err := bad.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", bad, err)
		}
	}
	if err := New(nil, Config{}).Run(context.Background()); !errors.Is(err, ErrConfig) {
		t.Errorf("Run without a client: %v", err)
	}
	if err := New(nil, Config{Keys: -1}).Run(context.Background()); !errors.Is(err, ErrConfig) {
		t.Errorf("Run with a bad config: %v", err)
	}
}

func connect(t *testing.T, endpoints []string) *client.Client {
	t.Helper()
	c, err := client.New(t.Context(), endpoints...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// run runs w for d and checks its history under strict serializability;
// it returns the history and the result.
func run(t *testing.T, w *Workload, d time.Duration) (*History, Result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err == nil {
		t.Error("a second Run was accepted")
	}
	h := w.History()
	if err := h.Validate(); err != nil {
		t.Fatalf("the workload recorded a bad history: %v", err)
	}
	r := CheckWith(h, Options{ProcessOrder: true, RealTime: true})
	t.Logf("%+v", w.Stats())
	t.Log(r)
	return h, r
}

// explain logs the ops of r's first anomalies.
func explain(t *testing.T, h *History, r Result) {
	t.Helper()
	byIndex := map[int]*Op{}
	for i := range h.Ops {
		byIndex[h.Ops[i].Index] = &h.Ops[i]
	}
	for _, a := range r.Anomalies[:min(len(r.Anomalies), 10)] {
		t.Log(a)
		for _, x := range a.Txns {
			if op := byIndex[x]; op != nil {
				t.Logf("  %v  (%v..%v)", op, time.Duration(op.Invoke), time.Duration(op.Complete))
			}
		}
	}
}

// mix counts what the ok ops of h did.
type mix struct{ ok, reads, appends, multiKey, retiredKeys int }

func mixOf(h *History) mix {
	var m mix
	for _, op := range h.Ops {
		if op.Type != TypeOK {
			continue
		}
		m.ok++
		keys := map[string]bool{}
		for _, mo := range op.Mops {
			keys[mo.Key] = true
			if mo.Kind == MopRead {
				m.reads++
			} else {
				m.appends++
			}
		}
		if len(keys) > 1 {
			m.multiKey++
		}
	}
	gens := map[string]bool{}
	for _, op := range h.Ops {
		for _, mo := range op.Mops {
			if !strings.HasSuffix(mo.Key, "-0") {
				gens[mo.Key] = true
			}
		}
	}
	m.retiredKeys = len(gens)
	return m
}

// The workload on the fake cluster (one lock, serializable): contention
// on few keys, retirement of full keys, a clean history.
func TestWorkloadFake(t *testing.T) {
	fc := clienttest.NewCluster(t, clienttest.Options{})
	w := New(connect(t, fc.Endpoints()), Config{Keys: 3, Clients: 4, Seed: 1, MaxAppendsPerKey: 6, KeyPrefix: "fake"})
	h, r := run(t, w, 500*time.Millisecond)
	if !r.OK {
		explain(t, h, r)
		t.Fatal("the fake cluster's history is not strictly serializable")
	}
	m, s := mixOf(h), w.Stats()
	t.Logf("%+v", m)
	if m.ok < 20 || m.reads == 0 || m.appends == 0 || m.multiKey == 0 {
		t.Errorf("a poor mix: %+v", m)
	}
	if s.CompareFailed == 0 || r.FailOps == 0 {
		t.Errorf("no compare failed on 3 keys with 4 clients: %+v", s)
	}
	if s.Retired == 0 || m.retiredKeys == 0 {
		t.Errorf("no key retired: %+v", s)
	}
	for _, op := range h.Ops {
		for _, mo := range op.Mops {
			if mo.Kind == MopRead && len(mo.Read) > 6 {
				t.Errorf("%v: a list past MaxAppendsPerKey", &op)
			}
		}
	}
}

// faults makes every node of fc answer some commits (Txns with puts) with
// errors: refuse (not applied, FailedPrecondition), lose (not applied,
// bare Unavailable: outcome unknown), apply-then-lose (applied, bare
// Unavailable) and lie (applied, FailedPrecondition: a broken server).
// Only for one client: applying here is not atomic with other Txns.
func faults(fc *clienttest.Cluster, seed uint64, refuse, lose, applyLose, lie float64) {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 1))
	apply := func(r *kvpb.TxnRequest) {
		for _, c := range r.GetCompare() {
			var v int64
			if kv := fc.Value(c.GetKey()); kv != nil {
				v = kv.GetVersion()
			}
			if v != c.GetVersion() {
				return
			}
		}
		for _, o := range r.GetSuccess() {
			if p := o.GetPut(); p != nil {
				fc.Put(p.GetKey(), p.GetValue())
			}
		}
	}
	hook := func(ctx context.Context, method string, req proto.Message) error {
		r, ok := req.(*kvpb.TxnRequest)
		if method != clienttest.MethodTxn || !ok || !slices.ContainsFunc(r.GetSuccess(), func(o *kvpb.RequestOp) bool { return o.GetPut() != nil }) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		x := rng.Float64()
		switch {
		case x < refuse:
			return status.Error(codes.FailedPrecondition, "injected refusal")
		case x < refuse+lose:
			return status.Error(codes.Unavailable, "injected loss")
		case x < refuse+lose+applyLose:
			apply(r)
			return status.Error(codes.Unavailable, "injected loss after apply")
		case x < refuse+lose+applyLose+lie:
			apply(r)
			return status.Error(codes.FailedPrecondition, "injected lie")
		}
		return nil
	}
	for _, n := range fc.Nodes {
		n.SetHook(hook)
	}
}

// Refused and lost commits are recorded as fail and info; info ops that
// applied are seen and the history still checks out.
func TestWorkloadFakeFaults(t *testing.T) {
	fc := clienttest.NewCluster(t, clienttest.Options{})
	faults(fc, 2, 0.15, 0.1, 0.15, 0)
	w := New(connect(t, fc.Endpoints()), Config{Keys: 3, Clients: 1, Seed: 2, KeyPrefix: "faults"})
	h, r := run(t, w, 400*time.Millisecond)
	if !r.OK {
		explain(t, h, r)
		t.Fatal("refusals and losses made the history fail")
	}
	if s := w.Stats(); s.Refused == 0 || s.Unknown == 0 || r.InfoOps == 0 || r.FailOps == 0 {
		t.Errorf("no refusal or loss recorded: %+v", s)
	}
	// Some info op applied, and a later read saw it.
	type elem struct {
		key string
		v   int
	}
	seen := map[elem]bool{}
	for _, op := range h.Ops {
		for _, m := range op.Mops {
			for _, e := range m.Read {
				seen[elem{m.Key, e}] = true
			}
		}
	}
	procs := map[int]bool{}
	observedInfo := 0
	for _, op := range h.Ops {
		if op.Type != TypeInfo {
			continue
		}
		procs[op.Process] = true
		for _, m := range op.Mops {
			if m.Kind == MopAppend && seen[elem{m.Key, m.Value}] {
				observedInfo++
				break
			}
		}
	}
	if observedInfo == 0 {
		t.Error("no info op's append was seen")
	}
	if len(procs) != r.InfoOps {
		t.Errorf("%d info ops in %d processes: a process continued after an info op", r.InfoOps, len(procs))
	}
}

// A server that applies a commit and answers that it did not: the
// checker sees the failed op's elements (G1a).
func TestWorkloadCatchesLyingServer(t *testing.T) {
	fc := clienttest.NewCluster(t, clienttest.Options{})
	faults(fc, 3, 0, 0, 0, 0.2)
	w := New(connect(t, fc.Endpoints()), Config{Keys: 2, Clients: 1, Seed: 3, KeyPrefix: "lies"})
	_, r := run(t, w, 300*time.Millisecond)
	if r.AnomalyCounts[KindG1a] == 0 {
		t.Fatalf("want G1a, got %v", r)
	}
}

// The workload against a real in-process cluster: 3 nodes, 4 partitions,
// 3 s. The history must be strictly serializable, with committed work of
// every shape.
func TestWorkloadCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster for 3 s")
	}
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 4})
	w := New(connect(t, c.Endpoints()), Config{Keys: 16, MaxOpsPerTxn: 4, Clients: 8, Seed: 4, KeyPrefix: "elle-cluster"})
	const d = 3 * time.Second
	start := time.Now()
	h, r := run(t, w, d)
	took := time.Since(start)
	if !r.OK {
		explain(t, h, r)
		t.Fatal("the cluster's history is not strictly serializable")
	}
	m, s := mixOf(h), w.Stats()
	t.Logf("%+v; %.0f committed txns/s (%.0f with appends) over %v", m, float64(s.Committed)/d.Seconds(), float64(s.Committed-s.ReadOnly)/d.Seconds(), took.Round(time.Millisecond))
	if s.Committed-s.ReadOnly == 0 || m.reads == 0 || m.appends == 0 || m.multiKey == 0 {
		t.Errorf("a poor mix: %+v, %+v", m, s)
	}
	if r.Edges == 0 || r.EdgesByType[EdgeWR] == 0 || r.EdgesByType[EdgeWW] == 0 {
		t.Errorf("no dependencies to check: %v", r)
	}
	// What the harness keeps on failure reads back to the same verdict.
	var buf bytes.Buffer
	if err := h.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	h2, err := DecodeHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if r2 := CheckWith(h2, Options{ProcessOrder: true, RealTime: true}); r2.OK != r.OK || r2.Edges != r.Edges {
		t.Errorf("the decoded history checks differently: %v", r2)
	}
}

// A closed client stops the workload at once, long before its ctx ends.
func TestWorkloadStopsOnClosedClient(t *testing.T) {
	fc := clienttest.NewCluster(t, clienttest.Options{})
	c, err := client.New(t.Context(), fc.Endpoints()...)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	w := New(c, Config{Clients: 2})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run kept going with a closed client")
	}
	if h := w.History(); len(h.Ops) != 0 {
		t.Errorf("recorded %d ops with a closed client", len(h.Ops))
	}
}
