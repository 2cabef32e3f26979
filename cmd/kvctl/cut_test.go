package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/client/clienttest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// The fake cluster of client/clienttest has no cut or check calls, so
// these tests serve the Cluster service from adminFake, whose answers
// each test sets.

// adminFake is one node serving the cut and check calls.
type adminFake struct {
	kvrpc.UnimplementedClusterServer
	addr string

	mu        sync.Mutex
	createCut func(ctx context.Context) (*kvpb.CreateCutResponse, error)
	cuts      []*kvpb.CutInfo
	check     *kvpb.CheckResponse
	ckpt      func(ctx context.Context) (*kvpb.CheckpointResponse, error)
	status    *kvpb.StatusResponse
	calls     map[string]int
	limits    []uint32      // ListCuts limits received
	deadlines time.Duration // time left to CreateCut's or Checkpoint's deadline, last call
}

func startAdminFake(t *testing.T) *adminFake {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &adminFake{addr: l.Addr().String(), calls: map[string]int{}}
	srv := grpc.NewServer()
	kvrpc.RegisterClusterServer(srv, f)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return f
}

var fakeHeader = &kvpb.ResponseHeader{ClusterId: "0000000000000c07", MemberId: "n1", CutVersion: 7}

// onCreateCut sets what CreateCut does.
func (f *adminFake) onCreateCut(fn func(ctx context.Context) (*kvpb.CreateCutResponse, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.createCut = fn
}

// setCuts sets the cuts the fake remembers, newest first.
func (f *adminFake) setCuts(cuts ...*kvpb.CutInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cuts = cuts
}

// setCheck sets Check's answer.
func (f *adminFake) setCheck(r *kvpb.CheckResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.check = r
}

// onCheckpoint sets what Checkpoint does.
func (f *adminFake) onCheckpoint(fn func(ctx context.Context) (*kvpb.CheckpointResponse, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ckpt = fn
}

// setStatus sets Status's answer.
func (f *adminFake) setStatus(r *kvpb.StatusResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = r
}

// Deadline returns the time that was left to the last CreateCut's or
// Checkpoint's deadline.
func (f *adminFake) Deadline() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deadlines
}

// Limits returns the ListCuts limits received.
func (f *adminFake) Limits() []uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uint32(nil), f.limits...)
}

func (f *adminFake) count(m string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[m]++
}

func (f *adminFake) Calls(m string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[m]
}

func (f *adminFake) CreateCut(ctx context.Context, _ *kvpb.CreateCutRequest) (*kvpb.CreateCutResponse, error) {
	f.count("CreateCut")
	f.mu.Lock()
	if dl, ok := ctx.Deadline(); ok {
		f.deadlines = time.Until(dl)
	}
	fn := f.createCut
	f.mu.Unlock()
	return fn(ctx)
}

func (f *adminFake) ListCuts(_ context.Context, r *kvpb.ListCutsRequest) (*kvpb.ListCutsResponse, error) {
	f.count("ListCuts")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limits = append(f.limits, r.GetLimit())
	cuts := f.cuts
	if l := int(r.GetLimit()); l > 0 && l < len(cuts) {
		cuts = cuts[:l]
	}
	return &kvpb.ListCutsResponse{Header: fakeHeader, Cuts: cuts}, nil
}

func (f *adminFake) GetCut(_ context.Context, r *kvpb.GetCutRequest) (*kvpb.GetCutResponse, error) {
	f.count("GetCut")
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.cuts {
		if c.GetVersion() == r.GetVersion() {
			return &kvpb.GetCutResponse{Header: fakeHeader, Cut: c}, nil
		}
	}
	return nil, status.Errorf(codes.FailedPrecondition, "rpc: failed precondition: no cut %d (group 0 keeps the last %d)", r.GetVersion(), len(f.cuts))
}

func (f *adminFake) Check(context.Context, *kvpb.CheckRequest) (*kvpb.CheckResponse, error) {
	f.count("Check")
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.check, nil
}

func (f *adminFake) Checkpoint(ctx context.Context, _ *kvpb.CheckpointRequest) (*kvpb.CheckpointResponse, error) {
	f.count("Checkpoint")
	f.mu.Lock()
	if dl, ok := ctx.Deadline(); ok {
		f.deadlines = time.Until(dl)
	}
	fn := f.ckpt
	f.mu.Unlock()
	return fn(ctx)
}

