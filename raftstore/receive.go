package raftstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/proto/internalpb"
)

// Raft messages from peers come through one door, Receive (DESIGN.md,
// "Trust"): admit checks each one before raft sees it, and the loop checks
// a heartbeat's commit index against this node's log (checkCommit). The
// transport has authenticated the batch's sender; everything inside the
// batch is checked here.

// The reasons a peer's raft message is dropped before it reaches raft, as
// Config.Rejected receives them. The set is fixed (RejectReasons); each is
// a label value of the server's cutkv_peer_rejected_total counter.
const (
	// RejectDecode: the bytes are not a raft message.
	RejectDecode = "decode"
	// RejectUnknownGroup: this node holds no replica of the group.
	RejectUnknownGroup = "unknown_group"
	// RejectNotAMember: the node that sent the batch is not one of the
	// group's other replicas (GroupConfig.Peers without this node).
	RejectNotAMember = "not_a_member"
	// RejectWrongSender: the message names another sender than the node
	// that sent the batch.
	RejectWrongSender = "wrong_sender"
	// RejectWrongRecipient: the message is addressed to another raft id.
	RejectWrongRecipient = "wrong_recipient"
	// RejectBadType: a message type that no peer sends (see peerSends).
	RejectBadType = "bad_type"
	// RejectMalformed: contents raft would take on trust and then panic
	// on or be corrupted by (see wellFormed).
	RejectMalformed = "malformed"
)

// RejectReasons returns every reason Config.Rejected can be called with,
// so that a counter can show each one from zero.
func RejectReasons() []string {
	return []string{RejectDecode, RejectUnknownGroup, RejectNotAMember, RejectWrongSender,
		RejectWrongRecipient, RejectBadType, RejectMalformed}
}

// ErrLogBehind: a leader says that entries this node acknowledged are
// committed, and this node's raft log does not reach them.
var ErrLogBehind = errors.New("raftstore: this node's raft log is behind what it acknowledged")

// forwardProposals says whether followers forward proposals to their
// leader (raft.Config.DisableProposalForwarding is its negation). They do
// not: Propose answers a follower's caller with the leader instead, so no
// peer ever sends a MsgProp.
const forwardProposals = false

// Receive hands the raft messages of one batch from node from (the
// transport authenticated it) to their groups. Each message is checked
// first (admit); one that fails is dropped, counted through
// Config.Rejected and logged, and the others go on. A refused message
// never ends the peer's stream: what one message lacks says nothing about
// the next (raft retransmits what matters), and cutting a healthy peer off
// would cost more than the message. Receive returns an error only when the
// store takes no messages: ErrNotServing after a fatal error, ErrStopped
// once stopped. It blocks while the loop's inbox is full (back pressure
// onto the sending peer).
func (s *Store) Receive(from uint64, msgs []*internalpb.GroupMessage) error {
	type stepMsg struct {
		g *group
		m *raftpb.Message
	}
	steps := make([]stepMsg, 0, len(msgs))
	for _, gm := range msgs {
		g, m, reason := s.admit(from, gm)
		if reason != "" {
			s.reject(reason, from, gm.GetGroup(), m)
			continue
		}
		if m.GetType() == raftpb.MsgSnap && !s.haveSnapshotFile(from, g.id, m) {
			continue // being fetched; the leader sends it again
		}
		steps = append(steps, stepMsg{g, m})
	}
	if len(steps) == 0 {
		return s.serving()
	}
	return s.do(context.Background(), func() {
		for _, st := range steps {
			if s.workErr.Load() != nil {
				return // the store is stopping: raft takes nothing more
			}
			if err := s.step(st.g, st.m); err != nil {
				s.halt(err)
				return
			}
		}
	})
}

// step hands one admitted message to its group's raft. An error means the
// node must stop (the message was not stepped). Loop only.
func (s *Store) step(g *group, m *raftpb.Message) error {
	switch m.GetType() {
	case raftpb.MsgTimeoutNow:
		if s.draining.Load() {
			return nil // a stopping node takes no leadership
		}
	case raftpb.MsgHeartbeat:
		if err := s.checkCommit(g, m); err != nil {
			return err
		}
	case raftpb.MsgApp:
		// An append may cut an uncommitted tail: raft's log then ends at
		// its last entry (see group.lastLow).
		g.lastLow = min(g.lastLow, m.GetIndex()+uint64(len(m.GetEntries())))
	case raftpb.MsgSnap:
		g.lastLow = min(g.lastLow, m.GetSnapshot().GetMetadata().GetIndex())
	}
	if err := g.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
		s.log.Debug("step", "group", g.id, "from", m.GetFrom(), "err", err)
	}
	return nil
}

