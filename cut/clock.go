package cut

import (
	"sync"
	"sync/atomic"

	"github.com/cutkv/cutkv/internal/notify"
)

// Clock is a node's known cut version: the highest it has seen. It only
// grows. Safe for concurrent use.
type Clock struct {
	v atomic.Uint64

	mu      sync.Mutex
	changed notify.Signal // wakes the waiters at every raise; guarded by mu
}

// NewClock returns a clock at version 0.
func NewClock() *Clock { return &Clock{} }

// Load returns the known version.
func (c *Clock) Load() uint64 { return c.v.Load() }

// Raise sets the known version to v if v is higher, and says whether it
// did. Merging a marker is Raise(marker).
func (c *Clock) Raise(v uint64) bool {
	for {
		cur := c.v.Load()
		if v <= cur {
			return false
		}
		if c.v.CompareAndSwap(cur, v) {
			c.mu.Lock()
			c.changed.Notify()
			c.mu.Unlock()
			return true
		}
	}
}

// Changed returns a channel closed at the next raise.
func (c *Clock) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed.Wait()
}
