package node

import (
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
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

func TestIntentAges(t *testing.T) {
	in := func(id string) *partition.Intent {
		return &partition.Intent{Op: &internalpb.TxnPrepareOp{TxnId: []byte(id)}}
	}
	ids := func(ins []*partition.Intent) string {
		var s []string
		for _, x := range ins {
			s = append(s, string(x.Op.GetTxnId()))
		}
		return strings.Join(s, ",")
	}
	t0 := time.Now()
	var a intentAges
	steps := []struct {
		at    time.Duration
		held  []string
		stale string
	}{
		{0, []string{"a", "b"}, ""},
		{time.Second, []string{"a", "b", "c"}, ""},
		{2 * time.Second, []string{"a", "b", "c"}, "a,b"},  // held for the timeout
		{2500 * time.Millisecond, []string{"c", "a"}, "a"}, // c for 1.5 s only
		{3 * time.Second, []string{"c", "b"}, "c"},         // b went and came back: counted afresh
		{5 * time.Second, []string{"b"}, "b"},
	}
	for i, st := range steps {
		var held []*partition.Intent
		for _, id := range st.held {
			held = append(held, in(id))
		}
		var stale []*partition.Intent
		stale, a = a.stale(held, t0.Add(st.at), 2*time.Second)
		if got := ids(stale); got != st.stale {
			t.Errorf("step %d at %v: stale %q, want %q", i, st.at, got, st.stale)
		}
		if len(a) != len(st.held) {
			t.Errorf("step %d: %d ages kept for %d intents held", i, len(a), len(st.held))
		}
	}
}
