package elle

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind names an anomaly (doc.go, "What is detected").
type Kind string

// The anomaly kinds Check reports.
const (
	// Cycles of the dependency graph, by the edges they need.
	KindG0     Kind = "G0"      // ww edges only: write cycle
	KindG1c    Kind = "G1c"     // ww and wr edges, at least one wr: circular information flow
	KindG2Item Kind = "G2-item" // at least one rw edge: anti-dependency cycle
	// The same cycles when they also need process-order edges (session
	// order broken) or real-time edges (strict serializability broken).
	KindG0Process      Kind = "G0-process"
	KindG1cProcess     Kind = "G1c-process"
	KindG2ItemProcess  Kind = "G2-item-process"
	KindG0Realtime     Kind = "G0-realtime"
	KindG1cRealtime    Kind = "G1c-realtime"
	KindG2ItemRealtime Kind = "G2-item-realtime"

	KindG1a               Kind = "G1a"                // aborted read
	KindG1b               Kind = "G1b"                // intermediate read
	KindGarbageRead       Kind = "garbage-read"       // an element nobody appended
	KindDuplicateElements Kind = "duplicate-elements" // one read holds an element twice
	KindIncompatibleOrder Kind = "incompatible-order" // two reads of a key disagree on its order
	KindInternal          Kind = "internal"           // a txn's read contradicts its own earlier ops
	KindLostAppend        Kind = "lost-append"        // an acknowledged append no later read shows
	KindInvalidHistory    Kind = "invalid-history"    // History.Validate refused the history
)

// Anomaly is one violation found in a history.
type Anomaly struct {
	Kind Kind
	// Detail explains it: the reads, elements and edges involved.
	Detail string
	// Txns are the op indices (Op.Index) involved: for a cycle, its
	// transactions in order.
	Txns []int
	// Cycle holds a cycle's edges, Txns[i] → Txns[i+1 mod n]; nil for
	// the other kinds.
	Cycle []Edge
}

// String renders a as "G2-item [T3 T7]: …".
func (a Anomaly) String() string {
	var b strings.Builder
	b.WriteString(string(a.Kind))
	if len(a.Txns) > 0 {
		b.WriteString(" [")
		for i, t := range a.Txns {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString("T" + strconv.Itoa(t))
		}
		b.WriteByte(']')
	}
	b.WriteString(": ")
	b.WriteString(a.Detail)
	return b.String()
}

// Options choose what Check assumes besides serializability.
type Options struct {
	// ProcessOrder adds an edge from each committed op to every later op
	// of the same process (session order): a process must observe its
	// own earlier transactions.
	ProcessOrder bool
	// RealTime adds an edge from each committed op to every op invoked
	// after it completed: strict serializability.
	RealTime bool
	// MaxReported is the most anomalies of one kind kept in
	// Result.Anomalies (0: 20); Result.AnomalyCounts counts them all.
	MaxReported int
}

// DefaultOptions are Check's: serializability with session order.
func DefaultOptions() Options { return Options{ProcessOrder: true} }

// Result is what Check found.
type Result struct {
	// OK: no anomaly at all.
	OK bool
	// Ops counts the history's ops; Committed, InfoOps and FailOps those
	// of type ok, info and fail.
	Ops, Committed, InfoOps, FailOps int
	// Keys counts the distinct keys of every micro-op.
	Keys int
	// Appends counts the append micro-ops of ok ops; ReadsChecked the
	// read micro-ops of ok ops (the reads the checker used).
	Appends, ReadsChecked int
	// Edges counts the distinct (from, to, type) dependencies between
	// transactions; EdgesByType splits them by type.
	Edges       int
	EdgesByType map[EdgeType]int
	// AnomalyCounts counts the anomalies by kind; Anomalies lists them,
	// at most Options.MaxReported of each kind.
	AnomalyCounts map[Kind]int
	Anomalies     []Anomaly
}

