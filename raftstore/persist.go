package raftstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"

	"go.etcd.io/raft/v3"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/checkpoint"
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

	// WAL front truncation. posMu guards pos, keep and marks, which the
	// loop and status readers consult too.
	posMu sync.Mutex
	// pos lists, by group, where its entries lie in the WAL (raft index
	// ascending): the WAL is truncated below the first one a group needs.
	pos map[uint64][]walPos
	// keep is, by group, the raft index after which it needs its entries.
	keep map[uint64]uint64
	// marks are, by group, the newest materialization (or installed
	// snapshot) marks, written again before each truncation.
	marks     map[uint64]*internalpb.MaterializedMark
	installed map[uint64]*internalpb.MaterializedMark
	truncate  bool // a truncation should be tried
}

func newPersister(s *Store) *persister {
	return &persister{
		s:      s,
		signal: make(chan struct{}, 1),
		done:   make(chan struct{}),
		lazy:   map[uint64]wal.Record{},
		hs:     map[uint64]*raftpb.HardState{},

		pos:       map[uint64][]walPos{},
		keep:      map[uint64]uint64{},
		marks:     map[uint64]*internalpb.MaterializedMark{},
		installed: map[uint64]*internalpb.MaterializedMark{},
	}
}

// replayed records what Open found in the WAL for group g (before run):
// where its entries lie, and the hard state and marks that each
// truncation writes again. Without them a group that needs none of its
// entries (idle since its materialization) would hold nothing back, and a
// truncation would delete its hard state and marks with the segments
// holding them: its term and vote would be lost, and its materialization
// would no longer be one the WAL vouches for (walKnows).
func (p *persister) replayed(g uint64, pos []walPos, hs *raftpb.HardState, installed, mark *internalpb.MaterializedMark) {
	p.posMu.Lock()
	defer p.posMu.Unlock()
	p.pos[g] = append([]walPos(nil), pos...)
	if hs != nil {
		p.hs[g] = hs
	}
	if installed != nil {
		p.installed[g] = installed
	}
	if mark != nil {
		p.marks[g] = mark
	}
}

