package main

import (
	"flag"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var histSeed = flag.Uint64("hist-seed", 0, "seed of TestHistogramQuantiles (0: from the clock)")

// TestHistogramQuantiles checks every reported percentile against the
// exact one from a sorted slice: never below it, and above it by less than
// 1/histSub of it.
func TestHistogramQuantiles(t *testing.T) {
	seed := *histSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -hist-seed %d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dists := map[string]func() int64{
		// Small values: exact buckets.
		"small": func() int64 { return rng.Int64N(300) },
		// Latency-like: log-uniform from 1 µs to 10 s.
		"log-uniform": func() int64 { return int64(math.Exp(rng.Float64()*math.Log(1e7)) * 1e3) },
		// A tight mode with a long tail.
		"exp-tail": func() int64 { return 800_000 + int64(rng.ExpFloat64()*2e6) },
		// Few distinct values, many repeats.
		"repeats": func() int64 { return []int64{5, 1000, 123_456, 9_999_999}[rng.IntN(4)] },
		// The whole tracked range.
		"wide": func() int64 { return rng.Int64N(histMax + 1) },
	}
	qs := []float64{0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1}
	for name, gen := range dists {
		for _, n := range []int{1, 2, 7, 1000, 100_000} {
			h := newHistogram()
			vals := make([]int64, n)
			for i := range vals {
				vals[i] = gen()
				h.record(vals[i])
			}
			slices.Sort(vals)
			for _, q := range qs {
				rank := max(int(math.Ceil(q*float64(n))), 1)
				want := vals[rank-1]
				got := h.quantile(q)
				if got < want || got-want > want/histSub {
					t.Errorf("%s n=%d q=%v: got %d, exact %d (error %d, bound %d)", name, n, q, got, want, got-want, want/histSub)
				}
			}
			if h.minimum() != vals[0] || h.max != vals[n-1] || h.count() != uint64(n) {
				t.Errorf("%s n=%d: min %d max %d count %d, want %d %d %d", name, n, h.minimum(), h.max, h.count(), vals[0], vals[n-1], n)
			}
		}
	}
}

// TestHistogramBuckets checks that buckets tile the range in order and
// that each is narrower than 1/histSub of its lowest value.
func TestHistogramBuckets(t *testing.T) {
	next := int64(0)
	for i := range histBuckets {
		lo, hi := bucketBounds(i)
		if lo != next || hi < lo {
			t.Fatalf("bucket %d is [%d, %d], want it to start at %d", i, lo, hi, next)
		}
		if lo >= histSub && (hi-lo+1)*histSub > lo {
			t.Fatalf("bucket %d [%d, %d] is too wide", i, lo, hi)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d [%d, %d]: bucketOf gives %d and %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		next = hi + 1
	}
	if next != histMax+1 {
		t.Fatalf("buckets end at %d, want %d", next-1, int64(histMax))
	}
}

func TestHistogramMergeAndClamp(t *testing.T) {
	a, b, all := newHistogram(), newHistogram(), newHistogram()
	for i := range int64(10_000) {
		v := i * i
		all.record(v)
		if i%3 == 0 {
			a.record(v)
		} else {
			b.record(v)
		}
	}
	a.merge(b)
	a.merge(newHistogram()) // empty: no change
	for _, q := range []float64{0, 0.5, 0.99, 1} {
		if a.quantile(q) != all.quantile(q) {
			t.Errorf("q=%v: merged %d, direct %d", q, a.quantile(q), all.quantile(q))
		}
	}
	if a.mean() != all.mean() || a.minimum() != all.minimum() || a.max != all.max {
		t.Errorf("merged mean/min/max %v %d %d, direct %v %d %d", a.mean(), a.minimum(), a.max, all.mean(), all.minimum(), all.max)
	}

	h := newHistogram()
	if h.quantile(0.5) != 0 || h.mean() != 0 || h.minimum() != 0 {
		t.Errorf("empty histogram: %d %v %d", h.quantile(0.5), h.mean(), h.minimum())
	}
	h.record(-5)             // counts as 0
	h.record(histMax * 1000) // beyond the range: last bucket, exact max
	if h.minimum() != 0 || h.max != histMax*1000 || h.quantile(1) != histMax*1000 {
		t.Errorf("clamping: min %d max %d q1 %d", h.minimum(), h.max, h.quantile(1))
	}
}