// Summary says in one line whether h passed, what it held, and how many
// anomalies of each kind were found.
func (r Result) Summary() string {
	var b strings.Builder
	verdict := "valid"
	if !r.OK {
		verdict = "INVALID"
	}
	fmt.Fprintf(&b, "%s: %d ops (%d ok, %d info, %d fail), %d keys, %d appends, %d reads checked, %d edges",
		verdict, r.Ops, r.Committed, r.InfoOps, r.FailOps, r.Keys, r.Appends, r.ReadsChecked, r.Edges)
	for _, t := range []EdgeType{EdgeWW, EdgeWR, EdgeRW, EdgeProcess, EdgeRealtime} {
		if n := r.EdgesByType[t]; n > 0 {
			fmt.Fprintf(&b, " %s=%d", t, n)
		}
	}
	if len(r.AnomalyCounts) > 0 {
		b.WriteString("; anomalies:")
		for _, k := range slices.Sorted(maps.Keys(r.AnomalyCounts)) {
			fmt.Fprintf(&b, " %s=%d", k, r.AnomalyCounts[k])
		}
	}
	return b.String()
}

// String is Summary, then the anomalies listed, one a line.
func (r Result) String() string {
	var b strings.Builder
	b.WriteString(r.Summary())
	for _, a := range r.Anomalies {
		b.WriteString("\n  ")
		b.WriteString(a.String())
	}
	return b.String()
}

// Check checks h for serializability and session order
// (DefaultOptions). It never fails: a history Validate refuses yields one
// invalid-history anomaly.
func Check(h *History) Result { return CheckWith(h, DefaultOptions()) }

// CheckWith checks h under opts. doc.go describes the analysis.
func CheckWith(h *History, opts Options) Result {
	if opts.MaxReported <= 0 {
		opts.MaxReported = 20
	}
	if h == nil {
		h = &History{}
	}
	c := &checker{
		h:    h,
		opts: opts,
		res:  Result{EdgesByType: map[EdgeType]int{}, AnomalyCounts: map[Kind]int{}},
	}
	c.count()
	if err := h.Validate(); err != nil {
		c.report(Anomaly{Kind: KindInvalidHistory, Detail: err.Error()})
	} else {
		c.indexWrites()
		c.checkInternal()
		c.inferOrders()
		c.checkReads()
		c.buildGraph()
		c.findCycles()
		c.checkLostAppends()
	}
	c.res.OK = len(c.res.AnomalyCounts) == 0
	return c.res
}

// writeRef is who appended an element to a key.
type writeRef struct {
	op    int  // position in h.Ops
	final bool // the op's last append to the key
}

// readRef is one read micro-op of an ok op.
type readRef struct {
	op   int // position in h.Ops
	key  string
	list []int
	// ext is the op's external read of key: its first read of the key
	// with its own earlier appends taken off the end; set (hasExt) only
	// on that first read, and only when it is internally consistent.
	ext          []int
	hasExt       bool
	incompatible bool // not a prefix of the key's inferred order
}

type checker struct {
	h    *History
	opts Options
	res  Result

	writes     map[string]map[int]writeRef
	reads      []readRef
	readsByKey map[string][]int // key → indices into reads
	keys       []string         // sorted keys of every micro-op
	order      map[string][]int // key → inferred version order
	pos        map[string]map[int]int
	badPrefix  map[string][]int // key → bad elements (duplicate, garbage, failed writer) in each prefix of its longest read
	unobserved map[string][]int // key → ok ops whose append to it no read shows

	node   []int // op position → node, -1 when not in the graph
	nodeOp []int // node → op position
	g      *graph
}

func (c *checker) report(a Anomaly) {
	c.res.AnomalyCounts[a.Kind]++
	if c.res.AnomalyCounts[a.Kind] <= c.opts.MaxReported {
		c.res.Anomalies = append(c.res.Anomalies, a)
	}
}

// t names the op at position i.
func (c *checker) t(i int) string { return "T" + strconv.Itoa(c.h.Ops[i].Index) }

func (c *checker) idx(i int) int { return c.h.Ops[i].Index }

