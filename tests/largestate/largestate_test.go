// Package largestate checks that a node holds more data than it keeps in
// memory: the partitions' state is on Pebble, bounded in memory by
// --cache-size and the memtables, however much is written.
package largestate

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/server"
)

const valueSize = 16 << 10

// value is key's value: valueSize bytes that do not compress (a chain of
// SHA-256s), so the state on disk is as large as what was written.
func value(key string) []byte {
	out := make([]byte, 0, valueSize)
	sum := sha256.Sum256([]byte(key))
	for len(out) < valueSize {
		out = append(out, sum[:]...)
		sum = sha256.Sum256(sum[:])
	}
	return out[:valueSize]
}

func heapInUse() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestStateLargerThanMemory writes incompressible values to a node whose
// cache is 16 MiB for CUTKV_SOAK (or until CUTKV_LARGE_BYTES), reads a sample back, and checks that
// the Go heap grew by less than a fixed bound (cache, memtables and
// slack), not with the data: the key-values are on disk. In make test
// (10 s) the data is a few times the bound; make e2e writes gigabytes.
func TestStateLargerThanMemory(t *testing.T) {
	soak := clustertest.SoakDuration(t)
	// CUTKV_LARGE_BYTES ends it earlier, once that much is written (make
	// e2e: 10 GiB).
	var limit int64 = 1 << 62
	if v := os.Getenv("CUTKV_LARGE_BYTES"); v != "" {
		l, err := strconv.ParseInt(v, 10, 64)
		if err != nil || l <= 0 {
			t.Fatalf("CUTKV_LARGE_BYTES=%q: want a positive number of bytes", v)
		}
		limit = l
	}
	const parts = 4
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: parts, Configure: func(_ int, cfg *server.Config) {
		cfg.CacheSize = 16 << 20
		// Raft keeps the log since the newest materialization, and
		// CatchUpEntries below it, in memory: bound that too.
		cfg.MaterializeBytes = 8 << 20
		cfg.CatchUpEntries = 500
	}})
	kv := c.KV(0)
	before := heapInUse()
	var n, written atomic.Int64
	var failed atomic.Int64
	deadline := time.Now().Add(soak)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline) && written.Load() < limit; i++ {
				k := fmt.Sprintf("w%02d-%08d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := kv.Put(ctx, &kvpb.PutRequest{Key: []byte(k), Value: value(k)})
				cancel()
				if err != nil {
					failed.Add(1)
					continue
				}
				n.Add(1)
				written.Add(int64(len(k) + valueSize))
			}
		}()
	}
	wg.Wait()
	if n.Load() == 0 {
		t.Fatalf("no write succeeded (%d failed)", failed.Load())
	}
	// A sample of what was written reads back.
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		k := fmt.Sprintf("w%02d-%08d", r.IntN(16), 0)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := kv.Get(ctx, &kvpb.GetRequest{Key: []byte(k)})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if string(resp.GetKv().GetValue()) != string(value(k)) {
			t.Fatalf("%s reads back %d bytes, not what was written", k, len(resp.GetKv().GetValue()))
		}
	}
	after := heapInUse()
	grew := int64(after) - int64(before)
	// The cache (16 MiB), two memtables of 4 MiB per partition, raft's
	// in-memory log per group (the WAL tail up to MaterializeBytes, plus
	// CatchUpEntries of 16 KiB below it: 16 MiB), and slack for the
	// runtime.
	const bound = 16<<20 + parts*2*4<<20 + parts*16<<20 + 96<<20
	t.Logf("%d values written (%d MiB, %d failed) in at most %v; heap %d MiB before, %d MiB after (grew %d MiB, bound %d MiB)",
		n.Load(), written.Load()>>20, failed.Load(), soak, before>>20, after>>20, grew>>20, bound>>20)
	if grew > bound {
		t.Fatalf("the heap grew by %d MiB for %d MiB written: state is held in memory (bound %d MiB)", grew>>20, written.Load()>>20, bound>>20)
	}
}
