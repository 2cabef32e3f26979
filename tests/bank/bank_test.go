package bank

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/tests/process"
)

// Shape of the workload (doc.go).
const (
	accounts        = 20
	initialBalance  = 100
	transferClients = 8
	readers         = 2
	// minTransfers and minReads make a run mean something: counts of
	// completed work, never speed.
	minTransfers              = 50
	minTransfersUnderFailures = 20
	minReads                  = 5
	// settleBound: once traffic has stopped, a transaction over every
	// account commits and every account reads back within this long.
	settleBound = 10 * time.Second
)

// checkBank settles the bank, checks its history and the counts of
// completed work, and logs what the clients did.
func checkBank(t *testing.T, b *Bank, deadline time.Time, seed uint64, minTransfers int64) {
	t.Helper()
	took, err := b.Settle(deadline, seed)
	if err != nil {
		t.Errorf("no lock may outlive the run: %v", err)
	} else {
		t.Logf("after traffic stopped, a transaction over all %d accounts committed and every account read back through every node in %v", len(b.Keys), took.Round(time.Millisecond))
	}
	t.Log(b.Summary())
	if err == nil {
		for _, e := range b.Check() {
			t.Error(e)
		}
		applied, not := b.Outcomes()
		t.Logf("unknown-outcome transfers: %d applied, %d not applied", applied, not)
	}
	if n := b.Stats.Transfers.Load(); n < minTransfers {
		t.Errorf("only %d transfers committed; want at least %d", n, minTransfers)
	}
	if n := b.Stats.Reads.Load(); n < minReads {
		t.Errorf("only %d reads of every account committed; want at least %d (reader starvation?)", n, minReads)
	}
}

// TestBankInProcess runs the bank workload on an in-process 3-node
// cluster with 4 partitions for CUTKV_SOAK: every read of all accounts
// and the final state sum to the initial total, and the history passes
// the all-or-nothing and serializability checks (History.Check).
func TestBankInProcess(t *testing.T) {
	soak := process.SoakDuration(t)
	rng := process.NewRand(t)
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 4})
	_, b, halt := startBank(t, c.Endpoints(), transferClients, rng)
	time.Sleep(soak)
	halt()
	checkBank(t, b, time.Now().Add(settleBound), rng.Uint64(), minTransfers)
}

// servesAgain checks that 10 more transfers than atRestart commit
// within 10 s: the cluster serves after the last restart.
func servesAgain(t *testing.T, b *Bank, atRestart int64) {
	t.Helper()
	if ok, _ := process.WaitFor(10*time.Second, func() (bool, string) {
		return b.Stats.Transfers.Load() >= atRestart+10, ""
	}); !ok {
		t.Errorf("fewer than 10 transfers committed within 10s after the last restart")
	}
}

// startBank opens accounts on the cluster at endpoints and starts the
// workload with transfers transfer clients and the readers. halt stops
// it and waits for the clients (once; it also runs at the test's end).
func startBank(t *testing.T, endpoints []string, transfers int, rng *rand.Rand) (r *Router, b *Bank, halt func()) {
	t.Helper()
	r, err := NewRouter(endpoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	b = NewBank(r, 4, accounts, initialBalance)
	if err := b.Init(rng.Uint64()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	wait := b.Run(stop, transfers, readers, rng.Uint64())
	var once sync.Once
	halt = func() { once.Do(func() { close(stop); wait() }) }
	t.Cleanup(halt) // registered after r.Close: runs before it
	return r, b, halt
}
