package bank

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/tests/process"
)

// recoveryBound is how long the participants may take to resolve a
// transaction whose coordinator died (DESIGN.md: "within seconds").
const recoveryBound = 10 * time.Second

// TestCoordinatorDeathIsRecovered kills a cross-partition transaction's
// coordinator at each crash point and checks that the participants finish
// its transaction alone (DESIGN.md, Transactions: parallel commits and
// recovery; issue 3, "Failures"). With parallel commits a transaction is
// committed once every participant's prepare applied, so at both points
// it is committed already and recovery must commit it:
//
//   - AfterPrepare: n1 dies after both participants prepared (the client
//     may have its answer) and before the decision is recorded. Recovery
//     finds the record STAGING, asks both participants, finds both
//     prepared and records COMMIT.
//   - AfterDecide: n1 dies after the COMMIT decision is durable on the
//     record partition and before the other participant's Finish.
//
// In both, reads never see the state before the transaction: within
// recoveryBound both of its writes are visible, and both keys writable;
// the client's answer is committed or an unknown outcome, never an abort.
func TestCoordinatorDeathIsRecovered(t *testing.T) {
	c := process.NewCluster(t, process.Spec{Bin: bin.Kvnode, Partitions: 4, Configure: func(n *process.Node) {
		if n.ID == "n1" {
			n.Bin = bin.KvnodeFailpoints
		}
	}})
	n1 := c.Nodes[0]
	coord := kvrpc.NewKVClient(dial(t, n1.GRPC))
	n2 := dial(t, c.Nodes[1].GRPC)
	others := []kvrpc.KVClient{kvrpc.NewKVClient(n2), kvrpc.NewKVClient(dial(t, c.Nodes[2].GRPC))}

	for _, tc := range []struct{ name, point, prefix string }{
		{"AfterPrepare", "txnAfterPrepare", "prep"},
		{"AfterDecide", "txnAfterDecide", "dec"},
	} {
		n1.Kill9()
		n1.Env = []string{"CUTKV_FAILPOINTS=" + tc.point + "=exit@0"}
		n1.Restart()
		t.Run(tc.name, func(t *testing.T) {
			k1, k2 := pickKeys(t, n2, tc.prefix, n1.ID)
			mustPut(t, others, k1, "c0")
			mustPut(t, others, k2, "d0")

			err := sendTwoKeyTxn(coord, k1, k2, "c1", "d1")
			died := awaitCrash(t, n1, tc.point)
			if v, why := classify(err); v != vUnknown && v != vCommitted {
				t.Errorf("the coordinator died with every prepare applied, yet its answer was %v (%s): the transaction is committed", err, why)
			}

			// Reads: LOCKED or the transaction's values, never the old ones.
			want := map[string]string{k1: "c1", k2: "d1"}
			refused := 0
			done := map[string]bool{}
			for len(done) < 2 {
				if time.Since(died) > recoveryBound {
					t.Fatalf("the committed transaction was not finished within %v of its coordinator's death", recoveryBound)
				}
				for _, k := range []string{k1, k2} {
					if done[k] {
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					resp, err := others[len(done)%2].Get(ctx, &kvpb.GetRequest{Key: []byte(k)})
					cancel()
					switch {
					case err != nil:
						refused++
					case string(resp.GetKv().GetValue()) == want[k]:
						done[k] = true
					default:
						t.Fatalf("%s = %q (version %d) after every prepare applied: the transaction's lock was lost", k, resp.GetKv().GetValue(), resp.GetKv().GetVersion())
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("both writes visible %v after the coordinator died (%d reads refused meanwhile)", time.Since(died).Round(time.Millisecond), refused)
			mustCommitTwoKeyTxn(t, others, k1, k2, 2, 2)

			// n1, back without failpoints, agrees.
			n1.Env = nil
			n1.Restart()
			for k, v := range map[string]string{k1: "c1x", k2: "d1x"} {
				if kv := mustGet(t, []kvrpc.KVClient{coord}, k); string(kv.GetValue()) != v {
					t.Errorf("%s = %q through the restarted coordinator, want %q", k, kv.GetValue(), v)
				}
			}
		})
	}
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// pickKeys returns two keys in different partitions, led (as cc's node
// sees it) by nodes other than avoid when there are two such partitions,
// so that the victim's death does not also cost them their leader.
func pickKeys(t *testing.T, cc *grpc.ClientConn, prefix, avoid string) (string, string) {
	t.Helper()
	var leaders []string
	ok, last := process.WaitFor(10*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := kvrpc.NewClusterClient(cc).Routing(ctx, &kvpb.RoutingRequest{})
		if err != nil {
			return false, err.Error()
		}
		leaders = resp.GetLeaders()
		for _, l := range leaders {
			if l == "" {
				return false, fmt.Sprintf("leaders %v", leaders)
			}
		}
		return true, ""
	})
	if !ok {
		t.Fatalf("no leader for every partition: %s", last)
	}
	var parts []uint64
	for i, l := range leaders {
		if l != avoid {
			parts = append(parts, uint64(i+1))
		}
	}
	for i, l := range leaders {
		if l == avoid && len(parts) < 2 {
			parts = append(parts, uint64(i+1))
		}
	}
	keyIn := func(p uint64, side string) string {
		for k := 0; ; k++ {
			key := fmt.Sprintf("rec/%s/%s.%d", prefix, side, k)
			if keyspace.PartitionOf([]byte(key), uint32(len(leaders))) == p {
				return key
			}
		}
	}
	k1, k2 := keyIn(parts[0], "a"), keyIn(parts[1], "b")
	t.Logf("keys %s (partition %d, leader %s) and %s (partition %d, leader %s)", k1, parts[0], leaders[parts[0]-1], k2, parts[1], leaders[parts[1]-1])
	return k1, k2
}

// awaitCrash waits for n to exit at the crash point and returns when.
func awaitCrash(t *testing.T, n *process.Node, point string) time.Time {
	t.Helper()
	code, desc := n.WaitExit(30 * time.Second)
	died := time.Now()
	if want := "failpoint " + point + ": exiting"; code != 86 || !strings.Contains(n.Stderr(), want) {
		t.Fatalf("%s: %s, want exit status 86 and %q; stderr:\n%s", n.ID, desc, want, process.Tail(n.Stderr(), 20))
	}
	return died
}

// sendTwoKeyTxn sends once, to kv, a Txn that puts v1 and v2 if both keys
// are at version 1.
func sendTwoKeyTxn(kv kvrpc.KVClient, k1, k2, v1, v2 string) error {
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	defer cancel()
	_, err := kv.Txn(ctx, &kvpb.TxnRequest{
		Compare:  []*kvpb.Compare{versionIs(k1, 1), versionIs(k2, 1)},
		Success:  []*kvpb.RequestOp{putOp(k1, []byte(v1)), putOp(k2, []byte(v2))},
		Priority: time.Now().UnixNano(),
	})
	return err
}

// attempt sends req once, through kvs[i%len(kvs)] (the server gives it a
// fresh txn_id).
// It fails the test on an answer other than committed or not applied, and
// reports whether the attempt committed and whether a lock refused it.
func attempt(t *testing.T, kvs []kvrpc.KVClient, i int, req *kvpb.TxnRequest) (resp *kvpb.TxnResponse, committed, aborted bool, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	resp, err = kvs[i%len(kvs)].Txn(ctx, req)
	cancel()
	v, why := classify(err)
	switch v {
	case vCommitted:
		return resp, true, false, nil
	case vUnknown, vInvalid:
		t.Fatalf("Txn: %v (%s)", err, why)
	}
	return nil, false, why == "ABORTED", err
}

// txnUntil runs req through the nodes in turn until an attempt commits,
// retrying attempts that were definitely not applied, until deadline; it
// fails the test on an unknown outcome.
func txnUntil(t *testing.T, kvs []kvrpc.KVClient, req *kvpb.TxnRequest, deadline time.Time) *kvpb.TxnResponse {
	t.Helper()
	req.Priority = time.Now().UnixNano()
	for i := 0; ; i++ {
		resp, ok, _, err := attempt(t, kvs, i, req)
		if ok {
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("Txn still refused at the deadline: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mustCommitTwoKeyTxn checks that both keys, at the given versions, are
// writable together: a two-partition Txn that compares them commits its
// success branch, writing value+"x".
func mustCommitTwoKeyTxn(t *testing.T, kvs []kvrpc.KVClient, k1, k2 string, v1, v2 int64) {
	t.Helper()
	a, b := mustGet(t, kvs, k1), mustGet(t, kvs, k2)
	resp := txnUntil(t, kvs, &kvpb.TxnRequest{
		Compare: []*kvpb.Compare{versionIs(k1, v1), versionIs(k2, v2)},
		Success: []*kvpb.RequestOp{putOp(k1, append(a.GetValue(), 'x')), putOp(k2, append(b.GetValue(), 'x'))},
	}, time.Now().Add(recoveryBound))
	if !resp.GetSucceeded() {
		t.Errorf("a Txn comparing %s@%d and %s@%d ran its failure branch", k1, v1, k2, v2)
	}
}

func mustPut(t *testing.T, kvs []kvrpc.KVClient, key, value string) {
	t.Helper()
	txnUntil(t, kvs, &kvpb.TxnRequest{Success: []*kvpb.RequestOp{putOp(key, []byte(value))}}, time.Now().Add(recoveryBound))
}

func mustGet(t *testing.T, kvs []kvrpc.KVClient, key string) *kvpb.KeyValue {
	t.Helper()
	var last error
	for deadline := time.Now().Add(recoveryBound); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := kvs[0].Get(ctx, &kvpb.GetRequest{Key: []byte(key)})
		cancel()
		if err == nil {
			return resp.GetKv()
		}
		last = err
	}
	t.Fatalf("get %s: %v", key, last)
	return nil
}