func (c *checker) count() {
	keys := map[string]bool{}
	c.res.Ops = len(c.h.Ops)
	for _, op := range c.h.Ops {
		switch op.Type {
		case TypeOK:
			c.res.Committed++
		case TypeInfo:
			c.res.InfoOps++
		case TypeFail:
			c.res.FailOps++
		}
		for _, m := range op.Mops {
			keys[m.Key] = true
			if op.Type == TypeOK {
				switch m.Kind {
				case MopAppend:
					c.res.Appends++
				case MopRead:
					c.res.ReadsChecked++
				}
			}
		}
	}
	c.keys = slices.Sorted(maps.Keys(keys))
	c.res.Keys = len(c.keys)
}

func (c *checker) indexWrites() {
	c.writes = map[string]map[int]writeRef{}
	for i, op := range c.h.Ops {
		last := map[string]int{}
		for _, m := range op.Mops {
			if m.Kind == MopAppend {
				last[m.Key] = m.Value
			}
		}
		for _, m := range op.Mops {
			if m.Kind != MopAppend {
				continue
			}
			if c.writes[m.Key] == nil {
				c.writes[m.Key] = map[int]writeRef{}
			}
			c.writes[m.Key][m.Value] = writeRef{op: i, final: last[m.Key] == m.Value}
		}
	}
}

// checkInternal checks each ok op against itself: a read shows what the
// op's earlier read of the key showed plus its appends since; with no
// earlier read, it ends with the op's appends so far; it holds none of the
// op's later appends. It collects the reads and their external parts.
func (c *checker) checkInternal() {
	c.readsByKey = map[string][]int{}
	type keyState struct {
		known    bool  // an earlier read fixed the state
		state    []int // the list as the op sees it, when known
		suffix   []int // the op's appends so far, when not known
		readSeen bool
	}
	for i, op := range c.h.Ops {
		if op.Type != TypeOK {
			continue
		}
		appendAt := map[string]map[int]int{} // key → element → mop position
		for j, m := range op.Mops {
			if m.Kind == MopAppend {
				if appendAt[m.Key] == nil {
					appendAt[m.Key] = map[int]int{}
				}
				appendAt[m.Key][m.Value] = j
			}
		}
		st := map[string]*keyState{}
		for j, m := range op.Mops {
			s := st[m.Key]
			if s == nil {
				s = &keyState{}
				st[m.Key] = s
			}
			if m.Kind == MopAppend {
				if s.known {
					s.state = append(s.state, m.Value)
				} else {
					s.suffix = append(s.suffix, m.Value)
				}
				continue
			}
			r := readRef{op: i, key: m.Key, list: m.Read}
			consistent := true
			switch {
			case s.known && !slices.Equal(m.Read, s.state):
				consistent = false
				c.report(Anomaly{Kind: KindInternal, Txns: []int{c.idx(i)}, Detail: fmt.Sprintf(
					"%s read %s = %v at micro-op %d, but its earlier read and appends give %v", c.t(i), m.Key, m.Read, j, s.state)})
			case !s.known && !hasSuffix(m.Read, s.suffix):
				consistent = false
				c.report(Anomaly{Kind: KindInternal, Txns: []int{c.idx(i)}, Detail: fmt.Sprintf(
					"%s read %s = %v at micro-op %d, which does not end with its own earlier appends %v", c.t(i), m.Key, m.Read, j, s.suffix)})
			case len(appendAt[m.Key]) > 0:
				for _, e := range m.Read {
					if at, mine := appendAt[m.Key][e]; mine && at > j {
						consistent = false
						c.report(Anomaly{Kind: KindInternal, Txns: []int{c.idx(i)}, Detail: fmt.Sprintf(
							"%s read %s = %v at micro-op %d, which holds %d, its own later append (micro-op %d)", c.t(i), m.Key, m.Read, j, e, at)})
						break
					}
				}
			}
			if !s.readSeen {
				s.readSeen = true
				if consistent {
					r.ext, r.hasExt = m.Read[:len(m.Read)-len(s.suffix)], true
				}
			}
			s.known, s.state, s.suffix = true, m.Read, nil
			if len(appendAt[m.Key]) > 0 {
				s.state = slices.Clone(m.Read) // appends must not write into the read
			}
			c.readsByKey[m.Key] = append(c.readsByKey[m.Key], len(c.reads))
			c.reads = append(c.reads, r)
		}
	}
}

