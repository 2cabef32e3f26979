package raftstore

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/cutkv/cutkv/wal"
)

// BenchmarkProposeParallel proposes from many goroutines to the leaders of
// 4 groups replicated on 3 stores in this process (in-memory transport),
// with 32 proposers per CPU, and reports proposals per second: with real
// fsyncs and with the WALs' fsync off (what the store itself costs).
func BenchmarkProposeParallel(b *testing.B) {
	for _, sync := range []bool{true, false} {
		name := "fsync"
		if !sync {
			name = "nosync"
		}
		b.Run(name, func(b *testing.B) {
			c := newTestCluster(b, clusterOptions{walOptions: func(uint64) wal.Options {
				return wal.Options{Logger: quietLogger, NoSync: !sync}
			}})
			benchmarkPropose(b, c)
		})
	}
}

func benchmarkPropose(b *testing.B, c *testCluster) {
	for _, g := range c.groups {
		c.put(g, "warm", "up")
	}
	var next atomic.Uint64
	value := make([]byte, 100)
	b.SetParallelism(32) // many proposers per CPU, so rounds batch them
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := next.Add(1)
			g := c.groups[int(i)%len(c.groups)]
			for {
				s := c.store(c.leaderOf(g))
				if s == nil {
					runtime.Gosched() // an election is under way
					continue
				}
				cmd := putCmd(fmt.Sprintf("key-%d", i), "")
				cmd.GetPut().Value = value
				if _, err := s.Propose(ctx, g, cmd); err == nil {
					break
				} else if !retryable(err) {
					b.Error(err)
					return
				}
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proposals/s")
}
