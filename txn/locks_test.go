package txn

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (0: pick one)")

// testSeed returns the -seed flag or a fresh seed, and logs it so that a
// failing run can be repeated.
func testSeed(t testing.TB) uint64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -seed=%d)", s, s)
	return s
}

// source is where a model test draws its choices from: a seeded PRNG in
// the randomized test, the fuzzer's bytes in the fuzz test.
type source interface {
	IntN(n int) int
}

// byteSource reads choices from fuzz input; once the bytes run out it
// answers 0 and sets eof.
type byteSource struct {
	data []byte
	eof  bool
}

func (b *byteSource) IntN(n int) int {
	if len(b.data) == 0 {
		b.eof = true
		return 0
	}
	c := b.data[0]
	b.data = b.data[1:]
	return int(c) % n
}

// lockModel is the obvious lock table: a list of granted (txn, want)
// pairs and a pairwise conflict rule, checked in O(n²).
type lockModel struct {
	granted []grantedWant
}

type grantedWant struct {
	txn string
	w   Want
}

// inRange: start <= k < end, an empty end being unbounded.
func inRange(k, start, end []byte) bool {
	return bytes.Compare(start, k) <= 0 && (len(end) == 0 || bytes.Compare(k, end) < 0)
}

// wantsConflict is the compatibility matrix: shared point/range locks
// never conflict with each other; an exclusive point lock conflicts with
// any lock on the same key and any range over it.
func wantsConflict(a, b Want) bool {
	switch {
	case a.End != nil && b.End != nil:
		return false
	case a.End != nil:
		return b.Mode == Exclusive && inRange(b.Start, a.Start, a.End)
	case b.End != nil:
		return a.Mode == Exclusive && inRange(a.Start, b.Start, b.End)
	}
	return bytes.Equal(a.Start, b.Start) && (a.Mode == Exclusive || b.Mode == Exclusive)
}

