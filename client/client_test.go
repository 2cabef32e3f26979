package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/client/clienttest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// testConfig has short backoffs so that tests run fast, and generous
// timeouts so that they pass on a loaded machine.
func testConfig(endpoints ...string) client.Config {
	return client.Config{
		Endpoints:              endpoints,
		DialTimeout:            5 * time.Second,
		RequestTimeout:         5 * time.Second,
		BackoffBase:            2 * time.Millisecond,
		BackoffMax:             20 * time.Millisecond,
		RoutingRefreshInterval: time.Millisecond,
	}
}

func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("NewWithConfig: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func totalCalls(cl *clienttest.Cluster, method string) int {
	n := 0
	for _, nd := range cl.Nodes {
		n += nd.Calls(method)
	}
	return n
}

func TestPutGetDelete(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	c := newClient(t, testConfig(cl.Endpoints()...))
	ctx := testCtx(t)

	if _, err := c.Get(ctx, []byte("k")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
	}
	if err := c.Put(ctx, []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	var h client.Header
	if err := c.Put(ctx, []byte("k"), []byte("v2"), client.WithHeader(&h)); err != nil {
		t.Fatal(err)
	}
	if h.ClusterID != cl.ClusterID || h.MemberID != cl.Leader([]byte("k")).ID {
		t.Errorf("header = %+v", h)
	}
	kv, err := c.Get(ctx, []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	if string(kv.Key) != "k" || string(kv.Value) != "v2" || kv.Version != 2 || kv.CreateIndex == 0 || kv.ModIndex <= kv.CreateIndex {
		t.Errorf("Get = %+v", kv)
	}
	for _, want := range []bool{true, false} {
		deleted, err := c.Delete(ctx, []byte("k"))
		if err != nil || deleted != want {
			t.Fatalf("Delete = %v, %v; want %v", deleted, err, want)
		}
	}
}

func TestRoutesToLeader(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 8})
	for _, n := range cl.Nodes {
		n.SetForward(false) // a misrouted request would be answered NOT_LEADER
	}
	c := newClient(t, testConfig(cl.Endpoints()...))
	ctx := testCtx(t)
	want := make(map[string]int)
	for i := range 40 {
		k := fmt.Appendf(nil, "key-%d", i)
		if err := c.Put(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, k); err != nil {
			t.Fatal(err)
		}
		want[cl.Leader(k).ID]++
	}
	for _, n := range cl.Nodes {
		if got := n.Calls(clienttest.MethodPut); got != want[n.ID] {
			t.Errorf("node %s got %d puts, want %d (each straight to the leader)", n.ID, got, want[n.ID])
		}
		if got := n.Calls(clienttest.MethodGet); got != want[n.ID] {
			t.Errorf("node %s got %d gets, want %d", n.ID, got, want[n.ID])
		}
	}
}

func TestNotLeaderHintFollowed(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 3})
	// Routing claims n1 leads everything; the truth differs.
	cl.SetReportedLeaders([]int{0, 0, 0})
	for _, n := range cl.Nodes {
		n.SetForward(false)
	}
	// Routing refreshes keep returning the stale view: only the hint helps.
	c := newClient(t, testConfig(cl.Endpoints()...))
	ctx := testCtx(t)
	var key []byte
	for i := 0; ; i++ {
		key = fmt.Appendf(nil, "k%d", i)
		if cl.Leader(key) != cl.Nodes[0] {
			break
		}
	}
	leader := cl.Leader(key)
	if err := c.Put(ctx, key, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got := cl.Nodes[0].Calls(clienttest.MethodPut); got != 1 {
		t.Errorf("stale leader n1 got %d puts, want 1", got)
	}
	if got := leader.Calls(clienttest.MethodPut); got != 1 {
		t.Errorf("true leader %s got %d puts, want 1", leader.ID, got)
	}
	// The hint is remembered: the next request goes straight to the leader.
	if _, err := c.Get(ctx, key); err != nil {
		t.Fatal(err)
	}
	if got := cl.Nodes[0].Calls(clienttest.MethodGet); got != 0 {
		t.Errorf("stale leader n1 got %d gets after the hint, want 0", got)
	}
}

func TestDeadEndpointSkipped(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 3})
	dead := clienttest.DeadAddr(t)
	c := newClient(t, testConfig(append([]string{dead}, cl.Endpoints()...)...))
	ctx := testCtx(t)
	if _, err := c.Members(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, []byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Scan(ctx, nil, nil, 0); err != nil {
		t.Fatal(err)
	}
}

