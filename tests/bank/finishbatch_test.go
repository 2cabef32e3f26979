package bank

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/tests/process"
)

// finishBatchClients is more than transferClients: Finishes share an
// entry only when several wait for one partition at once.
const finishBatchClients = 2 * transferClients

// TestFinishBatchLeaderDeath kills a partition leader with a batch of
// several transactions' Finishes in hand and not yet proposed
// (txnInFinishBatch), under the bank workload. Those transactions are
// committed (every prepare applied; their decisions are durable on their
// record partitions) and their intents on the dead leader's partition are
// still there: the coordinators' Finishes and the participants' recovery
// must finish them on the new leader.
//
// Every node runs the failpoints build armed with
// txnInFinishBatch=exit@N, N drawn small, since which node leads a
// partition with Finishes queued is the cluster's choice; a node that
// exits at the point is restarted without failpoints. After
// CUTKV_SOAK/2 with at least one such death the nodes still armed are
// stopped and restarted without failpoints; after 10 more transfers
// traffic stops and the bank checks run: the initial total in every read,
// the history all-or-nothing and serializable, and no lock outliving the
// run.
func TestFinishBatchLeaderDeath(t *testing.T) {
	soak := process.SoakDuration(t)
	rng := process.NewRand(t)
	after := 3 + rng.IntN(20)
	point := fmt.Sprintf("CUTKV_FAILPOINTS=txnInFinishBatch=exit@%d", after)
	c := process.NewCluster(t, process.Spec{Bin: bin.KvnodeFailpoints, Partitions: 4, Configure: func(n *process.Node) {
		n.Env = []string{point}
	}})
	_, b, halt := startBank(t, c.Endpoints(), finishBatchClients, rng)

	// Watch the nodes: one that exited must have exited at the point;
	// it comes back without failpoints.
	began := time.Now()
	deadline := began.Add(max(soak/2, 5*time.Second) + 30*time.Second)
	var deaths []string
	var lastRestart time.Time
	var atRestart int64
	const want = "failpoint txnInFinishBatch: exiting"
	died := func(n *process.Node, code int, desc string) {
		t.Helper()
		if code != 86 || !strings.Contains(n.Stderr(), want) {
			t.Fatalf("%s: %s, want exit status 86 and %q; stderr:\n%s", n.ID, desc, want, process.Tail(n.Stderr(), 20))
		}
		deaths = append(deaths, n.ID)
		t.Logf("%v: %s died with a batch of Finishes unproposed (exit@%d); %d transfers committed so far",
			time.Since(began).Round(time.Millisecond), n.ID, after, b.Stats.Transfers.Load())
	}
	// A node is restarted without waiting until it is ready: it is ready
	// only once a quorum answers, and the other two, still armed, may
	// die at the point meanwhile (a clean-clone run lost all three that
	// way while the first one's restart waited).
	restart := func(n *process.Node) {
		t.Helper()
		n.Env = nil
		n.Launch()
		lastRestart, atRestart = time.Now(), b.Stats.Transfers.Load()
	}
	for time.Now().Before(deadline) && (len(deaths) == 0 || time.Since(began) < soak/2) {
		for _, n := range c.Nodes {
			if n.Running() || n.Env == nil {
				continue // a restarted one is awaited below
			}
			code, desc := n.WaitExit(time.Second)
			died(n, code, desc)
			restart(n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The nodes still armed are stopped (SIGTERM) and come back without
	// failpoints too, so that none dies at the point while the checks
	// below read every account through every node. One may still reach
	// the point before the signal lands.
	for _, n := range c.Nodes {
		if n.Env == nil {
			continue
		}
		if !n.Running() {
			code, desc := n.WaitExit(time.Second)
			died(n, code, desc)
		} else if code, _ := n.Term(30 * time.Second); code == 86 {
			died(n, code, "exit status 86")
		}
		restart(n)
	}
	for _, n := range c.Nodes {
		n.AwaitReady()
	}
	if len(deaths) == 0 {
		t.Fatalf("no leader reached txnInFinishBatch=exit@%d within %v (%d transfers committed): Finishes never shared an entry",
			after, time.Since(began).Round(time.Second), b.Stats.Transfers.Load())
	}
	servesAgain(t, b, atRestart)
	halt()
	stopped := time.Now()
	t.Logf("traffic stopped %v after the last restart; deaths at the point: %v", stopped.Sub(lastRestart).Round(time.Millisecond), deaths)
	checkBank(t, b, stopped.Add(settleBound), rng.Uint64(), minTransfersUnderFailures)
}
