package wal

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkAppend appends one 128-byte record per call with real fsyncs,
// from one goroutine ("serial") and from p×GOMAXPROCS goroutines
// ("parallel=p"). records/fsync shows how many records group commit gathers
// into each batch. It asserts nothing about time.
func BenchmarkAppend(b *testing.B) {
	rec := []Record{{Type: RecordEntry, Group: 1, Data: make([]byte, 128)}}
	run := func(b *testing.B, appendAll func(w *WAL)) {
		var mu sync.Mutex
		batches, records := 0, 0
		w, err := Open(b.TempDir(), Options{OnSync: func(n, _ int, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			batches++
			records += n
		}})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		b.SetBytes(int64(encodedLen(rec[0])))
		b.ResetTimer()
		appendAll(w)
		b.StopTimer()
		mu.Lock()
		defer mu.Unlock()
		if batches > 0 {
			b.ReportMetric(float64(records)/float64(batches), "records/fsync")
		}
	}
	b.Run("serial", func(b *testing.B) {
		run(b, func(w *WAL) {
			for b.Loop() {
				if _, _, err := w.Append(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	for _, p := range []int{8, 64} {
		b.Run(fmt.Sprintf("parallel=%d", p), func(b *testing.B) {
			b.SetParallelism(p)
			run(b, func(w *WAL) {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, _, err := w.Append(rec); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}
