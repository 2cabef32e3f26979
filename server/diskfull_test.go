package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/cutkv/cutkv/engine"
	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/server"
)

// TestFullDiskStopsNode: a node whose disk fills while no write comes
// fails the Pebble flush of its next materialization, and stops for good
// at once, as on a WAL failure: NOT_SERVING, and a fatal error naming
// the table file and ENOSPC. (It used to go on SERVING, failing every
// read of the stopped partition, until a write reached that partition.)
// Freed, the disk takes the node's restart with every write kept. The
// data dir is a small tmpfs: root only.
func TestFullDiskStopsNode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs as the data dir")
	}
	data := filepath.Join(t.TempDir(), "n1")
	if err := os.MkdirAll(data, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("cutkv-test-disk", data, "tmpfs", 0, "size=64m"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(data, unix.MNT_DETACH) }) // after the cluster's Close
	c := clustertest.Start(t, 1, clustertest.Options{Configure: func(i int, cfg *server.Config) {
		smallCheckpoints(i, cfg)
		cfg.DataDir = data
	}})
	want := writeMany(t, c, "a", 100)

	filler := filepath.Join(data, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	// Materializing flushes every partition's memtable: no room for it.
	_, _ = kvrpc.NewClusterClient(c.Conn(0)).Checkpoint(ctxT(t, 30*time.Second), &kvpb.CheckpointRequest{})
	select {
	case err := <-c.Node(0).Fatal():
		if !errors.Is(err, engine.ErrStopped) || !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("fatal error %v: want a stopped partition state, for ENOSPC", err)
		}
		if !strings.Contains(err.Error(), filepath.Join(data, "state")+"/") || !strings.Contains(err.Error(), ".sst") {
			t.Errorf("fatal error %q does not name the table file in %s", err, data)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no fatal error within 15s of a failed flush on a full disk")
	}
	h, err := healthpb.NewHealthClient(c.Conn(0)).Check(ctxT(t, 5*time.Second), &healthpb.HealthCheckRequest{})
	if err == nil && h.GetStatus() == healthpb.HealthCheckResponse_SERVING {
		t.Error("health SERVING after the fatal error")
	}

	c.Kill(0)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	c.Restart(0)
	readAll(t, c, 0, want)
}