// noteKeep records that group g needs its entries after keep only, and
// its newest materialization; a truncation is tried with the next batch.
func (p *persister) noteKeep(g, keep, index, term uint64) {
	p.posMu.Lock()
	p.keep[g] = keep
	p.marks[g] = &internalpb.MaterializedMark{Index: index, Term: term}
	p.truncate = true
	p.posMu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

// tail returns the entries (and their record bytes) of group g after
// raft index after still in the WAL.
func (p *persister) tail(g, after uint64) (entries, bytes uint64) {
	p.posMu.Lock()
	defer p.posMu.Unlock()
	ps := p.pos[g]
	i := sort.Search(len(ps), func(i int) bool { return ps[i].raft > after })
	for _, x := range ps[i:] {
		entries++
		bytes += uint64(x.bytes)
	}
	return entries, bytes
}

// needLocked returns the lowest WAL index any group still needs and the
// group that needs it (0, 0 when none needs anything). REQUIRES: posMu.
func (p *persister) needLocked() (need, holder uint64) {
	for _, g := range p.s.order {
		ps := p.pos[g]
		keep := p.keep[g]
		i := sort.Search(len(ps), func(i int) bool { return ps[i].raft > keep })
		if i < len(ps) && (need == 0 || ps[i].wal < need) {
			need, holder = ps[i].wal, g
		}
	}
	return need, holder
}

// holder returns the group whose needs hold the WAL front back.
func (p *persister) holder() uint64 {
	p.posMu.Lock()
	defer p.posMu.Unlock()
	_, h := p.needLocked()
	return h
}

// maybeTruncate truncates the WAL front below what every group needs, to
// a segment boundary (deleting whole files). The hard states and
// materialization marks are written again first, so the truncated log
// still holds every group's newest ones. Persister goroutine only.
func (p *persister) maybeTruncate() error {
	p.posMu.Lock()
	if !p.truncate {
		p.posMu.Unlock()
		return nil
	}
	p.truncate = false
	need, _ := p.needLocked()
	w := p.s.cfg.WAL
	if need == 0 {
		need = w.LastIndex() + 1
	}
	var recs []wal.Record
	for _, g := range p.s.order {
		for _, mk := range []*internalpb.MaterializedMark{p.installed[g], p.marks[g]} {
			if mk == nil {
				continue
			}
			data, err := proto.Marshal(mk)
			if err != nil {
				p.posMu.Unlock()
				return fmt.Errorf("raftstore: marshal materialization mark: %w", err)
			}
			recs = append(recs, wal.Record{Type: wal.RecordMaterialized, Group: g, Data: data})
		}
	}
	p.posMu.Unlock()
	target := w.SegmentStart(need)
	if target <= w.FirstIndex() {
		return nil
	}
	for _, g := range p.s.order {
		if hs := p.hs[g]; hs != nil {
			data, err := proto.Marshal(hs)
			if err != nil {
				return fmt.Errorf("raftstore: marshal hard state: %w", err)
			}
			recs = append(recs, wal.Record{Type: wal.RecordHardState, Group: g, Data: data})
			delete(p.lazy, g)
		}
	}
	if _, _, err := w.Append(recs); err != nil {
		return err
	}
	if err := failpoint.Inject(failpoint.WALBeforeTruncate); err != nil {
		return err
	}
	before := w.Size()
	if err := w.TruncateFront(target); err != nil {
		return err
	}
	p.posMu.Lock()
	for g, ps := range p.pos {
		i := sort.Search(len(ps), func(i int) bool { return ps[i].wal >= target })
		p.pos[g] = append([]walPos(nil), ps[i:]...)
	}
	p.posMu.Unlock()
	p.s.log.Info("WAL truncated", "first_index", target, "freed_bytes", before-w.Size(), "bytes", w.Size())
	return nil
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
		var err error
		if len(reqs) > 0 {
			err = p.persist(reqs)
		}
		if err == nil {
			err = p.maybeTruncate()
		}
		if err != nil {
			p.s.failFromWorker(err)
			p.mu.Lock()
			p.closed, p.pending = true, nil // nothing more may be written
			p.mu.Unlock()
			return
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

// records builds the WAL records of reqs, in order: for each request an
// installed snapshot's mark (its file loaded into the state machine
// first), its entries, its hard state (or, when only the commit index
// moved, a lazy one written with the next batch that syncs anyway). sync
// says whether the batch must be written and fsynced.
func (p *persister) records(reqs []appendReq) (recs []wal.Record, ents []entryRec, installs map[*raftpb.Message]*install, sync bool, err error) {
	for _, r := range reqs {
		m, gid := r.m, r.g.id
		if snap := m.GetSnapshot(); snap != nil {
			// The install's mark goes before the entries that follow the
			// snapshot, in this batch: written after them, a crash between
			// the two left a WAL whose replay met those entries right after
			// the old log, a gap, and the node could not start (nor could
			// the cut verifier read its WAL).
			in, rec, err := p.loadSnapshot(r.g, snap)
			if err != nil {
				return nil, nil, nil, false, err
			}
			if installs == nil {
				installs = map[*raftpb.Message]*install{}
			}
			installs[m] = in
			recs = append(recs, rec)
			sync = true
		}
		for _, e := range m.GetEntries() {
			data, err := proto.Marshal(e)
			if err != nil {
				return nil, nil, nil, false, fmt.Errorf("raftstore: marshal entry: %w", err)
			}
			ents = append(ents, entryRec{rec: len(recs), raft: e.GetIndex()})
			recs = append(recs, wal.Record{Type: wal.RecordEntry, Group: gid, Data: data})
			sync = true
		}
		if m.Term != nil || m.Vote != nil || m.Commit != nil {
			hs := &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
			data, err := proto.Marshal(hs)
			if err != nil {
				return nil, nil, nil, false, fmt.Errorf("raftstore: marshal hard state: %w", err)
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
	return recs, ents, installs, sync, nil
}

// persist makes reqs durable, applies them to raft storage and delivers
// their responses.
func (p *persister) persist(reqs []appendReq) error {
	recs, ents, installs, sync, err := p.records(reqs)
	if err != nil {
		return err
	}
	if sync {
		recs = p.takeLazy(recs)
		if err := failpoint.Inject(failpoint.RaftBeforeSave); err != nil {
			return err
		}
		first, _, err := p.s.cfg.WAL.Append(recs)
		if err != nil {
			return err
		}
		if err := failpoint.Inject(failpoint.RaftAfterSave); err != nil {
			return err
		}
		p.notePositions(recs, ents, first)
	}
	// Durable (or needing no durability, with every earlier batch already
	// durable): update raft storage, then deliver the responses.
	local := map[*group][]*raftpb.Message{}
	remote := map[uint64][]*internalpb.GroupMessage{}
	var installed map[*group]uint64
	for _, r := range reqs {
		g, m := r.g, r.m
		if snap := m.GetSnapshot(); snap != nil {
			if err := p.finishInstall(g, snap, installs[m]); err != nil {
				return err
			}
			if installed == nil {
				installed = map[*group]uint64{}
			}
			installed[g] = snap.GetMetadata().GetIndex()
		}
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
	if len(remote) > 0 {
		if err := failpoint.Inject(failpoint.RaftBeforeSend); err != nil {
			return err
		}
	}
	for to, msgs := range remote {
		p.s.cfg.Transport.Send(to, msgs)
	}
	if len(local) > 0 || len(installed) > 0 {
		p.s.stepLocal(local, installed)
	}
	return nil
}

// notePositions records where the entry records of a batch that starts at
// WAL index first went.
func (p *persister) notePositions(recs []wal.Record, ents []entryRec, first uint64) {
	p.posMu.Lock()
	defer p.posMu.Unlock()
	for _, e := range ents {
		r := recs[e.rec]
		ps := p.pos[r.Group]
		// A rewritten tail (raft overwrote uncommitted entries) replaces
		// the old positions from that index on.
		j := sort.Search(len(ps), func(j int) bool { return ps[j].raft >= e.raft })
		p.pos[r.Group] = append(ps[:j], walPos{raft: e.raft, wal: first + uint64(e.rec), bytes: len(r.Data)})
	}
}

// entryRec names the raft index of the entry in recs[rec] of a batch.
type entryRec struct {
	rec  int
	raft uint64
}

// install is a raft snapshot from the leader being made durable before
// raft storage takes it, in two steps around the WAL batch that holds its
// mark: loadSnapshot loads the materialization file (fetched when the
// snapshot message arrived) into the state machine and returns the mark
// (a WAL record telling a restart that the log starts after it), then
// finishInstall, once the mark is durable, moves a fetched file into place
// and hands the snapshot to raft storage.
type install struct {
	mk      *internalpb.MaterializedMark
	m       checkpoint.Materialization
	path    string
	fetched bool
}

func (p *persister) loadSnapshot(g *group, snap *raftpb.Snapshot) (*install, wal.Record, error) {
	md := snap.GetMetadata()
	// The materialization is in MaterializeDir if this node had it
	// already, else it was fetched: it moves into MaterializeDir once the
	// mark is written.
	m, err := p.s.FindMaterialization(g.id, md.GetIndex())
	in := &install{m: m, path: filepath.Join(p.s.cfg.MaterializeDir, m.Name())}
	if err != nil {
		fm, ok := p.s.fetchedAt(g.id, md.GetIndex())
		if !ok {
			return nil, wal.Record{}, fmt.Errorf("raftstore: group %d: install snapshot at %d: no materialization of it here or fetched", g.id, md.GetIndex())
		}
		in.m, in.path, in.fetched = fm, filepath.Join(p.s.fetchedDir(), fm.Name()), true
	}
	if in.m.Dir {
		_, err = loadCheckpointDir(g.sm, in.path, 0)
	} else {
		_, err = loadImageFile(g.sm, in.path, 0)
	}
	if err != nil {
		return nil, wal.Record{}, fmt.Errorf("raftstore: group %d: install snapshot at %d from %s: %w", g.id, md.GetIndex(), in.path, err)
	}
	in.mk = &internalpb.MaterializedMark{Index: md.GetIndex(), Term: md.GetTerm(), Installed: true}
	data, err := proto.Marshal(in.mk)
	if err != nil {
		return nil, wal.Record{}, err
	}
	return in, wal.Record{Type: wal.RecordMaterialized, Group: g.id, Data: data}, nil
}

func (p *persister) finishInstall(g *group, snap *raftpb.Snapshot, in *install) error {
	md, mk, path := snap.GetMetadata(), in.mk, in.path
	if in.fetched {
		// A crash before this is finished at Open (settleFetched).
		if err := p.s.adoptFetched(in.m); err != nil {
			return err
		}
		path = filepath.Join(p.s.cfg.MaterializeDir, in.m.Name())
		p.s.removeFetched(g.id, md.GetIndex())
	}
	if err := g.storage.ApplySnapshot(snap); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
		return fmt.Errorf("raftstore: group %d: apply snapshot at %d: %w", g.id, md.GetIndex(), err)
	}
	p.posMu.Lock()
	ps := p.pos[g.id]
	i := sort.Search(len(ps), func(i int) bool { return ps[i].raft > md.GetIndex() })
	p.pos[g.id] = append([]walPos(nil), ps[i:]...)
	p.installed[g.id] = mk
	p.marks[g.id] = mk
	p.keep[g.id] = md.GetIndex()
	p.posMu.Unlock()
	g.counters.snapsIn.Add(1)
	p.s.log.Info("installed a snapshot from the leader", "group", g.id, "index", md.GetIndex(), "file", path)
	return nil
}
