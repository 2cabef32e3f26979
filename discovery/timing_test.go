package discovery

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// lanTiming mirrors memberlist.DefaultLANConfig, for comparison.
func lanTiming() Timing {
	c := memberlist.DefaultLANConfig()
	t := LocalTiming()
	t.ProbeInterval = c.ProbeInterval
	t.ProbeTimeout = c.ProbeTimeout
	t.SuspicionMult = c.SuspicionMult
	t.SuspicionMaxTimeoutMult = c.SuspicionMaxTimeoutMult
	t.AwarenessMaxMultiplier = c.AwarenessMaxMultiplier
	t.GossipInterval = c.GossipInterval
	t.GossipNodes = c.GossipNodes
	return t
}

const ms = time.Millisecond

func TestSuspicionTimeouts(t *testing.T) {
	local := LocalTiming()
	for _, tc := range []struct {
		name   string
		timing Timing
		n      int
		lo, hi time.Duration
		k      int
		worst  time.Duration
	}{
		// Too few members to confirm: the floor runs alone.
		{"local n=2", local, 2, 1200 * ms, 3600 * ms, 0, 1200 * ms},
		{"local n=3", local, 3, 1200 * ms, 3600 * ms, 0, 1200 * ms},
		// Enough members: starts at the ceiling, confirmations shorten it.
		{"local n=4", local, 4, 1200 * ms, 3600 * ms, 2, 3600 * ms},
		// log10 scaling starts above 10 members.
		{"local n=20", local, 20, 1561200 * time.Microsecond, 4683600 * time.Microsecond, 2, 4683600 * time.Microsecond},
		{"lan n=3", lanTiming(), 3, 4 * time.Second, 24 * time.Second, 0, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi, k := suspicionTimeouts(tc.timing, tc.n)
			if lo != tc.lo || hi != tc.hi || k != tc.k {
				t.Fatalf("suspicionTimeouts = (%v, %v, %d), want (%v, %v, %d)", lo, hi, k, tc.lo, tc.hi, tc.k)
			}
			if got := suspicionWorst(tc.timing, tc.n); got != tc.worst {
				t.Fatalf("suspicionWorst = %v, want %v", got, tc.worst)
			}
		})
	}
}

