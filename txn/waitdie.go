package txn

import (
	"bytes"
	"sync"
	"sync/atomic"
)

// WaitQueue is a partition leader's record of the transactions waiting
// for locks under wait-die. A transaction older than every holder of a
// lock it wants waits; while it waits, what it wants is reserved: a
// younger transaction whose wants conflict with an older waiter's dies,
// as it would against a holder. Without the reservation a transaction
// over many keys (an audit reading every account) waits for a moment when
// none of its keys is held, and under steady load small, younger
// transactions keep taking those keys first: it is starved however old
// it grows.
//
// The queue is not replicated and decides nothing that applies: the
// state machine's lock table does. It only sorts, on the leader, who
// waits and who dies. Safe for concurrent use.
type WaitQueue struct {
	n       atomic.Int32 // len(waiters): most checks find none, without the lock
	mu      sync.Mutex
	waiters map[string]waiter
}

type waiter struct {
	prio  int64
	wants []Want
}

// Wait records transaction id (priority prio) as waiting for wants until
// the returned function is called.
func (q *WaitQueue) Wait(id string, prio int64, wants []Want) (done func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.waiters == nil {
		q.waiters = map[string]waiter{}
	}
	q.waiters[id] = waiter{prio: prio, wants: wants}
	q.n.Store(int32(len(q.waiters)))
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		delete(q.waiters, id)
		q.n.Store(int32(len(q.waiters)))
	}
}

// OlderWaiter returns a waiting transaction older than id (priority prio)
// whose wants conflict with wants: id must die rather than take the locks
// before it.
func (q *WaitQueue) OlderWaiter(id string, prio int64, wants []Want) (string, bool) {
	if q.n.Load() == 0 {
		return "", false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for wid, w := range q.waiters {
		if wid != id && Older(w.prio, wid, prio, id) && WantsConflict(w.wants, wants) {
			return wid, true
		}
	}
	return "", false
}

// Len returns the number of waiting transactions.
func (q *WaitQueue) Len() int { return int(q.n.Load()) }

// WantsConflict says whether two transactions' wants could not be held
// at once, by the lock table's rules: an exclusive point lock conflicts
// with any lock on its key and with a range over it; shared locks and
// ranges (which are shared) do not conflict with each other.
func WantsConflict(a, b []Want) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Mode != Exclusive && y.Mode != Exclusive {
				continue
			}
			switch {
			case x.isRange() && y.isRange():
				// Ranges are shared: covered above.
			case x.isRange():
				if x.covers(y.Start) {
					return true
				}
			case y.isRange():
				if y.covers(x.Start) {
					return true
				}
			case bytes.Equal(x.Start, y.Start):
				return true
			}
		}
	}
	return false
}
