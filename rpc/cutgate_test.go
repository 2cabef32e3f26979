package rpc

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cutkv/cutkv/cut"
)

// gateNode is a node whose reads of group 0 answer allocated (or fail),
// counted.
type gateNode struct {
	*Node
	allocated atomic.Uint64
	fail      atomic.Bool
	reads     atomic.Int32
}

func newGateNode() *gateNode {
	g := &gateNode{Node: &Node{Clock: cut.NewClock()}}
	g.versions.read = func(context.Context) (uint64, error) {
		g.reads.Add(1)
		if g.fail.Load() {
			return 0, errors.New("group 0 has no leader")
		}
		return g.allocated.Load(), nil
	}
	return g
}

// TestAdmitVersion: a version at or below known is taken without asking
// group 0; one above it is taken once group 0 says it was allocated,
// refused (InvalidArgument, naming the field and group 0's highest) when
// it was not, and unconfirmed (not applied) when group 0 cannot answer.
// A refused version never raises the clock.
func TestAdmitVersion(t *testing.T) {
	ctx := context.Background()
	n := newGateNode()
	n.Clock.Raise(3)
	if err := n.admitVersion(ctx, "cut_version", 3); err != nil || n.reads.Load() != 0 {
		t.Fatalf("a known version: %v after %d reads, want nil after none", err, n.reads.Load())
	}

	n.allocated.Store(5)
	if err := n.admitVersion(ctx, "cut_version", 5); err != nil || n.Clock.Load() != 5 {
		t.Fatalf("an allocated version: %v, clock %d; want admitted, clock 5", err, n.Clock.Load())
	}
	if n.reads.Load() != 1 {
		t.Fatalf("%d reads of group 0, want 1", n.reads.Load())
	}

	err := n.admitVersion(ctx, "header.cut_version", 1<<40)
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "header.cut_version") || !strings.Contains(err.Error(), "is 5") {
		t.Fatalf("an unallocated version: %v, want ErrInvalidArgument naming the field and 5", err)
	}
	if n.Clock.Load() != 5 {
		t.Fatalf("a refused version moved the clock to %d", n.Clock.Load())
	}

	n.fail.Store(true)
	if err := n.admitVersion(ctx, "op.stamp", 6); !errors.Is(err, ErrUnconfirmed) || !strings.Contains(err.Error(), "op.stamp") {
		t.Fatalf("group 0 unreachable: %v, want ErrUnconfirmed naming the field", err)
	}
	// A failed read answers nobody else: the next call asks again.
	n.fail.Store(false)
	n.allocated.Store(6)
	before := n.reads.Load()
	if err := n.admitVersion(ctx, "op.stamp", 6); err != nil || n.Clock.Load() != 6 || n.reads.Load() != before+1 {
		t.Fatalf("after group 0 came back: %v, clock %d, %d reads; want admitted after one more read", err, n.Clock.Load(), n.reads.Load()-before)
	}
}

// TestAdmitVersionSharesReads: requests that name an unallocated version
// and arrived before a read of group 0 began share that read, so a flood
// of them costs a read at a time, never one per request; one that
// arrived after the read began asks again.
func TestAdmitVersionSharesReads(t *testing.T) {
	n := newGateNode()
	n.allocated.Store(2)
	arrived := n.versions.reads.Load() // every caller arrives before any read
	const callers = 50
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.confirmAllocated(context.Background(), 1000, arrived); err != nil {
				t.Errorf("confirmAllocated: %v", err)
			}
		}()
	}
	wg.Wait()
	if r := n.reads.Load(); r != 1 {
		t.Fatalf("%d callers made %d reads of group 0, want 1", callers, r)
	}
	if got := n.versions.allocated.Load(); got != 2 {
		t.Fatalf("allocated = %d after the read, want 2", got)
	}
	// Arriving now, after that read began: it is not this call's answer.
	n.allocated.Store(1000)
	if err := n.admitVersion(context.Background(), "cut_version", 1000); err != nil || n.reads.Load() != 2 {
		t.Fatalf("a version allocated after the shared read: %v after %d reads, want admitted after 2", err, n.reads.Load())
	}
}
