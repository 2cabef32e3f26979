package ui

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// fakeCluster answers the dashboard's calls from fields a test sets.
type fakeCluster struct {
	kvrpc.UnimplementedClusterServer
	mu        sync.Mutex
	calls     map[string]int
	members   []*kvpb.Member
	status    *kvpb.StatusResponse
	statusErr error
	cuts      []*kvpb.CutInfo
	snaps     []*kvpb.SnapshotInfo // what ListSnapshots answers
	snapsErr  error
	details   map[string]*kvpb.SnapshotInfo // what GetSnapshot answers
}

func (f *fakeCluster) count(m string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[m]++
}

func (f *fakeCluster) called(m string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[m]
}

func (f *fakeCluster) Members(context.Context, *kvpb.MembersRequest) (*kvpb.MembersResponse, error) {
	f.count("Members")
	return &kvpb.MembersResponse{Members: f.members}, nil
}

func (f *fakeCluster) Status(context.Context, *kvpb.StatusRequest) (*kvpb.StatusResponse, error) {
	f.count("Status")
	return f.status, f.statusErr
}

func (f *fakeCluster) ListCuts(_ context.Context, req *kvpb.ListCutsRequest) (*kvpb.ListCutsResponse, error) {
	f.count("ListCuts")
	if req.GetLimit() != MaxCuts {
		return nil, status.Errorf(codes.InvalidArgument, "limit %d", req.GetLimit())
	}
	return &kvpb.ListCutsResponse{Cuts: f.cuts}, nil
}

func (f *fakeCluster) ListSnapshots(context.Context, *kvpb.ListSnapshotsRequest) (*kvpb.ListSnapshotsResponse, error) {
	f.count("ListSnapshots")
	if f.snapsErr != nil {
		return nil, f.snapsErr
	}
	return &kvpb.ListSnapshotsResponse{Store: "file:///snaps", Snapshots: f.snaps}, nil
}

func (f *fakeCluster) GetSnapshot(_ context.Context, req *kvpb.GetSnapshotRequest) (*kvpb.GetSnapshotResponse, error) {
	f.count("GetSnapshot")
	d, ok := f.details[req.GetId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no snapshot %s", req.GetId())
	}
	return &kvpb.GetSnapshotResponse{Snapshot: d}, nil
}

// fakeClock is a settable Config.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestHandler(t *testing.T, f *fakeCluster, reg prometheus.Gatherer) (*Handler, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.UnixMilli(1_800_000_000_000)}
	h, err := New(Config{Self: "n1", Cluster: f, Metrics: reg, Now: clk.now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return h, clk
}

func get(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, target, nil))
	return w
}

func getStatus(t *testing.T, h http.Handler, target string) Status {
	t.Helper()
	w := get(t, h, http.MethodGet, target)
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", target, w.Code, w.Body)
	}
	var st Status
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
		t.Fatalf("GET %s: %v in %s", target, err, w.Body)
	}
	return st
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "no Cluster service") {
		t.Errorf("New without a Cluster: %v", err)
	}
	if _, err := New(Config{Cluster: &fakeCluster{}, Refresh: -time.Second}); err == nil {
		t.Error("New with a negative refresh: no error")
	}
}

func TestQueryAndMethodChecks(t *testing.T) {
	h, _ := newTestHandler(t, &fakeCluster{status: &kvpb.StatusResponse{}}, nil)
	for _, tc := range []struct {
		method, target string
		code           int
		body           string
	}{
		{"POST", "/ui/api/status", http.StatusMethodNotAllowed, "only GET and HEAD"},
		{"GET", "/ui/api/status?cuts=0", http.StatusBadRequest, "cuts=\"0\": want a number from 1 to 50"},
		{"GET", "/ui/api/status?cuts=51", http.StatusBadRequest, "from 1 to 50"},
		{"GET", "/ui/api/status?snapshots=x", http.StatusBadRequest, "snapshots=\"x\""},
		{"GET", "/ui/api/status?cuts=1&cuts=2", http.StatusBadRequest, "given 2 times"},
		{"GET", "/ui/api/status?limit=3", http.StatusBadRequest, "unknown query parameter \"limit\""},
		{"GET", "/ui/api/status?cuts=5&snapshots=50", http.StatusOK, "\"members\""},
		{"GET", "/ui/", http.StatusOK, "<title>cutkv dashboard</title>"},
		{"GET", "/ui/app.js", http.StatusOK, "api/status"},
		{"GET", "/ui/nothere.js", http.StatusNotFound, ""},
	} {
		w := get(t, h, tc.method, tc.target)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("%s %s: %d %q, want %d containing %q", tc.method, tc.target, w.Code, w.Body, tc.code, tc.body)
		}
	}
	w := get(t, h, "GET", "/ui/")
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("page served with Content-Security-Policy %q", csp)
	}
}

