package elle

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// builder makes hand-written histories. By default each op gets its own
// process and the time slot [10i, 10i+5]: serial, in the order added.
type builder struct{ h History }

func (b *builder) op(typ OpType, mops ...Mop) int {
	i := len(b.h.Ops)
	return b.opAt(i, typ, int64(10*i), int64(10*i+5), mops...)
}

func (b *builder) opAt(proc int, typ OpType, invoke, complete int64, mops ...Mop) int {
	i := len(b.h.Ops)
	if typ != TypeOK {
		for j := range mops {
			if mops[j].Kind == MopRead {
				mops[j].Read = nil
			}
		}
	}
	b.h.Ops = append(b.h.Ops, Op{Index: i, Process: proc, Type: typ, Invoke: invoke, Complete: complete, Mops: mops})
	return i
}

func ap(k string, v int) Mop { return Append(k, v) }

// rd is a read that returned vs (the empty list when none).
func rd(k string, vs ...int) Mop { return Read(k, append([]int{}, vs...)) }

// kinds lists the distinct kinds of r's anomalies.
func kinds(r Result) []Kind {
	var out []Kind
	for k := range r.AnomalyCounts {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestCheckFindsEachAnomaly(t *testing.T) {
	realtime := Options{ProcessOrder: true, RealTime: true}
	tests := []struct {
		name  string
		build func(b *builder)
		opts  Options // zero: DefaultOptions
		want  Kind
		txns  []int // if set, the anomaly's Txns (any order)
	}{
		{
			name: "G0 write cycle",
			build: func(b *builder) {
				b.opAt(1, TypeOK, 0, 10, ap("x", 1), ap("y", 1))
				b.opAt(2, TypeOK, 0, 10, ap("x", 2), ap("y", 2))
				b.opAt(3, TypeOK, 20, 30, rd("x", 1, 2), rd("y", 2, 1))
			},
			want: KindG0, txns: []int{0, 1},
		},
		{
			name: "G1c circular information flow",
			build: func(b *builder) {
				b.opAt(1, TypeOK, 0, 10, ap("x", 1), rd("y", 2))
				b.opAt(2, TypeOK, 0, 10, ap("y", 2), rd("x", 1))
			},
			want: KindG1c, txns: []int{0, 1},
		},
		{
			name: "G2-item write skew",
			build: func(b *builder) {
				b.opAt(1, TypeOK, 0, 10, rd("x"), rd("y"), ap("x", 1))
				b.opAt(2, TypeOK, 0, 10, rd("x"), rd("y"), ap("y", 1))
				b.opAt(3, TypeOK, 20, 30, rd("x", 1), rd("y", 1))
			},
			want: KindG2Item, txns: []int{0, 1},
		},
		{
			name: "G2-item write skew nobody read afterwards",
			build: func(b *builder) {
				b.opAt(1, TypeOK, 0, 10, rd("x"), rd("y"), ap("x", 1))
				b.opAt(2, TypeOK, 0, 10, rd("x"), rd("y"), ap("y", 1))
			},
			want: KindG2Item, txns: []int{0, 1},
		},
		{
			name: "G2-item lost update",
			build: func(b *builder) {
				b.opAt(1, TypeOK, 0, 10, rd("x"), ap("x", 1))
				b.opAt(2, TypeOK, 0, 10, rd("x"), ap("x", 2))
				b.opAt(3, TypeOK, 20, 30, rd("x", 1, 2))
			},
			want: KindG2Item, txns: []int{0, 1},
		},
		{
			name: "G1a aborted read",
			build: func(b *builder) {
				b.op(TypeFail, ap("x", 1))
				b.op(TypeOK, rd("x", 1))
			},
			want: KindG1a, txns: []int{0, 1},
		},
		{
			name: "G1b intermediate read",
			build: func(b *builder) {
				b.opAt(1, TypeOK, 0, 10, ap("x", 1), ap("x", 2))
				b.opAt(2, TypeOK, 0, 10, rd("x", 1))
				b.opAt(3, TypeOK, 20, 30, rd("x", 1, 2))
			},
			want: KindG1b, txns: []int{0, 1},
		},
		{
			name: "garbage read",
			build: func(b *builder) {
				b.op(TypeOK, ap("x", 1))
				b.op(TypeOK, rd("x", 1, 99))
			},
			want: KindGarbageRead, txns: []int{1},
		},
		{
			name: "duplicate elements",
			build: func(b *builder) {
				b.op(TypeOK, ap("x", 1))
				b.op(TypeOK, rd("x", 1, 1))
			},
			want: KindDuplicateElements, txns: []int{1},
		},
		{
			name: "internal: read misses own append",
			build: func(b *builder) {
				b.op(TypeOK, ap("x", 1), rd("x"))
			},
			want: KindInternal, txns: []int{0},
		},
		{
			name: "internal: second read differs from first plus appends",
			build: func(b *builder) {
				b.op(TypeOK, ap("x", 5))
				b.op(TypeOK, rd("x", 5), ap("x", 6), rd("x", 5))
			},
			want: KindInternal, txns: []int{1},
		},
		{
			name: "internal: read shows own later append",
			build: func(b *builder) {
				b.op(TypeOK, rd("x", 3), ap("x", 3))
			},
			want: KindInternal, txns: []int{0},
		},
		{
			name: "incompatible order",
			build: func(b *builder) {
				b.opAt(1, TypeOK, 0, 10, ap("x", 1))
				b.opAt(2, TypeOK, 0, 10, ap("x", 2))
				b.opAt(3, TypeOK, 20, 30, rd("x", 1, 2))
				b.opAt(4, TypeOK, 20, 30, rd("x", 2, 1))
			},
			want: KindIncompatibleOrder,
		},
		{
			name: "lost append",
			build: func(b *builder) {
				b.op(TypeOK, ap("x", 1))
				b.op(TypeOK, rd("x"))
			},
			want: KindLostAppend, txns: []int{0, 1},
		},
		{
			name: "G2-item-realtime stale read",
			build: func(b *builder) {
				b.op(TypeOK, ap("x", 1))
				b.op(TypeOK, rd("x", 1))
				b.op(TypeOK, rd("x"))
			},
			opts: realtime, want: KindG2ItemRealtime, txns: []int{0, 1, 2},
		},
		{
			name: "G1c-realtime future read",
			build: func(b *builder) {
				b.opAt(1, TypeOK, 0, 5, rd("x", 1))
				b.opAt(2, TypeOK, 10, 15, ap("x", 1))
			},
			opts: Options{RealTime: true}, want: KindG1cRealtime, txns: []int{0, 1},
		},
		{
			name: "G1c-process read of the process's next write",
			build: func(b *builder) {
				b.opAt(1, TypeOK, 0, 5, rd("x", 1))
				b.opAt(1, TypeOK, 10, 15, ap("x", 1))
			},
			want: KindG1cProcess, txns: []int{0, 1},
		},
		{
			name: "G0 through an info op whose appends were seen",
			build: func(b *builder) {
				b.opAt(1, TypeInfo, 0, 10, ap("x", 1), ap("y", 1))
				b.opAt(2, TypeOK, 0, 10, ap("x", 2), ap("y", 2))
				b.opAt(3, TypeOK, 20, 30, rd("x", 1, 2), rd("y", 2, 1))
			},
			want: KindG0, txns: []int{0, 1},
		},
		{
			name: "invalid: element appended twice",
			build: func(b *builder) {
				b.op(TypeOK, ap("x", 1))
				b.op(TypeFail, ap("x", 1))
			},
			want: KindInvalidHistory,
		},
		{
			name: "invalid: committed read without result",
			build: func(b *builder) {
				b.op(TypeOK, Read("x", nil))
			},
			want: KindInvalidHistory,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b builder
			tc.build(&b)
			opts := tc.opts
			if opts == (Options{}) {
				opts = DefaultOptions()
			}
			r := CheckWith(&b.h, opts)
			if r.OK {
				t.Fatalf("want %s, the history passed:\n%v", tc.want, r)
			}
			if got := kinds(r); !slices.Equal(got, []Kind{tc.want}) {
				t.Fatalf("kinds %v, want only %s:\n%v", got, tc.want, r)
			}
			a := r.Anomalies[0]
			if tc.txns != nil {
				got := slices.Sorted(slices.Values(a.Txns))
				if !slices.Equal(got, tc.txns) {
					t.Errorf("txns %v, want %v: %v", got, tc.txns, a)
				}
			}
			if a.Detail == "" || !strings.HasPrefix(a.String(), string(tc.want)) {
				t.Errorf("poor report: %q", a.String())
			}
			if (a.Cycle != nil) != isCycleKind(tc.want) {
				t.Errorf("cycle %v for kind %s", a.Cycle, tc.want)
			}
			for i, e := range a.Cycle {
				if e.From != a.Txns[i] || e.To != a.Txns[(i+1)%len(a.Txns)] {
					t.Errorf("edge %d %v does not join T%d to the next txn of %v", i, e, a.Txns[i], a.Txns)
				}
			}
			t.Log(a)
		})
	}
}

func isCycleKind(k Kind) bool {
	return strings.HasPrefix(string(k), "G0") || strings.HasPrefix(string(k), "G1c") || strings.HasPrefix(string(k), "G2")
}

// The anomalies that need process order or real time pass when the
// checker does not assume them.
func TestCheckWeakerOptionsAccept(t *testing.T) {
	var stale builder
	stale.op(TypeOK, ap("x", 1))
	stale.op(TypeOK, rd("x", 1))
	stale.op(TypeOK, rd("x"))
	var process builder
	process.opAt(1, TypeOK, 0, 5, rd("x", 1))
	process.opAt(1, TypeOK, 10, 15, ap("x", 1))
	for name, h := range map[string]*History{"stale read": &stale.h, "process": &process.h} {
		if r := CheckWith(h, Options{}); !r.OK {
			t.Errorf("%s: serializable, but: %v", name, r)
		}
	}
	// The stale read is serializable, but a process's stale read of its
	// own write is not session-consistent.
	var own builder
	own.opAt(1, TypeOK, 0, 5, ap("x", 1))
	own.opAt(1, TypeOK, 10, 15, rd("x"))
	own.opAt(2, TypeOK, 20, 25, rd("x", 1))
	r := Check(&own.h)
	if got := kinds(r); !slices.Equal(got, []Kind{KindG2ItemProcess}) {
		t.Errorf("kinds %v, want [%s]: %v", got, KindG2ItemProcess, r)
	}
}

func TestCheckAcceptsCleanHistories(t *testing.T) {
	all := Options{ProcessOrder: true, RealTime: true}
	t.Run("serial", func(t *testing.T) {
		var b builder
		b.opAt(1, TypeOK, 0, 5, rd("x"), ap("x", 1), rd("x", 1), ap("y", 2))
		b.opAt(1, TypeOK, 10, 15, rd("x", 1), rd("y", 2), ap("x", 3), ap("x", 4), rd("x", 1, 3, 4))
		b.opAt(2, TypeOK, 20, 25, ap("y", 5), rd("y", 2, 5))
		b.opAt(2, TypeFail, 30, 35, ap("x", 6), rd("x"))
		b.opAt(3, TypeInfo, 40, 45, ap("x", 7))          // applied: seen below
		b.opAt(4, TypeInfo, 50, 55, ap("y", 8), rd("y")) // not applied
		b.opAt(5, TypeOK, 60, 65, rd("x", 1, 3, 4, 7), rd("y", 2, 5), rd("z"))
		b.opAt(5, TypeOK, 70, 75, ap("z", 9))
		r := CheckWith(&b.h, all)
		if !r.OK {
			t.Fatal(r)
		}
		if r.Committed != 5 || r.InfoOps != 2 || r.FailOps != 1 || r.Keys != 3 || r.ReadsChecked != 9 || r.Appends != 6 || r.Edges == 0 {
			t.Errorf("counts: %v", r)
		}
		t.Log(r)
	})
	t.Run("concurrent without conflicts", func(t *testing.T) {
		var b builder
		// Four processes, each on its own key, all overlapping in time.
		for p := range 4 {
			k := string(rune('a' + p))
			var list []int
			for i := range 5 {
				v := 100*p + i + 1
				inv := int64(i*10 + p)
				b.opAt(p, TypeOK, inv, inv+9, rd(k, list...), ap(k, v))
				list = append(list, v)
			}
		}
		// And readers of everything, overlapping the writers.
		b.opAt(9, TypeOK, 15, 60, rd("a", 1, 2), rd("b", 101))
		r := CheckWith(&b.h, all)
		if !r.OK {
			t.Fatal(r)
		}
	})
	t.Run("empty", func(t *testing.T) {
		if r := Check(&History{}); !r.OK || r.Ops != 0 {
			t.Fatal(r)
		}
		if r := Check(nil); !r.OK {
			t.Fatal(r)
		}
	})
}

// A long history whose anomalies are all the same kind reports at most
// MaxReported of them and counts them all.
func TestCheckCapsReports(t *testing.T) {
	var b builder
	for i := range 50 {
		b.op(TypeOK, rd("x"+strconv.Itoa(i), 1000+i))
	}
	r := CheckWith(&b.h, Options{MaxReported: 5})
	if r.AnomalyCounts[KindGarbageRead] != 50 || len(r.Anomalies) != 5 {
		t.Fatalf("counts %v, %d listed", r.AnomalyCounts, len(r.Anomalies))
	}
}