func TestGossipRounds(t *testing.T) {
	local := LocalTiming() // GossipNodes 3
	for _, tc := range []struct {
		n, want int
	}{
		{1, 1}, {2, 1}, {4, 1}, {5, 2}, {16, 2}, {17, 3}, {64, 3}, {65, 4},
	} {
		if got := gossipRounds(local, tc.n); got != tc.want {
			t.Errorf("gossipRounds(n=%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

// TestDetectionBound is the derivation of the 5 s promise: the worst-case
// time from a member's death until every other member reports it failed.
func TestDetectionBound(t *testing.T) {
	local := LocalTiming()
	for _, tc := range []struct {
		name   string
		timing Timing
		n      int
		// parts of the bound
		cycle, deadline, suspicion, gossip time.Duration
		limit                              time.Duration // 0: no promise
	}{
		// The promise: a 3-member cluster on loopback, under 5 s.
		{"local n=3", local, 3, 1200 * ms, 600 * ms, 1200 * ms, 100 * ms, 5 * time.Second},
		{"local n=2", local, 2, 600 * ms, 600 * ms, 1200 * ms, 100 * ms, 5 * time.Second},
		// Larger clusters: the round-robin cycle and the confirmation
		// ceiling grow; the bound is pessimistic (any of n-1 probers may
		// catch the death, and confirmations cut the suspicion short).
		{"local n=5", local, 5, 2400 * ms, 600 * ms, 3600 * ms, 200 * ms, 0},
		// memberlist's LAN defaults: awareness may stretch a probe 8×.
		{"lan n=3", lanTiming(), 3, 4 * time.Second, 8 * time.Second, 4 * time.Second, 200 * ms, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := probeCycle(tc.timing, tc.n); got != tc.cycle {
				t.Errorf("probeCycle = %v, want %v", got, tc.cycle)
			}
			if got := probeDeadline(tc.timing); got != tc.deadline {
				t.Errorf("probeDeadline = %v, want %v", got, tc.deadline)
			}
			if got := suspicionWorst(tc.timing, tc.n); got != tc.suspicion {
				t.Errorf("suspicionWorst = %v, want %v", got, tc.suspicion)
			}
			if got := time.Duration(gossipRounds(tc.timing, tc.n)) * tc.timing.GossipInterval; got != tc.gossip {
				t.Errorf("gossip = %v, want %v", got, tc.gossip)
			}
			want := tc.cycle + tc.deadline + tc.suspicion + tc.gossip
			got := detectionBound(tc.timing, tc.n)
			if got != want {
				t.Fatalf("detectionBound = %v, want %v", got, want)
			}
			if tc.limit > 0 && got >= tc.limit {
				t.Fatalf("detectionBound = %v, promised < %v", got, tc.limit)
			}
			t.Logf("worst-case detection with %d members: %v", tc.n, got)
		})
	}
	if lan := detectionBound(lanTiming(), 3); lan < 5*time.Second {
		t.Fatalf("LAN defaults detect within %v; LocalTiming would be pointless", lan)
	}
}

func TestSuspectAfter(t *testing.T) {
	local := LocalTiming()
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{2, 1200 * ms}, {3, 1800 * ms}, {5, 3000 * ms},
	} {
		got := suspectAfter(local, tc.n)
		if got != tc.want {
			t.Errorf("suspectAfter(n=%d) = %v, want %v", tc.n, got, tc.want)
		}
		// Suspicion must come before the failure verdict can.
		if got >= detectionBound(local, tc.n) {
			t.Errorf("suspectAfter(n=%d) = %v is not before detectionBound %v", tc.n, got, detectionBound(local, tc.n))
		}
	}
}

func TestNextBackoff(t *testing.T) {
	lo, hi := 100*ms, 2*time.Second
	for _, tc := range []struct {
		cur, want time.Duration
	}{
		{0, lo}, {lo, 200 * ms}, {400 * ms, 800 * ms}, {1600 * ms, hi}, {hi, hi}, {5 * time.Second, hi},
	} {
		if got := nextBackoff(tc.cur, lo, hi); got != tc.want {
			t.Errorf("nextBackoff(%v) = %v, want %v", tc.cur, got, tc.want)
		}
	}
}

func TestTimingDefaultsAndValidate(t *testing.T) {
	got := Timing{ProbeInterval: time.Second}.withDefaults(LocalTiming())
	want := LocalTiming()
	want.ProbeInterval = time.Second
	if got != want {
		t.Fatalf("withDefaults = %+v, want %+v", got, want)
	}
	if err := LocalTiming().validate(); err != nil {
		t.Fatalf("LocalTiming invalid: %v", err)
	}
	for name, mut := range map[string]func(*Timing){
		"probe timeout not below interval": func(t *Timing) { t.ProbeTimeout = t.ProbeInterval },
		"negative duration":                func(t *Timing) { t.GossipInterval = -1 },
		"negative multiplier":              func(t *Timing) { t.SuspicionMult = -1 },
		"retry min above max":              func(t *Timing) { t.JoinRetryMin = 3 * t.JoinRetryMax },
	} {
		tm := LocalTiming()
		mut(&tm)
		if err := tm.validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: validate = %v, want ErrInvalidConfig", name, err)
		}
	}

	var c memberlist.Config
	LocalTiming().apply(&c)
	if c.ProbeInterval != 300*ms || c.SuspicionMult != 4 || c.TCPTimeout != time.Second ||
		c.DeadNodeReclaimTime != 500*ms || c.AwarenessMaxMultiplier != 2 {
		t.Fatalf("apply: %+v", c)
	}
}
