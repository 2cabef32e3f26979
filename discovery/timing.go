package discovery

import (
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/memberlist"
)

// Timing holds the clocks of the failure detector and of gossip. Each field
// maps onto one memberlist.Config field (named in its comment). The zero
// value of a field means "take it from LocalTiming".
//
// The worst-case time from a member's death to every other member reporting
// it StateFailed is detectionBound; see that function for the derivation.
type Timing struct {
	// ProbeInterval is the period of the probe ticker (ProbeInterval). Each
	// tick probes one other member; members are visited round-robin in an
	// order reshuffled after every round.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct UDP ping waits for its ack before
	// indirect pings and a TCP ping are tried for the rest of the probe
	// (ProbeTimeout). Must be shorter than ProbeInterval.
	ProbeTimeout time.Duration
	// SuspicionMult scales how long a member stays suspect before it is
	// declared failed: SuspicionMult × max(1, log10 n) × ProbeInterval
	// (SuspicionMult).
	SuspicionMult int
	// SuspicionMaxTimeoutMult is the multiple of that timeout a suspicion
	// starts at when confirmations from other members are expected; each
	// confirmation shortens it (SuspicionMaxTimeoutMult).
	SuspicionMaxTimeoutMult int
	// AwarenessMaxMultiplier caps how far a member that doubts its own
	// health stretches the deadline of its probes (AwarenessMaxMultiplier).
	AwarenessMaxMultiplier int
	// GossipInterval and GossipNodes: every GossipInterval, queued
	// broadcasts go to GossipNodes random members (GossipInterval,
	// GossipNodes).
	GossipInterval time.Duration
	GossipNodes    int
	// RetransmitMult: a broadcast is sent RetransmitMult × ceil(log10(n+1))
	// times before it is dropped from the queue (RetransmitMult).
	RetransmitMult int
	// PushPullInterval is the period of a full state exchange over TCP with
	// one random member (PushPullInterval). It heals what gossip missed, for
	// example a restarted member that others still hold as failed.
	PushPullInterval time.Duration
	// StreamTimeout bounds dialing, reading and writing TCP streams: joins,
	// push/pull, TCP pings, leave notices (TCPTimeout).
	StreamTimeout time.Duration
	// GossipToTheDeadTime is how long a failed member is still gossiped to,
	// so that a falsely accused member can refute, before memberlist forgets
	// it (GossipToTheDeadTime). Discovery itself never forgets a member.
	GossipToTheDeadTime time.Duration
	// DeadNodeReclaimTime is how long after its failure a member's ID may
	// come back from a different address, as a restarted node on a new port
	// or IP does (DeadNodeReclaimTime).
	DeadNodeReclaimTime time.Duration
	// JoinRetryMin and JoinRetryMax bound the backoff between join attempts
	// while this node sees no other live member.
	JoinRetryMin time.Duration
	JoinRetryMax time.Duration
}

// LocalTiming is the preset for loopback and fast LANs: a member that stops
// is reported failed by the others of a 3-member cluster within 3.1 s at
// worst (detectionBound). memberlist's DefaultLANConfig takes 16 s at worst
// for the same cluster, mostly because a member that doubts its health may
// stretch probes eightfold.
func LocalTiming() Timing {
	return Timing{
		ProbeInterval:           300 * time.Millisecond,
		ProbeTimeout:            150 * time.Millisecond,
		SuspicionMult:           4,
		SuspicionMaxTimeoutMult: 3,
		AwarenessMaxMultiplier:  2,
		GossipInterval:          100 * time.Millisecond,
		GossipNodes:             3,
		RetransmitMult:          4,
		PushPullInterval:        2 * time.Second,
		StreamTimeout:           time.Second,
		GossipToTheDeadTime:     10 * time.Second,
		DeadNodeReclaimTime:     500 * time.Millisecond,
		JoinRetryMin:            100 * time.Millisecond,
		JoinRetryMax:            2 * time.Second,
	}
}