func TestDeadLeaderSkipped(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 3})
	// n1 is dead but Routing still names it the leader of every partition;
	// the others forward to the true leaders.
	cl.Nodes[0].Stop()
	cl.SetReportedLeaders([]int{0, 0, 0})
	for p := uint64(1); p <= 3; p++ {
		cl.SetLeader(p, 1)
	}
	c := newClient(t, testConfig(cl.Endpoints()...))
	ctx := testCtx(t)
	for i := range 10 {
		k := fmt.Appendf(nil, "k%d", i)
		if err := c.Put(ctx, k, []byte("v")); err != nil {
			t.Fatalf("Put %s: %v", k, err)
		}
	}
	if got := totalCalls(cl, clienttest.MethodPut); got != 10 {
		t.Errorf("%d puts reached the nodes, want 10", got)
	}
}

func TestLeaderStoppedReadRetried(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 1})
	cl.Put([]byte("k"), []byte("v"))
	c := newClient(t, testConfig(cl.Endpoints()...))
	ctx := testCtx(t)
	if _, err := c.Get(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	// The leader dies with a connection open; the partition moves.
	cl.Nodes[0].Stop()
	cl.SetLeader(1, 2)
	kv, err := c.Get(ctx, []byte("k"))
	if err != nil || string(kv.Value) != "v" {
		t.Fatalf("Get after the leader died = %+v, %v", kv, err)
	}
}

func TestAmbiguousWriteNotResent(t *testing.T) {
	for _, tc := range []struct {
		name string
		hook clienttest.Hook
		// timeout: the attempt times out, perhaps before the server saw
		// it, so the server counts 0 or 1 calls.
		timeout bool
	}{
		{"connection reset", func(ctx context.Context, m string, _ proto.Message) error {
			return status.Error(codes.Unavailable, "connection reset by peer")
		}, false},
		{"attempt timeout", func(ctx context.Context, m string, _ proto.Message) error {
			<-ctx.Done()
			return ctx.Err()
		}, true},
		{"internal", func(ctx context.Context, m string, _ proto.Message) error {
			return status.Error(codes.Internal, "boom")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 2})
			for _, n := range cl.Nodes {
				n.SetHook(func(ctx context.Context, m string, req proto.Message) error {
					if m == clienttest.MethodPut || m == clienttest.MethodDelete {
						return tc.hook(ctx, m, req)
					}
					return nil
				})
			}
			cfg := testConfig(cl.Endpoints()...)
			if tc.timeout {
				cfg.RequestTimeout = 100 * time.Millisecond
			}
			c := newClient(t, cfg)
			ctx := testCtx(t)
			err := c.Put(ctx, []byte("k"), []byte("v"))
			if !errors.Is(err, client.ErrOutcomeUnknown) {
				t.Fatalf("Put = %v, want ErrOutcomeUnknown", err)
			}
			if errors.Is(err, client.ErrUnavailable) {
				t.Errorf("Put error %v is both unknown and unavailable", err)
			}
			_, err = c.Delete(ctx, []byte("k"))
			if !errors.Is(err, client.ErrOutcomeUnknown) {
				t.Fatalf("Delete = %v, want ErrOutcomeUnknown", err)
			}
			for _, m := range []string{clienttest.MethodPut, clienttest.MethodDelete} {
				if got := totalCalls(cl, m); got > 1 || (got == 0 && !tc.timeout) {
					t.Errorf("%s was served %d times, want 1", m, got)
				}
			}
		})
	}
}

func TestNotAppliedRetried(t *testing.T) {
	for _, reason := range []string{
		clienttest.ReasonProposalDropped,
		clienttest.ReasonNoLeader,
		clienttest.ReasonNotLeader,
		clienttest.ReasonNotServing,
		clienttest.ReasonShuttingDown,
	} {
		t.Run(reason, func(t *testing.T) {
			cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 1})
			var failures atomic.Int32
			failures.Store(3)
			for _, n := range cl.Nodes {
				n.SetHook(func(ctx context.Context, m string, _ proto.Message) error {
					if m == clienttest.MethodPut && failures.Add(-1) >= 0 {
						return clienttest.NotApplied(reason, "")
					}
					return nil
				})
			}
			c := newClient(t, testConfig(cl.Endpoints()...))
			if err := c.Put(testCtx(t), []byte("k"), []byte("v")); err != nil {
				t.Fatalf("Put = %v", err)
			}
			if got := totalCalls(cl, clienttest.MethodPut); got != 4 {
				t.Errorf("put sent %d times, want 4 (3 refused + 1)", got)
			}
			if kv := cl.Value([]byte("k")); kv == nil || kv.Version != 1 {
				t.Errorf("stored %v, want version 1", kv)
			}
		})
	}
}

