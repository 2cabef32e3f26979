//go:build failpoints

package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// TestProbesAfterWALFailure: a WAL fsync that fails (walBeforeSync armed
// with "error") leaves the WAL in its sticky failure: /readyz answers
// 503 saying so, and /livez 503 too, since the raft loop stopped with it
// (the process is of no use until restarted).
func TestProbesAfterWALFailure(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: 2, Configure: withHTTP})
	n := c.Node(0)
	put(t, c, 0, "before", "ok")
	clustertest.Eventually(t, 10*time.Second, func() error {
		if code, body := probe(t, nil, "http", n, "/readyz"); code != 200 {
			return fmt.Errorf("/readyz before the failure: %d %q", code, body)
		}
		return nil
	})
	if err := failpoint.Arm(failpoint.WALBeforeSync + "=error"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = failpoint.Arm("") })
	_, _ = c.KV(0).Put(ctxT(t, 2*time.Second), &kvpb.PutRequest{Key: []byte("after"), Value: []byte("fails")}) // makes the WAL sync
	clustertest.Eventually(t, 10*time.Second, func() error {
		if code, body := probe(t, nil, "http", n, "/readyz"); code != 503 || !strings.Contains(body, "WAL failed") || !strings.Contains(body, "injected") {
			return fmt.Errorf("/readyz after a failed WAL sync: %d %q, want 503 saying WAL failed", code, body)
		}
		if code, body := probe(t, nil, "http", n, "/livez"); code != 503 || !strings.Contains(body, "raft loop stopped") {
			return fmt.Errorf("/livez after a failed WAL sync: %d %q, want 503 saying the raft loop stopped", code, body)
		}
		return nil
	})
	select {
	case err := <-n.Fatal():
		t.Logf("the node stopped as it should: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the node did not report the WAL failure as fatal")
	}
}
