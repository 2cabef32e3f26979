package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/datadir"
	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/server"
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

// TestUpgradeFromMemoryState: a data dir written with the state in memory
// (its materializations are image files, its WAL truncated behind them)
// starts with the state on Pebble: each partition loads its newest file
// into Pebble, serves everything written before, and materializes as
// checkpoint directories from then on.
func TestUpgradeFromMemoryState(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: 2, Configure: func(i int, cfg *server.Config) {
		smallCheckpoints(i, cfg)
		cfg.Storage = server.StorageMemory
	}})
	want := writeMany(t, c, "a", 200)
	checkpointAll(t, c, 0)
	for k, v := range writeMany(t, c, "b", 50) {
		want[k] = v
	}
	c.Stop(0)
	dir := filepath.Join(c.Config(0).DataDir, datadir.MaterializeDir)
	before, err := checkpoint.List(dir)
	if err != nil || len(before[1]) == 0 || before[1][0].Dir {
		t.Fatalf("the in-memory node's materializations: %v %v", before, err)
	}
	c.Reconfigure(0, func(cfg *server.Config) { cfg.Storage = server.StoragePebble })
	c.Restart(0)
	readAll(t, c, 0, want)
	checkpointAll(t, c, 0)
	after, err := checkpoint.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for g := uint64(1); g <= 2; g++ {
		ms := after[g]
		if len(ms) == 0 || !ms[len(ms)-1].Dir {
			t.Fatalf("partition %d after the upgrade: materializations %v, want a checkpoint directory newest", g, ms)
		}
	}
	c.Stop(0)
	c.Restart(0)
	readAll(t, c, 0, want)
}

// TestManyPartitionsFitDescriptors: a node with 16 partitions on Pebble
// keeps its storage's open files within the descriptor budget its
// --max-connections check reserves: a few per group (the WAL, Pebble's
// LOCK, MANIFEST and directory) plus the shared file cache's SSTs.
func TestManyPartitionsFitDescriptors(t *testing.T) {
	const parts = 16
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: parts, Configure: smallCheckpoints})
	writeMany(t, c, "a", 400)
	checkpointAll(t, c, 0)
	writeMany(t, c, "b", 400)
	checkpointAll(t, c, 0)
	dataDir := c.Config(0).DataDir
	dirs, err := os.ReadDir(filepath.Join(dataDir, datadir.StateDir))
	if err != nil || len(dirs) != parts {
		t.Fatalf("state dirs: %v, %v; want %d", dirs, err, parts)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skip(err)
	}
	budget := 4*(parts+1) + int(min(max(rl.Cur/4, 64), 1000))
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	open := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, dataDir) {
			open++
		}
	}
	if open == 0 || open > budget {
		t.Fatalf("%d files of the data dir open, budget %d", open, budget)
	}
	t.Logf("%d partitions: %d files of the data dir open (budget %d)", parts, open, budget)
}
