package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// proxiedPorts are the ports whose connections between hosts pass
// through the delay proxies of chaos/hosts: the peer port (raft and 2PC)
// in rounds that delay, none in others, which so keep the direct links
// they always had.
func proxiedPorts(kinds []Kind) []int {
	if slices.Contains(kinds, Delay) {
		return []int{peerPort}
	}
	return nil
}

// injectDelay slows peer links: with even odds every link of one node,
// both ways, or a random set of directed links, each by the same delay of
// 20-200 ms and jitter of up to a quarter of it (all seeded). Gossip and
// client traffic are not slowed. The proof is a round trip measured
// through the first delayed link to its node's peer port (a probe the
// node's TLS listener answers by closing): the shortest of three must be
// at least the delays it crosses less their jitter.
func (n *nemesis) injectDelay(ctx context.Context) (target string, proven bool, proof string) {
	c := n.c
	nodes := len(c.nodes)
	ms := 20 + n.r.IntN(181)
	delay := time.Duration(ms) * time.Millisecond
	jitter := time.Duration(ms*n.r.IntN(26)/100) * time.Millisecond
	var links [][2]int // node indexes, from -> to
	if n.r.IntN(2) == 0 {
		i := n.r.IntN(nodes)
		for _, j := range n.others(i) {
			links = append(links, [2]int{i, j}, [2]int{j, i})
		}
		target = fmt.Sprintf("%s's peer links both ways", c.nodes[i].id)
	} else {
		for a := range nodes {
			for b := range nodes {
				if a != b && n.r.IntN(3) == 0 {
					links = append(links, [2]int{a, b})
				}
			}
		}
		if len(links) == 0 {
			p := n.r.Perm(nodes)
			links = append(links, [2]int{p[0], p[1]})
		}
		var s []string
		for _, l := range links {
			s = append(s, c.nodes[l[0]].id+"->"+c.nodes[l[1]].id)
		}
		target = "peer links " + strings.Join(s, ",")
	}
	target += fmt.Sprintf(", %v±%v", delay, jitter)

	probe := links[0]
	before, berr := n.roundTrip(ctx, probe)
	for _, l := range links {
		if err := c.net.Delay(l[0]+1, l[1]+1, delay, jitter); err != nil {
			return target, false, err.Error()
		}
	}
	want := delay - jitter // the probe crosses probe's link
	if slices.Contains(links, [2]int{probe[1], probe[0]}) {
		want += delay - jitter // and its answer the way back
	}
	after, aerr := n.roundTrip(ctx, probe)
	from, to := c.nodes[probe[0]].id, c.nodes[probe[1]].id
	if aerr != nil {
		return target, false, fmt.Sprintf("a round trip %s->%s's peer port failed: %v", from, to, aerr)
	}
	was := fmt.Sprint(before.Round(time.Microsecond))
	if berr != nil {
		was = "failed: " + berr.Error()
	}
	return target, after >= want, fmt.Sprintf("a round trip %s->%s's peer port took %v, %v expected at least (before the delay: %s)",
		from, to, after.Round(time.Microsecond), want, was)
}

// roundTrip is the shortest of three round trips over link l (node
// indexes) to its node's peer port, so that a busy machine's scheduling
// does not make a round trip look delayed.
func (n *nemesis) roundTrip(ctx context.Context, l [2]int) (time.Duration, error) {
	best := time.Duration(-1)
	var last error
	for range 3 {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		d, err := n.c.net.RoundTrip(l[0]+1, l[1]+1, peerPort, 3*time.Second)
		if err != nil {
			last = err
			continue
		}
		if best < 0 || d < best {
			best = d
		}
	}
	if best < 0 {
		return 0, last
	}
	return best, nil
}