// serving returns the error Receive returns when the store takes nothing.
func (s *Store) serving() error {
	if err := s.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrNotServing, err)
	}
	select {
	case <-s.stopc:
		return ErrStopped
	default:
		return nil
	}
}

// admit decodes one message of a batch that node from sent and checks
// that raft may see it: the group is held here, the sender is one of its
// other replicas and the message says so, it is addressed to this node,
// its type is one a peer sends, and raft can take its contents. It
// returns the group and the message, or the reason to drop it (with the
// message when it decoded). It reads only what Open fixed, so it runs on
// the caller's goroutine; the loop may assume all of it.
func (s *Store) admit(from uint64, gm *internalpb.GroupMessage) (*group, *raftpb.Message, string) {
	m := &raftpb.Message{}
	if err := proto.Unmarshal(gm.GetMessage(), m); err != nil {
		return nil, nil, RejectDecode
	}
	g := s.groups[gm.GetGroup()]
	switch {
	case g == nil:
		return nil, m, RejectUnknownGroup
	case from == s.cfg.RaftID || !slices.Contains(g.peers, from):
		// This node is in Peers but sends itself nothing over the network.
		return nil, m, RejectNotAMember
	case m.GetFrom() != from:
		return nil, m, RejectWrongSender
	case m.GetTo() != s.cfg.RaftID:
		return nil, m, RejectWrongRecipient
	case !peerSends(m.GetType()):
		return nil, m, RejectBadType
	case !wellFormed(g, m):
		return nil, m, RejectMalformed
	}
	return g, m, ""
}

// peerSends says whether a peer sends raft messages of type t to this
// node. It does not send raft's node-local types (raft.IsLocalMsg:
// MsgHup, MsgBeat, MsgUnreachable, MsgSnapStatus, MsgCheckQuorum and the
// MsgStorage* ones) nor MsgForgetLeader (a local call); nor MsgProp, which
// a follower forwards only with forwardProposals; nor MsgTransferLeader,
// which a follower forwards to its leader, but this store asks only a
// leader to transfer (and a forwarded one names the transferee, not its
// sender, as From). Types this raft version does not know are refused too.
func peerSends(t raftpb.MessageType) bool {
	switch t {
	case raftpb.MsgApp, raftpb.MsgAppResp,
		raftpb.MsgVote, raftpb.MsgVoteResp, raftpb.MsgPreVote, raftpb.MsgPreVoteResp,
		raftpb.MsgSnap, raftpb.MsgHeartbeat, raftpb.MsgHeartbeatResp,
		raftpb.MsgTimeoutNow, raftpb.MsgReadIndex, raftpb.MsgReadIndexResp:
		// MsgReadIndex: a leader that queued a read can step down before
		// the loop hands it to raft, which then forwards it to the new
		// leader, who answers with MsgReadIndexResp.
		return true
	case raftpb.MsgProp:
		return forwardProposals
	}
	return false
}

// wellFormed checks the contents of a member's message that raft takes on
// trust: an append's entries are indexed consecutively after m.Index
// (maybeAppend slices them by index, and panics or corrupts the log
// otherwise), with terms from m.LogTerm up to m.Term; a snapshot names
// this group's materialization at its own index, and its configuration
// only the group's replicas (restore rebuilds the configuration from it).
// Leaders of this store send nothing else.
func wellFormed(g *group, m *raftpb.Message) bool {
	switch m.GetType() {
	case raftpb.MsgApp:
		ents := m.GetEntries()
		if m.GetIndex() > math.MaxUint64-uint64(len(ents)) {
			return false
		}
		term := m.GetLogTerm()
		for i, e := range ents {
			if e.GetIndex() != m.GetIndex()+1+uint64(i) || e.GetTerm() < term || e.GetTerm() > m.GetTerm() {
				return false
			}
			term = e.GetTerm()
		}
	case raftpb.MsgSnap:
		snap := m.GetSnapshot()
		md := snap.GetMetadata()
		grp, idx, ok := parseSnapshotData(snap.GetData())
		if !ok || grp != g.id || idx != md.GetIndex() {
			return false
		}
		cs := md.GetConfState()
		if len(cs.GetVoters()) == 0 {
			return false
		}
		for _, set := range [][]uint64{cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext()} {
			for _, id := range set {
				if !slices.Contains(g.peers, id) {
					return false
				}
			}
		}
	}
	return true
}