// TestGiveUpNamesTheLastAnswer: when the deadline cuts an attempt short,
// the error still carries what the cluster last answered (here NO_LEADER),
// not only "deadline exceeded".
func TestGiveUpNamesTheLastAnswer(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 2, Partitions: 1})
	var calls atomic.Int32
	for _, n := range cl.Nodes {
		n.SetHook(func(ctx context.Context, m string, _ proto.Message) error {
			if m != clienttest.MethodGet {
				return nil
			}
			if calls.Add(1) == 1 {
				return clienttest.NotApplied(clienttest.ReasonNoLeader, "")
			}
			<-ctx.Done() // every later attempt outlives the deadline
			return ctx.Err()
		})
	}
	c := newClient(t, testConfig(cl.Endpoints()...))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Get(ctx, []byte("k"))
	if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "NO_LEADER") || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("Get = %v; want ErrUnavailable naming NO_LEADER and the deadline", err)
	}
	if calls.Load() < 2 {
		t.Fatalf("%d Get attempts, want the refused one and one cut by the deadline", calls.Load())
	}
}

func TestDeadlineHonoured(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 1})
	var (
		mu    sync.Mutex
		calls []time.Time
	)
	for _, n := range cl.Nodes {
		n.SetHook(func(ctx context.Context, m string, _ proto.Message) error {
			switch m {
			case clienttest.MethodPut:
				mu.Lock()
				calls = append(calls, time.Now())
				mu.Unlock()
				return clienttest.NotApplied(clienttest.ReasonProposalDropped, "")
			case clienttest.MethodGet:
				<-ctx.Done() // never answers
				return ctx.Err()
			}
			return nil
		})
	}
	// Without honouring the deadline an operation would take at least the
	// 5 s attempt timeout; lateness allows for a loaded machine.
	c := newClient(t, testConfig(cl.Endpoints()...))
	const budget, lateness = 300 * time.Millisecond, 2 * time.Second

	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	deadline, _ := ctx.Deadline()
	err := c.Put(ctx, []byte("k"), []byte("v"))
	switch {
	case errors.Is(err, client.ErrUnavailable) && !errors.Is(err, client.ErrOutcomeUnknown):
	case errors.Is(err, client.ErrOutcomeUnknown) && errors.Is(err, context.DeadlineExceeded):
		// The deadline cut the last attempt short: rare, but right.
		t.Logf("the last attempt was in flight at the deadline: %v", err)
	default:
		t.Fatalf("Put = %v, want ErrUnavailable (not applied)", err)
	}
	if late := time.Since(deadline); late > lateness {
		t.Errorf("Put returned %v after its deadline", late)
	}
	mu.Lock()
	if len(calls) < 2 {
		t.Errorf("put sent %d times in %v, want retries", len(calls), budget)
	}
	// The hook sees when an attempt arrives, not when it was sent: one sent
	// just before the deadline may land just after it (gRPC never sends an
	// RPC whose ctx has expired). A sleep past the deadline would show as a
	// lateness of the order of the backoff.
	const transit = 5 * time.Millisecond
	for _, at := range calls {
		if at.After(deadline.Add(transit)) {
			t.Errorf("an attempt started %v after the deadline", at.Sub(deadline))
		}
	}
	mu.Unlock()

	ctx, cancel = context.WithTimeout(context.Background(), budget)
	defer cancel()
	deadline, _ = ctx.Deadline()
	_, err = c.Get(ctx, []byte("k"))
	if !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get = %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	if late := time.Since(deadline); late > lateness {
		t.Errorf("Get returned %v after its deadline", late)
	}
}

func TestCutVersionEchoed(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 2})
	cl.SetCutVersion(7)
	c := newClient(t, testConfig(cl.Endpoints()...))
	ctx := testCtx(t)
	if got := c.CutVersion(); got != 7 {
		t.Errorf("CutVersion after New = %d, want 7 (from the Routing reply)", got)
	}
	if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	leader := cl.Leader([]byte("k"))
	if got := leader.LastCutVersion(clienttest.MethodPut); got != 7 {
		t.Errorf("put carried cut_version %d, want 7", got)
	}
	cl.SetCutVersion(9)
	if _, err := c.Get(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	if got := c.CutVersion(); got != 9 {
		t.Errorf("CutVersion = %d, want 9", got)
	}
	// A node that knows less still gets the client's highest version.
	cl.SetCutVersion(3)
	if _, err := c.Members(ctx); err != nil {
		t.Fatal(err)
	}
	var carried uint64
	for _, n := range cl.Nodes {
		carried = max(carried, n.LastCutVersion(clienttest.MethodMembers))
	}
	if carried != 9 || c.CutVersion() != 9 {
		t.Errorf("members carried %d, client holds %d; want 9 and 9", carried, c.CutVersion())
	}
}

