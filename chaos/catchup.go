package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// A follower cut off until it can only be caught up by a raft snapshot:
// while it is isolated the others write more than --catch-up-entries
// (catchUpEntries) into its groups and materialize, which compacts their
// in-memory logs past what it holds; after the heal their leaders send
// it MsgSnap and it fetches and installs their materialization files.

// catchUpEntries is the chaos nodes' --catch-up-entries: small, so that a
// few seconds of writes put an isolated follower behind the compacted
// log (and restarted nodes meet raft snapshots more often too).
const catchUpEntries = 64

// catchUpWrites are the puts written while the follower is isolated: 96
// per partition on average, over catchUpEntries in most.
const catchUpWrites = 12 * catchUpEntries

// metricSum returns the sum over every series of family in node i's
// /metrics (the text format), and whether the family was there.
func (c *cluster) metricSum(ctx context.Context, i int, family string) (float64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s:%d/metrics", c.nodes[i].host.IP(), httpPort), nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, fmt.Errorf("chaos: %s /metrics: %w", c.nodes[i].id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false, fmt.Errorf("chaos: %s /metrics: %s", c.nodes[i].id, resp.Status)
	}
	return sumFamily(bufio.NewScanner(resp.Body), family)
}

// sumFamily adds up the samples of family in a text exposition.
func sumFamily(sc *bufio.Scanner, family string) (float64, bool, error) {
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, family) {
			continue
		}
		rest := line[len(family):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue // another family with this prefix
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("chaos: metric line %q: %w", line, err)
		}
		sum += v
		found = true
	}
	return sum, found, sc.Err()
}

// injectSnapshotCatchUp isolates a node, writes catchUpWrites keys
// through the others, lets the live verifier copy the logs, materializes
// them (Cluster.Checkpoint), heals the
// network and waits for the node's cutkv_raft_snapshots_installed_total
// to grow: proven when it did. The fault heals itself; the nemesis's
// hold and heal that follow find nothing to undo.
func (n *nemesis) injectSnapshotCatchUp(ctx context.Context) (target string, proven bool, proof string) {
	c := n.c
	f := n.r.IntN(len(c.nodes))
	target = c.nodes[f].id
	const family = "cutkv_raft_snapshots_installed_total"
	before, ok, err := c.metricSum(ctx, f, family)
	if err != nil || !ok {
		return target, false, fmt.Sprintf("%s before: found %v, %v", family, ok, err)
	}
	if err := c.net.Isolate(f + 1); err != nil {
		return target, false, err.Error()
	}
	others := n.others(f)
	if cut, why := n.cutOff(others, f); !cut {
		return target, false, why
	}
	var eps []string
	for _, j := range others {
		eps = append(eps, c.nodes[j].clientAddr())
	}
	written, err := catchUpBurst(ctx, eps, time.Since(n.start).Milliseconds())
	if err != nil {
		return target, false, fmt.Sprintf("writes while %s was isolated: %d of %d, then %v", target, written, catchUpWrites, err)
	}
	// The checkpoint truncates the logs behind it at once, where the
	// background materializations leave the live verifier a window: no
	// cut or snapshot starts until it is done, and the cuts completed
	// until now are copied and verified first.
	release := func() {}
	if n.calls != nil {
		var idle bool
		if idle, release = n.calls.hold(20 * time.Second); !idle {
			n.logf("catch-up: a cut or snapshot still in flight after 20s; checkpointing all the same")
		}
	}
	if n.verifyNow != nil {
		if err := n.verifyNow(ctx); err != nil {
			n.logf("verifier pass before the catch-up's checkpoint: %v", err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	resp, err := kvrpc.NewClusterClient(c.conns[others[0]]).Checkpoint(cctx, &kvpb.CheckpointRequest{})
	cancel()
	release()
	if err != nil {
		return target, false, fmt.Sprintf("%d keys written; checkpoint: %v", written, err)
	}
	materialized := 0
	for _, g := range resp.GetGroups() {
		if g.GetError() == "" && g.GetMaterializedIndex() > 0 {
			materialized++
		}
	}
	healed := time.Now()
	if err := c.net.Heal(); err != nil {
		return target, false, err.Error()
	}
	for time.Since(healed) < 20*time.Second && ctx.Err() == nil {
		now, _, err := c.metricSum(ctx, f, family)
		if err == nil && now > before {
			return target, true, fmt.Sprintf("%d keys written and %d replicas materialized while it was isolated; it installed %.0f raft snapshots within %v of the heal",
				written, materialized, now-before, time.Since(healed).Round(time.Millisecond))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return target, false, fmt.Sprintf("%d keys written and %d replicas materialized while it was isolated; %s did not grow within 20s of the heal", written, materialized, family)
}

// catchUpBurst puts catchUpWrites keys of its own (prefix "cu/", apart
// from every workload's keys) through endpoints, 16 at a time, and
// returns how many were acknowledged. A put that fails is not retried
// (it may have applied: nothing reads these keys back but the replicas'
// hash comparison, which holds either way).
func catchUpBurst(ctx context.Context, endpoints []string, tag int64) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl, err := client.NewWithConfig(ctx, client.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	value := []byte(strings.Repeat("c", 64))
	var next, done atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 16 {
		wg.Go(func() {
			for {
				k := next.Add(1)
				if k > catchUpWrites || ctx.Err() != nil {
					return
				}
				key := fmt.Sprintf("cu/%d/%05d", tag, k)
				err := cl.Put(ctx, []byte(key), value)
				if err == nil {
					done.Add(1)
					continue
				}
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if int(done.Load()) < catchUpWrites/2 {
		return int(done.Load()), fmt.Errorf("fewer than half acknowledged; first error: %v", firstErr)
	}
	return int(done.Load()), nil
}