func (m *lockModel) conflicts(txn string, wants []Want) []string {
	var out []string
	for _, g := range m.granted {
		if g.txn == txn {
			continue
		}
		for _, w := range wants {
			if wantsConflict(g.w, w) && !slices.Contains(out, g.txn) {
				out = append(out, g.txn)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (m *lockModel) acquire(txn string, wants []Want) []string {
	if c := m.conflicts(txn, wants); len(c) > 0 {
		return c
	}
	for _, w := range wants {
		m.granted = append(m.granted, grantedWant{txn, cloneWant(w)})
	}
	return nil
}

func (m *lockModel) release(txn string) {
	m.granted = slices.DeleteFunc(m.granted, func(g grantedWant) bool { return g.txn == txn })
}

func (m *lockModel) holders() []string {
	var out []string
	for _, g := range m.granted {
		if !slices.Contains(out, g.txn) {
			out = append(out, g.txn)
		}
	}
	sort.Strings(out)
	return out
}

func (m *lockModel) heldBy(txn string) []Want {
	var out []Want
	for _, g := range m.granted {
		if g.txn == txn {
			out = append(out, g.w)
		}
	}
	return out
}

func first(ids []string) (string, bool) {
	if len(ids) == 0 {
		return "", false
	}
	slices.Sort(ids)
	return ids[0], true
}

// writeBlocker: the smallest id holding any lock on key or a range over it.
func (m *lockModel) writeBlocker(key []byte) (string, bool) {
	var ids []string
	for _, g := range m.granted {
		if (g.w.End == nil && bytes.Equal(g.w.Start, key)) || (g.w.End != nil && inRange(key, g.w.Start, g.w.End)) {
			ids = append(ids, g.txn)
		}
	}
	return first(ids)
}

// readBlocker: the smallest id holding an exclusive lock on start (end
// nil) or on a key in [start, end).
func (m *lockModel) readBlocker(start, end []byte) (string, bool) {
	var ids []string
	for _, g := range m.granted {
		if g.w.End != nil || g.w.Mode != Exclusive {
			continue
		}
		if (end == nil && bytes.Equal(g.w.Start, start)) || (end != nil && inRange(g.w.Start, start, end)) {
			ids = append(ids, g.txn)
		}
	}
	return first(ids)
}

// dump is the model's state in the canonical form of dumpTable.
func (m *lockModel) dump() string {
	points := map[string]*[2][]string{} // key -> {exclusive holders, shared holders}
	ranges := map[string][]string{}
	for _, g := range m.granted {
		if g.w.End != nil {
			r := fmt.Sprintf("[%q,%q)", g.w.Start, g.w.End)
			if !slices.Contains(ranges[g.txn], r) {
				ranges[g.txn] = append(ranges[g.txn], r)
			}
			continue
		}
		p := points[string(g.w.Start)]
		if p == nil {
			p = &[2][]string{}
			points[string(g.w.Start)] = p
		}
		i := 1
		if g.w.Mode == Exclusive {
			i = 0
		}
		if !slices.Contains(p[i], g.txn) {
			p[i] = append(p[i], g.txn)
		}
	}
	var b strings.Builder
	for _, k := range sortedKeys(points) {
		p := points[k]
		sort.Strings(p[1])
		fmt.Fprintf(&b, "point %q excl=%v shared=%v\n", k, p[0], p[1])
	}
	for _, h := range sortedKeys(ranges) {
		sort.Strings(ranges[h])
		fmt.Fprintf(&b, "ranges %s %v\n", h, ranges[h])
	}
	return b.String()
}

// dumpTable is the table's internal state in a canonical form: point
// locks by key (so a leaked empty entry shows), ranges by holder, deduped.
func dumpTable(t *LockTable) string {
	var b strings.Builder
	for _, k := range sortedKeys(t.points) {
		pl := t.points[k]
		var excl []string
		if pl.excl != "" {
			excl = []string{pl.excl}
		}
		fmt.Fprintf(&b, "point %q excl=%v shared=%v\n", k, excl, sortedKeys(pl.shared))
	}
	for _, h := range sortedKeys(t.ranges) {
		var rs []string
		for _, w := range t.ranges[h] {
			r := fmt.Sprintf("[%q,%q)", w.Start, w.End)
			if !slices.Contains(rs, r) {
				rs = append(rs, r)
			}
		}
		sort.Strings(rs)
		fmt.Fprintf(&b, "ranges %s %v\n", h, rs)
	}
	return b.String()
}

// fullDump includes the per-holder lists, to tell that a call changed
// nothing at all.
func fullDump(t *LockTable) string {
	var b strings.Builder
	b.WriteString(dumpTable(t))
	for _, h := range sortedKeys(t.held) {
		fmt.Fprintf(&b, "held %s %s\n", h, fmtWants(t.held[h]))
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func cloneWant(w Want) Want {
	c := Want{Start: append([]byte{}, w.Start...), Mode: w.Mode}
	if w.End != nil {
		c.End = append([]byte{}, w.End...)
	}
	return c
}

func fmtWant(w Want) string {
	m := "S"
	if w.Mode == Exclusive {
		m = "X"
	}
	if w.End == nil {
		return fmt.Sprintf("%s%q", m, w.Start)
	}
	return fmt.Sprintf("%s[%q,%q)", m, w.Start, w.End)
}

func fmtWants(ws []Want) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = fmtWant(w)
	}
	return "{" + strings.Join(s, " ") + "}"
}

var (
	lockTxns    = []string{"t1", "t2", "t3", "t4"}
	lockKeys    = []string{"a", "ab", "b", "c"}
	rangeStarts = []string{"", "a", "ab", "b", "c"}
	rangeEnds   = []string{"", "a", "ab", "b", "c", "d"} // "": to the end
	probeWants  = func() []Want {
		var ws []Want
		for _, k := range lockKeys {
			ws = append(ws, Want{Start: []byte(k), Mode: Shared}, Want{Start: []byte(k), Mode: Exclusive})
		}
		for _, r := range [][2]string{{"", ""}, {"a", "b"}, {"ab", "c"}, {"b", ""}, {"c", "a"}, {"a", "ab"}, {"aa", "ab"}} {
			ws = append(ws, Want{Start: []byte(r[0]), End: append([]byte{}, r[1]...), Mode: Shared})
		}
		return ws
	}()
)

func pick[T any](src source, xs []T) T { return xs[src.IntN(len(xs))] }

func genWant(src source) Want {
	if src.IntN(3) == 0 {
		// Ranges are always shared: scans only read.
		return Want{Start: []byte(pick(src, rangeStarts)), End: append([]byte{}, pick(src, rangeEnds)...), Mode: Shared}
	}
	m := Shared
	if src.IntN(2) == 0 {
		m = Exclusive
	}
	return Want{Start: []byte(pick(src, lockKeys)), Mode: m}
}

func genWants(src source) []Want {
	ws := make([]Want, src.IntN(4)) // zero wants too
	for i := range ws {
		ws[i] = genWant(src)
	}
	return ws
}

// lockHarness drives a LockTable and the model side by side.
type lockHarness struct {
	tb    testing.TB
	table *LockTable
	model lockModel
	log   []string
}

func newLockHarness(tb testing.TB) *lockHarness {
	return &lockHarness{tb: tb, table: NewLockTable()}
}

func (h *lockHarness) fatalf(format string, args ...any) {
	h.tb.Helper()
	tail := h.log
	if len(tail) > 40 {
		tail = tail[len(tail)-40:]
	}
	h.tb.Fatalf("after steps (last %d of %d):\n  %s\n%s", len(tail), len(h.log), strings.Join(tail, "\n  "), fmt.Sprintf(format, args...))
}

func (h *lockHarness) step(src source) {
	h.tb.Helper()
	txn := pick(src, lockTxns)
	switch op := src.IntN(8); op {
	case 0, 1, 2, 3:
		wants := genWants(src)
		if op == 3 {
			// Re-acquire some of what txn holds, plus maybe more:
			// a transaction never conflicts with itself.
			held := h.model.heldBy(txn)
			wants = nil
			for _, w := range held {
				if src.IntN(2) == 0 {
					wants = append(wants, cloneWant(w))
				}
			}
			if src.IntN(2) == 0 {
				wants = append(wants, genWant(src))
			}
		}
		h.log = append(h.log, fmt.Sprintf("Acquire(%s, %s)", txn, fmtWants(wants)))
		before := fullDump(h.table)
		got := h.table.Acquire(txn, wants)
		want := h.model.acquire(txn, wants)
		if !slices.Equal(got, want) {
			h.fatalf("Acquire(%s, %s) = %v, model %v", txn, fmtWants(wants), got, want)
		}
		if len(got) > 0 {
			if after := fullDump(h.table); after != before {
				h.fatalf("refused Acquire changed the table:\nbefore:\n%safter:\n%s", before, after)
			}
		}
		// The table must own its copies of the keys.
		for _, w := range wants {
			for i := range w.Start {
				w.Start[i] = 'z'
			}
			for i := range w.End {
				w.End[i] = 'z'
			}
		}
	case 4:
		h.log = append(h.log, fmt.Sprintf("Release(%s)", txn))
		h.table.Release(txn)
		h.model.release(txn)
		if slices.Contains(h.table.Holders(), txn) {
			h.fatalf("%s still holds locks after Release", txn)
		}
	case 5:
		wants := genWants(src)
		h.log = append(h.log, fmt.Sprintf("Conflicts(%s, %s)", txn, fmtWants(wants)))
		before := fullDump(h.table)
		got, want := h.table.Conflicts(txn, wants), h.model.conflicts(txn, wants)
		if !slices.Equal(got, want) {
			h.fatalf("Conflicts(%s, %s) = %v, model %v", txn, fmtWants(wants), got, want)
		}
		if after := fullDump(h.table); after != before {
			h.fatalf("Conflicts changed the table:\nbefore:\n%safter:\n%s", before, after)
		}
	case 6:
		key := []byte(pick(src, lockKeys))
		h.log = append(h.log, fmt.Sprintf("WriteBlocker(%q)", key))
		gh, gok := h.table.WriteBlocker(key)
		wh, wok := h.model.writeBlocker(key)
		if gh != wh || gok != wok {
			h.fatalf("WriteBlocker(%q) = %q %v, model %q %v", key, gh, gok, wh, wok)
		}
	case 7:
		start := []byte(pick(src, rangeStarts))
		var end []byte
		if src.IntN(3) > 0 {
			end = append([]byte{}, pick(src, rangeEnds)...)
		}
		h.log = append(h.log, fmt.Sprintf("ReadBlocker(%q, %q nil=%v)", start, end, end == nil))
		gh, gok := h.table.ReadBlocker(start, end)
		wh, wok := h.model.readBlocker(start, end)
		if gh != wh || gok != wok {
			h.fatalf("ReadBlocker(%q, %q) = %q %v, model %q %v", start, end, gh, gok, wh, wok)
		}
	}
	h.check()
}

// check compares the whole observable state with the model.
func (h *lockHarness) check() {
	h.tb.Helper()
	if got, want := dumpTable(h.table), h.model.dump(); got != want {
		h.fatalf("table:\n%smodel:\n%s", got, want)
	}
	holders := h.model.holders()
	if got := h.table.Holders(); !slices.Equal(got, holders) {
		h.fatalf("Holders = %v, model %v", got, holders)
	}
	if h.table.Len() != len(holders) {
		h.fatalf("Len = %d, model %d", h.table.Len(), len(holders))
	}
	for _, txn := range append(lockTxns, "t9") {
		for _, w := range probeWants {
			got, want := h.table.Conflicts(txn, []Want{w}), h.model.conflicts(txn, []Want{w})
			if !slices.Equal(got, want) {
				h.fatalf("Conflicts(%s, %s) = %v, model %v", txn, fmtWant(w), got, want)
			}
			if slices.Contains(got, txn) {
				h.fatalf("%s conflicts with itself on %s", txn, fmtWant(w))
			}
		}
		// What a transaction holds it can always ask for again.
		if c := h.table.Conflicts(txn, h.model.heldBy(txn)); len(c) > 0 {
			h.fatalf("%s conflicts with %v on the locks it holds", txn, c)
		}
	}
	for _, k := range lockKeys {
		gh, gok := h.table.WriteBlocker([]byte(k))
		wh, wok := h.model.writeBlocker([]byte(k))
		if gh != wh || gok != wok {
			h.fatalf("WriteBlocker(%q) = %q %v, model %q %v", k, gh, gok, wh, wok)
		}
		gh, gok = h.table.ReadBlocker([]byte(k), nil)
		wh, wok = h.model.readBlocker([]byte(k), nil)
		if gh != wh || gok != wok {
			h.fatalf("ReadBlocker(%q, nil) = %q %v, model %q %v", k, gh, gok, wh, wok)
		}
	}
	for _, w := range probeWants {
		if w.End == nil {
			continue
		}
		gh, gok := h.table.ReadBlocker(w.Start, w.End)
		wh, wok := h.model.readBlocker(w.Start, w.End)
		if gh != wh || gok != wok {
			h.fatalf("ReadBlocker(%q, %q) = %q %v, model %q %v", w.Start, w.End, gh, gok, wh, wok)
		}
	}
}

// releaseAll releases every transaction and checks nothing is left.
func (h *lockHarness) releaseAll() {
	h.tb.Helper()
	for _, txn := range lockTxns {
		h.table.Release(txn)
		h.model.release(txn)
	}
	h.log = append(h.log, "Release(all)")
	h.check()
	if h.table.Len() != 0 || len(h.table.points) != 0 || len(h.table.ranges) != 0 || len(h.table.held) != 0 {
		h.fatalf("table not empty after releasing everyone:\n%s", fullDump(h.table))
	}
}

// TestLockTableModel drives random sequences of calls on a LockTable and
// on lockModel and compares every answer and the state after each call.
func TestLockTableModel(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	for round := 0; round < 20; round++ {
		h := newLockHarness(t)
		for i := 0; i < 300; i++ {
			h.step(r)
		}
		h.releaseAll()
	}
}

// FuzzLockTable is TestLockTableModel with the choices taken from the
// fuzzer's bytes.
func FuzzLockTable(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 1, 0, 0, 1, 1, 0, 1, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1024 {
			return
		}
		src := &byteSource{data: data}
		h := newLockHarness(t)
		for !src.eof {
			h.step(src)
		}
		h.releaseAll()
	})
}

// TestLockTableScenarios spells out a few cases of the compatibility
// matrix by hand, independently of the model.
func TestLockTableScenarios(t *testing.T) {
	pt := func(k string, m Mode) Want { return Want{Start: []byte(k), Mode: m} }
	rg := func(s, e string) Want { return Want{Start: []byte(s), End: append([]byte{}, e...), Mode: Shared} }
	lt := NewLockTable()
	steps := []struct {
		txn   string
		wants []Want
		want  []string
	}{
		{"A", []Want{pt("k", Exclusive)}, nil},
		{"B", []Want{pt("k", Shared)}, []string{"A"}},
		{"B", []Want{rg("a", "z")}, []string{"A"}},
		{"B", []Want{rg("l", "")}, nil},                  // [l, end) misses k
		{"B", []Want{rg("a", "k")}, nil},                 // end is exclusive
		{"C", []Want{pt("m", Exclusive)}, []string{"B"}}, // B's range [l, end) covers m
		{"C", []Want{pt("m", Shared), rg("", "")}, []string{"A"}},
		{"A", []Want{pt("k", Shared), rg("", "")}, nil}, // never conflicts with itself
		{"C", []Want{pt("x", Exclusive), pt("k", Shared)}, []string{"A", "B"}},
	}
	for i, s := range steps {
		if got := lt.Acquire(s.txn, s.wants); !slices.Equal(got, s.want) {
			t.Fatalf("step %d: Acquire(%s, %s) = %v, want %v", i, s.txn, fmtWants(s.wants), got, s.want)
		}
	}
	// C was refused everything (all or nothing).
	if _, ok := lt.held["C"]; ok {
		t.Fatalf("C holds %s after refused acquires", fmtWants(lt.held["C"]))
	}
	if h, ok := lt.WriteBlocker([]byte("m")); !ok || h != "A" {
		t.Fatalf("WriteBlocker(m) = %q %v, want A (range [\"\", end))", h, ok)
	}
	if h, ok := lt.ReadBlocker([]byte("k"), nil); !ok || h != "A" {
		t.Fatalf("ReadBlocker(k) = %q %v, want A", h, ok)
	}
	if h, ok := lt.ReadBlocker([]byte("l"), []byte{}); ok {
		t.Fatalf("ReadBlocker([l, end)) = %q, want none (only shared locks there)", h)
	}
	lt.Release("A")
	if h, ok := lt.WriteBlocker([]byte("k")); ok {
		t.Fatalf("WriteBlocker(k) = %q after A released", h)
	}
	if got := lt.Acquire("C", []Want{pt("k", Exclusive)}); len(got) != 0 {
		t.Fatalf("C after A released: %v", got)
	}
	if got := lt.Acquire("C", []Want{pt("m", Exclusive)}); !slices.Equal(got, []string{"B"}) {
		t.Fatalf("C on m under B's range: %v", got)
	}
	if got := lt.Holders(); !slices.Equal(got, []string{"B", "C"}) {
		t.Fatalf("Holders = %v", got)
	}
}
