package raftstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/wal"
)

// Materialization (DESIGN.md, "Checkpoints"): each group's state is
// written now and then, at an exact applied index m, to an immutable file
// in Config.MaterializeDir, from an image the loop takes between entries
// and encodes in the background. After each one the in-memory raft log is
// compacted behind m (keeping CatchUpEntries for slow followers; others get
// the file as a raft snapshot) and the node WAL is truncated below the
// lowest WAL position any group still needs. A group needs its entries
// after keepIndex, the older of the two newest materializations kept, so
// that a damaged newest file can fall back to the older one (the first
// one, when a cut is positioned before it, to the whole log, kept until
// the second, or until a materialization of the idle group finds nothing
// new); a pin (a snapshot upload in progress) can hold more.

// ErrWALBehind: a materialization names an index past everything the WAL
// knows of its group: the WAL lost its newest part.
var ErrWALBehind = errors.New("raftstore: the WAL is behind this node's materializations")

// ErrMaterializeBusy: a materialization of the group is being written.
var ErrMaterializeBusy = errors.New("raftstore: a materialization of this group is already being written")

// ErrNoMaterializeDir: the store was configured without MaterializeDir.
var ErrNoMaterializeDir = errors.New("raftstore: materialization is off (no MaterializeDir)")

// keepMaterializations is how many materialization files a group keeps.
const keepMaterializations = 2

// walPos is where one entry record of a group lies in the node WAL.
type walPos struct {
	raft  uint64 // raft index of the entry
	wal   uint64 // WAL index of the record
	bytes int    // record data size
}

type baseInfo struct {
	index, term uint64
	keep        uint64 // the older materialization kept (0: none)
}

// durableApplied is the applied index a state machine holds when the
// store opens it: 0 for one kept in memory, the index its store reached
// for a durable one (a partition on Pebble). Such a state is not replaced
// by a materialization it is already past; replay skips the entries it
// holds.
func durableApplied(sm StateMachine) uint64 {
	if a, ok := sm.(interface{ Applied() uint64 }); ok {
		return a.Applied()
	}
	return 0
}

