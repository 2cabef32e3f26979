package elle

import (
	"slices"
	"strconv"
)

// EdgeType names a dependency between two transactions.
type EdgeType string

// The edge types (doc.go, "Dependencies").
const (
	EdgeWW       EdgeType = "ww"
	EdgeWR       EdgeType = "wr"
	EdgeRW       EdgeType = "rw"
	EdgeProcess  EdgeType = "process"
	EdgeRealtime EdgeType = "realtime"
)

// edgeMask is a set of edge types, one bit each, lowest bit the strongest
// (the one a cycle's edge is labelled with when it has several).
type edgeMask uint8

const (
	maskWW edgeMask = 1 << iota
	maskWR
	maskRW
	maskProcess
	maskRealtime
)

var maskTypes = []struct {
	m edgeMask
	t EdgeType
}{{maskWW, EdgeWW}, {maskWR, EdgeWR}, {maskRW, EdgeRW}, {maskProcess, EdgeProcess}, {maskRealtime, EdgeRealtime}}

func maskOf(t EdgeType) edgeMask {
	for _, mt := range maskTypes {
		if mt.t == t {
			return mt.m
		}
	}
	return 0
}

// strongest returns the lowest type in m.
func (m edgeMask) strongest() EdgeType {
	for _, mt := range maskTypes {
		if m&mt.m != 0 {
			return mt.t
		}
	}
	return ""
}

// Edge is one dependency in a reported cycle.
type Edge struct {
	// From and To are op indices (Op.Index).
	From, To int
	Type     EdgeType
	// Key is the key of a ww, wr or rw edge.
	Key string
	// Why explains the edge: which elements, which process.
	Why string
}

// String renders e as "T3 -rw k-> T7 (T3 read k up to 4; T7 appended 9 next)".
func (e Edge) String() string {
	s := "T" + strconv.Itoa(e.From) + " -" + string(e.Type)
	if e.Key != "" {
		s += " " + e.Key
	}
	s += "-> T" + strconv.Itoa(e.To)
	if e.Why != "" {
		s += " (" + e.Why + ")"
	}
	return s
}

type arc struct {
	to   int
	mask edgeMask
}

type edgeKey struct {
	from, to int
	t        edgeMask
}

// graph is the dependency graph over nodes 0..n-1 (the checker maps them
// to ops). Build it with add, then call seal before any search.
type graph struct {
	n     int
	build []map[int]edgeMask
	out   [][]arc          // sorted by to; set by seal
	why   map[edgeKey]Edge // one per distinct (from, to, type) edge

	// Scratch for searches, all zero between calls.
	index, low []int
	onStack    []bool
	in         []bool
	parent     []int
	seen       []bool
}

func newGraph(n int) *graph {
	return &graph{n: n, build: make([]map[int]edgeMask, n), why: make(map[edgeKey]Edge)}
}

// add records the edge from → to of type t; the first explanation of each
// (from, to, type) is kept. Self edges are dropped.
func (g *graph) add(from, to int, t EdgeType, e Edge) {
	if from == to {
		return
	}
	m := maskOf(t)
	if g.build[from] == nil {
		g.build[from] = make(map[int]edgeMask)
	}
	if g.build[from][to]&m != 0 {
		return
	}
	g.build[from][to] |= m
	e.Type = t
	g.why[edgeKey{from, to, m}] = e
}

// seal turns the edges into sorted adjacency lists, for searches whose
// results do not depend on map order.
func (g *graph) seal() {
	g.out = make([][]arc, g.n)
	for v, m := range g.build {
		arcs := make([]arc, 0, len(m))
		for to, mask := range m {
			arcs = append(arcs, arc{to, mask})
		}
		slices.SortFunc(arcs, func(a, b arc) int { return a.to - b.to })
		g.out[v] = arcs
	}
	g.build = nil
	g.index = make([]int, g.n)
	g.low = make([]int, g.n)
	g.onStack = make([]bool, g.n)
	g.in = make([]bool, g.n)
	g.parent = make([]int, g.n)
	g.seen = make([]bool, g.n)
}

