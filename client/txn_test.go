package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/client/clienttest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// txnHook makes every node run h on Txn requests only.
func txnHook(cl *clienttest.Cluster, h func(ctx context.Context, r *kvpb.TxnRequest) error) {
	for _, n := range cl.Nodes {
		n.SetHook(func(ctx context.Context, m string, req proto.Message) error {
			if m == clienttest.MethodTxn {
				return h(ctx, req.(*kvpb.TxnRequest))
			}
			return nil
		})
	}
}

func TestTxnToProto(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{})
	cl.SetCutVersion(4)
	c := newClient(t, testConfig(cl.Endpoints()...))
	before := time.Now().UnixNano()
	_, err := c.Txn(testCtx(t)).
		If(
			client.Compare(client.Version([]byte("a")), "=", 3),
			client.Compare(client.Version([]byte("b")), "<", int64(2)),
			client.Compare(client.Value([]byte("c")), "!=", []byte("x")),
			client.Compare(client.Value([]byte("d")), ">", "y"),
			client.KeyMissing([]byte("e")),
			client.KeyExists([]byte("f")),
		).
		Then(client.OpPut([]byte("a"), []byte("1")), client.OpGet([]byte("g")), client.OpDelete([]byte("b"))).
		Else(client.OpScan([]byte("p"), []byte("q"), 10), client.OpScan(nil, []byte("b"), 0), client.OpPut([]byte("z"), nil)).
		Commit()
	after := time.Now().UnixNano()
	if err != nil {
		t.Fatal(err)
	}
	reqs := cl.TxnRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d txn requests, want 1", len(reqs))
	}
	got := reqs[0]
	if len(got.GetTxnId()) != 0 {
		t.Errorf("txn_id = %x, want none (the server assigns ids)", got.GetTxnId())
	}
	if p := got.GetPriority(); p < before || p > after {
		t.Errorf("priority = %d, want the Unix nanoseconds of the attempt (%d..%d)", p, before, after)
	}
	if got.GetHeader().GetCutVersion() != 4 {
		t.Errorf("header = %v, want cut_version 4", got.GetHeader())
	}
	ver := func(k string, r kvpb.Compare_Result, v int64) *kvpb.Compare {
		return &kvpb.Compare{Key: []byte(k), Target: kvpb.Compare_VERSION, Result: r, TargetUnion: &kvpb.Compare_Version{Version: v}}
	}
	val := func(k string, r kvpb.Compare_Result, v string) *kvpb.Compare {
		return &kvpb.Compare{Key: []byte(k), Target: kvpb.Compare_VALUE, Result: r, TargetUnion: &kvpb.Compare_Value{Value: []byte(v)}}
	}
	want := &kvpb.TxnRequest{
		Header: got.GetHeader(), TxnId: got.GetTxnId(), Priority: got.GetPriority(),
		Compare: []*kvpb.Compare{
			ver("a", kvpb.Compare_EQUAL, 3),
			ver("b", kvpb.Compare_LESS, 2),
			val("c", kvpb.Compare_NOT_EQUAL, "x"),
			val("d", kvpb.Compare_GREATER, "y"),
			ver("e", kvpb.Compare_EQUAL, 0),
			ver("f", kvpb.Compare_GREATER, 0),
		},
		Success: []*kvpb.RequestOp{
			{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte("a"), Value: []byte("1")}}},
			{Request: &kvpb.RequestOp_Get{Get: &kvpb.GetRequest{Key: []byte("g")}}},
			{Request: &kvpb.RequestOp_Delete{Delete: &kvpb.DeleteRequest{Key: []byte("b")}}},
		},
		Failure: []*kvpb.RequestOp{
			{Request: &kvpb.RequestOp_Scan{Scan: &kvpb.ScanRequest{Start: []byte("p"), End: []byte("q"), Limit: 10}}},
			{Request: &kvpb.RequestOp_Scan{Scan: &kvpb.ScanRequest{End: []byte("b")}}},
			{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte("z")}}},
		},
	}
	if !proto.Equal(got, want) {
		t.Errorf("sent %v\nwant %v", got, want)
	}
}

