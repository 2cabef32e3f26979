package raftstore

import (
	"fmt"
	"sync"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/wal"
)

// appendReq is one group's MsgStorageAppend, handed from the loop to the
// persister.
type appendReq struct {
	g *group
	m *raftpb.Message
}

// persister is the node's local append thread (raft's AsyncStorageWrites):
// it takes MsgStorageAppend messages from every group in the order the loop
// produced them, writes everything queued as one WAL batch with one fsync,
// updates the groups' raft storage, and only then delivers each message's
// responses — to peers through the transport, to this node's own raft
// groups through the loop. While it writes, the loop goes on ticking,
// stepping and proposing, and what it queues meanwhile forms the next
// batch (group commit).
type persister struct {
	s *Store

	mu      sync.Mutex
	pending []appendReq   // REQUIRES: mu held
	closed  bool          // REQUIRES: mu held
	signal  chan struct{} // poked when pending grows or closed is set
	done    chan struct{}

	// lazy holds commit-index-only hard states by group: raft does not need
	// them durable (a restarted node re-learns its commit index), so they
	// never cost an fsync of their own; they ride with the next synced
	// batch, or are written at stop.
	lazy map[uint64]wal.Record
	// hs is the last hard state handed to the WAL, by group, to tell a
	// term or vote change (must sync) from a commit-only one.
	hs map[uint64]*raftpb.HardState
}

func newPersister(s *Store) *persister {
	return &persister{
		s:      s,
		signal: make(chan struct{}, 1),
		done:   make(chan struct{}),
		lazy:   map[uint64]wal.Record{},
		hs:     map[uint64]*raftpb.HardState{},
	}
}

// enqueue hands the loop's append messages over in order. It never
// blocks: the loop must stay free to deliver the persister's local
// responses. The queue is bounded by raft's own flow control.
func (p *persister) enqueue(reqs []appendReq) {
	p.mu.Lock()
	if !p.closed {
		p.pending = append(p.pending, reqs...)
	}
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

// close makes run write what is queued, flush and return; it waits.
func (p *persister) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
	<-p.done
}

// run processes batches until closed, then flushes the lazy hard states
// (a clean stop restarts with exactly what was applied).
func (p *persister) run() {
	defer close(p.done)
	for {
		<-p.signal
		p.mu.Lock()
		reqs, closed := p.pending, p.closed
		p.pending = nil
		p.mu.Unlock()
		if len(reqs) > 0 {
			if err := p.persist(reqs); err != nil {
				p.s.failFromWorker(err)
				p.mu.Lock()
				p.closed, p.pending = true, nil // nothing more may be written
				p.mu.Unlock()
				return
			}
		}
		if closed {
			break
		}
	}
	if len(p.lazy) > 0 && p.s.Err() == nil {
		if _, _, err := p.s.cfg.WAL.Append(p.takeLazy(nil)); err != nil {
			p.s.log.Warn("could not write the last commit indexes at stop; a restart re-learns them", "err", err)
		}
	}
}

func (p *persister) takeLazy(recs []wal.Record) []wal.Record {
	for _, id := range p.s.order {
		if r, ok := p.lazy[id]; ok {
			recs = append(recs, r)
			delete(p.lazy, id)
		}
	}
	return recs
}

// persist makes reqs durable, applies them to raft storage and delivers
// their responses.
func (p *persister) persist(reqs []appendReq) error {
	var recs []wal.Record
	sync := false
	for _, r := range reqs {
		m, gid := r.m, r.g.id
		for _, e := range m.GetEntries() {
			data, err := proto.Marshal(e)
			if err != nil {
				return fmt.Errorf("raftstore: marshal entry: %w", err)
			}
			recs = append(recs, wal.Record{Type: wal.RecordEntry, Group: gid, Data: data})
			sync = true
		}
		if m.Term != nil || m.Vote != nil || m.Commit != nil {
			hs := &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
			data, err := proto.Marshal(hs)
			if err != nil {
				return fmt.Errorf("raftstore: marshal hard state: %w", err)
			}
			rec := wal.Record{Type: wal.RecordHardState, Group: gid, Data: data}
			prev := p.hs[gid]
			if prev == nil || prev.GetTerm() != hs.GetTerm() || prev.GetVote() != hs.GetVote() {
				recs = append(recs, rec)
				delete(p.lazy, gid)
				sync = true
			} else {
				p.lazy[gid] = rec
			}
			p.hs[gid] = hs
		}
	}
	if sync {
		recs = p.takeLazy(recs)
		if err := failpoint.Inject(failpoint.RaftBeforeSave); err != nil {
			return err
		}
		if _, _, err := p.s.cfg.WAL.Append(recs); err != nil {
			return err
		}
		if err := failpoint.Inject(failpoint.RaftAfterSave); err != nil {
			return err
		}
	}
	// Durable (or needing no durability, with every earlier batch already
	// durable): update raft storage, then deliver the responses.
	local := map[*group][]*raftpb.Message{}
	remote := map[uint64][]*internalpb.GroupMessage{}
	for _, r := range reqs {
		g, m := r.g, r.m
		if len(m.GetEntries()) > 0 {
			if err := g.storage.Append(m.GetEntries()); err != nil {
				return fmt.Errorf("raftstore: group %d: storage append: %w", g.id, err)
			}
		}
		if hs := p.hs[g.id]; hs != nil && (m.Term != nil || m.Vote != nil || m.Commit != nil) {
			if err := g.storage.SetHardState(hs); err != nil {
				return fmt.Errorf("raftstore: group %d: set hard state: %w", g.id, err)
			}
		}
		for _, resp := range m.GetResponses() {
			if resp.GetTo() == p.s.cfg.RaftID {
				local[g] = append(local[g], resp)
				continue
			}
			data, err := proto.Marshal(resp)
			if err != nil {
				return fmt.Errorf("raftstore: marshal message: %w", err)
			}
			remote[resp.GetTo()] = append(remote[resp.GetTo()], &internalpb.GroupMessage{Group: g.id, Message: data})
		}
	}
	for to, msgs := range remote {
		p.s.cfg.Transport.Send(to, msgs)
	}
	if len(local) > 0 {
		p.s.stepLocal(local)
	}
	return nil
}
