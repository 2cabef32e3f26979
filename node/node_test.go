package node

import (
	"context"
	"testing"
	"time"

	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/rpc"
)

// TestRunStopsWithContext: Run returns once its context ends, every loop
// stopped (the server waits for it before closing the store and the WAL
// the loops use); the rpc.Node's PokeCuts reaches the cut agent.
func TestRunStopsWithContext(t *testing.T) {
	rn := &rpc.Node{Clock: cut.NewClock()}
	n := New(rn, Config{CutInterval: time.Hour})
	rn.PokeCuts()
	select {
	case <-n.poke:
	default:
		t.Fatal("rpc.Node.PokeCuts does not wake the cut agent")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		n.Run(ctx)
		close(done)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run still running 5 s after its context ended")
	}
}