func TestTxnBranchesAndResults(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 4})
	cl.Put([]byte("acct/a"), []byte("100"))
	cl.Put([]byte("acct/b"), []byte("50"))
	cl.Put([]byte("log/1"), []byte("x"))
	cl.Put([]byte("log/2"), []byte("y"))
	cl.Put([]byte("log/3"), []byte("z"))
	cl.Put([]byte("log/4"), []byte("w"))
	c := newClient(t, testConfig(cl.Endpoints()...))
	ctx := testCtx(t)

	// A transfer whose compares hold.
	resp, err := c.Txn(ctx).
		If(client.Compare(client.Version([]byte("acct/a")), "=", 1), client.Compare(client.Value([]byte("acct/b")), "=", "50")).
		Then(client.OpPut([]byte("acct/a"), []byte("90")), client.OpPut([]byte("acct/b"), []byte("60")),
			client.OpDelete([]byte("log/1")), client.OpDelete([]byte("nope")),
			client.OpGet([]byte("missing")), client.OpScan([]byte("log/2"), []byte("log0"), 2)).
		Else(client.OpGet([]byte("acct/a"))).
		Commit()
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Succeeded || len(resp.Responses) != 6 {
		t.Fatalf("resp = %+v, want the Then branch with 6 results", resp)
	}
	kinds := []client.OpKind{client.KindPut, client.KindPut, client.KindDelete, client.KindDelete, client.KindGet, client.KindScan}
	for i, k := range kinds {
		if resp.Responses[i].Kind != k {
			t.Errorf("response %d is a %v, want %v", i, resp.Responses[i].Kind, k)
		}
	}
	if r := resp.Responses; r[2].Deleted != 1 || r[3].Deleted != 0 || len(r[4].KVs) != 0 ||
		len(r[5].KVs) != 2 || string(r[5].KVs[0].Key) != "log/2" || string(r[5].KVs[1].Value) != "z" || !r[5].More {
		t.Errorf("responses = %+v", r)
	}
	if resp.Header.ClusterID != cl.ClusterID || resp.Header.MemberID == "" {
		t.Errorf("header = %+v", resp.Header)
	}
	a, b := cl.Value([]byte("acct/a")), cl.Value([]byte("acct/b"))
	if string(a.GetValue()) != "90" || a.GetVersion() != 2 || string(b.GetValue()) != "60" || b.GetVersion() != 2 || cl.Value([]byte("log/1")) != nil {
		t.Errorf("after the transfer: a=%v b=%v", a, b)
	}

	// The same compares now fail: the Else branch runs and reads.
	resp, err = c.Txn(ctx).
		If(client.Compare(client.Version([]byte("acct/a")), "=", 1)).
		Then(client.OpPut([]byte("acct/a"), []byte("0"))).
		Else(client.OpGet([]byte("acct/a")), client.OpScan([]byte("acct/"), []byte("acct0"), 0)).
		Commit()
	if err != nil {
		t.Fatal(err)
	}
	if resp.Succeeded || len(resp.Responses) != 2 {
		t.Fatalf("resp = %+v, want the Else branch", resp)
	}
	got := resp.Responses[0].KVs
	if len(got) != 1 || string(got[0].Key) != "acct/a" || string(got[0].Value) != "90" || got[0].Version != 2 || got[0].ModIndex == 0 {
		t.Errorf("get = %+v", got)
	}
	if s := resp.Responses[1]; len(s.KVs) != 2 || s.More {
		t.Errorf("scan = %+v", s)
	}

	// Existence, and a value compare on an absent key (always false).
	for _, tc := range []struct {
		cmp  client.Cmp
		want bool
	}{
		{client.KeyMissing([]byte("ghost")), true},
		{client.KeyExists([]byte("ghost")), false},
		{client.KeyExists([]byte("acct/a")), true},
		{client.Compare(client.Value([]byte("ghost")), "!=", "x"), false},
		{client.Compare(client.Value([]byte("acct/a")), "<", "91"), true},
		{client.Compare(client.Version([]byte("acct/a")), ">", 2), false},
	} {
		resp, err := c.Txn(ctx).If(tc.cmp).Commit()
		if err != nil || resp.Succeeded != tc.want || len(resp.Responses) != 0 {
			t.Errorf("If(%v) = %+v, %v; want succeeded %v", tc.cmp, resp, err, tc.want)
		}
	}
}

func TestTxnRoutesBySmallestKey(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 8})
	c := newClient(t, testConfig(cl.Endpoints()...))
	ctx := testCtx(t)
	for i := range 20 {
		ka, kb := fmt.Appendf(nil, "a%d", i), fmt.Appendf(nil, "b%d", i)
		before := cl.Leader(ka).Calls(clienttest.MethodTxn)
		if _, err := c.Txn(ctx).If(client.KeyExists(kb)).Then(client.OpPut(kb, nil)).Else(client.OpPut(ka, nil)).Commit(); err != nil {
			t.Fatal(err)
		}
		if got := cl.Leader(ka).Calls(clienttest.MethodTxn) - before; got != 1 {
			t.Fatalf("txn %d did not go to %s, the leader of its smallest key %q", i, cl.Leader(ka).ID, ka)
		}
	}
}

