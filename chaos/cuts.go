package chaos

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// cutter asks a random node for a consistent cut every 500 ms (one call
// at a time: a cut in flight is joined, not doubled).
type cutter struct {
	c    *cluster
	r    *rand.Rand
	gate *gate // shared with the snapshotter

	mu        sync.Mutex
	calls     int
	completed []uint64
	failed    int
	errors    int
	lastDone  time.Time
	inFlight  bool
	flightCh  chan struct{} // closed when a call starts; replaced after
	doneCh    chan struct{} // closed when a cut completes; replaced after
	lastError string
}

func newCutter(c *cluster, seed uint64, g *gate) *cutter {
	return &cutter{c: c, r: rand.New(rand.NewPCG(seed, 0xc07)), gate: g, flightCh: make(chan struct{}), doneCh: make(chan struct{})}
}

// everyTick calls fn every d until ctx ends.
func everyTick(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}

func (cu *cutter) run(ctx context.Context, every time.Duration) {
	everyTick(ctx, every, func() { cu.tick(ctx) })
}

// tick starts a CreateCut unless one is in flight or the gate is held.
func (cu *cutter) tick(ctx context.Context) {
	cu.mu.Lock()
	busy := cu.inFlight
	if !busy && !cu.gate.enter() {
		cu.mu.Unlock()
		return
	}
	if !busy {
		cu.inFlight = true
		cu.calls++
		close(cu.flightCh)
		cu.flightCh = make(chan struct{})
	}
	i := cu.r.IntN(len(cu.c.conns))
	cu.mu.Unlock()
	if !busy {
		go cu.call(ctx, i)
	}
}

func (cu *cutter) call(ctx context.Context, i int) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	resp, err := kvrpc.NewClusterClient(cu.c.conns[i]).CreateCut(cctx, &kvpb.CreateCutRequest{})
	cancel()
	defer cu.gate.leave()
	cu.mu.Lock()
	defer cu.mu.Unlock()
	cu.inFlight = false
	switch {
	case err != nil:
		cu.errors++
		cu.lastError = err.Error()
	case resp.GetCut().GetState() == kvpb.CutState_CUT_STATE_COMPLETED:
		v := resp.GetCut().GetVersion()
		if n := len(cu.completed); n == 0 || cu.completed[n-1] != v {
			cu.completed = append(cu.completed, v)
		}
		cu.lastDone = time.Now()
		close(cu.doneCh)
		cu.doneCh = make(chan struct{})
	default:
		cu.failed++
		cu.lastError = resp.GetCut().GetError()
	}
}

// completedAfter waits up to within for a cut that completes after t and
// returns how long after t it completed.
func (cu *cutter) completedAfter(ctx context.Context, t time.Time, within time.Duration) (time.Duration, bool) {
	deadline := time.NewTimer(time.Until(t.Add(within)))
	defer deadline.Stop()
	for {
		cu.mu.Lock()
		last, ch := cu.lastDone, cu.doneCh
		cu.mu.Unlock()
		if last.After(t) {
			return last.Sub(t), true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return 0, false
		case <-ctx.Done():
			return 0, false
		}
	}
}

// waitInFlight waits up to within until a CreateCut is in flight.
func (cu *cutter) waitInFlight(ctx context.Context, within time.Duration) bool {
	cu.mu.Lock()
	if cu.inFlight {
		cu.mu.Unlock()
		return true
	}
	ch := cu.flightCh
	cu.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-time.After(within):
		return false
	case <-ctx.Done():
		return false
	}
}

// summary returns the counts.
func (cu *cutter) summary() (calls, completed, failed, errors int, last string) {
	cu.mu.Lock()
	defer cu.mu.Unlock()
	return cu.calls, len(cu.completed), cu.failed, cu.errors, cu.lastError
}

// snapshotTaken is one snapshot the round took.
type snapshotTaken struct {
	ID  string
	Cut uint64
}

// snapshotter asks a random node for an incremental snapshot every 5 s.
type snapshotter struct {
	c    *cluster
	r    *rand.Rand
	gate *gate // shared with the cutter

	mu     sync.Mutex
	taken  []snapshotTaken
	errors int
	last   string
}

func (s *snapshotter) run(ctx context.Context, every time.Duration) {
	everyTick(ctx, every, func() { s.once(ctx) })
}

func (s *snapshotter) once(ctx context.Context) {
	if !s.gate.enter() {
		return
	}
	defer s.gate.leave()
	s.mu.Lock()
	i := s.r.IntN(len(s.c.conns))
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	stream, err := kvrpc.NewClusterClient(s.c.conns[i]).CreateSnapshot(cctx, &kvpb.CreateSnapshotRequest{})
	var res *kvpb.CreateSnapshotResult
	for err == nil {
		var m *kvpb.CreateSnapshotResponse
		m, err = stream.Recv()
		if m.GetResult() != nil {
			res = m.GetResult()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if res != nil && (err == nil || errors.Is(err, io.EOF)) {
		s.taken = append(s.taken, snapshotTaken{ID: res.GetSnapshot().GetId(), Cut: res.GetSnapshot().GetCutVersion()})
		return
	}
	s.errors++
	if err != nil {
		s.last = err.Error()
	}
}

func (s *snapshotter) snapshots() ([]snapshotTaken, int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]snapshotTaken(nil), s.taken...), s.errors, s.last
}

// gate lets the nemesis hold new cuts and snapshots for a moment (the
// catch-up's checkpoint, which truncates the logs behind it at once, is
// preceded by a verifier pass that must see every cut completed so far).
type gate struct {
	mu   sync.Mutex
	held bool
	busy int // calls in flight
}

// enter starts a call unless the gate is held; a call entered must leave.
func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held {
		return false
	}
	g.busy++
	return true
}

func (g *gate) leave() {
	g.mu.Lock()
	g.busy--
	g.mu.Unlock()
}

// hold stops new calls and waits up to within for those in flight to
// end; it returns whether they did, and the function that opens the gate
// again.
func (g *gate) hold(within time.Duration) (idle bool, release func()) {
	g.mu.Lock()
	g.held = true
	g.mu.Unlock()
	release = func() {
		g.mu.Lock()
		g.held = false
		g.mu.Unlock()
	}
	deadline := time.Now().Add(within)
	for {
		g.mu.Lock()
		busy := g.busy
		g.mu.Unlock()
		if busy == 0 {
			return true, release
		}
		if time.Now().After(deadline) {
			return false, release
		}
		time.Sleep(10 * time.Millisecond)
	}
}