func TestInvalidArgument(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 1, Partitions: 1})
	c := newClient(t, testConfig(cl.Endpoints()...))
	ctx := testCtx(t)
	for name, err := range map[string]error{
		"empty key": c.Put(ctx, nil, []byte("v")),
		"big key":   c.Put(ctx, bytes.Repeat([]byte("k"), client.MaxKeySize+1), nil),
		"big value": c.Put(ctx, []byte("k"), make([]byte, client.MaxValueSize+1)),
		"get empty": func() error { _, err := c.Get(ctx, []byte{}); return err }(),
		"limit":     func() error { _, _, err := c.Scan(ctx, nil, nil, -1); return err }(),
	} {
		if !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if got := cl.Nodes[0].Calls(clienttest.MethodPut); got != 0 {
		t.Errorf("%d invalid puts were sent", got)
	}
	// A server-side InvalidArgument is not retried.
	cl.Nodes[0].SetHook(func(ctx context.Context, m string, _ proto.Message) error {
		return status.Error(codes.InvalidArgument, "no")
	})
	if err := c.Put(ctx, []byte("k"), []byte("v")); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("Put = %v, want ErrInvalidArgument", err)
	}
	if got := cl.Nodes[0].Calls(clienttest.MethodPut); got != 1 {
		t.Errorf("put sent %d times, want 1", got)
	}
}

func TestScan(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 4})
	const n = 2345
	for i := range n {
		cl.Put(fmt.Appendf(nil, "k%05d", i), fmt.Appendf(nil, "v%d", i))
	}
	cl.Put([]byte("z"), []byte("last"))
	c := newClient(t, testConfig(cl.Endpoints()...))
	ctx := testCtx(t)

	kvs, more, err := c.Scan(ctx, []byte("k"), []byte("l"), 10)
	if err != nil || len(kvs) != 10 || !more || string(kvs[0].Key) != "k00000" {
		t.Fatalf("Scan = %d kvs, more %v, err %v", len(kvs), more, err)
	}
	all, err := c.ScanAll(ctx, []byte("k"), []byte("l"))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("ScanAll returned %d, want %d", len(all), n)
	}
	for i, kv := range all {
		if want := fmt.Sprintf("k%05d", i); string(kv.Key) != want || string(kv.Value) != fmt.Sprintf("v%d", i) {
			t.Fatalf("ScanAll[%d] = %q=%q, want key %q", i, kv.Key, kv.Value, want)
		}
	}
	s := c.NewScanner(ctx, nil, nil, 7, client.WithKeysOnly())
	count := 0
	for s.Next() {
		if s.KeyValue().Value != nil {
			t.Fatal("keys-only scan returned a value")
		}
		count++
	}
	if s.Err() != nil || count != n+1 {
		t.Fatalf("scanner: %d keys, err %v", count, s.Err())
	}
	if s.Next() {
		t.Error("Next after the end returned true")
	}
}

func TestMembersAndStatus(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 2})
	cl.Nodes[2].SetState(kvpb.MemberState_MEMBER_STATE_SUSPECT)
	c := newClient(t, testConfig(cl.Endpoints()...))
	ctx := testCtx(t)
	ms, err := c.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 || ms[0].ID != "n1" || ms[0].GRPCAddr != cl.Nodes[0].Addr || ms[0].State != client.StateAlive ||
		ms[2].State != client.StateSuspect || ms[0].Since.IsZero() || ms[0].RaftID != 1 {
		t.Errorf("Members = %+v", ms)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ClusterID != cl.ClusterID || st.Partitions != 2 || len(st.Groups) != 3 || len(st.Nodes) != 3 ||
		st.Groups[0].ID != 0 || !st.Nodes[0].Serving || st.Nodes[0].DiskFreeBytes == 0 {
		t.Errorf("Status = %+v", st)
	}
}

func TestNewUnavailable(t *testing.T) {
	cfg := testConfig(clienttest.DeadAddr(t), clienttest.DeadAddr(t))
	cfg.DialTimeout = 200 * time.Millisecond
	start := time.Now()
	_, err := client.NewWithConfig(context.Background(), cfg)
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("NewWithConfig = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("NewWithConfig took %v with a 200ms dial timeout", d)
	}
}

func TestClosed(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 1, Partitions: 1})
	c := newClient(t, testConfig(cl.Endpoints()...))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(testCtx(t), []byte("k")); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
}

func TestConcurrent(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 4})
	c := newClient(t, testConfig(cl.Endpoints()...))
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				k := fmt.Appendf(nil, "g%d-%d", g, i)
				if err := c.Put(ctx, k, k); err != nil {
					t.Error(err)
					return
				}
				if kv, err := c.Get(ctx, k); err != nil || !bytes.Equal(kv.Value, k) {
					t.Errorf("Get %s = %q, %v", k, kv.Value, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
