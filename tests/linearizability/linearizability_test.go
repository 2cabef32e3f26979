package linearizability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

const (
	nodes      = 3
	partitions = 4
	numKeys    = 5
	numClients = 6
	// checkTimeout bounds porcupine; a check that runs out is a failure
	// (Unknown), reported as such.
	checkTimeout = 60 * time.Second
	// Completed work the run must reach to count as a test at all.
	minOKOps = 200
	minKills = 2
)

func TestLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster soak under a nemesis; skipped in -short mode")
	}
	soak := soakDuration(t)
	seed := testSeed(t)
	t.Logf("soak %v, seed %d (CUTKV_SEED=%d repeats the choices, not the timing)", soak, seed, seed)

	c := clustertest.Start(t, nodes, clustertest.Options{Partitions: partitions})
	conns := dialAll(t, c)
	var kvs []kvrpc.KVClient
	for _, cc := range conns {
		kvs = append(kvs, kvrpc.NewKVClient(cc))
	}
	keys := PickKeys(numKeys, partitions)
	t.Logf("keys %v; nodes n1..n%d at %v", keys, nodes, c.Endpoints())

	var down atomic.Int32 // 1 + index of the node the nemesis holds down, 0 if none
	w, err := NewWorkload(Config{
		Nodes:   kvs,
		Keys:    keys,
		Seed:    seed,
		Clients: numClients,
		Skip:    func(i int) bool { return int(down.Load()) == i+1 },
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(soak)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	var (
		wg    sync.WaitGroup
		ops   []porcupine.Operation
		stats Stats
	)
	// Should the nemesis stop the test early, the clients stop too,
	// before the cluster is torn down (cleanups run last registered
	// first).
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		ops, stats = w.Run(ctx)
	}()

	// The nemesis runs on the test goroutine: cluster helpers may call
	// t.Fatal, which is legal only here.
	nem := &nemesis{c: c, conns: conns, rng: rand.New(rand.NewPCG(seed, 0)), down: &down, now: w.Now}
	nem.run(t, deadline)
	wg.Wait()

	// Every node is up again: each key, read once more, must show every
	// acknowledged write (DESIGN.md invariant 1, checked by the model).
	final, finalErr := w.FinalReads(context.Background())
	history := append(ops, final...)

	t.Logf("%v", stats)
	t.Logf("%d final reads; nemesis: %d leader kills, %d restarts", len(final), nem.kills, nem.restarts)

	res, err := Check(history, checkTimeout, os.Getenv("CUTKV_PORCUPINE_OUT"), nem.events...)
	t.Log(res)
	if err != nil {
		t.Error(err)
		for _, f := range res.Failures {
			t.Logf("key %s is NOT linearizable (%d operations)\n%s", f.Key, f.Operations, f.Explanation)
		}
	}

	if stats.OK < minOKOps {
		t.Errorf("only %d operations completed, want at least %d", stats.OK, minOKOps)
	}
	if nem.kills < minKills {
		t.Errorf("only %d leader kills, want at least %d (is CUTKV_SOAK too short?)", nem.kills, minKills)
	}
	if finalErr != nil {
		t.Errorf("after the nemesis stopped: %v", finalErr)
	}
}

// soakDuration reads CUTKV_SOAK (a Go duration), default 10s.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	d, err := parseSoak(os.Getenv("CUTKV_SOAK"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func parseSoak(s string) (time.Duration, error) {
	if s == "" {
		return 10 * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("CUTKV_SOAK=%q: %w", s, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("CUTKV_SOAK=%q: must be positive", s)
	}
	return d, nil
}

// testSeed reads CUTKV_SEED, else picks one.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	s := os.Getenv("CUTKV_SEED")
	if s == "" {
		return rand.Uint64() >> 1
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("CUTKV_SEED=%q: %v", s, err)
	}
	return seed
}

// dialAll opens one connection per node, owned by the test, with the
// workload's short reconnect back-off (DialOptions).
func dialAll(t *testing.T, c *clustertest.Cluster) []*grpc.ClientConn {
	t.Helper()
	var conns []*grpc.ClientConn
	for i := 0; i < c.N(); i++ {
		opts := append(DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		cc, err := grpc.NewClient(c.Config(i).GRPCAddr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		conns = append(conns, cc)
	}
	return conns
}

// waitConnected waits up to within for cc to be ready. Not getting there
// is not a failure: requests on it will fail and be counted.
func waitConnected(cc *grpc.ClientConn, within time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		st := cc.GetState()
		if st == connectivity.Ready {
			return
		}
		cc.Connect()
		if !cc.WaitForStateChange(ctx, st) {
			return
		}
	}
}

// nemesis kills the leader of a random partition, keeps it down a moment,
// restarts it and waits for every partition to have a leader again. At
// most one node is down at a time, so a majority is always up.
type nemesis struct {
	c        *clustertest.Cluster
	conns    []*grpc.ClientConn // the clients' connections, by node
	rng      *rand.Rand
	down     *atomic.Int32
	now      func() int64 // the history's clock (Workload.Now)
	kills    int
	restarts int
	events   []porcupine.Annotation
}

func (n *nemesis) run(t *testing.T, deadline time.Time) {
	t.Helper()
	pause := n.jitter(200*time.Millisecond, 500*time.Millisecond)
	for sleepBefore(pause, deadline) {
		pause = n.jitter(300*time.Millisecond, 800*time.Millisecond)
		p := uint64(1 + n.rng.IntN(partitions))
		victim := n.leaderOf(p)
		if victim < 0 {
			continue
		}
		n.down.Store(int32(victim + 1))
		from := n.now()
		n.c.Kill(victim)
		n.kills++
		time.Sleep(n.jitter(300*time.Millisecond, 900*time.Millisecond))
		n.c.Restart(victim)
		n.restarts++
		// The clients' connection to it may be waiting out a reconnect
		// back-off; a request sent now would fail unsent yet look like a
		// write of unknown outcome.
		waitConnected(n.conns[victim], 2*time.Second)
		n.down.Store(0)
		n.events = append(n.events, porcupine.Annotation{
			Tag:             "nemesis",
			Start:           from,
			End:             n.now(),
			Description:     fmt.Sprintf("n%d down", victim+1),
			Details:         fmt.Sprintf("killed n%d, leader of partition %d; restarted", victim+1, p),
			BackgroundColor: "#f4c7c3",
		})
		n.waitLeaders(5 * time.Second)
	}
}

func (n *nemesis) jitter(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)))
}

// leaderOf returns the index of the node that leads partition p, -1 if no
// node claims it right now.
func (n *nemesis) leaderOf(p uint64) int {
	for i := 0; i < n.c.N(); i++ {
		if node := n.c.Node(i); node != nil {
			if st, ok := node.Store().Status(p); ok && st.IsLeader {
				return i
			}
		}
	}
	return -1
}

// waitLeaders polls until every partition has a leader, or within passes.
// Not finding one is not a failure here: the clients' errors and the
// operation counts will tell.
func (n *nemesis) waitLeaders(within time.Duration) {
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		all := true
		for p := uint64(1); p <= partitions; p++ {
			if n.leaderOf(p) < 0 {
				all = false
				break
			}
		}
		if all {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sleepBefore sleeps d and reports true, or returns false at once if the
// deadline would pass first.
func sleepBefore(d time.Duration, deadline time.Time) bool {
	if time.Until(deadline) <= d {
		return false
	}
	time.Sleep(d)
	return true
}