// sccs returns the strongly connected components of more than one node of
// the subgraph induced by nodes (all nodes when nodes is nil) over edges
// with a type in mask, each sorted, in order of their smallest node.
// Iterative Tarjan.
func (g *graph) sccs(nodes []int, mask edgeMask) [][]int {
	if nodes == nil {
		nodes = make([]int, g.n)
		for i := range nodes {
			nodes[i] = i
		}
	}
	for _, v := range nodes {
		g.in[v] = true
	}
	defer func() {
		for _, v := range nodes {
			g.in[v], g.index[v], g.low[v], g.onStack[v] = false, 0, 0, false
		}
	}()
	type frame struct{ v, next int }
	var (
		counter int
		stack   []int
		calls   []frame
		out     [][]int
	)
	visit := func(v int) {
		counter++
		g.index[v], g.low[v] = counter, counter
		stack = append(stack, v)
		g.onStack[v] = true
		calls = append(calls, frame{v: v})
	}
	for _, s := range nodes {
		if g.index[s] != 0 {
			continue
		}
		visit(s)
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			if f.next < len(g.out[v]) {
				a := g.out[v][f.next]
				f.next++
				if a.mask&mask == 0 || !g.in[a.to] {
					continue
				}
				if g.index[a.to] == 0 {
					visit(a.to)
				} else if g.onStack[a.to] {
					g.low[v] = min(g.low[v], g.index[a.to])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				p := calls[len(calls)-1].v
				g.low[p] = min(g.low[p], g.low[v])
			}
			if g.low[v] != g.index[v] {
				continue
			}
			var comp []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				g.onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 {
				slices.Sort(comp)
				out = append(out, comp)
			}
		}
	}
	slices.SortFunc(out, func(a, b []int) int { return a[0] - b[0] })
	return out
}

// maxCycleStarts bounds the breadth-first searches shortestCycle makes in
// one component: enough to find a short cycle, cheap in a huge component.
const maxCycleStarts = 16

// shortestCycle returns a shortest cycle through the first nodes of comp
// (a strongly connected component under mask, sorted) using only comp's
// nodes and mask's edges: the nodes in order, the first not repeated.
func (g *graph) shortestCycle(comp []int, mask edgeMask) []int {
	for _, v := range comp {
		g.in[v] = true
	}
	defer func() {
		for _, v := range comp {
			g.in[v] = false
		}
	}()
	var best []int
	for _, s := range comp[:min(len(comp), maxCycleStarts)] {
		if c := g.cycleFrom(s, mask, len(best)); c != nil {
			best = c
			if len(best) == 2 {
				break
			}
		}
	}
	return best
}

// cycleFrom finds a shortest cycle through s by breadth-first search
// within g.in; nil if none shorter than bound (0: no bound).
func (g *graph) cycleFrom(s int, mask edgeMask, bound int) []int {
	var visited []int
	defer func() {
		for _, v := range visited {
			g.seen[v], g.parent[v] = false, 0
		}
	}()
	g.seen[s] = true
	visited = append(visited, s)
	frontier := []int{s}
	for depth := 1; len(frontier) > 0; depth++ {
		if bound > 0 && depth >= bound {
			return nil
		}
		var next []int
		for _, u := range frontier {
			for _, a := range g.out[u] {
				if a.mask&mask == 0 || !g.in[a.to] {
					continue
				}
				if a.to == s {
					// The path s → … → u, closed by u → s.
					var path []int
					for v := u; v != s; v = g.parent[v] {
						path = append(path, v)
					}
					path = append(path, s)
					slices.Reverse(path)
					return path
				}
				if g.seen[a.to] {
					continue
				}
				g.seen[a.to] = true
				g.parent[a.to] = u
				visited = append(visited, a.to)
				next = append(next, a.to)
			}
		}
		frontier = next
	}
	return nil
}

// arcMask returns the types of the edges from → to.
func (g *graph) arcMask(from, to int) edgeMask {
	arcs := g.out[from]
	i, ok := slices.BinarySearchFunc(arcs, to, func(a arc, t int) int { return a.to - t })
	if !ok {
		return 0
	}
	return arcs[i].mask
}