// withDefaults returns t with every zero field taken from def.
func (t Timing) withDefaults(def Timing) Timing {
	pickD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	pickI := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	pickD(&t.ProbeInterval, def.ProbeInterval)
	pickD(&t.ProbeTimeout, def.ProbeTimeout)
	pickI(&t.SuspicionMult, def.SuspicionMult)
	pickI(&t.SuspicionMaxTimeoutMult, def.SuspicionMaxTimeoutMult)
	pickI(&t.AwarenessMaxMultiplier, def.AwarenessMaxMultiplier)
	pickD(&t.GossipInterval, def.GossipInterval)
	pickI(&t.GossipNodes, def.GossipNodes)
	pickI(&t.RetransmitMult, def.RetransmitMult)
	pickD(&t.PushPullInterval, def.PushPullInterval)
	pickD(&t.StreamTimeout, def.StreamTimeout)
	pickD(&t.GossipToTheDeadTime, def.GossipToTheDeadTime)
	pickD(&t.DeadNodeReclaimTime, def.DeadNodeReclaimTime)
	pickD(&t.JoinRetryMin, def.JoinRetryMin)
	pickD(&t.JoinRetryMax, def.JoinRetryMax)
	return t
}

// validate reports the first setting memberlist would misbehave with.
func (t Timing) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ProbeInterval", t.ProbeInterval}, {"ProbeTimeout", t.ProbeTimeout},
		{"GossipInterval", t.GossipInterval}, {"PushPullInterval", t.PushPullInterval},
		{"StreamTimeout", t.StreamTimeout}, {"GossipToTheDeadTime", t.GossipToTheDeadTime},
		{"DeadNodeReclaimTime", t.DeadNodeReclaimTime},
		{"JoinRetryMin", t.JoinRetryMin}, {"JoinRetryMax", t.JoinRetryMax},
	} {
		if d.v < 0 {
			return fmt.Errorf("%w: timing %s is negative (%v)", ErrInvalidConfig, d.name, d.v)
		}
	}
	for _, m := range []struct {
		name string
		v    int
	}{
		{"SuspicionMult", t.SuspicionMult}, {"SuspicionMaxTimeoutMult", t.SuspicionMaxTimeoutMult},
		{"AwarenessMaxMultiplier", t.AwarenessMaxMultiplier}, {"GossipNodes", t.GossipNodes},
		{"RetransmitMult", t.RetransmitMult},
	} {
		if m.v < 1 {
			return fmt.Errorf("%w: timing %s must be at least 1 (got %d)", ErrInvalidConfig, m.name, m.v)
		}
	}
	if t.ProbeTimeout >= t.ProbeInterval {
		return fmt.Errorf("%w: timing ProbeTimeout %v must be shorter than ProbeInterval %v",
			ErrInvalidConfig, t.ProbeTimeout, t.ProbeInterval)
	}
	if t.JoinRetryMin > t.JoinRetryMax {
		return fmt.Errorf("%w: timing JoinRetryMin %v exceeds JoinRetryMax %v",
			ErrInvalidConfig, t.JoinRetryMin, t.JoinRetryMax)
	}
	return nil
}

// apply copies t into the matching memberlist settings.
func (t Timing) apply(c *memberlist.Config) {
	c.ProbeInterval = t.ProbeInterval
	c.ProbeTimeout = t.ProbeTimeout
	c.SuspicionMult = t.SuspicionMult
	c.SuspicionMaxTimeoutMult = t.SuspicionMaxTimeoutMult
	c.AwarenessMaxMultiplier = t.AwarenessMaxMultiplier
	c.GossipInterval = t.GossipInterval
	c.GossipNodes = t.GossipNodes
	c.RetransmitMult = t.RetransmitMult
	c.PushPullInterval = t.PushPullInterval
	c.TCPTimeout = t.StreamTimeout
	c.GossipToTheDeadTime = t.GossipToTheDeadTime
	c.DeadNodeReclaimTime = t.DeadNodeReclaimTime
}

