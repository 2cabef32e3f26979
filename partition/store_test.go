package partition

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cutkv/cutkv/engine"
)

// With CUTKV_PARTITION_STORE=pebble every partition the tests make with
// New keeps its state in Pebble (on an in-memory file system) instead of
// the B-tree: the same scripts, models and fuzz seeds check both stores
// (make test runs the package both ways).
func init() {
	if os.Getenv("CUTKV_PARTITION_STORE") != "pebble" {
		return
	}
	env, err := engine.NewEnv(engine.EnvConfig{CacheSize: 64 << 20, FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	var seq atomic.Uint64
	newKVs = func(id uint64) kvStore {
		db, err := engine.Open(env, fmt.Sprintf("/p%d-%d", id, seq.Add(1)), id)
		if err != nil {
			panic(err)
		}
		return &pebbleKVs{db: db}
	}
}

// TestStoreUnderTest: the store the package's tests run on is the one
// asked for.
func TestStoreUnderTest(t *testing.T) {
	_, pebble := New(1).kvs.(*pebbleKVs)
	if want := os.Getenv("CUTKV_PARTITION_STORE") == "pebble"; pebble != want {
		t.Fatalf("New makes a Pebble store: %v, want %v", pebble, want)
	}
}
