package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Swizzle (FoundationDB's simulator): the links among a random set of
// nodes are clogged one by one, then opened again one by one in another
// random order, so that the cluster passes through many partial
// partitions in a row — a leader that loses its followers one at a time,
// a quorum that reforms on a different side — rather than one clean cut.

// swizzleLinks returns every link among nodes (indexes into the
// cluster), each once as a pair in ascending order, in the order of the
// pairs' positions in nodes.
func swizzleLinks(nodes []int) [][2]int {
	var out [][2]int
	for i := range nodes {
		for j := i + 1; j < len(nodes); j++ {
			a, b := nodes[i], nodes[j]
			out = append(out, [2]int{min(a, b), max(a, b)})
		}
	}
	return out
}

func linkNames(c *cluster, links [][2]int) string {
	s := make([]string, len(links))
	for i, l := range links {
		s[i] = c.nodes[l[0]].id + "-" + c.nodes[l[1]].id
	}
	return strings.Join(s, " ")
}

// injectSwizzle clogs the links among 3 or more random nodes one by one
// (100-400 ms apart), proves every one of them cut (a connection to the
// peer port timed out across each, both ways), then opens all but the
// last again in another random order, 100-400 ms apart; the heal opens
// the last.
func (n *nemesis) injectSwizzle(ctx context.Context) (target string, proven bool, proof string) {
	c := n.c
	// Three or more nodes, so that some link stays clogged while others
	// open again (with two there is one link).
	k := min(len(c.nodes), 3+n.r.IntN(max(1, len(c.nodes)-2)))
	links := swizzleLinks(n.r.Perm(len(c.nodes))[:k])
	n.r.Shuffle(len(links), func(i, j int) { links[i], links[j] = links[j], links[i] })
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Duration(100+n.r.IntN(300)) * time.Millisecond):
			return true
		}
	}
	for _, l := range links {
		if err := c.net.Clog(l[0]+1, l[1]+1); err != nil {
			return "clogged " + linkNames(c, links), false, err.Error()
		}
		if !pause() {
			return "clogged " + linkNames(c, links), false, ctx.Err().Error()
		}
	}
	var mu sync.Mutex
	var open []string
	var wg sync.WaitGroup
	for _, l := range links {
		for _, d := range [][2]int{l, {l[1], l[0]}} {
			wg.Go(func() {
				if c.net.Reachable(d[0]+1, d[1]+1, peerPort, 700*time.Millisecond) {
					mu.Lock()
					open = append(open, fmt.Sprintf("%s->%s", c.nodes[d[0]].id, c.nodes[d[1]].id))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	sort.Strings(open)
	order := append([][2]int(nil), links...)
	n.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	target = fmt.Sprintf("clogged %s; opened %s", linkNames(c, links), linkNames(c, order[:len(order)-1]))
	for _, l := range order[:len(order)-1] {
		if !pause() {
			break
		}
		if err := c.net.Unclog(l[0]+1, l[1]+1); err != nil {
			return target, false, err.Error()
		}
	}
	proof = fmt.Sprintf("%d links clogged one by one; a connection to the peer port timed out both ways across each", len(links))
	if len(open) > 0 {
		proof = fmt.Sprintf("%d links clogged, but these connections got through: %s", len(links), strings.Join(open, " "))
	}
	return target, len(open) == 0, proof
}
