//go:build failpoints

package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// TestTxnRecoveryForgetsRecord: a coordinator held after every vote
// (txnAfterPrepare) leaves a committed transaction whose record is
// STAGING; the participants' recovery commits it, finishes every
// participant and then drops the record, as a coordinator does after its
// Finishes. Before, records that recovery decided were kept for the
// node's lifetime (memory only). Checked while the coordinator is still
// held, so that only recovery can have dropped it.
func TestTxnRecoveryForgetsRecord(t *testing.T) {
	const parts = 4
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: parts})
	a, b, _ := keysIn("recforget", parts)
	clustertest.Eventually(t, 10*time.Second, func() error { // leaders and routes
		_, err := c.KV(0).Put(ctxT(t, 2*time.Second), &kvpb.PutRequest{Key: []byte(a), Value: []byte("0")})
		return err
	})
	done := holdTxn(t, c, 0, a, b)
	// The hold fires when the coordinator has its vote (applied on the
	// record partition's leader); its followers apply the entry soon after.
	clustertest.Eventually(t, 10*time.Second, func() error {
		if r := txnRecords(c); r != 3 {
			return fmt.Errorf("%d transaction records with one transaction prepared, want 3 (the STAGING one in each replica)", r)
		}
		return nil
	})
	clustertest.Eventually(t, 20*time.Second, func() error {
		for _, k := range []string{a, b} {
			g, err := c.KV(1).Get(ctxT(t, 2*time.Second), &kvpb.GetRequest{Key: []byte(k)})
			if err != nil {
				return err
			}
			if v := string(g.GetKv().GetValue()); v != "held" {
				return fmt.Errorf("%s = %q: recovery has not committed the held transaction", k, v)
			}
		}
		if r := txnRecords(c); r != 0 {
			return fmt.Errorf("%d transaction records after recovery finished every participant", r)
		}
		return nil
	})
	if err := failpoint.Arm(""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Logf("the released coordinator's answer: %v", err)
	}
}