func TestTxnAbortedRetried(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 2})
	var failures atomic.Int32
	failures.Store(3)
	txnHook(cl, func(ctx context.Context, r *kvpb.TxnRequest) error {
		if failures.Add(-1) >= 0 {
			return status.Error(codes.Aborted, "cutkv: txn: conflict with an older transaction")
		}
		return nil
	})
	c := newClient(t, testConfig(cl.Endpoints()...))
	resp, err := c.Txn(testCtx(t)).If(client.KeyMissing([]byte("k"))).Then(client.OpPut([]byte("k"), []byte("v"))).Commit()
	if err != nil || !resp.Succeeded {
		t.Fatalf("Commit = %+v, %v", resp, err)
	}
	reqs := cl.TxnRequests()
	if len(reqs) != 4 {
		t.Fatalf("txn sent %d times, want 4 (3 aborted + 1)", len(reqs))
	}
	for i, r := range reqs {
		if len(r.GetTxnId()) != 0 {
			t.Errorf("attempt %d: txn_id %x, want none (the server assigns ids)", i, r.GetTxnId())
		}
		if r.GetPriority() == 0 || r.GetPriority() != reqs[0].GetPriority() {
			t.Errorf("attempt %d: priority %d, want that of the first attempt, %d", i, r.GetPriority(), reqs[0].GetPriority())
		}
		if !proto.Equal(r.GetCompare()[0], reqs[0].GetCompare()[0]) || !proto.Equal(r.GetSuccess()[0], reqs[0].GetSuccess()[0]) {
			t.Errorf("attempt %d changed the transaction: %v", i, r)
		}
	}
	if kv := cl.Value([]byte("k")); kv.GetVersion() != 1 {
		t.Errorf("stored %v, want version 1", kv)
	}
}

func TestTxnNotAppliedRetried(t *testing.T) {
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
			failures.Store(2)
			txnHook(cl, func(ctx context.Context, r *kvpb.TxnRequest) error {
				if failures.Add(-1) >= 0 {
					return clienttest.NotApplied(reason, "")
				}
				return nil
			})
			c := newClient(t, testConfig(cl.Endpoints()...))
			if _, err := c.Txn(testCtx(t)).Then(client.OpPut([]byte("k"), []byte("v"))).Commit(); err != nil {
				t.Fatalf("Commit = %v", err)
			}
			reqs := cl.TxnRequests()
			if len(reqs) != 3 {
				t.Fatalf("txn sent %d times, want 3", len(reqs))
			}
			if len(reqs[1].GetTxnId()) != 0 || reqs[0].GetPriority() != reqs[2].GetPriority() {
				t.Errorf("retries must carry no id (the server makes one each) and the same priority: %v", reqs)
			}
		})
	}
}

func TestTxnAmbiguousNotResent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hook    func(ctx context.Context, r *kvpb.TxnRequest) error
		timeout bool
	}{
		{"connection reset", func(ctx context.Context, r *kvpb.TxnRequest) error {
			return status.Error(codes.Unavailable, "connection reset by peer")
		}, false},
		{"internal", func(ctx context.Context, r *kvpb.TxnRequest) error {
			return status.Error(codes.Internal, "boom")
		}, false},
		{"deadline from the server", func(ctx context.Context, r *kvpb.TxnRequest) error {
			return status.Error(codes.DeadlineExceeded, "prepare timed out")
		}, false},
		{"attempt timeout", func(ctx context.Context, r *kvpb.TxnRequest) error {
			<-ctx.Done()
			return ctx.Err()
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 2})
			txnHook(cl, tc.hook)
			cfg := testConfig(cl.Endpoints()...)
			if tc.timeout {
				cfg.RequestTimeout = 100 * time.Millisecond
			}
			c := newClient(t, cfg)
			_, err := c.Txn(testCtx(t)).Then(client.OpPut([]byte("k"), []byte("v"))).Commit()
			if !errors.Is(err, client.ErrOutcomeUnknown) || errors.Is(err, client.ErrConflict) || errors.Is(err, client.ErrUnavailable) {
				t.Fatalf("Commit = %v, want ErrOutcomeUnknown only", err)
			}
			if got := totalCalls(cl, clienttest.MethodTxn); got > 1 || (got == 0 && !tc.timeout) {
				t.Errorf("txn was sent %d times, want 1", got)
			}
		})
	}
}

