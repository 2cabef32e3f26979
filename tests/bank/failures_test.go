package bank

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/tests/process"
)

// TestBankUnderFailures runs the bank workload on three kvnode processes
// (n1 runs the failpoints build) through three phases, traffic never
// stopping:
//
//  1. for CUTKV_SOAK a nemesis SIGKILLs a random node (a coordinator of
//     the Txns sent to it and the leader of some partitions) and restarts
//     it, at most one node down at a time;
//  2. for CUTKV_SOAK/2 every Txn goes to n1 while n1 runs with
//     txnAfterPrepare=exit@N, N drawn so that it fires mid-phase: n1 dies
//     between Prepare and the decision, and is restarted;
//  3. the same with txnAfterDecide: n1 dies between the decision and
//     Finish, is restarted, and traffic stops as soon as 10 more
//     transfers have committed (at most 10 s).
//
// Then every read and the final state show the initial total, the history
// passes History.Check (all or nothing, serializable), and no lock
// outlives the failures: once traffic stops, a Txn over every account
// commits and every account reads back through every node within
// settleBound.
func TestBankUnderFailures(t *testing.T) {
	soak := process.SoakDuration(t)
	rng := process.NewRand(t)
	c := process.NewCluster(t, process.Spec{Bin: bin.Kvnode, Partitions: 4, Configure: func(n *process.Node) {
		if n.ID == "n1" {
			n.Bin = bin.KvnodeFailpoints
		}
	}})
	fp := c.Nodes[0]
	r, b, halt := startBank(t, c.Endpoints(), transferClients, rng)

	began := time.Now()
	at := func() string { return time.Since(began).Round(time.Millisecond).String() }
	pause := func(lo, hi time.Duration, until time.Time) {
		d := lo + time.Duration(rng.Int64N(int64(hi-lo)))
		time.Sleep(min(d, max(time.Until(until), 0)))
	}

	// Phase 1: the nemesis. Its victim is the leader of a random
	// partition (so a participant leader) and, since Txns go to every
	// node, a coordinator too.
	nemesisKills := 0
	end := began.Add(soak)
	for time.Now().Before(end) {
		pause(300*time.Millisecond, 1200*time.Millisecond, end)
		n, why := c.Nodes[rng.IntN(len(c.Nodes))], "at random"
		if leaders, err := r.Leaders(rng); err == nil {
			p := rng.IntN(len(leaders))
			for _, o := range c.Nodes {
				if o.ID == leaders[p] {
					n, why = o, fmt.Sprintf("leader of partition %d", p+1)
				}
			}
		}
		n.Kill9()
		nemesisKills++
		pause(100*time.Millisecond, 800*time.Millisecond, end)
		n.Restart()
		t.Logf("%s: %s (%s) SIGKILLed and restarted", at(), n.ID, why)
	}
	kills := nemesisKills
	rate := float64(r.TotalMultiPartitionTxns()) / time.Since(began).Seconds()
	t.Logf("%s: nemesis done: %d SIGKILLs; %.0f multi-partition Txn attempts/s; %d transfers committed so far", at(), kills, rate, b.Stats.Transfers.Load())

	// Phases 2 and 3: n1 coordinates and dies at a crash point.
	var lastRestart time.Time
	fired := map[string]int{}
	var atRestart int64
	points := []string{"txnAfterPrepare", "txnAfterDecide"}
	for k, point := range points {
		phase := soak / 2
		// The rate measured under the nemesis underestimates the rate
		// without it: N lands in the first half of the phase or so.
		after := max(5, int(rate*phase.Seconds()*(0.3+0.6*rng.Float64())))
		// No Txn reaches n1 before it is ready, or the failpoint could
		// fire before the harness sees it ready.
		r.Avoid(fp.GRPC)
		fp.Kill9()
		kills++
		fp.Env = []string{fmt.Sprintf("CUTKV_FAILPOINTS=%s=exit@%d", point, after)}
		fp.Restart()
		phaseStart := time.Now()
		sentBefore := r.MultiPartitionTxns(fp.GRPC)
		r.Prefer(fp.GRPC)
		r.Avoid("")
		code, desc := fp.WaitExit(phase + 30*time.Second)
		sent := r.MultiPartitionTxns(fp.GRPC) - sentBefore
		want := "failpoint " + point + ": exiting"
		if code != 86 || !strings.Contains(fp.Stderr(), want) {
			t.Errorf("%s: %s after %s=exit@%d, want exit status 86 and %q; stderr:\n%s", fp.ID, desc, point, after, want, process.Tail(fp.Stderr(), 20))
		} else {
			fired[point]++
		}
		t.Logf("%s: %s died at %s after %v (exit@%d; %d multi-partition Txns sent to it)", at(), fp.ID, point, time.Since(phaseStart).Round(time.Millisecond), after, sent)
		fp.Env = nil
		fp.Restart()
		lastRestart, atRestart = time.Now(), b.Stats.Transfers.Load()
		t.Logf("%s: %s restarted without failpoints", at(), fp.ID)
		if k < len(points)-1 {
			// Traffic goes on through the restarted n1 until the phase
			// ends, and for a second at least.
			time.Sleep(max(time.Until(phaseStart.Add(phase)), time.Second))
		}
	}

	// The cluster serves after the last restart; then traffic stops at
	// once, so that the check for leftover locks follows the last crash
	// closely.
	servesAgain(t, b, atRestart)
	halt()
	stopped := time.Now()
	t.Logf("%s: traffic stopped, %v after the last restart; %d SIGKILLs in all, crash points fired: %v",
		at(), stopped.Sub(lastRestart).Round(time.Millisecond), kills, fired)

	// Each SIGKILL leaves the dead coordinator's locks for recovery
	// (rpc.RecoveryTimeout, 2 s), during which the transfers touching them
	// abort: fewer transfers complete here than in TestBankInProcess.
	checkBank(t, b, stopped.Add(settleBound), rng.Uint64(), minTransfersUnderFailures)
	if minKills := max(1, int(soak/(4*time.Second))); nemesisKills < minKills {
		t.Errorf("only %d nemesis SIGKILLs; want at least %d", nemesisKills, minKills)
	}
}
