package txn

import (
	"bytes"
	"sort"
)

// Mode is a lock mode.
type Mode uint8

// Lock modes: reads share, writes exclude.
const (
	Shared Mode = iota + 1
	Exclusive
)

// Want is one lock a transaction asks for: a key (End nil) or a key range
// [Start, End) (End empty = to the end of the key space; ranges are
// always Shared: scans only read).
type Want struct {
	Start []byte
	End   []byte // nil: a point lock on Start; non-nil: a range
	Mode  Mode
}

func (w Want) isRange() bool { return w.End != nil }

func (w Want) covers(key []byte) bool {
	return bytes.Compare(key, w.Start) >= 0 && (len(w.End) == 0 || bytes.Compare(key, w.End) < 0)
}

type pointLock struct {
	excl   string              // holder of the exclusive lock, "" if none
	shared map[string]struct{} // holders of shared locks
}

// LockTable holds the locks of prepared transactions of one partition.
// Not safe for concurrent use: its owner serializes calls.
type LockTable struct {
	points map[string]*pointLock
	ranges map[string][]Want // by holder
	held   map[string][]Want // every lock, by holder
}

// NewLockTable returns an empty table.
func NewLockTable() *LockTable {
	return &LockTable{points: map[string]*pointLock{}, ranges: map[string][]Want{}, held: map[string][]Want{}}
}

// Conflicts returns the other transactions whose locks conflict with
// wants, sorted and without duplicates; empty means txn may take them.
// A transaction never conflicts with itself.
func (t *LockTable) Conflicts(txn string, wants []Want) []string {
	set := map[string]struct{}{}
	for _, w := range wants {
		if w.isRange() {
			// A (shared) range conflicts with exclusive point locks in it.
			for k, pl := range t.points {
				if pl.excl != "" && pl.excl != txn && w.covers([]byte(k)) {
					set[pl.excl] = struct{}{}
				}
			}
			continue
		}
		if pl := t.points[string(w.Start)]; pl != nil {
			if pl.excl != "" && pl.excl != txn {
				set[pl.excl] = struct{}{}
			}
			if w.Mode == Exclusive {
				for h := range pl.shared {
					if h != txn {
						set[h] = struct{}{}
					}
				}
			}
		}
		if w.Mode == Exclusive {
			for h, rs := range t.ranges {
				if h == txn {
					continue
				}
				for _, r := range rs {
					if r.covers(w.Start) {
						set[h] = struct{}{}
					}
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for h := range set {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// Acquire takes every lock in wants for txn, or none when another
// transaction holds a conflicting one (whose ids it returns). Locks txn
// already holds are kept; asking again is harmless.
func (t *LockTable) Acquire(txn string, wants []Want) (conflicts []string) {
	if c := t.Conflicts(txn, wants); len(c) > 0 {
		return c
	}
	for _, w := range wants {
		w = Want{Start: bytes.Clone(w.Start), End: cloneEnd(w.End), Mode: w.Mode}
		t.held[txn] = append(t.held[txn], w)
		if w.isRange() {
			t.ranges[txn] = append(t.ranges[txn], w)
			continue
		}
		pl := t.points[string(w.Start)]
		if pl == nil {
			pl = &pointLock{}
			t.points[string(w.Start)] = pl
		}
		if w.Mode == Exclusive {
			pl.excl = txn
		} else {
			if pl.shared == nil {
				pl.shared = map[string]struct{}{}
			}
			pl.shared[txn] = struct{}{}
		}
	}
	return nil
}

func cloneEnd(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// Release drops every lock txn holds.
func (t *LockTable) Release(txn string) {
	for _, w := range t.held[txn] {
		if w.isRange() {
			continue
		}
		pl := t.points[string(w.Start)]
		if pl == nil {
			continue
		}
		if pl.excl == txn {
			pl.excl = ""
		}
		delete(pl.shared, txn)
		if pl.excl == "" && len(pl.shared) == 0 {
			delete(t.points, string(w.Start))
		}
	}
	delete(t.held, txn)
	delete(t.ranges, txn)
}

// WriteBlocker returns a transaction whose lock stops a plain
// (non-transactional) write of key: any lock on the key or a range over it.
func (t *LockTable) WriteBlocker(key []byte) (string, bool) {
	c := t.Conflicts("", []Want{{Start: key, Mode: Exclusive}})
	if len(c) == 0 {
		return "", false
	}
	return c[0], true
}

// ReadBlocker returns a transaction holding an exclusive lock on a key in
// [start, end) (end nil: only start itself; empty: to the end): a prepared
// write whose outcome a plain read must not guess.
func (t *LockTable) ReadBlocker(start, end []byte) (string, bool) {
	w := Want{Start: start, End: end, Mode: Shared}
	if end == nil {
		if pl := t.points[string(start)]; pl != nil && pl.excl != "" {
			return pl.excl, true
		}
		return "", false
	}
	c := t.Conflicts("", []Want{w})
	if len(c) == 0 {
		return "", false
	}
	return c[0], true
}

// Holders returns the transactions holding any lock, sorted.
func (t *LockTable) Holders() []string {
	out := make([]string, 0, len(t.held))
	for h := range t.held {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// Len returns the number of transactions holding locks.
func (t *LockTable) Len() int { return len(t.held) }