// reject counts a dropped message and logs it, rate-limited.
func (s *Store) reject(reason string, from, group uint64, m *raftpb.Message) {
	s.cfg.Rejected(reason)
	ok, held := s.rejectLog.note(reason, time.Now())
	if !ok {
		return
	}
	attrs := []any{"reason", reason, "group", group, "from", from}
	if m != nil {
		attrs = append(attrs, "to", m.GetTo(), "claims_from", m.GetFrom(), "type", m.GetType().String(), "term", m.GetTerm())
	}
	if held > 0 {
		attrs = append(attrs, "not_logged_since_last", held)
	}
	s.log.Warn("dropped a raft message from a peer", attrs...)
}

// rejectLogEvery is how often at most a rejection of one reason is logged.
const rejectLogEvery = 10 * time.Second

// rejectLog rate-limits the log lines about dropped messages: the first of
// each reason, then at most one per rejectLogEvery. Its memory is bounded
// by the fixed set of reasons, whatever a sender puts in its messages.
type rejectLog struct {
	mu   sync.Mutex
	last map[string]time.Time // REQUIRES mu
	held map[string]int       // not logged since last; REQUIRES mu
}

// note says whether a rejection for reason at now is logged and, if it is,
// how many of that reason were not since the last one logged.
func (r *rejectLog) note(reason string, now time.Time) (ok bool, held int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last, r.held = map[string]time.Time{}, map[string]int{}
	}
	if last, seen := r.last[reason]; seen && now.Sub(last) < rejectLogEvery {
		r.held[reason]++
		return false, 0
	}
	held = r.held[reason]
	r.last[reason], r.held[reason] = now, 0
	return true, held
}

// checkCommit keeps raft from seeing a heartbeat whose commit index lies
// beyond this node's raft log, on which raft would panic ("tocommit(N) is
// out of range [lastIndex(M)]") and keep panicking at every restart. It
// returns the error that stops the node instead. Loop only.
//
// A leader's heartbeat carries min(the follower's match, its commit), and
// match is what this follower acknowledged as durable; since then its log
// can only have lost entries past every commit index (an uncommitted tail
// a newer leader cut, whose own heartbeats count matches anew), and a
// stale leader's heartbeat raft ignores (so is this check). In normal
// operation the commit index is therefore within this node's log — after
// a restart from its durable log, and after installing a snapshot (which
// ends the log at the snapshot's index, past everything this node
// acknowledged to the leader that sent it). Only a log that lost what it
// acknowledged (an old or partly deleted WAL) fails. A heartbeat is the
// one message whose commit index raft takes unbounded: an append commits
// at most its own last entry, a snapshot its own index.
func (s *Store) checkCommit(g *group, m *raftpb.Message) error {
	c := m.GetCommit()
	if c <= g.lastLow {
		return nil
	}
	bs := g.rn.BasicStatus()
	if c <= bs.HardState.GetCommit() || !heartbeatCommits(m.GetTerm(), bs) {
		return nil // raft will not move its commit index
	}
	// lastLow is exact only right after a Ready: hand every group's over.
	if err := s.handleReady(); err != nil {
		return err
	}
	if c <= g.lastLow {
		return nil
	}
	return fmt.Errorf("%w: group %d: leader %d (term %d) says entries up to index %d are committed, which this node "+
		"acknowledged to it, but this node's raft log ends at index %d: the log was lost or rolled back here "+
		"(an old or partly deleted WAL, a data directory copied back). Stopping instead of letting raft panic. "+
		"Put the missing WAL segments back if there are any; otherwise rebuild this replica: clear its data "+
		"directory and start it again once the group has another leader (the leader keeps sending what this "+
		"node acknowledged to it)",
		ErrLogBehind, g.id, m.GetFrom(), m.GetTerm(), c, g.lastLow)
}

// heartbeatCommits says whether raft, in state st, takes the commit index
// of a heartbeat of term t: a follower or candidate does, after stepping
// up to a newer term; a stale heartbeat is answered and otherwise ignored,
// and a leader ignores one of its own term. A heartbeat without a term
// raft takes as local: it skips the term check.
func heartbeatCommits(t uint64, st raft.BasicStatus) bool {
	term := st.HardState.GetTerm()
	switch {
	case t != 0 && t < term:
		return false
	case t > term:
		return true
	default:
		return st.RaftState != raft.StateLeader
	}
}

// halt stops the store for good with err, as a persister failure does:
// nothing more reaches raft, and the loop fails the store once its current
// turn ends (Config.OnFatal). Loop only.
func (s *Store) halt(err error) {
	s.workErr.CompareAndSwap(nil, &err)
}
