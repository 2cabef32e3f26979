package txn

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/cutkv/cutkv/internal/notify"
)

// WaitQueue is a partition leader's record of the transactions that
// passed its door and have not yet applied there, under wait-die. Each
// entry is either waiting (older than every holder of a lock it wants,
// it waits for them to go) or admitted (its entry is proposed, not yet
// applied). Both reserve what they want:
//
//   - a younger transaction whose wants conflict with an entry dies, as
//     it would against a holder. Without the reservation a transaction
//     over many keys (an audit reading every account) waits for a moment
//     when none of its keys is held, and under steady load small, younger
//     transactions keep taking those keys first: it is starved however
//     old it grows;
//   - an older transaction that conflicts with a younger admitted entry
//     waits for it to apply (then it is a holder, or refused). Without
//     that, both are proposed and the first to apply wins: an audit over
//     16 partitions met, on some partition, a younger transfer already on
//     its way nearly every attempt, and was refused where it applied.
//
// Admit decides under the queue's lock, so that of two transactions that
// look at once one sees the other. The queue is not replicated and
// decides nothing that applies: the state machine's lock table does (and
// refuses what a new leader, with an empty queue, lets through). Safe for
// concurrent use.
type WaitQueue struct {
	n       atomic.Int32 // len(entries)
	mu      sync.Mutex
	entries map[string]*entry
	changed notify.Signal // wakes the waiters when an entry leaves
}

type entry struct {
	prio     int64
	wants    []Want
	admitted bool
}

// Verdict is wait-die's answer for a transaction at a partition leader.
type Verdict int

const (
	// Proceed: propose the transaction's entry.
	Proceed Verdict = iota
	// Wait: look again when a holder or an admitted entry goes.
	Wait
	// Die: refuse; the client retries with the same priority, older.
	Die
)

// Ticket is a transaction's entry in a WaitQueue, from Enter to Leave.
type Ticket struct {
	q  *WaitQueue
	id string
	e  *entry
}

// Enter records transaction id (priority prio) as waiting for wants. The
// caller must Leave, once its entry applied or it gave up.
func (q *WaitQueue) Enter(id string, prio int64, wants []Want) *Ticket {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.entries == nil {
		q.entries = map[string]*entry{}
	}
	e := &entry{prio: prio, wants: wants}
	q.entries[id] = e
	q.n.Store(int32(len(q.entries)))
	return &Ticket{q: q, id: id, e: e}
}

// Admit decides for t: Die when an older entry conflicts (it reserved
// the keys, or is about to hold them) or held says Die; Wait when a
// younger admitted entry conflicts (its entry is on its way) or held
// says Wait; else t is admitted and Proceed. held judges the partition's
// lock holders; it is called under the queue's lock.
func (t *Ticket) Admit(held func() Verdict) Verdict {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	wait := false
	for id, e := range q.entries {
		if e == t.e || !WantsConflict(e.wants, t.e.wants) {
			continue
		}
		switch {
		case Older(e.prio, id, t.e.prio, t.id):
			return Die
		case e.admitted:
			wait = true
		}
	}
	if v := held(); v != Proceed {
		return v
	}
	if wait {
		return Wait
	}
	t.e.admitted = true
	return Proceed
}

// Leave removes t's entry and wakes the transactions waiting for it.
func (t *Ticket) Leave() {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.entries[t.id] != t.e {
		return
	}
	delete(q.entries, t.id)
	q.n.Store(int32(len(q.entries)))
	q.changed.Notify()
}

// Changed returns a channel that is closed when the next entry leaves.
// Take it before looking, as with partition.Partition.Changed.
func (q *WaitQueue) Changed() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.changed.Wait()
}

// Len returns the number of entries: waiting and admitted transactions.
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