// restoreBase loads the newest usable materialization of group gc into its
// state machine and raft storage. Usable: it verifies, and the WAL holds
// the log from right after it (so nothing committed after it is lost).
// Without materializations, the WAL must hold the whole log. It returns
// nil when the group starts from an empty state.
func (s *Store) restoreBase(gc GroupConfig, l *groupLog, st *raft.MemoryStorage) (*baseInfo, error) {
	firstEntry, lastEntry := uint64(0), uint64(0)
	if n := len(l.Entries); n > 0 {
		firstEntry, lastEntry = l.Entries[0].GetIndex(), l.Entries[n-1].GetIndex()
	}
	var mats []checkpoint.Materialization
	if s.cfg.MaterializeDir != "" {
		all, err := checkpoint.List(s.cfg.MaterializeDir)
		if err != nil {
			return nil, fmt.Errorf("raftstore: group %d: list materializations: %w", gc.ID, err)
		}
		mats = all[gc.ID]
	}
	if err := s.checkWALCovers(gc.ID, l, mats); err != nil {
		return nil, err
	}
	var refused []string
	for i := len(mats) - 1; i >= 0; i-- {
		m := mats[i]
		path := filepath.Join(s.cfg.MaterializeDir, m.Name())
		if firstEntry > m.Index+1 {
			refused = append(refused, fmt.Sprintf("%s: the WAL holds this group's log only from entry %d", path, firstEntry))
			continue
		}
		if hc := l.HardState.GetCommit(); hc > max(m.Index, lastEntry) {
			refused = append(refused, fmt.Sprintf("%s: committed entries up to %d are in neither it nor the WAL", path, hc))
			continue
		}
		ahead := durableApplied(gc.SM)
		var (
			meta checkpoint.Meta
			err  error
		)
		if m.Dir {
			meta, err = loadCheckpointDir(gc.SM, path, ahead)
		} else {
			meta, err = loadImageFile(gc.SM, path, ahead)
		}
		if err != nil {
			refused = append(refused, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		if len(refused) > 0 {
			s.log.Warn("fell back to an older materialization", "group", gc.ID, "index", m.Index, "refused", strings.Join(refused, "; "))
		}
		snap := raftpb.Snapshot{
			Data:     snapshotData(gc.ID, m.Index),
			Metadata: &raftpb.SnapshotMetadata{Index: &meta.Index, Term: &meta.Term, ConfState: &raftpb.ConfState{Voters: gc.Peers}},
		}
		if err := st.ApplySnapshot(&snap); err != nil {
			return nil, fmt.Errorf("raftstore: group %d: restore snapshot at %d: %w", gc.ID, m.Index, err)
		}
		b := &baseInfo{index: m.Index, term: meta.Term, keep: m.Index}
		if i > 0 {
			b.keep = mats[i-1].Index
		}
		if ahead >= m.Index {
			s.log.Info("state opened ahead of its materialization", "group", gc.ID, "applied", ahead, "materialization", m.Index, "file", path,
				"wal_tail_entries", max(lastEntry, ahead)-ahead)
		} else {
			s.log.Info("loaded materialization", "group", gc.ID, "index", m.Index, "file", path,
				"wal_tail_entries", max(lastEntry, m.Index)-m.Index)
		}
		return b, nil
	}
	if firstEntry > 1 || (firstEntry == 0 && l.Installed != nil) {
		why := "none found in " + s.cfg.MaterializeDir
		if len(refused) > 0 {
			why = strings.Join(refused, "; ")
		}
		b, err := s.seedFromPeers(gc, l, st, firstEntry, lastEntry)
		if err == nil {
			s.log.Warn("this node's materializations were not usable", "group", gc.ID, "refused", why)
			return b, nil
		}
		return nil, fmt.Errorf("raftstore: group %d: the WAL holds its log only from entry %d and no usable materialization covers what is before (%s), and no peer's could be fetched (%v): refusing to start with data missing; restore the files, start the peers, or rebuild this node from its peers",
			gc.ID, firstEntry, why, err)
	}
	if len(refused) > 0 {
		s.log.Warn("materializations not usable; replaying the whole log from the WAL", "group", gc.ID, "refused", strings.Join(refused, "; "))
	}
	return nil, nil
}

// loadImageFile opens the materialization file path and loads it into sm,
// unless sm is already at or past its index (ahead): then the file is
// read through to check it, since raft snapshots and snapshot bases are
// made of it.
func loadImageFile(sm StateMachine, path string, ahead uint64) (checkpoint.Meta, error) {
	r, err := checkpoint.Open(path)
	if err != nil {
		return checkpoint.Meta{}, err
	}
	defer r.Close()
	if ahead < r.Meta().Index {
		err = sm.LoadImage(r)
	} else {
		_, err = io.Copy(io.Discard, r)
	}
	return r.Meta(), err
}

// walKnows returns the highest raft index of the group's log that the WAL
// records: its last entry, its hard state's commit index, its
// materialization marks (own and installed).
func (l *GroupLog) walKnows() uint64 {
	k := max(l.HardState.GetCommit(), l.Installed.GetIndex(), l.Materialized.GetIndex())
	if n := len(l.Entries); n > 0 {
		k = max(k, l.Entries[n-1].GetIndex())
	}
	return k
}

// checkWALCovers refuses a group whose newest materialization names an
// index past everything the WAL knows of it (walKnows): the WAL lost its
// newest part (the newest segment deleted or cut at a record boundary, an
// older copy of the WAL), which its segment chain cannot see (DESIGN.md,
// "Trust"). Every file in MaterializeDir is one the WAL vouches for:
//
//   - this node's own materialization at m is written after entry m was
//     applied, so after it was durable in the WAL; the WAL front is
//     truncated behind m only after m's mark (with the group's hard state)
//     was written again at the tail, so the WAL holds entry m or the mark
//     (a crash between the file and its mark leaves entry m);
//   - a materialization fetched from a leader moves into MaterializeDir
//     only after its install mark is in the WAL (persister.install,
//     settleFetched).
//
// A WAL that held no record at all at Open is the exception: a restore
// fills a new data directory with materializations and no WAL (and a
// whole WAL deleted looks the same). Those groups start from their
// materializations, whose marks markRestored writes at once.
func (s *Store) checkWALCovers(group uint64, l *groupLog, mats []checkpoint.Materialization) error {
	if len(mats) == 0 || s.walNew {
		return nil
	}
	newest := mats[len(mats)-1]
	known := l.walKnows()
	if newest.Index <= known {
		return nil
	}
	last := uint64(0)
	if n := len(l.Entries); n > 0 {
		last = l.Entries[n-1].GetIndex()
	}
	return fmt.Errorf("%w: group %d: materialization %s is at index %d, but the WAL knows this group's log only up "+
		"to index %d (last entry %d, commit %d, materialization marks up to %d): the WAL lost its newest part "+
		"(the newest segment deleted or cut short, or an older copy of the WAL), and with it entries and votes "+
		"this node acknowledged. Refusing to start: put the missing WAL segments back, or rebuild this node from "+
		"its peers (clear its data directory; its groups' leaders must change before it rejoins, since a leader "+
		"keeps sending the commit index this node acknowledged to it)",
		ErrWALBehind, group, filepath.Join(s.cfg.MaterializeDir, newest.Name()), newest.Index, known, last,
		l.HardState.GetCommit(), max(l.Installed.GetIndex(), l.Materialized.GetIndex()))
}

// markRestored writes the marks of the materializations that groups
// started from when the WAL was new (checkWALCovers): from now on the
// WAL vouches for them.
func (s *Store) markRestored() error {
	if !s.walNew {
		return nil
	}
	var recs []wal.Record
	for _, id := range s.order {
		g := s.groups[id]
		if g.matIndex == 0 {
			continue
		}
		data, err := proto.Marshal(&internalpb.MaterializedMark{Index: g.matIndex, Term: g.matTerm})
		if err != nil {
			return fmt.Errorf("raftstore: marshal materialization mark: %w", err)
		}
		recs = append(recs, wal.Record{Type: wal.RecordMaterialized, Group: id, Data: data})
	}
	if len(recs) == 0 {
		return nil
	}
	if _, _, err := s.cfg.WAL.Append(recs); err != nil {
		return fmt.Errorf("raftstore: recording the materializations of a new WAL: %w", err)
	}
	s.log.Info("the WAL is new: groups start from the materializations found (a restored data directory)", "groups", len(recs))
	return nil
}

// fetchedDirName is the subdirectory of Config.MaterializeDir where
// materializations fetched from a leader (raft snapshots) wait until their
// install is recorded in the WAL; only then do they move into
// MaterializeDir (see checkWALCovers).
const fetchedDirName = "fetched"

func (s *Store) fetchedDir() string { return filepath.Join(s.cfg.MaterializeDir, fetchedDirName) }

// fetchedPath is where the materialization of group at index fetched from
// a leader waits for its install.
func (s *Store) fetchedPath(group, index uint64) string {
	return filepath.Join(s.fetchedDir(), checkpoint.Materialization{Partition: group, Index: index}.Name())
}

// fetchedAt returns the fetched materialization of group at index, a file
// or a checkpoint directory, if there is one.
func (s *Store) fetchedAt(group, index uint64) (checkpoint.Materialization, bool) {
	for _, dir := range []bool{true, false} {
		m := checkpoint.Materialization{Partition: group, Index: index, Dir: dir}
		if _, err := os.Stat(filepath.Join(s.fetchedDir(), m.Name())); err == nil {
			return m, true
		}
	}
	return checkpoint.Materialization{}, false
}

// adoptFetched moves a fetched materialization whose install the WAL
// records into MaterializeDir, durably.
func (s *Store) adoptFetched(m checkpoint.Materialization) error {
	group := m.Partition
	from, to := filepath.Join(s.fetchedDir(), m.Name()), filepath.Join(s.cfg.MaterializeDir, m.Name())
	if err := checkpoint.OS.Rename(from, to); err != nil {
		return fmt.Errorf("raftstore: group %d: moving the installed snapshot %s into place: %w", group, from, err)
	}
	if err := checkpoint.OS.SyncDir(s.cfg.MaterializeDir); err != nil {
		return fmt.Errorf("raftstore: group %d: moving the installed snapshot %s into place: fsync of %s: %w", group, from, s.cfg.MaterializeDir, err)
	}
	return nil
}

// removeFetched removes group's fetched materializations at or below
// index: an install at index makes them of no use.
func (s *Store) removeFetched(group, index uint64) {
	all, err := checkpoint.List(s.fetchedDir())
	if err != nil {
		s.log.Warn("listing fetched materializations", "err", err)
		return
	}
	for _, m := range all[group] {
		if m.Index <= index {
			if err := checkpoint.Remove(s.fetchedDir(), m); err != nil {
				s.log.Warn("removing a fetched materialization", "file", m.Name(), "err", err)
			}
		}
	}
}

// settleFetched, at Open, finishes the installs a crash interrupted
// between their WAL mark and moving their file into place, and removes
// every other fetched materialization: the WAL does not record its
// install, so this node's state is still its own (the leader sends the
// snapshot again if it is still needed).
func (s *Store) settleFetched(logs map[uint64]*groupLog) error {
	all, err := checkpoint.List(s.fetchedDir())
	if err != nil {
		return fmt.Errorf("raftstore: %w", err)
	}
	for group, mats := range all {
		for _, m := range mats {
			if l := logs[group]; l != nil && l.Installed.GetIndex() == m.Index {
				if _, err := os.Stat(filepath.Join(s.cfg.MaterializeDir, m.Name())); errors.Is(err, os.ErrNotExist) {
					if err := s.adoptFetched(m); err != nil {
						return err
					}
					s.log.Info("finished installing a raft snapshot that a crash interrupted", "group", group, "index", m.Index)
					continue
				}
			}
			if err := checkpoint.Remove(s.fetchedDir(), m); err != nil {
				return fmt.Errorf("raftstore: removing a fetched materialization not installed: %w", err)
			}
		}
	}
	return nil
}

// snapshotData is the data of a raft snapshot this store makes: the
// materialization it stands for. The file itself goes to a follower
// through Config.Fetch.
func snapshotData(group, index uint64) []byte {
	b := binary.BigEndian.AppendUint64(nil, group)
	return binary.BigEndian.AppendUint64(b, index)
}

func parseSnapshotData(b []byte) (group, index uint64, ok bool) {
	if len(b) != 16 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:]), true
}