func (f *adminFake) Status(context.Context, *kvpb.StatusRequest) (*kvpb.StatusResponse, error) {
	f.count("Status")
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status, nil
}

// Two cuts of two partitions: 12 completed in 35ms, 13 failed.
var (
	completedCut = &kvpb.CutInfo{
		Version: 12, State: kvpb.CutState_CUT_STATE_COMPLETED,
		StartedUnixMs: 1735812000123, FinishedUnixMs: 1735812000158,
		Partitions: []*kvpb.CutPartition{
			{Partition: 1, Pos: 1021, FinishIndex: 1024, Before: 2, After: 1, Aborted: 0},
			{Partition: 2, Pos: 880, FinishIndex: 882, Before: 0, After: 0, Aborted: 3},
		},
	}
	failedCut = &kvpb.CutInfo{
		Version: 13, State: kvpb.CutState_CUT_STATE_FAILED,
		StartedUnixMs: 1735812010000, FinishedUnixMs: 1735812020002,
		Partitions: []*kvpb.CutPartition{{Partition: 1, Pos: 1100, FinishIndex: 1101}},
		Error:      "partition 2 did not finish within 10s",
	}
	runningCut = &kvpb.CutInfo{Version: 14, State: kvpb.CutState_CUT_STATE_RUNNING, StartedUnixMs: 1735812030000}
)

