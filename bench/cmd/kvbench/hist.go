package main

import (
	"math"
	"math/bits"
)

// The latency histogram is log-linear, as HDR histograms are: values below
// histSub (256) have a bucket each; above, every power-of-two range
// [2ᵏ, 2ᵏ⁺¹) is cut into histSub/2 equal buckets. A bucket's width is thus
// at most 1/histSub of the smallest value it holds, so a percentile
// reported as its bucket's upper bound is never below the true value and
// exceeds it by less than 1/256 (0.39 %) of it. Memory is fixed:
// histBuckets counters, whatever the number of values.
const (
	histSubBits = 8
	histSub     = 1 << histSubBits
	// histMaxBits bounds the values tracked exactly: up to 2⁴⁰-1 ns (about
	// 18 minutes). Larger values are counted in the last bucket; max stays
	// exact.
	histMaxBits = 40
	histMax     = 1<<histMaxBits - 1
	histBuckets = (histMaxBits - histSubBits + 1) * histSub
)

// histogram records non-negative values (nanoseconds). The zero value is
// not usable: use newHistogram. Not safe for concurrent use: each worker
// keeps its own and they are merged at the end.
type histogram struct {
	counts   []uint64
	n        uint64
	min, max int64
	sum      float64
}

func newHistogram() *histogram {
	return &histogram{counts: make([]uint64, histBuckets), min: math.MaxInt64}
}

// bucketOf returns the index of v's bucket; 0 ≤ v ≤ histMax.
func bucketOf(v int64) int {
	if v < histSub {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - histSubBits - 1
	return shift*histSub + int(v>>shift)
}

// bucketBounds returns the smallest and largest value of bucket i
// (inclusive).
func bucketBounds(i int) (lo, hi int64) {
	if i < 2*histSub {
		return int64(i), int64(i)
	}
	shift := i/histSub - 1
	m := int64(i - shift*histSub)
	return m << shift, (m+1)<<shift - 1
}

// record adds one value; negative values count as 0.
func (h *histogram) record(v int64) {
	v = max(v, 0)
	h.n++
	h.sum += float64(v)
	h.min = min(h.min, v)
	h.max = max(h.max, v)
	h.counts[bucketOf(min(v, histMax))]++
}

// merge adds o's values to h.
func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// count returns the number of values recorded.
func (h *histogram) count() uint64 { return h.n }

// quantile returns the value at quantile q (0 ≤ q ≤ 1): the upper bound of
// the bucket holding the ⌈q·n⌉-th smallest value, clamped to the exact
// minimum and maximum. See the error bound above. 0 when empty.
func (h *histogram) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	if rank >= h.n {
		return h.max
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, hi := bucketBounds(i)
			return min(max(hi, h.min), h.max)
		}
	}
	return h.max
}

// mean returns the exact mean, 0 when empty.
func (h *histogram) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// minimum returns the smallest value, 0 when empty.
func (h *histogram) minimum() int64 {
	if h.n == 0 {
		return 0
	}
	return h.min
}
