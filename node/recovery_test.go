package node

import (
	"testing"
	"time"
)

func TestHorizonPace(t *testing.T) {
	t0 := time.Now()
	const base = int64(1_000_000)
	for _, tc := range []struct {
		name     string
		observed []int64 // horizons seen, one a second from t0
		want     int64   // the wall clock minus the retention
		at       time.Duration
		bound    int64
	}{
		{"nothing seen: not paced", nil, base + 900_000, 0, base + 900_000},
		{"a zero horizon is none", []int64{0, 0}, base + 900_000, 0, base + 900_000},
		{"a clock behind or right: its own", []int64{base}, base + 4_000, 5 * time.Second, base + 4_000},
		{"a clock 15 min ahead: the real time elapsed", []int64{base}, base + 900_000, 5 * time.Second, base + 5_000},
		{"paced from the first seen, not the later", []int64{0, base, base + 60_000}, base + 900_000, 3 * time.Second, base + 2_000},
	} {
		var h horizonPace
		for i, o := range tc.observed {
			h.observe(o, t0.Add(time.Duration(i)*time.Second))
		}
		if got := h.bound(tc.want, t0.Add(tc.at)); got != tc.bound {
			t.Errorf("%s: bound %d, want %d", tc.name, got, tc.bound)
		}
	}
}