func TestCutText(t *testing.T) {
	var b bytes.Buffer
	if err := writeCutText(&b, completedCut); err != nil {
		t.Fatal(err)
	}
	want := `version   12
state     completed
started   2025-01-02T10:00:00.123Z
finished  2025-01-02T10:00:00.158Z
duration  35ms

PARTITION  POS   FINISH  BEFORE  AFTER  ABORTED
1          1021  1024    2       1      0
2          880   882     0       0      3
`
	if b.String() != want {
		t.Errorf("completed cut:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	if err := writeCutText(&b, failedCut); err != nil {
		t.Fatal(err)
	}
	want = `version   13
state     failed
started   2025-01-02T10:00:10.000Z
finished  2025-01-02T10:00:20.002Z
duration  10.002s
error     partition 2 did not finish within 10s

PARTITION  POS   FINISH  BEFORE  AFTER  ABORTED
1          1100  1101    0       0      0
`
	if b.String() != want {
		t.Errorf("failed cut:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	if err := writeCutListText(&b, []*kvpb.CutInfo{runningCut, failedCut, completedCut}); err != nil {
		t.Fatal(err)
	}
	want = `VERSION  STATE      STARTED                   DURATION  PARTITIONS  ERROR
14       running    2025-01-02T10:00:30.000Z  -         0           -
13       failed     2025-01-02T10:00:10.000Z  10.002s   1           partition 2 did not finish within 10s
12       completed  2025-01-02T10:00:00.123Z  35ms      2           -
`
	if b.String() != want {
		t.Errorf("cut list:\n%s\nwant:\n%s", b.String(), want)
	}
}

// A partition of each kind: OK, DIVERGED, UNCHECKED (a replica down), and
// UNCHECKED (no hash at all).
var checkResp = &kvpb.CheckResponse{Header: fakeHeader, Partitions: []*kvpb.PartitionCheck{
	{Partition: 1, Index: 1042, Consistent: true, Replicas: []*kvpb.ReplicaHash{
		{Node: "n1", Hash: 0x9f3a0c1b2d3e4f50, Keys: 12}, {Node: "n2", Hash: 0x9f3a0c1b2d3e4f50, Keys: 12}}},
	{Partition: 2, Index: 880, Replicas: []*kvpb.ReplicaHash{
		{Node: "n1", Hash: 0xaa, Keys: 5}, {Node: "n2", Hash: 0xbb, Keys: 6}}},
	{Partition: 3, Index: 77, Replicas: []*kvpb.ReplicaHash{
		{Node: "n1", Hash: 0xcc, Keys: 1}, {Node: "n2", Error: "unreachable"}}},
	{Partition: 4, Error: "no leader"},
}}

func TestCheckText(t *testing.T) {
	var b bytes.Buffer
	if err := writeCheckText(&b, checkResp.GetPartitions()); err != nil {
		t.Fatal(err)
	}
	want := `PARTITION  INDEX  NODE  HASH              KEYS  RESULT     ERROR
1          1042   n1    9f3a0c1b2d3e4f50  12    OK         -
1          1042   n2    9f3a0c1b2d3e4f50  12    OK         -
2          880    n1    00000000000000aa  5     DIVERGED   -
2          880    n2    00000000000000bb  6     DIVERGED   -
3          77     n1    00000000000000cc  1     UNCHECKED  -
3          77     n2    -                 -     UNCHECKED  unreachable
4          -      -     -                 -     UNCHECKED  no leader
`
	if b.String() != want {
		t.Errorf("check:\n%s\nwant:\n%s", b.String(), want)
	}
	// Without errors there is no ERROR column.
	b.Reset()
	if err := writeCheckText(&b, checkResp.GetPartitions()[:1]); err != nil {
		t.Fatal(err)
	}
	want = `PARTITION  INDEX  NODE  HASH              KEYS  RESULT
1          1042   n1    9f3a0c1b2d3e4f50  12    OK
1          1042   n2    9f3a0c1b2d3e4f50  12    OK
`
	if b.String() != want {
		t.Errorf("check, all OK:\n%s\nwant:\n%s", b.String(), want)
	}
}

// fakeCtl runs kvctl against the fakes.
func fakeCtl(t *testing.T, fakes []*adminFake, args ...string) result {
	t.Helper()
	var eps []string
	for _, f := range fakes {
		eps = append(eps, f.addr)
	}
	return kvctl(t, nil, "", append([]string{"--endpoints", strings.Join(eps, ",")}, args...)...)
}

func TestCutCreate(t *testing.T) {
	f := startAdminFake(t)
	f.onCreateCut(func(context.Context) (*kvpb.CreateCutResponse, error) {
		return &kvpb.CreateCutResponse{Header: fakeHeader, Cut: completedCut}, nil
	})
	r := fakeCtl(t, []*adminFake{f}, "cut", "create")
	var text bytes.Buffer
	_ = writeCutText(&text, completedCut)
	want(t, r, 0, text.String())
	// Without --timeout, cut create waits 30s; with it, as long as it says.
	if d := f.Deadline(); d < 25*time.Second || d > 30*time.Second {
		t.Errorf("cut create without --timeout: deadline in %v, want 30s", d)
	}
	fakeCtl(t, []*adminFake{f}, "--timeout", "3s", "cut", "create")
	if d := f.Deadline(); d < time.Second || d > 3*time.Second {
		t.Errorf("cut create --timeout 3s: deadline in %v", d)
	}

	var js struct {
		Header jsonHeader `json:"header"`
		Cut    jsonCut    `json:"cut"`
	}
	r = fakeCtl(t, []*adminFake{f}, "-o", "json", "cut", "create")
	decode(t, r, &js)
	if r.code != 0 || js.Header.MemberID != "n1" || js.Header.ClusterID != "0000000000000c07" || js.Cut.Version != 12 || js.Cut.State != "completed" ||
		js.Cut.StartedUnixMs != 1735812000123 || js.Cut.FinishedUnixMs != 1735812000158 || len(js.Cut.Partitions) != 2 ||
		js.Cut.Partitions[1] != (jsonCutPartition{Partition: 2, Pos: 880, FinishIndex: 882, Aborted: 3}) {
		t.Errorf("cut create json: exit %d, %+v", r.code, js)
	}
	if strings.Contains(r.stdout, `"error"`) || !strings.Contains(r.stdout, `"state":"completed"`) {
		t.Errorf("cut create json: %s", r.stdout)
	}

	// A failed cut: printed, then exit 6 with its error.
	f.onCreateCut(func(context.Context) (*kvpb.CreateCutResponse, error) {
		return &kvpb.CreateCutResponse{Header: fakeHeader, Cut: failedCut}, nil
	})
	r = fakeCtl(t, []*adminFake{f}, "cut", "create")
	text.Reset()
	_ = writeCutText(&text, failedCut)
	want(t, r, 6, text.String())
	if !strings.HasPrefix(r.stderr, "Error: cut 13 failed: partition 2 did not finish within 10s\n") {
		t.Errorf("failed cut: stderr %q", r.stderr)
	}
	r = fakeCtl(t, []*adminFake{f}, "-o", "json", "cut", "create")
	decode(t, r, &js)
	if r.code != 6 || js.Cut.State != "failed" || js.Cut.Error != "partition 2 did not finish within 10s" {
		t.Errorf("failed cut json: exit %d, %s", r.code, r.stdout)
	}
}

func TestCutCreateRetries(t *testing.T) {
	// The first node has no leader for group 0: the second one answers.
	a, b := startAdminFake(t), startAdminFake(t)
	a.onCreateCut(func(context.Context) (*kvpb.CreateCutResponse, error) {
		return nil, clienttest.NotApplied(clienttest.ReasonNoLeader, "")
	})
	b.onCreateCut(func(context.Context) (*kvpb.CreateCutResponse, error) {
		return &kvpb.CreateCutResponse{Header: fakeHeader, Cut: completedCut}, nil
	})
	r := fakeCtl(t, []*adminFake{a, b}, "cut", "create")
	if r.code != 0 || a.Calls("CreateCut") != 1 || b.Calls("CreateCut") != 1 {
		t.Errorf("NO_LEADER then OK: exit %d, calls %d %d; %+v", r.code, a.Calls("CreateCut"), b.Calls("CreateCut"), r)
	}

	// Only "not applied" until the deadline: no cut was started, exit 3.
	// The answers take 40 ms, so that an attempt sent close to the
	// deadline would be cut off by it (and leave the outcome unknown):
	// kvctl does not send one with less time left than an attempt takes.
	b.onCreateCut(func(context.Context) (*kvpb.CreateCutResponse, error) {
		time.Sleep(40 * time.Millisecond)
		return nil, clienttest.NotApplied(clienttest.ReasonNotLeader, "")
	})
	r = fakeCtl(t, []*adminFake{a, b}, "--timeout", "300ms", "cut", "create")
	if r.code != 3 || !strings.Contains(r.stderr, "NOT_LEADER") && !strings.Contains(r.stderr, "NO_LEADER") {
		t.Errorf("not applied until the deadline: %+v", r)
	}

	// An answer lost after the call was sent: the cut may have started,
	// exit 4.
	a.onCreateCut(func(ctx context.Context) (*kvpb.CreateCutResponse, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	r = fakeCtl(t, []*adminFake{a}, "--timeout", "300ms", "cut", "create")
	if r.code != 4 || !strings.Contains(r.stderr, "kvctl cut list") {
		t.Errorf("deadline with the call in flight: %+v", r)
	}
}

func TestCutListShow(t *testing.T) {
	f := startAdminFake(t)
	f.setCuts(runningCut, failedCut, completedCut)
	var text bytes.Buffer
	_ = writeCutListText(&text, []*kvpb.CutInfo{runningCut, failedCut})
	want(t, fakeCtl(t, []*adminFake{f}, "cut", "list", "--limit", "2"), 0, text.String())
	fakeCtl(t, []*adminFake{f}, "cut", "list")
	fakeCtl(t, []*adminFake{f}, "cut", "list", "--limit", "0")
	if got := f.Limits(); len(got) != 3 || got[0] != 2 || got[1] != cutListLimit || got[2] != 0 {
		t.Errorf("limits sent: %v, want [2 %d 0]", got, cutListLimit)
	}

	var list struct {
		Header jsonHeader `json:"header"`
		Cuts   []jsonCut  `json:"cuts"`
	}
	r := fakeCtl(t, []*adminFake{f}, "-o", "json", "cut", "list")
	decode(t, r, &list)
	if r.code != 0 || len(list.Cuts) != 3 || list.Cuts[0].State != "running" || list.Cuts[0].FinishedUnixMs != 0 ||
		list.Cuts[1].Error == "" || list.Cuts[2].Version != 12 || list.Header.CutVersion != 7 {
		t.Errorf("cut list json: exit %d, %s", r.code, r.stdout)
	}
	f.setCuts()
	want(t, fakeCtl(t, []*adminFake{f}, "-o", "json", "cut", "list"), 0,
		`{"header":{"cluster_id":"0000000000000c07","member_id":"n1","raft_term":0,"cut_version":7},"cuts":[]}`+"\n")
	f.setCuts(runningCut, failedCut, completedCut)

	// show prints what create prints, whatever the cut's state.
	text.Reset()
	_ = writeCutText(&text, failedCut)
	want(t, fakeCtl(t, []*adminFake{f}, "cut", "show", "13"), 0, text.String())
	var show struct {
		Header jsonHeader `json:"header"`
		Cut    jsonCut    `json:"cut"`
	}
	r = fakeCtl(t, []*adminFake{f}, "cut", "show", "12", "-o", "json")
	decode(t, r, &show)
	if r.code != 0 || show.Cut.Version != 12 || len(show.Cut.Partitions) != 2 {
		t.Errorf("cut show json: %+v", r)
	}

	// An unknown cut: exit 1, the server's reason, a hint.
	r = fakeCtl(t, []*adminFake{f}, "cut", "show", "99")
	want(t, r, 1, "")
	if !strings.HasPrefix(r.stderr, "Error: cut 99 not found: rpc: failed precondition: no cut 99 (group 0 keeps the last 3)\n") ||
		!strings.Contains(r.stderr, "kvctl cut list") {
		t.Errorf("unknown cut: stderr %q", r.stderr)
	}
	if f.Calls("GetCut") != 3 {
		t.Errorf("GetCut called %d times, want 3 (a refusal is not retried)", f.Calls("GetCut"))
	}

	for _, args := range [][]string{
		{"cut"}, {"cut", "bogus"}, {"cut", "show"}, {"cut", "show", "x"}, {"cut", "show", "0"}, {"cut", "show", "1", "2"},
		{"cut", "list", "--limit", "-1"}, {"cut", "create", "extra"}, {"check", "extra"}, {"--timeout", "0s", "cut", "create"},
	} {
		if r := fakeCtl(t, []*adminFake{f}, args...); r.code != 2 || !strings.HasPrefix(r.stderr, "Error: ") || r.stdout != "" {
			t.Errorf("kvctl %q: %+v; want exit 2", args, r)
		}
	}
}

func TestCheck(t *testing.T) {
	f := startAdminFake(t)
	f.setCheck(&kvpb.CheckResponse{Header: fakeHeader, Partitions: checkResp.GetPartitions()[:1]})
	r := fakeCtl(t, []*adminFake{f}, "check")
	var text bytes.Buffer
	_ = writeCheckText(&text, checkResp.GetPartitions()[:1])
	want(t, r, 0, text.String())

	var js struct {
		Header     jsonHeader `json:"header"`
		Partitions []struct {
			Partition uint64 `json:"partition"`
			Index     uint64 `json:"index"`
			Replicas  []struct {
				Node  string `json:"node"`
				Hash  string `json:"hash"`
				Keys  uint64 `json:"keys"`
				Error string `json:"error"`
			} `json:"replicas"`
			Consistent bool   `json:"consistent"`
			Error      string `json:"error"`
		} `json:"partitions"`
	}
	r = fakeCtl(t, []*adminFake{f}, "-o", "json", "check")
	decode(t, r, &js)
	if r.code != 0 || len(js.Partitions) != 1 || !js.Partitions[0].Consistent || js.Partitions[0].Index != 1042 ||
		len(js.Partitions[0].Replicas) != 2 || js.Partitions[0].Replicas[1].Hash != "9f3a0c1b2d3e4f50" || js.Partitions[0].Replicas[1].Keys != 12 {
		t.Errorf("check json: exit %d, %s", r.code, r.stdout)
	}

	// Diverged and unchecked partitions: the table, then exit 7.
	f.setCheck(checkResp)
	r = fakeCtl(t, []*adminFake{f}, "check")
	text.Reset()
	_ = writeCheckText(&text, checkResp.GetPartitions())
	want(t, r, 7, text.String())
	if !strings.HasPrefix(r.stderr, "Error: replicas diverge in partition 2; partitions 3, 4 could not be checked\n") {
		t.Errorf("check stderr %q", r.stderr)
	}
	r = fakeCtl(t, []*adminFake{f}, "-o", "json", "check")
	decode(t, r, &js)
	if r.code != 7 || len(js.Partitions) != 4 || js.Partitions[2].Replicas[1].Error != "unreachable" || js.Partitions[2].Replicas[1].Hash != "" ||
		js.Partitions[3].Error != "no leader" || js.Partitions[3].Replicas == nil {
		t.Errorf("check json, not OK: exit %d, %s", r.code, r.stdout)
	}
}

func TestAdminUnavailable(t *testing.T) {
	dead := clienttest.DeadAddr(t) + "," + clienttest.DeadAddr(t)
	for _, args := range [][]string{{"cut", "create"}, {"cut", "list"}, {"cut", "show", "1"}, {"check"}, {"checkpoint"}, {"status"}} {
		r := kvctl(t, nil, "", append([]string{"--endpoints", dead, "--dial-timeout", "200ms", "--timeout", "500ms"}, args...)...)
		if r.code != 3 || !strings.Contains(r.stderr, "unavailable") || r.stdout != "" {
			t.Errorf("%q with every node down: %+v; want exit 3", args, r)
		}
	}
}