// MaterializationPath returns where the materialization of group at index
// lives (or would live) on this node.
func (s *Store) MaterializationPath(group, index uint64) string {
	return filepath.Join(s.cfg.MaterializeDir, checkpoint.Materialization{Partition: group, Index: index}.Name())
}

// Materialize writes the state of group at its applied index to a
// materialization file, waits until it is durable, and returns the index.
// When nothing was applied since the newest materialization it returns
// that one's index and writes nothing, and the WAL kept behind that one
// as its fallback may go.
func (s *Store) Materialize(ctx context.Context, groupID uint64) (uint64, error) {
	if s.cfg.MaterializeDir == "" {
		return 0, ErrNoMaterializeDir
	}
	type res struct {
		index uint64
		err   error
	}
	ch := make(chan res, 1)
	err := s.do(ctx, func() {
		g := s.groups[groupID]
		if g == nil {
			ch <- res{err: fmt.Errorf("%w %d", ErrUnknownGroup, groupID)}
			return
		}
		if g.matBusy {
			ch <- res{err: ErrMaterializeBusy}
			return
		}
		// A checkpoint is taken outside the loop; an image is taken here.
		cp, ckpt := checkpointerOf(g.sm)
		var img Image
		idx := durableApplied(g.sm)
		if !ckpt {
			img = g.sm.Materialize()
			idx = img.Applied()
		}
		if idx <= g.matIndex {
			if img != nil {
				img.Close()
			}
			// Idle since its newest materialization, which has lasted
			// a whole interval: the log kept as its fallback goes.
			if g.keepIndex < g.matIndex {
				g.keepIndex = g.matIndex
				s.persist.noteKeep(g.id, s.keepFrom(g), g.matIndex, g.matTerm)
			}
			ch <- res{index: g.matIndex}
			return
		}
		g.matBusy = true
		s.mats.Add(1)
		if ckpt {
			go func() {
				defer s.mats.Done()
				start := time.Now()
				idx, term, size, err := s.writeCheckpoint(g, cp, idx)
				s.noteMaterialized(Materialized{Group: g.id, Bytes: size, Took: time.Since(start), Err: err})
				if derr := s.do(context.Background(), func() { s.materialized(g, idx, term, err) }); derr != nil && err == nil {
					err = derr
				}
				ch <- res{index: idx, err: err}
			}()
			return
		}
		term, err := g.storage.Term(idx)
		if err != nil {
			s.mats.Done()
			g.matBusy = false
			img.Close()
			ch <- res{err: fmt.Errorf("raftstore: group %d: term of applied index %d: %w", g.id, idx, err)}
			return
		}
		go func() {
			defer s.mats.Done()
			start := time.Now()
			_, _, size, err := checkpoint.Files{FS: failpointFS{checkpoint.OS}}.Write(s.cfg.MaterializeDir, checkpoint.Meta{Partition: g.id, Index: idx, Term: term}, img.Encode)
			img.Close()
			if err == nil {
				s.log.Info("materialized", "group", g.id, "index", idx, "bytes", size, "took", time.Since(start))
			} else {
				size = 0
			}
			s.noteMaterialized(Materialized{Group: g.id, Bytes: size, Took: time.Since(start), Err: err})
			if derr := s.do(context.Background(), func() { s.materialized(g, idx, term, err) }); derr != nil && err == nil {
				err = derr
			}
			ch <- res{index: idx, err: err}
		}()
	})
	if err != nil {
		return 0, err
	}
	select {
	case r := <-ch:
		return r.index, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// materialized takes a durable materialization into account: raft's
// snapshot, the in-memory log's compaction, the files kept, and the WAL
// truncation. Loop only.
func (s *Store) materialized(g *group, idx, term uint64, err error) {
	g.matBusy = false
	if err != nil {
		s.log.Error("materialization failed; the WAL keeps this group's log until one succeeds", "group", g.id, "index", idx, "err", err)
		return
	}
	// The WAL is kept from the previous materialization, the fallback if
	// this one is found damaged. The first one has no older file, and
	// where a cut is positioned before it (one running across it, or
	// completed just before), the whole log stays until the second
	// materialization, or one that finds the group idle: the cut can
	// still be rebuilt, verified and snapshotted from it.
	g.keepIndex = g.matIndex
	if g.keepIndex == 0 && !cutBefore(g.sm, idx) {
		g.keepIndex = idx
	}
	g.matIndex, g.matTerm, g.matAt = idx, term, time.Now()
	cs := &raftpb.ConfState{Voters: g.peers}
	if _, err := g.storage.CreateSnapshot(idx, cs, snapshotData(g.id, idx)); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
		s.log.Warn("raft snapshot not recorded", "group", g.id, "index", idx, "err", err)
	}
	if ci := idx - min(idx, s.cfg.CatchUpEntries); ci > 0 {
		if first, _ := g.storage.FirstIndex(); ci >= first {
			if err := g.storage.Compact(ci); err != nil && !errors.Is(err, raft.ErrCompacted) {
				s.log.Warn("raft log not compacted", "group", g.id, "index", ci, "err", err)
			}
		}
	}
	s.removeOldMaterializations(g)
	s.persist.noteKeep(g.id, s.keepFrom(g), g.matIndex, g.matTerm)
	s.publishStatus(g)
}

// cutBefore says whether sm, a state machine that takes part in cuts,
// has a cut positioned at or before index.
func cutBefore(sm StateMachine, index uint64) bool {
	c, ok := sm.(interface{ CutPos() uint64 })
	if !ok {
		return false
	}
	pos := c.CutPos()
	return pos > 0 && pos <= index
}

// keepFrom is the raft index after which group g needs its WAL entries.
// Loop only.
func (s *Store) keepFrom(g *group) uint64 {
	k := g.keepIndex
	s.pinMu.Lock()
	for _, p := range s.pins[g.id] {
		k = min(k, p)
	}
	s.pinMu.Unlock()
	return k
}

// removeOldMaterializations keeps the newest keepMaterializations files of
// g (and any pinned ones).
func (s *Store) removeOldMaterializations(g *group) {
	all, err := checkpoint.List(s.cfg.MaterializeDir)
	if err != nil {
		s.log.Warn("listing materializations", "err", err)
		return
	}
	mats := all[g.id]
	for i := 0; i+keepMaterializations < len(mats); i++ {
		if s.pinned(g.id, mats[i].Index) {
			continue
		}
		if err := checkpoint.Remove(s.cfg.MaterializeDir, mats[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("removing an old materialization", "file", mats[i].Name(), "err", err)
		}
	}
}

// Pin keeps group's WAL entries after index, and its materializations at
// or after index, until the returned release is called (a snapshot that
// has not uploaded them yet).
func (s *Store) Pin(group, index uint64) (release func()) {
	s.pinMu.Lock()
	defer s.pinMu.Unlock()
	if s.pins == nil {
		s.pins = map[uint64]map[uint64]uint64{}
	}
	if s.pins[group] == nil {
		s.pins[group] = map[uint64]uint64{}
	}
	s.pinSeq++
	id := s.pinSeq
	s.pins[group][id] = index
	return func() {
		s.pinMu.Lock()
		defer s.pinMu.Unlock()
		delete(s.pins[group], id)
	}
}

func (s *Store) pinned(group, index uint64) bool {
	s.pinMu.Lock()
	defer s.pinMu.Unlock()
	for _, p := range s.pins[group] {
		if index >= p {
			return true
		}
	}
	return false
}

// MaterializeStatus is a group's checkpoint state on this node.
type MaterializeStatus struct {
	Index       uint64 // newest materialization, 0 if none
	Files       int    // materialization files kept
	TailEntries uint64 // WAL entries after Index (replayed by a restart)
	TailBytes   uint64
}

// MaterializeStatus reports group's checkpoint state.
func (s *Store) MaterializeStatus(group uint64) MaterializeStatus {
	st := MaterializeStatus{}
	if gs, ok := s.Status(group); ok {
		st.Index = gs.Materialized
	}
	st.TailEntries, st.TailBytes = s.persist.tail(group, st.Index)
	if s.cfg.MaterializeDir != "" {
		if all, err := checkpoint.List(s.cfg.MaterializeDir); err == nil {
			st.Files = len(all[group])
		}
	}
	return st
}

// RunMaterializer materializes, until ctx ends, every group whose newest
// materialization is older than Config.MaterializeInterval or whose WAL
// tail passed Config.MaterializeBytes, and the group holding the WAL back
// when the WAL grew past twice MaterializeBytes.
func (s *Store) RunMaterializer(ctx context.Context) {
	if s.cfg.MaterializeDir == "" {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		holder := s.persist.holder()
		// Early only when it can free something: the WAL is large and has
		// an older segment than the one being written (truncation deletes
		// whole segments), and not more often than earlyGap per group (a
		// group needs two materializations past a segment, its previous
		// one being the fallback kept).
		w := s.cfg.WAL
		walBig := w.Size() >= 2*s.cfg.MaterializeBytes && w.SegmentStart(w.LastIndex()) > w.FirstIndex()
		earlyGap := max(s.cfg.MaterializeInterval/6, 5*time.Second)
		for _, id := range s.order {
			gs, ok := s.Status(id)
			early := id == holder && walBig && (gs.Materialized == 0 || time.Since(gs.MaterializedAt) >= earlyGap)
			if ok && early && gs.Applied <= gs.Materialized && gs.Materialized > 0 {
				// Idle since its newest materialization, the group holds
				// the WAL only for the older one kept as a fallback: let
				// that go rather than the disk fill up.
				_ = s.do(ctx, func() {
					g := s.groups[id]
					if g.keepIndex < g.matIndex {
						g.keepIndex = g.matIndex
						s.persist.noteKeep(id, s.keepFrom(g), g.matIndex, g.matTerm)
					}
				})
				continue
			}
			if !ok || gs.Applied <= gs.Materialized {
				continue
			}
			_, tailBytes := s.persist.tail(id, gs.Materialized)
			due := time.Since(gs.MaterializedAt) >= s.cfg.MaterializeInterval ||
				tailBytes >= uint64(s.cfg.MaterializeBytes) ||
				early
			if !due {
				continue
			}
			if _, err := s.Materialize(ctx, id); err != nil && !errors.Is(err, ErrMaterializeBusy) && ctx.Err() == nil {
				s.log.Warn("materialization", "group", id, "err", err)
			}
		}
	}
}

// failpointFS arms materializeBeforeRename in materialization writes.
type failpointFS struct{ checkpoint.FS }

func (f failpointFS) Rename(oldPath, newPath string) error {
	if err := failpoint.Inject(failpoint.MaterializeBeforeRename); err != nil {
		return err
	}
	return f.FS.Rename(oldPath, newPath)
}

// snapshotFetchWait bounds one fetch of a materialization file.
const snapshotFetchWait = 10 * time.Minute

// haveSnapshotFile says whether the materialization a raft snapshot from
// node from names is on this node; if not, it starts fetching it (once per
// group at a time) and the message is dropped: the leader sends it again.
func (s *Store) haveSnapshotFile(from, group uint64, m *raftpb.Message) bool {
	g, idx, ok := parseSnapshotData(m.GetSnapshot().GetData())
	if !ok || g != group || s.cfg.MaterializeDir == "" {
		s.log.Warn("dropping a raft snapshot this node cannot install", "group", group, "from", from)
		return false
	}
	if _, err := s.FindMaterialization(group, idx); err == nil {
		return true
	}
	if _, ok := s.fetchedAt(group, idx); ok {
		return true
	}
	path := s.fetchedPath(group, idx)
	_, dirOK := checkpointerOf(s.groups[group].sm)
	if s.cfg.Fetch == nil {
		return false
	}
	s.fetchMu.Lock()
	if s.fetching == nil {
		s.fetching = map[uint64]bool{}
	}
	busy := s.fetching[group]
	s.fetching[group] = true
	s.fetchMu.Unlock()
	if busy {
		return false
	}
	go func() {
		defer func() {
			s.fetchMu.Lock()
			delete(s.fetching, group)
			s.fetchMu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), snapshotFetchWait)
		defer cancel()
		start := time.Now()
		if err := s.cfg.Fetch(ctx, from, group, idx, path, dirOK); err != nil {
			s.log.Warn("fetching a raft snapshot's materialization failed; the leader will send it again", "group", group, "index", idx, "from", from, "err", err)
			return
		}
		s.log.Info("fetched a raft snapshot's materialization", "group", group, "index", idx, "from", from, "took", time.Since(start))
	}()
	return false
}

// Materializations lists group's materialization files on this node,
// oldest first (none when materialization is off). Pin the group before
// relying on one staying.
func (s *Store) Materializations(group uint64) ([]checkpoint.Materialization, error) {
	if s.cfg.MaterializeDir == "" {
		return nil, nil
	}
	all, err := checkpoint.List(s.cfg.MaterializeDir)
	if err != nil {
		return nil, fmt.Errorf("raftstore: group %d: list materializations: %w", group, err)
	}
	return all[group], nil
}
