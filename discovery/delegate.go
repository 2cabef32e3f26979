package discovery

import (
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
)

// hooks receives memberlist's callbacks for a Discovery. memberlist calls
// NotifyJoin, NotifyLeave, NotifyUpdate, NotifyAlive and NotifyConflict
// while holding its node lock, so these only touch the table (under mu)
// and queue callbacks; none blocks or calls back into memberlist.
type hooks struct{ d *Discovery }

var (
	_ memberlist.Delegate         = hooks{}
	_ memberlist.EventDelegate    = hooks{}
	_ memberlist.AliveDelegate    = hooks{}
	_ memberlist.MergeDelegate    = hooks{}
	_ memberlist.ConflictDelegate = hooks{}
	_ memberlist.PingDelegate     = hooks{}
)

// NodeMeta returns this node's encoded Meta (at most maxMetaSize bytes,
// below any limit memberlist passes).
func (h hooks) NodeMeta(limit int) []byte { return h.d.meta }

// NotifyMsg receives a user message, by gossip or over TCP. buf is reused
// by memberlist after the call.
func (h hooks) NotifyMsg(buf []byte) { h.d.receive(buf, false) }

// GetBroadcasts hands queued broadcasts to memberlist's gossip.
func (h hooks) GetBroadcasts(overhead, limit int) [][]byte {
	return h.d.queue.GetBroadcasts(overhead, limit)
}

// LocalState returns the departures this node knows of, so that push/pull
// repairs departures a member missed.
func (h hooks) LocalState(join bool) []byte {
	d := h.d
	d.mu.Lock()
	deps := d.members.departures()
	d.mu.Unlock()
	if len(deps) == 0 {
		return nil
	}
	return encodeFrame(kindDeparture, d.cfg.Meta.ClusterID, encodeDepartures(deps))
}

// MergeRemoteState receives another member's LocalState.
func (h hooks) MergeRemoteState(buf []byte, join bool) {
	if len(buf) > 0 {
		h.d.receive(buf, true)
	}
}

func (h hooks) NotifyJoin(n *memberlist.Node)   { h.d.observeAlive(n) }
func (h hooks) NotifyUpdate(n *memberlist.Node) { h.d.observeAlive(n) }

// NotifyLeave is called when a member is declared dead or left.
func (h hooks) NotifyLeave(n *memberlist.Node) {
	d := h.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if m, ok := d.members.gone(n.Name, time.Now()); ok {
		d.emitLocked(m)
	}
}

// NotifyAlive admits or refuses every alive message, gossiped or merged.
func (h hooks) NotifyAlive(n *memberlist.Node) error { return h.d.admit(n) }

// NotifyMerge admits or refuses the whole member list of a joining cluster.
func (h hooks) NotifyMerge(peers []*memberlist.Node) error {
	for _, n := range peers {
		if err := h.d.admit(n); err != nil {
			return err
		}
	}
	return nil
}

// NotifyConflict reports two live members that claim the same id.
func (h hooks) NotifyConflict(existing, other *memberlist.Node) {
	h.d.log.Warn("discovery: two members claim the same id",
		"id", existing.Name, "addr", existing.Address(), "other_addr", other.Address())
}

func (h hooks) AckPayload() []byte { return nil }

// NotifyPingComplete is called when a member acks a direct probe in time.
func (h hooks) NotifyPingComplete(other *memberlist.Node, _ time.Duration, _ []byte) {
	d := h.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if m, ok := d.members.acked(other.Name, time.Now()); ok {
		d.emitLocked(m)
	}
}

// admit refuses a member whose metadata is unreadable, names another node,
// or belongs to another cluster.
func (d *Discovery) admit(n *memberlist.Node) error {
	meta, _, err := decodeMeta(n.Meta)
	if err == nil && meta.ID != n.Name {
		err = fmt.Errorf("%w: metadata id %q differs from node name %q", ErrBadMeta, meta.ID, n.Name)
	}
	if err == nil && meta.ClusterID != d.cfg.Meta.ClusterID {
		err = fmt.Errorf("%w: %q (%s) is in cluster %016x, this is cluster %016x",
			ErrForeignCluster, n.Name, n.Address(), meta.ClusterID, d.cfg.Meta.ClusterID)
	}
	if err != nil {
		d.refused.Add(1)
	}
	return err
}

// observeAlive records a member memberlist holds alive. Its metadata was
// checked by admit.
func (d *Discovery) observeAlive(n *memberlist.Node) {
	meta, instance, err := decodeMeta(n.Meta)
	if err != nil {
		d.log.Warn("discovery: ignoring member", "id", n.Name, "err", err)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if m, ok := d.members.alive(meta, instance, n.Address(), time.Now()); ok {
		d.emitLocked(m)
	}
}

// receive handles a user message or, with fromState, a push/pull state.
func (d *Discovery) receive(buf []byte, fromState bool) {
	kind, cluster, body, err := decodeFrame(buf)
	if err != nil {
		d.log.Debug("discovery: dropping message", "err", err)
		return
	}
	if cluster != d.cfg.Meta.ClusterID {
		d.refused.Add(1)
		d.log.Debug("discovery: dropping message of another cluster", "cluster", fmt.Sprintf("%016x", cluster))
		return
	}
	switch {
	case kind == kindBroadcast && !fromState:
		d.emitMessage(slices.Clone(body))
	case kind == kindDeparture:
		deps, err := decodeDepartures(body)
		if err != nil {
			d.log.Debug("discovery: dropping message", "err", err)
			return
		}
		now := time.Now()
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, dep := range deps {
			if m, ok := d.members.depart(dep, now); ok {
				d.emitLocked(m)
			}
		}
	}
}

// uniqueBroadcast is a broadcast that supersedes nothing.
type uniqueBroadcast struct{ msg []byte }

func (b uniqueBroadcast) Invalidates(memberlist.Broadcast) bool { return false }
func (b uniqueBroadcast) Message() []byte                       { return b.msg }
func (b uniqueBroadcast) Finished()                             {}
func (b uniqueBroadcast) UniqueBroadcast()                      {}

// namedBroadcast supersedes a queued broadcast of the same name.
type namedBroadcast struct {
	name string
	msg  []byte
}

func (b namedBroadcast) Invalidates(other memberlist.Broadcast) bool {
	o, ok := other.(memberlist.NamedBroadcast)
	return ok && o.Name() == b.name
}
func (b namedBroadcast) Name() string    { return b.name }
func (b namedBroadcast) Message() []byte { return b.msg }
func (b namedBroadcast) Finished()       {}