func hasSuffix(list, suffix []int) bool {
	return len(list) >= len(suffix) && slices.Equal(list[len(list)-len(suffix):], suffix)
}

// checkReads looks at each ok read alone: duplicates, elements nobody
// appended (garbage), elements of failed ops (G1a), and an external read
// ending in another op's non-final append to the key (G1b).
func (c *checker) checkReads() {
	for _, r := range c.reads {
		if !r.incompatible && c.badPrefix[r.key][len(r.list)] == 0 {
			// A prefix of the key's order without a bad element.
			c.checkIntermediate(r)
			continue
		}
		seen := map[int]bool{}
		var dups, garbage []int
		aborted := map[int][]int{} // failed writer → its elements seen
		for _, e := range r.list {
			if seen[e] && !slices.Contains(dups, e) {
				dups = append(dups, e)
			}
			seen[e] = true
			w, ok := c.writes[r.key][e]
			switch {
			case !ok:
				garbage = append(garbage, e)
			case c.h.Ops[w.op].Type == TypeFail:
				aborted[w.op] = append(aborted[w.op], e)
			}
		}
		if len(dups) > 0 {
			c.report(Anomaly{Kind: KindDuplicateElements, Txns: []int{c.idx(r.op)}, Detail: fmt.Sprintf(
				"%s read %s = %v, which holds %v more than once", c.t(r.op), r.key, r.list, dups)})
		}
		if len(garbage) > 0 {
			c.report(Anomaly{Kind: KindGarbageRead, Txns: []int{c.idx(r.op)}, Detail: fmt.Sprintf(
				"%s read %s = %v: nobody appended %v to %s", c.t(r.op), r.key, r.list, garbage, r.key)})
		}
		for _, w := range slices.Sorted(maps.Keys(aborted)) {
			c.report(Anomaly{Kind: KindG1a, Txns: []int{c.idx(w), c.idx(r.op)}, Detail: fmt.Sprintf(
				"%s read %s = %v, which holds %v appended by %s, which failed", c.t(r.op), r.key, r.list, aborted[w], c.t(w))})
		}
		c.checkIntermediate(r)
	}
}

// checkIntermediate reports r's external read ending with an element its
// writer appended before more of its own (G1b).
func (c *checker) checkIntermediate(r readRef) {
	if !r.hasExt || len(r.ext) == 0 {
		return
	}
	last := r.ext[len(r.ext)-1]
	if w, ok := c.writes[r.key][last]; ok && w.op != r.op && c.h.Ops[w.op].Type != TypeFail && !w.final {
		c.report(Anomaly{Kind: KindG1b, Txns: []int{c.idx(w.op), c.idx(r.op)}, Detail: fmt.Sprintf(
			"%s read %s = %v, ending with %d, which %s appended before appending more to %s", c.t(r.op), r.key, r.list, last, c.t(w.op), r.key)})
	}
}

