package cut

import (
	"sync"
	"testing"
	"testing/synctest"
)

func TestClockRaise(t *testing.T) {
	c := NewClock()
	if c.Load() != 0 {
		t.Fatalf("new clock at %d", c.Load())
	}
	steps := []struct {
		v      uint64
		raised bool
		after  uint64
	}{
		{0, false, 0},
		{3, true, 3},
		{2, false, 3},
		{3, false, 3},
		{4, true, 4},
		{1, false, 4},
	}
	for _, s := range steps {
		if got := c.Raise(s.v); got != s.raised || c.Load() != s.after {
			t.Fatalf("Raise(%d) = %v, Load %d; want %v, %d", s.v, got, c.Load(), s.raised, s.after)
		}
	}
}

// TestClockRaiseConcurrent raises one clock from many goroutines while
// others read it: reads never go back, every successful raise is a
// strict increase, and the end is the highest value raised.
func TestClockRaiseConcurrent(t *testing.T) {
	const writers, perWriter = 8, 2000
	c := NewClock()
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			var last uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				v := c.Load()
				if v < last {
					t.Errorf("Load went back from %d to %d", last, v)
					return
				}
				last = v
			}
		})
	}
	var writersWG sync.WaitGroup
	for g := range writers {
		writersWG.Go(func() {
			var lastRaised uint64
			for i := range perWriter {
				// Interleaved, partly decreasing values per writer.
				v := uint64(i*writers+g) ^ uint64(i%7)
				if c.Raise(v) {
					if v <= lastRaised {
						t.Errorf("writer %d raised to %d after raising to %d", g, v, lastRaised)
					}
					lastRaised = v
					if got := c.Load(); got < v {
						t.Errorf("Load %d after a raise to %d", got, v)
					}
				}
			}
		})
	}
	writersWG.Wait()
	close(stop)
	readers.Wait()
	var want uint64
	for g := range writers {
		for i := range perWriter {
			want = max(want, uint64(i*writers+g)^uint64(i%7))
		}
	}
	if got := c.Load(); got != want {
		t.Fatalf("clock at %d, want the highest raise %d", got, want)
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestClockChanged(t *testing.T) {
	c := NewClock()
	ch := c.Changed()
	if closed(ch) {
		t.Fatal("Changed closed before any raise")
	}
	c.Raise(0)
	if closed(ch) {
		t.Fatal("Changed closed by a raise to the same version")
	}
	c.Raise(2)
	if !closed(ch) {
		t.Fatal("Changed not closed by a raise")
	}
	ch2 := c.Changed()
	if closed(ch2) {
		t.Fatal("the next Changed is closed already")
	}
	c.Raise(1)
	c.Raise(2)
	if closed(ch2) {
		t.Fatal("Changed closed by a lower or equal version")
	}
	c.Raise(3)
	if !closed(ch2) {
		t.Fatal("Changed not closed by the second raise")
	}
}

// TestClockChangedNoLostWakeup waits, the way the cut agent does (take
// Changed, then Load, then wait), for raises made concurrently: it must
// see the last one. In a synctest bubble a lost wakeup is a deadlock,
// which fails the test at once instead of hanging it.
func TestClockChangedNoLostWakeup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const target = 200
		c := NewClock()
		done := make(chan uint64)
		go func() {
			for {
				changed := c.Changed()
				if v := c.Load(); v >= target {
					done <- v
					return
				}
				<-changed
			}
		}()
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for v := uint64(g + 1); v <= target; v += 4 {
					c.Raise(v)
				}
			})
		}
		wg.Wait()
		if v := <-done; v != target {
			t.Fatalf("waiter saw %d, want %d", v, target)
		}
	})
}