// A source that fails leaves an error in its own section; the others are
// filled as usual.
func TestSectionErrors(t *testing.T) {
	f := &fakeCluster{
		members:   []*kvpb.Member{{Id: "n1", RaftId: 1, State: kvpb.MemberState_MEMBER_STATE_ALIVE}},
		statusErr: status.Error(codes.Unavailable, "no leader for group 0"),
		cuts:      []*kvpb.CutInfo{{Version: 9, State: kvpb.CutState_CUT_STATE_COMPLETED, StartedUnixMs: 1000, FinishedUnixMs: 1250}},
		snapsErr:  status.Error(codes.PermissionDenied, "store s3://x is not this node's snapshot store"),
	}
	h, _ := newTestHandler(t, f, nil)
	st := getStatus(t, h, "/ui/api/status")
	if want := "status: Unavailable: no leader for group 0"; st.Partitions.Error != want {
		t.Errorf("partitions error %q, want %q", st.Partitions.Error, want)
	}
	if len(st.Members.Items) != 1 || st.Members.Items[0].Serving != nil || st.Members.Items[0].StatusError == "" {
		t.Errorf("members without status: %+v", st.Members.Items)
	}
	if len(st.Cuts.Items) != 1 || st.Cuts.Items[0].DurationMs != 250 || st.Cuts.Items[0].State != "completed" {
		t.Errorf("cuts: %+v", st.Cuts.Items)
	}
	if !strings.Contains(st.Snapshots.Error, "list snapshots: PermissionDenied: store s3://x") {
		t.Errorf("snapshots error %q", st.Snapshots.Error)
	}
	if !strings.Contains(st.Ops.Error, "no metrics registry") {
		t.Errorf("ops error %q", st.Ops.Error)
	}
}

// However many pages poll, the node gathers once per Refresh and reads
// the store once per SnapshotRefresh.
func TestGatherOncePerRefresh(t *testing.T) {
	f := &fakeCluster{status: &kvpb.StatusResponse{}}
	h, clk := newTestHandler(t, f, nil)
	for range 5 {
		getStatus(t, h, "/ui/api/status")
	}
	if n := f.called("Status"); n != 1 {
		t.Errorf("5 polls within a refresh: %d status calls, want 1", n)
	}
	clk.advance(time.Second)
	getStatus(t, h, "/ui/api/status")
	if n, s := f.called("Status"), f.called("ListSnapshots"); n != 2 || s != 1 {
		t.Errorf("after a refresh: %d status calls (want 2), %d snapshot listings (want 1)", n, s)
	}
	clk.advance(10 * time.Second)
	getStatus(t, h, "/ui/api/status")
	if s := f.called("ListSnapshots"); s != 2 {
		t.Errorf("after a snapshot refresh: %d listings, want 2", s)
	}
}

func TestOpsRates(t *testing.T) {
	reg := prometheus.NewRegistry()
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: requestsFamily}, []string{"method", "code"})
	reg.MustRegister(reqs)
	f := &fakeCluster{status: &kvpb.StatusResponse{Groups: []*kvpb.PartitionStatus{{Id: 0, AppliedIndex: 5}, {Id: 1, AppliedIndex: 10}, {Id: 2, AppliedIndex: 20}}}}
	h, clk := newTestHandler(t, f, reg)
	reqs.WithLabelValues("/cutkv.kv.v1.KV/Put", "OK").Add(10)
	st := getStatus(t, h, "/ui/api/status")
	if st.Ops.RequestsPerSec != nil || st.Ops.RequestsTotal != 10 || len(st.Ops.Series) != 0 {
		t.Fatalf("first sample: %+v", st.Ops)
	}
	reqs.WithLabelValues("/cutkv.kv.v1.KV/Put", "OK").Add(30)
	reqs.WithLabelValues("/cutkv.kv.v1.KV/Get", "NotFound").Add(10)
	reqs.WithLabelValues("/cutkv.forward.cutkv.kv.v1.KV/Put", "OK").Add(1000) // a peer's, not counted
	f.status = &kvpb.StatusResponse{Groups: []*kvpb.PartitionStatus{{Id: 0, AppliedIndex: 500}, {Id: 1, AppliedIndex: 30}, {Id: 2, AppliedIndex: 40}}}
	clk.advance(2 * time.Second)
	st = getStatus(t, h, "/ui/api/status")
	if st.Ops.RequestsPerSec == nil || *st.Ops.RequestsPerSec != 20 {
		t.Errorf("requests/s %v, want 20 (40 in 2s)", st.Ops.RequestsPerSec)
	}
	if st.Ops.EntriesPerSec == nil || *st.Ops.EntriesPerSec != 20 {
		t.Errorf("entries/s %v, want 20 (40 in 2s, group 0 not counted)", st.Ops.EntriesPerSec)
	}
	// A group whose applied index goes back (another reporter) adds nothing.
	f.status = &kvpb.StatusResponse{Groups: []*kvpb.PartitionStatus{{Id: 1, AppliedIndex: 3}, {Id: 2, AppliedIndex: 42}}}
	clk.advance(time.Second)
	st = getStatus(t, h, "/ui/api/status")
	if *st.Ops.EntriesPerSec != 2 || len(st.Ops.Series) != 2 {
		t.Errorf("entries/s %v (want 2), series %v", *st.Ops.EntriesPerSec, st.Ops.Series)
	}
	// A failed status forgets the counters: no rate over the gap.
	f.statusErr = status.Error(codes.Unavailable, "down")
	clk.advance(time.Second)
	if st = getStatus(t, h, "/ui/api/status"); st.Ops.EntriesPerSec != nil || st.Ops.Error == "" {
		t.Errorf("entries/s with status failing: %v, error %q", st.Ops.EntriesPerSec, st.Ops.Error)
	}
	f.statusErr = nil
	clk.advance(time.Second)
	if st = getStatus(t, h, "/ui/api/status"); st.Ops.EntriesPerSec != nil {
		t.Errorf("entries/s right after the gap: %v, want none", *st.Ops.EntriesPerSec)
	}
	for range maxSamples + 10 {
		clk.advance(time.Second)
		st = getStatus(t, h, "/ui/api/status")
	}
	if len(st.Ops.Series) != maxSamples {
		t.Errorf("series of %d points, want at most %d", len(st.Ops.Series), maxSamples)
	}
}

