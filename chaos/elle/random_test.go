package elle

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

var seedFlag = flag.Uint64("elle.seed", 0, "run the randomized checker tests with this seed only")

// serialHistory runs n random transactions one after another against an
// in-memory model of lists and records them as a history a correct store
// could have produced: each op's [invoke, complete] holds its point in the
// serial order but overlaps its neighbours', processes never overlap
// themselves, and the ops are shuffled. About one op in ten fails (not
// applied) and one in ten is info (applied or not). It returns the final
// state of the model.
func serialHistory(rng *rand.Rand, n, keys int) (*History, map[string][]int) {
	h := &History{}
	model := map[string][]int{}
	lastDone := map[int]int64{} // process → complete of its last op
	procs := 0
	next := 0
	key := func() string { return fmt.Sprintf("k%d", rng.IntN(keys)) }
	for i := range n {
		point := int64(1000 + 100*i)
		invoke := point - rng.Int64N(300)
		complete := point + rng.Int64N(300)
		typ := TypeOK
		switch x := rng.IntN(10); {
		case x == 0:
			typ = TypeFail
		case x == 1:
			typ = TypeInfo
		}
		applied := typ == TypeOK || (typ == TypeInfo && rng.IntN(2) == 0)
		state := map[string][]int{} // the txn's view of the keys it touched
		view := func(k string) []int {
			if l, ok := state[k]; ok {
				return l
			}
			return slices.Clone(model[k])
		}
		var mops []Mop
		for range 1 + rng.IntN(4) {
			k := key()
			if rng.IntN(2) == 0 {
				next++
				state[k] = append(view(k), next)
				mops = append(mops, Append(k, next))
			} else {
				l := view(k)
				state[k] = l
				var res []int
				if typ == TypeOK {
					res = slices.Clone(l)
					if res == nil {
						res = []int{}
					}
				}
				mops = append(mops, Read(k, res))
			}
		}
		if applied {
			for k, l := range state {
				model[k] = l
			}
		}
		// A process free since before invoke, else a new one; after an
		// info op a process is never used again.
		proc := -1
		for p := range procs {
			if done, ok := lastDone[p]; ok && done < invoke && rng.IntN(2) == 0 {
				proc = p
				break
			}
		}
		if proc < 0 {
			proc = procs
			procs++
		}
		if typ == TypeInfo {
			delete(lastDone, proc)
		} else {
			lastDone[proc] = complete
		}
		h.Ops = append(h.Ops, Op{Index: i, Process: proc, Type: typ, Invoke: invoke, Complete: complete, Mops: mops})
	}
	rng.Shuffle(len(h.Ops), func(i, j int) { h.Ops[i], h.Ops[j] = h.Ops[j], h.Ops[i] })
	return h, model
}

// readsOf lists the positions (op, mop) of ok reads of k with at least
// minLen elements.
func readsOf(h *History, k string, minLen int) [][2]int {
	var out [][2]int
	for i, op := range h.Ops {
		if op.Type != TypeOK {
			continue
		}
		for j, m := range op.Mops {
			if m.Kind == MopRead && m.Key == k && len(m.Read) >= minLen {
				out = append(out, [2]int{i, j})
			}
		}
	}
	return out
}

// injection breaks a clean history in one way; false when the history
// offers no place for it.
type injection struct {
	name string
	want Kind
	do   func(rng *rand.Rand, h *History, model map[string][]int) bool
}

func maxIndex(h *History) (idx int, end int64) {
	for _, op := range h.Ops {
		idx, end = max(idx, op.Index), max(end, op.Complete)
	}
	return idx, end
}

func maxElement(h *History) int {
	v := 0
	for _, op := range h.Ops {
		for _, m := range op.Mops {
			if m.Kind == MopAppend {
				v = max(v, m.Value)
			}
		}
	}
	return v
}