// inferOrders takes each key's version order from its longest read (the
// first such by op position); every other read must be a prefix of it.
func (c *checker) inferOrders() {
	c.order = map[string][]int{}
	c.pos = map[string]map[int]int{}
	c.badPrefix = map[string][]int{}
	for _, k := range c.keys {
		rs := c.readsByKey[k]
		longest := -1
		for _, ri := range rs {
			if longest < 0 || len(c.reads[ri].list) > len(c.reads[longest].list) {
				longest = ri
			}
		}
		var canon []int
		if longest >= 0 {
			canon = c.reads[longest].list
		}
		for _, ri := range rs {
			r := &c.reads[ri]
			if isPrefix(r.list, canon) {
				continue
			}
			r.incompatible = true
			l := c.reads[longest]
			c.report(Anomaly{Kind: KindIncompatibleOrder, Txns: []int{c.idx(r.op), c.idx(l.op)}, Detail: fmt.Sprintf(
				"%s read %s = %v and %s read %v: neither is a prefix of the other", c.t(r.op), k, r.list, c.t(l.op), l.list)})
		}
		pos := map[int]int{}
		var order []int
		bad := make([]int, len(canon)+1)
		writes := c.writes[k]
		for i, e := range canon {
			_, dup := pos[e]
			w, ok := writes[e]
			bad[i+1] = bad[i]
			if dup || !ok || c.h.Ops[w.op].Type == TypeFail {
				bad[i+1]++
			}
			if !dup {
				pos[e] = len(order)
				order = append(order, e)
			}
		}
		c.order[k], c.pos[k], c.badPrefix[k] = order, pos, bad
	}
}

func isPrefix(a, b []int) bool { return len(a) <= len(b) && slices.Equal(a, b[:len(a)]) }

// buildGraph makes the nodes (ok ops, and info ops some read shows an
// append of) and the edges between them.
func (c *checker) buildGraph() {
	c.node = make([]int, len(c.h.Ops))
	for i, op := range c.h.Ops {
		c.node[i] = -1
		in := op.Type == TypeOK
		if op.Type == TypeInfo {
			for _, m := range op.Mops {
				if _, seen := c.pos[m.Key][m.Value]; m.Kind == MopAppend && seen {
					in = true
				}
			}
		}
		if in {
			c.node[i] = len(c.nodeOp)
			c.nodeOp = append(c.nodeOp, i)
		}
	}
	c.g = newGraph(len(c.nodeOp))
	c.unobserved = map[string][]int{}
	for i, op := range c.h.Ops {
		if op.Type != TypeOK {
			continue
		}
		for _, m := range op.Mops {
			if _, seen := c.pos[m.Key][m.Value]; m.Kind == MopAppend && !seen {
				if u := c.unobserved[m.Key]; len(u) == 0 || u[len(u)-1] != i {
					c.unobserved[m.Key] = append(u, i)
				}
			}
		}
	}
	c.addDataEdges()
	if c.opts.ProcessOrder {
		c.addProcessEdges()
	}
	if c.opts.RealTime {
		c.addRealtimeEdges()
	}
	c.g.seal()
	c.res.Edges = len(c.g.why)
	for k := range c.g.why {
		c.res.EdgesByType[k.t.strongest()]++
	}
}

// writerNode returns the node of the op that appended e to k, -1 if none
// (nobody, or a failed or unobserved op).
func (c *checker) writerNode(k string, e int) (node, op int) {
	w, ok := c.writes[k][e]
	if !ok {
		return -1, -1
	}
	return c.node[w.op], w.op
}

func (c *checker) addEdge(fromOp, toOp int, t EdgeType, key, why string) {
	from, to := c.node[fromOp], c.node[toOp]
	if from < 0 || to < 0 {
		return
	}
	c.g.add(from, to, t, Edge{From: c.idx(fromOp), To: c.idx(toOp), Key: key, Why: why})
}

