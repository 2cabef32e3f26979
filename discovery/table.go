package discovery

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// State is a member's state as this node sees it.
type State int

const (
	// StateAlive: memberlist holds the member alive and, if this node probes
	// it, it answers.
	StateAlive State = iota
	// StateSuspect: memberlist still holds the member alive, but this node's
	// direct probes of it have gone unanswered for longer than a probe cycle
	// (suspectAfter). Advisory: memberlist does not expose its own suspicion.
	StateSuspect
	// StateFailed: the cluster's failure detector declared the member dead
	// (it stopped without leaving, or is unreachable).
	StateFailed
	// StateLeft: the member left on purpose (Leave).
	StateLeft
)

// String returns "alive", "suspect", "failed" or "left".
func (s State) String() string {
	switch s {
	case StateAlive:
		return "alive"
	case StateSuspect:
		return "suspect"
	case StateFailed:
		return "failed"
	case StateLeft:
		return "left"
	default:
		return fmt.Sprintf("State(%d)", int(s))
	}
}

// record is the table's entry for one member id.
type record struct {
	m Member
	// leaving: a departure for m.Instance is known, so the member's next
	// disappearance is a leave, not a failure.
	leaving bool
	// lastAck: when this node last heard the member answer a direct probe,
	// or when the member (re)appeared.
	lastAck time.Time
}

// table is the membership as this node sees it: every member ever seen,
// keyed by id. It is a plain value driven by method calls carrying the
// current time; each call that changes what a caller of Members would see
// returns the changed Member and true. Not safe for concurrent use.
type table struct {
	self string
	recs map[string]*record
}

func newTable(self string) *table {
	return &table{self: self, recs: make(map[string]*record)}
}

// alive records that memberlist holds the member alive with this metadata
// (it joined, came back, or changed its metadata).
func (t *table) alive(meta Meta, instance uint64, addr string, now time.Time) (Member, bool) {
	r, ok := t.recs[meta.ID]
	if !ok {
		r = &record{
			m:       Member{Meta: meta, Instance: instance, GossipAddr: addr, State: StateAlive, Since: now},
			lastAck: now,
		}
		t.recs[meta.ID] = r
		return r.m, true
	}
	changed := r.m.Meta != meta || r.m.GossipAddr != addr || r.m.Instance != instance
	if r.m.Instance != instance {
		// A new process: departures of the old one do not apply.
		r.leaving = false
	}
	r.m.Meta, r.m.Instance, r.m.GossipAddr = meta, instance, addr
	r.lastAck = now
	if r.m.State != StateAlive {
		r.m.State, r.m.Since = StateAlive, now
		changed = true
	}
	return r.m, changed
}

// gone records that memberlist declared the member dead or left. memberlist
// does not say which, so a known departure decides.
func (t *table) gone(id string, now time.Time) (Member, bool) {
	r, ok := t.recs[id]
	if !ok || r.m.State == StateFailed || r.m.State == StateLeft {
		return Member{}, false
	}
	r.m.State, r.m.Since = StateFailed, now
	if r.leaving {
		r.m.State = StateLeft
	}
	return r.m, true
}

// depart records a departure notice. Notices for another instance of the
// member (an earlier process, or a later one this node has not seen yet)
// are ignored. A notice that arrives after the member was declared failed
// turns the failure into a leave: gossip does not keep messages in order.
func (t *table) depart(d departure, now time.Time) (Member, bool) {
	r, ok := t.recs[d.ID]
	if !ok || r.m.Instance != d.Instance {
		return Member{}, false
	}
	r.leaving = true
	if r.m.State != StateFailed {
		return Member{}, false
	}
	r.m.State, r.m.Since = StateLeft, now
	return r.m, true
}

// acked records that the member answered one of this node's direct probes.
func (t *table) acked(id string, now time.Time) (Member, bool) {
	r, ok := t.recs[id]
	if !ok || id == t.self {
		return Member{}, false
	}
	r.lastAck = now
	if r.m.State != StateSuspect {
		return Member{}, false
	}
	r.m.State, r.m.Since = StateAlive, now
	return r.m, true
}

// expire marks StateSuspect every other alive member that has not answered
// a direct probe for longer than after. The result is sorted by id.
func (t *table) expire(now time.Time, after time.Duration) []Member {
	var out []Member
	for id, r := range t.recs {
		if id == t.self || r.m.State != StateAlive || now.Sub(r.lastAck) <= after {
			continue
		}
		r.m.State, r.m.Since = StateSuspect, now
		out = append(out, r.m)
	}
	sortMembers(out)
	return out
}

// live counts the members memberlist holds alive (alive or suspect here),
// self included.
func (t *table) live() int {
	n := 0
	for _, r := range t.recs {
		if r.m.State == StateAlive || r.m.State == StateSuspect {
			n++
		}
	}
	return n
}

// departures lists every departure this node knows of, sorted by id, for
// other members that may have missed them.
func (t *table) departures() []departure {
	var out []departure
	for id, r := range t.recs {
		if r.leaving || r.m.State == StateLeft {
			out = append(out, departure{ID: id, Instance: r.m.Instance})
		}
	}
	slices.SortFunc(out, func(a, b departure) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// get returns the member with this id.
func (t *table) get(id string) (Member, bool) {
	r, ok := t.recs[id]
	if !ok {
		return Member{}, false
	}
	return r.m, true
}

// members returns every member, sorted by id.
func (t *table) members() []Member {
	out := make([]Member, 0, len(t.recs))
	for _, r := range t.recs {
		out = append(out, r.m)
	}
	sortMembers(out)
	return out
}

func sortMembers(ms []Member) {
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
}
