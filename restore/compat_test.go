package restore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestRestoreSnapshotOfOldVersion restores a snapshot taken by the
// version that kept partitions in memory (commit 94e5dae: format 1
// manifest, materialization files as bases; testdata/store-94e5dae, made
// with its kvnode and kvctl: a 1-node, 2-partition cluster, key-1 …
// key-20 written, kvctl checkpoint, key-21 … key-30 written, key-5
// overwritten with "changed", key-7 deleted, kvctl snapshot create).
func TestRestoreSnapshotOfOldVersion(t *testing.T) {
	src, err := filepath.Abs("testdata/store-94e5dae")
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(store, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "n1")
	res, err := Run(context.Background(), Options{StoreURL: "file://" + store, Snapshot: "cut-00000000000000000001", DataDir: dataDir, NodeID: "n1", InitialCluster: members(1)})
	if err != nil {
		t.Fatal(err)
	}
	if res.CutVersion != 1 || len(res.Groups) != 3 {
		t.Fatalf("result %+v", res)
	}
	got := load(t, dataDir)
	have := map[string]string{}
	for g := uint64(1); g <= 2; g++ {
		if got.files[g].Dir {
			t.Fatalf("partition %d restored as a checkpoint directory from a file base", g)
		}
		for k, v := range kvs(got.parts[g]) {
			have[k] = v
		}
	}
	want := map[string]string{}
	for i := 1; i <= 30; i++ {
		want[fmt.Sprintf("key-%d", i)] = fmt.Sprintf("value-%d", i)
	}
	want["key-5"] = "changed"
	delete(want, "key-7")
	if len(have) != len(want) {
		t.Fatalf("restored %d keys, want %d: %v", len(have), len(want), have)
	}
	for k, v := range want {
		if have[k] != v {
			t.Errorf("%s = %q, want %q", k, have[k], v)
		}
	}
}