func (c *checker) addDataEdges() {
	for _, k := range c.keys {
		o := c.order[k]
		for i := 1; i < len(o); i++ {
			a, aop := c.writerNode(k, o[i-1])
			b, bop := c.writerNode(k, o[i])
			if a >= 0 && b >= 0 {
				c.addEdge(aop, bop, EdgeWW, k, fmt.Sprintf("%s appended %d, %s appended %d next", c.t(aop), o[i-1], c.t(bop), o[i]))
			}
		}
		// An ok op's append no read shows comes after every element
		// some read shows.
		if len(o) > 0 {
			if a, aop := c.writerNode(k, o[len(o)-1]); a >= 0 {
				for _, u := range c.unobserved[k] {
					c.addEdge(aop, u, EdgeWW, k, fmt.Sprintf("%s appended %d, the last element any read shows; %s's append comes later", c.t(aop), o[len(o)-1], c.t(u)))
				}
			}
		}
	}
	for _, r := range c.reads {
		if !r.hasExt || r.incompatible {
			continue
		}
		o := c.order[r.key]
		j := len(r.ext)
		if j > 0 {
			if w, wop := c.writerNode(r.key, r.ext[j-1]); w >= 0 {
				c.addEdge(wop, r.op, EdgeWR, r.key, fmt.Sprintf("%s read %s up to %d, which %s appended", c.t(r.op), r.key, r.ext[j-1], c.t(wop)))
			}
		}
		seen := "empty"
		if j > 0 {
			seen = "up to " + strconv.Itoa(r.ext[j-1])
			// The version read is its writer's: what overwrote it is
			// the next element of another op (more of the writer's own
			// elements make the read intermediate, G1b, not an edge).
			if w, ok := c.writes[r.key][r.ext[j-1]]; ok {
				for j < len(o) {
					if v, ok := c.writes[r.key][o[j]]; !ok || v.op != w.op {
						break
					}
					j++
				}
			}
		}
		if j < len(o) {
			if w, wop := c.writerNode(r.key, o[j]); w >= 0 {
				c.addEdge(r.op, wop, EdgeRW, r.key, fmt.Sprintf("%s read %s %s; %s appended %d next", c.t(r.op), r.key, seen, c.t(wop), o[j]))
			}
			continue
		}
		for _, u := range c.unobserved[r.key] {
			c.addEdge(r.op, u, EdgeRW, r.key, fmt.Sprintf("%s read %s %s, the longest read; %s's append comes later", c.t(r.op), r.key, seen, c.t(u)))
		}
	}
}

// addProcessEdges links each committed op to the later ops of its
// process that are nodes, through the latest committed one before each.
func (c *checker) addProcessEdges() {
	byProc := map[int][]int{}
	for _, i := range c.nodeOp {
		p := c.h.Ops[i].Process
		byProc[p] = append(byProc[p], i)
	}
	for _, p := range slices.Sorted(maps.Keys(byProc)) {
		ops := byProc[p]
		slices.SortFunc(ops, func(a, b int) int { return c.cmpInvoke(a, b) })
		last := -1
		for _, i := range ops {
			op := &c.h.Ops[i]
			if last >= 0 && c.h.Ops[last].Complete < op.Invoke {
				c.addEdge(last, i, EdgeProcess, "", fmt.Sprintf("process %d ran %s, then %s", p, c.t(last), c.t(i)))
			}
			if op.Type == TypeOK {
				last = i
			}
		}
	}
}

func (c *checker) cmpInvoke(a, b int) int {
	oa, ob := &c.h.Ops[a], &c.h.Ops[b]
	return cmp.Or(cmp.Compare(oa.Invoke, ob.Invoke), cmp.Compare(oa.Index, ob.Index))
}

// addRealtimeEdges links every committed op to the ops invoked after it
// completed, keeping only the edges the transitive closure needs: an op
// gets edges from the frontier (completed ops no completed op follows in
// real time), and its completion takes its predecessors off the frontier.
// Info ops never complete.
func (c *checker) addRealtimeEdges() {
	type event struct {
		at       int64
		complete bool
		op       int
	}
	var evs []event
	for _, i := range c.nodeOp {
		op := &c.h.Ops[i]
		evs = append(evs, event{at: op.Invoke, op: i})
		if op.Type == TypeOK {
			evs = append(evs, event{at: op.Complete, complete: true, op: i})
		}
	}
	// At equal times invocations come first: real-time order is strict.
	slices.SortFunc(evs, func(a, b event) int {
		ac, bc := 0, 0
		if a.complete {
			ac = 1
		}
		if b.complete {
			bc = 1
		}
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(ac, bc), cmp.Compare(c.h.Ops[a.op].Index, c.h.Ops[b.op].Index))
	})
	frontier := map[int]bool{}
	preds := map[int][]int{}
	for _, ev := range evs {
		if !ev.complete {
			ps := slices.Sorted(maps.Keys(frontier))
			for _, p := range ps {
				c.addEdge(p, ev.op, EdgeRealtime, "", fmt.Sprintf("%s completed at %v, before %s was invoked at %v",
					c.t(p), time.Duration(c.h.Ops[p].Complete), c.t(ev.op), time.Duration(c.h.Ops[ev.op].Invoke)))
			}
			preds[ev.op] = ps
			continue
		}
		for _, p := range preds[ev.op] {
			delete(frontier, p)
		}
		delete(preds, ev.op)
		frontier[ev.op] = true
	}
}

