package discovery

import (
	"slices"
	"testing"
	"time"
)

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{
		StateAlive: "alive", StateSuspect: "suspect", StateFailed: "failed", StateLeft: "left", State(9): "State(9)",
	} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

// step is one input to the table and the state of member "n2" it should
// leave behind; changed says whether the step reports a visible change.
type step struct {
	do      func(tb *table, now time.Time) bool
	state   State
	changed bool
}

func aliveStep(instance uint64) func(*table, time.Time) bool {
	return func(tb *table, now time.Time) bool {
		_, ok := tb.alive(Meta{ID: "n2", ClusterID: 1, GRPCAddr: "g2"}, instance, "127.0.0.1:2", now)
		return ok
	}
}

func goneStep(tb *table, now time.Time) bool { _, ok := tb.gone("n2", now); return ok }

func departStep(instance uint64) func(*table, time.Time) bool {
	return func(tb *table, now time.Time) bool {
		_, ok := tb.depart(departure{ID: "n2", Instance: instance}, now)
		return ok
	}
}

func ackStep(tb *table, now time.Time) bool { _, ok := tb.acked("n2", now); return ok }

func expireStep(after time.Duration) func(*table, time.Time) bool {
	return func(tb *table, now time.Time) bool { return len(tb.expire(now, after)) > 0 }
}

func TestTableTransitions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"killed member fails", []step{
			{aliveStep(1), StateAlive, true},
			{goneStep, StateFailed, true},
			{goneStep, StateFailed, false},
		}},
		{"departed member leaves", []step{
			{aliveStep(1), StateAlive, true},
			{departStep(1), StateAlive, false},
			{goneStep, StateLeft, true},
		}},
		{"late departure turns failure into leave", []step{
			{aliveStep(1), StateAlive, true},
			{goneStep, StateFailed, true},
			{departStep(1), StateLeft, true},
			{departStep(1), StateLeft, false},
		}},
		{"departure of another instance is ignored", []step{
			{aliveStep(2), StateAlive, true},
			{departStep(1), StateAlive, false},
			{goneStep, StateFailed, true},
			{departStep(1), StateFailed, false},
		}},
		{"restart clears an old departure", []step{
			{aliveStep(1), StateAlive, true},
			{departStep(1), StateAlive, false},
			{goneStep, StateLeft, true},
			{aliveStep(2), StateAlive, true},
			{goneStep, StateFailed, true},
		}},
		{"restart after failure", []step{
			{aliveStep(1), StateAlive, true},
			{goneStep, StateFailed, true},
			{aliveStep(2), StateAlive, true},
		}},
		{"same metadata again is no change", []step{
			{aliveStep(1), StateAlive, true},
			{aliveStep(1), StateAlive, false},
		}},
		{"silent member turns suspect, an ack revives it", []step{
			{aliveStep(1), StateAlive, true},
			{expireStep(time.Hour), StateAlive, false},
			{expireStep(0), StateSuspect, true},
			{expireStep(0), StateSuspect, false},
			{ackStep, StateAlive, true},
			{ackStep, StateAlive, false},
		}},
		{"suspect member fails", []step{
			{aliveStep(1), StateAlive, true},
			{expireStep(0), StateSuspect, true},
			{goneStep, StateFailed, true},
			{ackStep, StateFailed, false},
		}},
		{"unknown member events are ignored", []step{
			{goneStep, -1, false},
			{departStep(1), -1, false},
			{ackStep, -1, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTable("n1")
			tb.alive(Meta{ID: "n1", ClusterID: 1}, 9, "127.0.0.1:1", time.Unix(0, 0))
			now := time.Unix(100, 0)
			for i, s := range tc.steps {
				now = now.Add(time.Second)
				if changed := s.do(tb, now); changed != s.changed {
					t.Fatalf("step %d: changed = %v, want %v", i, changed, s.changed)
				}
				m, ok := tb.get("n2")
				if s.state < 0 {
					if ok {
						t.Fatalf("step %d: n2 appeared: %+v", i, m)
					}
					continue
				}
				if !ok || m.State != s.state {
					t.Fatalf("step %d: n2 = %+v (found %v), want state %v", i, m, ok, s.state)
				}
				if s.changed && !m.Since.Equal(now) {
					t.Fatalf("step %d: Since = %v, want %v", i, m.Since, now)
				}
			}
			if self, _ := tb.get("n1"); self.State != StateAlive {
				t.Fatalf("self = %+v, want alive", self)
			}
		})
	}
}

func TestTableSelfNeverSuspect(t *testing.T) {
	tb := newTable("n1")
	tb.alive(Meta{ID: "n1"}, 1, "a", time.Unix(0, 0))
	if got := tb.expire(time.Unix(1000, 0), 0); len(got) != 0 {
		t.Fatalf("expire = %+v, self must not turn suspect", got)
	}
	if _, ok := tb.acked("n1", time.Unix(1, 0)); ok {
		t.Fatal("acked self reported a change")
	}
}

func TestTableListsAndDepartures(t *testing.T) {
	tb := newTable("n1")
	t0 := time.Unix(0, 0)
	for i, id := range []string{"n3", "n1", "n2", "n4"} {
		tb.alive(Meta{ID: id}, uint64(i+1), "addr-"+id, t0)
	}
	tb.depart(departure{ID: "n2", Instance: 3}, t0) // leaving, still alive
	tb.depart(departure{ID: "n4", Instance: 4}, t0)
	tb.gone("n4", t0) // left
	tb.gone("n3", t0) // failed
	var ids []string
	for _, m := range tb.members() {
		ids = append(ids, m.ID+"="+m.State.String())
	}
	if got, want := len(ids), 4; got != want {
		t.Fatalf("members = %v", ids)
	}
	if want := []string{"n1=alive", "n2=alive", "n3=failed", "n4=left"}; !slices.Equal(ids, want) {
		t.Fatalf("members = %v, want %v", ids, want)
	}
	if got := tb.live(); got != 2 {
		t.Fatalf("live = %d, want 2", got)
	}
	deps := tb.departures()
	if len(deps) != 2 || deps[0] != (departure{ID: "n2", Instance: 3}) || deps[1] != (departure{ID: "n4", Instance: 4}) {
		t.Fatalf("departures = %+v", deps)
	}
}