var injections = []injection{
	{
		// Swap two elements of a read that another read covers.
		name: "swap", want: KindIncompatibleOrder,
		do: func(rng *rand.Rand, h *History, model map[string][]int) bool {
			for _, k := range slices.Sorted(maps.Keys(model)) {
				rs := readsOf(h, k, 2)
				rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
				for _, r := range rs {
					list := h.Ops[r[0]].Mops[r[1]].Read
					i := rng.IntN(len(list) - 1)
					j := i + 1 + rng.IntN(len(list)-1-i)
					for _, o := range readsOf(h, k, j+1) {
						if o != r {
							list[i], list[j] = list[j], list[i]
							return true
						}
					}
				}
			}
			return false
		},
	},
	{
		// Drop an element, not the last, of a read that another read of
		// at least its length covers.
		name: "drop", want: KindIncompatibleOrder,
		do: func(rng *rand.Rand, h *History, model map[string][]int) bool {
			for _, k := range slices.Sorted(maps.Keys(model)) {
				for _, r := range readsOf(h, k, 2) {
					m := &h.Ops[r[0]].Mops[r[1]]
					for _, o := range readsOf(h, k, len(m.Read)) {
						if o != r {
							i := rng.IntN(len(m.Read) - 1)
							m.Read = slices.Delete(m.Read, i, i+1)
							return true
						}
					}
				}
			}
			return false
		},
	},
	{
		// A failed append, then a read that shows it after everything.
		name: "aborted read", want: KindG1a,
		do: func(rng *rand.Rand, h *History, model map[string][]int) bool {
			idx, end := maxIndex(h)
			k := fmt.Sprintf("k%d", rng.IntN(4))
			v := maxElement(h) + 1
			h.Ops = append(h.Ops,
				Op{Index: idx + 1, Process: 1000, Type: TypeFail, Invoke: end + 10, Complete: end + 20, Mops: []Mop{Append(k, v)}},
				Op{Index: idx + 2, Process: 1001, Type: TypeOK, Invoke: end + 30, Complete: end + 40, Mops: []Mop{Read(k, append(slices.Clone(model[k]), v))}})
			return true
		},
	},
	{
		// Write skew: two concurrent ops read the final state of two
		// keys and each appends to one of them.
		name: "write skew", want: KindG2Item,
		do: func(rng *rand.Rand, h *History, model map[string][]int) bool {
			idx, end := maxIndex(h)
			v := maxElement(h)
			x, y := "k0", "k1"
			rd := func(k string) Mop { return Read(k, append([]int{}, model[k]...)) }
			h.Ops = append(h.Ops,
				Op{Index: idx + 1, Process: 1000, Type: TypeOK, Invoke: end + 10, Complete: end + 30, Mops: []Mop{rd(x), rd(y), Append(x, v+1)}},
				Op{Index: idx + 2, Process: 1001, Type: TypeOK, Invoke: end + 10, Complete: end + 30, Mops: []Mop{rd(x), rd(y), Append(y, v+2)}},
				Op{Index: idx + 3, Process: 1002, Type: TypeOK, Invoke: end + 40, Complete: end + 50, Mops: []Mop{Read(x, append(slices.Clone(model[x]), v+1)), Read(y, append(slices.Clone(model[y]), v+2))}})
			return true
		},
	},
	{
		// Each of two concurrent ops reads the other's append.
		name: "circular information flow", want: KindG1c,
		do: func(rng *rand.Rand, h *History, model map[string][]int) bool {
			idx, end := maxIndex(h)
			v := maxElement(h)
			x, y := "k2", "k3"
			h.Ops = append(h.Ops,
				Op{Index: idx + 1, Process: 1000, Type: TypeOK, Invoke: end + 10, Complete: end + 30, Mops: []Mop{Append(x, v+1), Read(y, append(slices.Clone(model[y]), v+2))}},
				Op{Index: idx + 2, Process: 1001, Type: TypeOK, Invoke: end + 10, Complete: end + 30, Mops: []Mop{Append(y, v+2), Read(x, append(slices.Clone(model[x]), v+1))}})
			return true
		},
	},
}

// TestCheckRandomSerialHistories: random serial executions, shuffled in
// time consistently with their order, pass even under real time; each
// injected anomaly is then found and named.
func TestCheckRandomSerialHistories(t *testing.T) {
	seeds := []uint64{}
	if *seedFlag != 0 {
		seeds = append(seeds, *seedFlag)
	} else {
		for s := uint64(1); s <= 40; s++ {
			seeds = append(seeds, s)
		}
	}
	strict := Options{ProcessOrder: true, RealTime: true}
	injected := map[string]int{}
	for _, seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 0xe11e))
		h, model := serialHistory(rng, 50+rng.IntN(250), 2+rng.IntN(6))
		if r := CheckWith(h, strict); !r.OK {
			t.Fatalf("seed %d (-elle.seed=%d): a serial history fails:\n%v", seed, seed, r)
		}
		for _, inj := range injections {
			bad := h.Clone()
			if !inj.do(rng, bad, model) {
				continue
			}
			injected[inj.name]++
			for _, opts := range []Options{{}, strict} {
				r := CheckWith(bad, opts)
				if r.OK || r.AnomalyCounts[inj.want] == 0 {
					t.Errorf("seed %d (-elle.seed=%d), %s, options %+v: want %s, got %v", seed, seed, inj.name, opts, inj.want, r)
				}
			}
		}
	}
	for _, inj := range injections {
		if injected[inj.name] < len(seeds)/2 {
			t.Errorf("%s injected in only %d of %d histories", inj.name, injected[inj.name], len(seeds))
		}
	}
	t.Logf("injections over %d seeds: %v", len(seeds), injected)
}