// TestReadOnlyTxnRetriedWhenAmbiguous: a transaction that only reads is
// sent again after an answer that leaves a write's outcome unknown (it
// changed nothing either way), and succeeds.
func TestReadOnlyTxnRetriedWhenAmbiguous(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 2})
	cl.Put([]byte("k"), []byte("v"))
	var failures atomic.Int32
	failures.Store(2)
	txnHook(cl, func(ctx context.Context, r *kvpb.TxnRequest) error {
		if failures.Add(-1) >= 0 {
			return status.Error(codes.Unavailable, "connection reset by peer")
		}
		return nil
	})
	c := newClient(t, testConfig(cl.Endpoints()...))
	resp, err := c.Txn(testCtx(t)).If(client.Compare(client.Version([]byte("k")), ">", 0)).Then(client.OpGet([]byte("k")), client.OpGet([]byte("j"))).Commit()
	if err != nil {
		t.Fatalf("read-only Commit = %v, want it retried until it succeeds", err)
	}
	if !resp.Succeeded || len(resp.Responses) != 2 || len(resp.Responses[0].KVs) != 1 {
		t.Errorf("read-only Commit answered %+v", resp)
	}
	if got := totalCalls(cl, clienttest.MethodTxn); got != 3 {
		t.Errorf("txn sent %d times, want 3", got)
	}
	// With a write in the branch that did not run, it is a write.
	failures.Store(1)
	_, err = c.Txn(testCtx(t)).If(client.Compare(client.Version([]byte("k")), ">", 0)).Then(client.OpGet([]byte("k"))).Else(client.OpPut([]byte("k"), []byte("w"))).Commit()
	if !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Errorf("a transaction that may write: %v, want ErrOutcomeUnknown", err)
	}
}

func TestTxnConflictUntilDeadline(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 3, Partitions: 2})
	aborted := status.Error(codes.Aborted, "cutkv: txn: wounded")
	txnHook(cl, func(ctx context.Context, r *kvpb.TxnRequest) error { return aborted })
	c := newClient(t, testConfig(cl.Endpoints()...))
	const budget, lateness = 300 * time.Millisecond, 2 * time.Second
	// The deadline may, rarely, cut an attempt in flight: that gives
	// ErrOutcomeUnknown, rightly. Try again then.
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		deadline, _ := ctx.Deadline()
		_, err := c.Txn(ctx).Then(client.OpPut([]byte("k"), []byte("v"))).Commit()
		cancel()
		if errors.Is(err, client.ErrOutcomeUnknown) && errors.Is(err, context.DeadlineExceeded) && try < 3 {
			t.Logf("the deadline caught an attempt in flight: %v", err)
			continue
		}
		if !errors.Is(err, client.ErrConflict) || errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrOutcomeUnknown) {
			t.Fatalf("Commit = %v, want ErrConflict only", err)
		}
		if status.Code(err) != codes.Aborted || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Commit = %v, want it to wrap the last Aborted and the deadline", err)
		}
		if late := time.Since(deadline); late > lateness {
			t.Errorf("Commit returned %v after its deadline", late)
		}
		break
	}
	if got := totalCalls(cl, clienttest.MethodTxn); got < 2 {
		t.Errorf("txn sent %d times in %v, want retries", got, budget)
	}
	if cl.Value([]byte("k")) != nil {
		t.Error("an aborted txn was applied")
	}
}