func snapInfo(id string, cut uint64, pieces ...string) *kvpb.SnapshotInfo {
	s := &kvpb.SnapshotInfo{Id: id, CutVersion: cut, PartitionCount: 1}
	p := &kvpb.SnapshotPartition{Partition: 1, BaseName: "base-1", BaseSize: 100}
	for _, name := range pieces {
		p.Pieces = append(p.Pieces, &kvpb.SnapshotPiece{Name: name, Size: 10})
	}
	s.Partitions = []*kvpb.SnapshotPartition{p}
	return s
}

// The chain: each snapshot against its parent, the objects read once.
func TestSnapshotChain(t *testing.T) {
	f := &fakeCluster{status: &kvpb.StatusResponse{}, details: map[string]*kvpb.SnapshotInfo{}}
	var list []*kvpb.SnapshotInfo
	for i := range MaxSnapshots + 5 {
		id := "cut-" + string(rune('A'+i%26)) + string(rune('a'+i/26))
		var pieces []string
		for j := 0; j <= i; j++ {
			pieces = append(pieces, "piece-"+string(rune('A'+j%26))+string(rune('a'+j/26)))
		}
		d := snapInfo(id, uint64(i+1), pieces...)
		f.details[id] = d
		list = append(list, &kvpb.SnapshotInfo{Id: id, CutVersion: uint64(i + 1)})
	}
	f.snaps = list
	h, clk := newTestHandler(t, f, nil)
	st := getStatus(t, h, "/ui/api/status")
	items := st.Snapshots.Items
	if len(items) != MaxSnapshots || items[len(items)-1].ID != list[len(list)-1].GetId() {
		t.Fatalf("%d snapshots, last %v; want the newest %d", len(items), items[len(items)-1], MaxSnapshots)
	}
	first := items[0]
	if first.Parent != list[4].GetId() || first.NewObjects == nil || *first.NewObjects != 1 || *first.NewBytes != 10 || *first.SharedObjects != 6 {
		t.Errorf("oldest listed: %+v (new %v, shared %v)", first, first.NewObjects, first.SharedObjects)
	}
	if n := f.called("GetSnapshot"); n != MaxSnapshots+1 {
		t.Errorf("%d manifests read, want %d", n, MaxSnapshots+1)
	}
	clk.advance(time.Minute)
	if st = getStatus(t, h, "/ui/api/status?snapshots=3"); len(st.Snapshots.Items) != 3 || st.Snapshots.Items[2].ID != list[len(list)-1].GetId() {
		t.Errorf("?snapshots=3: %+v", st.Snapshots.Items)
	}
	if n := f.called("GetSnapshot"); n != MaxSnapshots+1 {
		t.Errorf("a second listing read %d manifests again", n-MaxSnapshots-1)
	}

	// A manifest that cannot be read says so, on it and on its child.
	f.snaps = []*kvpb.SnapshotInfo{{Id: "gone"}, list[0]}
	clk.advance(time.Minute)
	st = getStatus(t, h, "/ui/api/status")
	if got := st.Snapshots.Items; len(got) != 2 || !strings.Contains(got[0].DetailError, "show snapshot gone: NotFound") ||
		got[1].NewObjects != nil || got[1].DetailError == "" {
		t.Errorf("unreadable parent: %+v", got)
	}
}