// The functions below derive, from a Timing and the number n of live
// members (self included), how long each step of failure detection can take
// after a member dies. They follow memberlist v0.7.0's probe loop
// (state.go: probe, probeNode, suspectNode) and its suspicion timer
// (suspicion.go), assuming one member fails at a time.

// probeCycle is the longest a prober goes between two probes of the same
// member. Every tick probes one of the n-1 others; a round visits each once
// and the order is reshuffled between rounds, so a member probed first in
// one round may be probed last in the next: 2n-3 ticks apart. One tick more
// covers the phase between the death and the ticker.
func probeCycle(t Timing, n int) time.Duration {
	others := max(n-1, 1)
	return time.Duration(2*others) * t.ProbeInterval
}

// probeDeadline is how long a probe of a dead member runs before the prober
// marks it suspect: the probe interval, stretched by at most
// AwarenessMaxMultiplier when the prober doubts its own health.
func probeDeadline(t Timing) time.Duration {
	return time.Duration(t.AwarenessMaxMultiplier) * t.ProbeInterval
}

// suspicionTimeouts returns the suspicion timer of an n-member cluster: the
// floor lo it shrinks to, the start hi, and k, the independent
// confirmations memberlist waits for. With k == 0 the timer simply runs lo.
// memberlist wants SuspicionMult-2 confirmations and gives up on them when
// fewer than that many members (besides the prober and the suspect) exist.
func suspicionTimeouts(t Timing, n int) (lo, hi time.Duration, k int) {
	scale := math.Max(1, math.Log10(math.Max(1, float64(n))))
	// Millisecond-precision scaling, as memberlist computes it.
	lo = time.Duration(t.SuspicionMult) * time.Duration(scale*1000) * t.ProbeInterval / 1000
	hi = time.Duration(t.SuspicionMaxTimeoutMult) * lo
	k = t.SuspicionMult - 2
	if n-2 < k {
		k = 0
	}
	return lo, hi, k
}

// suspicionWorst is the longest a suspicion lasts: its start value when
// confirmations are expected but none arrive, else the floor.
func suspicionWorst(t Timing, n int) time.Duration {
	lo, hi, k := suspicionTimeouts(t, n)
	if k < 1 {
		return lo
	}
	return hi
}

// gossipRounds is how many gossip ticks a broadcast needs to reach all n
// members. When every other member fits in one tick's GossipNodes it is
// exact (one tick); beyond that it is the idealised epidemic estimate in
// which every informed member tells GossipNodes new ones per tick.
func gossipRounds(t Timing, n int) int {
	if n-1 <= t.GossipNodes {
		return 1
	}
	rounds := 0
	for reached := 1; reached < n; reached *= t.GossipNodes + 1 {
		rounds++
	}
	return rounds
}

// detectionBound is the worst-case time from a member's death until every
// other member reports it StateFailed: wait for a probe, let the probe fail,
// let the suspicion run out, gossip the verdict (the others started their
// own suspicion timers from the gossiped suspicion, which ends no later).
func detectionBound(t Timing, n int) time.Duration {
	return probeCycle(t, n) + probeDeadline(t) + suspicionWorst(t, n) +
		time.Duration(gossipRounds(t, n))*t.GossipInterval
}

// suspectAfter is how long a member may go without acking one of this
// node's direct probes before this node reports it StateSuspect: longer
// than that, at least one probe of it has failed.
func suspectAfter(t Timing, n int) time.Duration {
	return probeCycle(t, n) + probeDeadline(t)
}

// nextBackoff doubles a join retry delay within [lo, hi].
func nextBackoff(cur, lo, hi time.Duration) time.Duration {
	next := 2 * cur
	if next < lo {
		next = lo
	}
	if next > hi {
		next = hi
	}
	return next
}
