package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cutkv/cutkv/datadir"
	"github.com/cutkv/cutkv/internal/clustertest"
)

// TestStateInPebble: a node keeps each partition's state in a Pebble under
// <data-dir>/state, exports its metrics, and after a restart serves what
// was written before (opened at its last flush, the WAL replayed from
// there).
func TestStateInPebble(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: 2, Configure: withHTTP})
	want := map[string]string{}
	for i := range 20 {
		k := fmt.Sprintf("k%02d", i)
		put(t, c, 0, k, "v")
		want[k] = "v"
	}
	for g := 1; g <= 2; g++ {
		dir := filepath.Join(c.Config(0).DataDir, datadir.StateDir, fmt.Sprintf("p%04d", g))
		if _, err := os.Stat(filepath.Join(dir, "MANIFEST-000001")); err != nil {
			t.Fatalf("partition %d has no Pebble in %s: %v", g, dir, err)
		}
	}
	clustertest.Eventually(t, 5*time.Second, func() error {
		if v := metric(t, c.Node(0), `cutkv_state_disk_bytes{partition="1"}`); v <= 0 {
			return fmt.Errorf("cutkv_state_disk_bytes of partition 1: %v", v)
		}
		return nil
	})
	c.Stop(0)
	c.Restart(0)
	readAll(t, c, 0, want)
}
