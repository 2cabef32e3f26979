package server_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/node"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/rpc"
)

func opPut(k, v string) *kvpb.RequestOp {
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte(k), Value: []byte(v)}}}
}

func opGet(k string) *kvpb.RequestOp {
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Get{Get: &kvpb.GetRequest{Key: []byte(k)}}}
}

func cmpVersion(k string, v int64) *kvpb.Compare {
	return &kvpb.Compare{Key: []byte(k), Target: kvpb.Compare_VERSION, Result: kvpb.Compare_EQUAL, TargetUnion: &kvpb.Compare_Version{Version: v}}
}

// keysIn returns a key, one in another partition and one in the same.
func keysIn(prefix string, parts uint32) (a, b, c string) {
	a = prefix + "-0"
	pa := keyspace.PartitionOf([]byte(a), parts)
	for i := 1; b == "" || c == ""; i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		if p := keyspace.PartitionOf([]byte(k), parts); p != pa && b == "" {
			b = k
		} else if p == pa && c == "" {
			c = k
		}
	}
	return a, b, c
}

// txnRecords counts the transaction records every replica of c holds.
func txnRecords(c *clustertest.Cluster) int {
	total := 0
	for i := range 3 {
		total += c.Node(i).TxnRecords()
	}
	return total
}

func TestTxnOnePhaseAndTwoPhase(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{})
	a, b, _ := keysIn("x", 4)
	d, _, same := keysIn("y", 4)
	for i, pair := range [][2]string{{a, b}, {d, same}} {
		x, y := pair[0], pair[1]
		name := []string{"cross-partition", "single-partition"}[i]
		var resp *kvpb.TxnResponse
		clustertest.Eventually(t, 10*time.Second, func() error {
			var err error
			resp, err = c.KV(i).Txn(ctxT(t, 5*time.Second), &kvpb.TxnRequest{
				Compare: []*kvpb.Compare{cmpVersion(x, 0), cmpVersion(y, 0)},
				Success: []*kvpb.RequestOp{opPut(x, "100"), opPut(y, "50")},
				Failure: []*kvpb.RequestOp{opGet(x), opGet(y)},
			})
			return err
		})
		if !resp.GetSucceeded() || len(resp.GetResponses()) != 2 || resp.GetResponses()[0].GetPut() == nil {
			t.Fatalf("%s: first txn: %v", name, resp)
		}
		// Same compares again: now false, so the failure branch reads. A
		// 2PC transaction is answered once its decision is durable and its
		// locks go a raft round later, so this one may meet them and be
		// answered Aborted ("retry"), as any conflict is; it is retried
		// only for that.
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; {
			resp, err = c.KV(2).Txn(ctxT(t, 5*time.Second), &kvpb.TxnRequest{
				Compare: []*kvpb.Compare{cmpVersion(x, 0), cmpVersion(y, 0)},
				Success: []*kvpb.RequestOp{opPut(x, "bad"), opPut(y, "bad")},
				Failure: []*kvpb.RequestOp{opGet(x), opGet(y)},
			})
			if status.Code(err) != codes.Aborted || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil || resp.GetSucceeded() {
			t.Fatalf("%s: second txn: %v %v", name, resp, err)
		}
		got := []string{string(resp.GetResponses()[0].GetGet().GetKv().GetValue()), string(resp.GetResponses()[1].GetGet().GetKv().GetValue())}
		if got[0] != "100" || got[1] != "50" {
			t.Fatalf("%s: failure branch read %v", name, got)
		}
		// The writes are visible to plain reads on every node.
		for n := 0; n < 3; n++ {
			g, err := c.KV(n).Get(ctxT(t, 5*time.Second), &kvpb.GetRequest{Key: []byte(y)})
			if err != nil || string(g.GetKv().GetValue()) != "50" {
				t.Fatalf("%s: get %s via n%d: %v %v", name, y, n+1, g, err)
			}
		}
	}
	// Invalid transactions are refused.
	_, err := c.KV(0).Txn(ctxT(t, 5*time.Second), &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opPut(a, "1"), opPut(a, "2")}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("duplicate write: %v", err)
	}
	_, err = c.KV(0).Txn(ctxT(t, 5*time.Second), &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opPut(a, "1"), opGet(a)}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("read of a written key: %v", err)
	}
}

// TestTxnRecordsForgotten: the record of a 2PC transaction goes once
// every participant applied its Finish (batched, about a second later),
// committed or aborted; its finished ids go once the partitions' horizon
// passes its prepare time (retention shortened here); the data stays.
// (That a late prepare is then refused: partition TestTxnHorizon.)
func TestTxnRecordsForgotten(t *testing.T) {
	retention, interval := rpc.FinishedRetention, node.HorizonInterval
	rpc.FinishedRetention, node.HorizonInterval = 300*time.Millisecond, 200*time.Millisecond
	t.Cleanup(func() { rpc.FinishedRetention, node.HorizonInterval = retention, interval }) // after the cluster stops
	c := clustertest.Start(t, 3, clustertest.Options{})
	const n = 40
	for i := range n {
		a, b, _ := keysIn(fmt.Sprintf("forget%02d-", i), 4)
		clustertest.Eventually(t, 10*time.Second, func() error {
			_, err := c.KV(i%3).Txn(ctxT(t, 5*time.Second), &kvpb.TxnRequest{
				Success: []*kvpb.RequestOp{opPut(a, "1"), opPut(b, "2")},
			})
			return err
		})
	}
	clustertest.Eventually(t, 15*time.Second, func() error {
		if r := txnRecords(c); r != 0 {
			return fmt.Errorf("%d transaction records still held after %d transactions finished", r, n)
		}
		return nil
	})
	clustertest.Eventually(t, 15*time.Second, func() error {
		total := 0
		for i := range 3 {
			total += c.Node(i).FinishedTxnIDs()
		}
		if total != 0 {
			return fmt.Errorf("%d finished transaction ids still remembered past the horizon", total)
		}
		return nil
	})
	a, b, _ := keysIn("forget39-", 4)
	for _, k := range []string{a, b} {
		g, err := c.KV(0).Get(ctxT(t, 5*time.Second), &kvpb.GetRequest{Key: []byte(k)})
		if err != nil || g.GetKv() == nil {
			t.Fatalf("get %s after the records went: %v %v", k, g, err)
		}
	}
}