// findCycles reports, for each strongly connected component, shortest
// cycles under the smallest set of edge types that has any: ww, then
// ww+wr, then ww+wr+rw, then with process order, then with real time.
func (c *checker) findCycles() {
	data := maskWW | maskWR | maskRW
	levels := []edgeMask{maskWW, maskWW | maskWR, data}
	all := data
	if c.opts.ProcessOrder {
		all |= maskProcess
		levels = append(levels, all)
	}
	if c.opts.RealTime {
		all |= maskRealtime
		levels = append(levels, all)
	}
	for _, comp := range c.g.sccs(nil, all) {
		for _, lm := range levels {
			subs := c.g.sccs(comp, lm)
			for _, sub := range subs {
				c.reportCycle(c.g.shortestCycle(sub, lm), lm)
			}
			if len(subs) > 0 {
				break
			}
		}
	}
}

func (c *checker) reportCycle(cyc []int, lm edgeMask) {
	var (
		edges []Edge
		txns  []int
		used  edgeMask
		rw    int
	)
	for i, u := range cyc {
		v := cyc[(i+1)%len(cyc)]
		t := (c.g.arcMask(u, v) & lm).strongest()
		used |= maskOf(t)
		if t == EdgeRW {
			rw++
		}
		edges = append(edges, c.g.why[edgeKey{u, v, maskOf(t)}])
		txns = append(txns, c.idx(c.nodeOp[u]))
	}
	kind := KindG0
	switch {
	case used&maskRW != 0:
		kind = KindG2Item
	case used&maskWR != 0:
		kind = KindG1c
	}
	switch {
	case used&maskRealtime != 0:
		kind += "-realtime"
	case used&maskProcess != 0:
		kind += "-process"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cycle of %d transactions", len(cyc))
	if rw > 0 {
		fmt.Fprintf(&b, " with %d rw edge(s)", rw)
	}
	b.WriteString(": ")
	for i, e := range edges {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.String())
	}
	c.report(Anomaly{Kind: kind, Txns: txns, Cycle: edges, Detail: b.String()})
}

// checkLostAppends reports each append of an ok op that no read shows
// although some ok read of the key was invoked after the op completed.
func (c *checker) checkLostAppends() {
	latest := map[string]int{} // key → position of the ok read invoked last
	for _, r := range c.reads {
		if l, ok := latest[r.key]; !ok || c.h.Ops[r.op].Invoke > c.h.Ops[l].Invoke {
			latest[r.key] = r.op
		}
	}
	for i, op := range c.h.Ops {
		if op.Type != TypeOK {
			continue
		}
		for _, m := range op.Mops {
			if m.Kind != MopAppend {
				continue
			}
			if _, seen := c.pos[m.Key][m.Value]; seen {
				continue
			}
			l, ok := latest[m.Key]
			if !ok || c.h.Ops[l].Invoke <= op.Complete {
				continue
			}
			c.report(Anomaly{Kind: KindLostAppend, Txns: []int{c.idx(i), c.idx(l)}, Detail: fmt.Sprintf(
				"%s appended %d to %s and committed at %v, but no read shows it, although %s, invoked later at %v, read %s",
				c.t(i), m.Value, m.Key, time.Duration(op.Complete), c.t(l), time.Duration(c.h.Ops[l].Invoke), m.Key)})
		}
	}
}