func TestTxnInvalidArgument(t *testing.T) {
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 1, Partitions: 1})
	cfg := testConfig(cl.Endpoints()...)
	cfg.MaxTxnOps = 3
	c := newClient(t, cfg)
	ctx := testCtx(t)
	k := []byte("k")
	puts := func(n int) []client.Op {
		var ops []client.Op
		for i := range n {
			ops = append(ops, client.OpPut(fmt.Appendf(nil, "k%d", i), nil))
		}
		return ops
	}
	for name, txn := range map[string]*client.Txn{
		"too many compares":   c.Txn(ctx).If(client.KeyExists(k), client.KeyExists(k), client.KeyExists(k), client.KeyExists(k)),
		"too many then":       c.Txn(ctx).Then(puts(4)...),
		"too many else":       c.Txn(ctx).Else(puts(4)...),
		"bad operator":        c.Txn(ctx).If(client.Compare(client.Version(k), "==", 1)),
		"bad version type":    c.Txn(ctx).If(client.Compare(client.Version(k), "=", "1")),
		"bad value type":      c.Txn(ctx).If(client.Compare(client.Value(k), "=", 1)),
		"zero compare":        c.Txn(ctx).If(client.Cmp{}),
		"empty compare key":   c.Txn(ctx).If(client.KeyExists(nil)),
		"empty put key":       c.Txn(ctx).Then(client.OpPut(nil, nil)),
		"big key":             c.Txn(ctx).Else(client.OpGet(bytes.Repeat(k, client.MaxKeySize+1))),
		"big value":           c.Txn(ctx).Then(client.OpPut(k, make([]byte, client.MaxValueSize+1))),
		"negative limit":      c.Txn(ctx).Then(client.OpScan(nil, nil, -1)),
		"zero op":             c.Txn(ctx).Then(client.Op{}),
		"double write":        c.Txn(ctx).Then(client.OpPut(k, nil), client.OpDelete(k)),
		"get of a write":      c.Txn(ctx).Else(client.OpGet(k), client.OpPut(k, nil)),
		"scan over a write":   c.Txn(ctx).Then(client.OpDelete(k), client.OpScan([]byte("a"), []byte("z"), 0)),
		"open scan, a write":  c.Txn(ctx).Then(client.OpScan([]byte("j"), nil, 0), client.OpPut(k, nil)),
		"double write (else)": c.Txn(ctx).Then(client.OpPut(k, nil)).Else(client.OpPut(k, nil), client.OpPut(k, nil)),
	} {
		if _, err := txn.Commit(); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if got := cl.Nodes[0].Calls(clienttest.MethodTxn); got != 0 {
		t.Errorf("%d invalid txns were sent", got)
	}
	// Legal: the branches are checked apart; a write outside a scan's range.
	if _, err := c.Txn(ctx).Then(client.OpPut(k, nil), client.OpScan([]byte("l"), nil, 0)).Else(client.OpGet(k)).Commit(); err != nil {
		t.Errorf("a valid txn: %v", err)
	}

	// A server-side InvalidArgument is not retried.
	txnHook(cl, func(ctx context.Context, r *kvpb.TxnRequest) error {
		return status.Error(codes.InvalidArgument, "cutkv: txn: no")
	})
	before := cl.Nodes[0].Calls(clienttest.MethodTxn)
	if _, err := c.Txn(ctx).Then(client.OpPut(k, nil)).Commit(); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("Commit = %v, want ErrInvalidArgument", err)
	}
	if got := cl.Nodes[0].Calls(clienttest.MethodTxn) - before; got != 1 {
		t.Errorf("txn sent %d times, want 1", got)
	}
}

func TestTxnFakeRefusesWhatTheServerRefuses(t *testing.T) {
	// The client checks these itself; the fake must too, for programs that
	// build requests by hand.
	cl := clienttest.NewCluster(t, clienttest.Options{Nodes: 1, Partitions: 2, MaxTxnOps: 2})
	conn, err := grpc.NewClient(cl.Nodes[0].Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv := kvrpc.NewKVClient(conn)
	put := func(k string) *kvpb.RequestOp {
		return &kvpb.RequestOp{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte(k)}}}
	}
	get := func(k string) *kvpb.RequestOp {
		return &kvpb.RequestOp{Request: &kvpb.RequestOp_Get{Get: &kvpb.GetRequest{Key: []byte(k)}}}
	}
	scan := func(a, b string) *kvpb.RequestOp {
		return &kvpb.RequestOp{Request: &kvpb.RequestOp_Scan{Scan: &kvpb.ScanRequest{Start: []byte(a), End: []byte(b)}}}
	}
	for name, r := range map[string]*kvpb.TxnRequest{
		"ops":        {Success: []*kvpb.RequestOp{put("a"), put("b"), put("c")}},
		"double":     {Failure: []*kvpb.RequestOp{put("a"), put("a")}},
		"read write": {Success: []*kvpb.RequestOp{get("a"), put("a")}},
		"scan write": {Success: []*kvpb.RequestOp{scan("a", "c"), put("b")}},
		"empty key":  {Success: []*kvpb.RequestOp{get("")}},
		"empty op":   {Success: []*kvpb.RequestOp{{}}},
		"mismatch":   {Compare: []*kvpb.Compare{{Key: []byte("a"), Target: kvpb.Compare_VALUE, TargetUnion: &kvpb.Compare_Version{Version: 1}}}},
	} {
		_, err := kv.Txn(testCtx(t), r)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if got, err := kv.Txn(testCtx(t), &kvpb.TxnRequest{Success: []*kvpb.RequestOp{scan("a", "b"), put("b")}}); err != nil || !got.GetSucceeded() {
		t.Errorf("a write at a scan's exclusive end: %v, %v", got, err)
	}
	if got, want := cl.Value([]byte("b")), (&kvpb.KeyValue{Key: []byte("b"), Value: []byte{}, Version: 1, CreateIndex: 1, ModIndex: 1}); !proto.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
}
