package partition

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cutkv/cutkv/engine"
)

// This file keeps a partition's state on disk, in Pebble (package engine;
// docs/design/2026-12-02-pebble-state.md): the key-values, the rows of the
// transaction tables and the cut progress (rows.go), and the applied
// index, each entry's in one batch. Pebble's own WAL is off: what a
// restart finds is the state at the last flush, and the node replays its
// WAL from there (raftstore skips a materialization the state is past).

// loadChunk bounds the key-values a load (LoadImage) puts in one batch.
const loadChunk = 4 << 20

// pebbleKVs is the kvStore of a partition on Pebble.
type pebbleKVs struct {
	db *engine.DB
	// b is the open entry's batch (begin..commit), nil between entries;
	// over holds its key-value writes (nil: deleted), which reads inside
	// the entry see before the DB's.
	b    *engine.Batch
	over map[string]*KV
	// count is the number of keys, kept in the DB beside them.
	count, stored uint64
	// pending counts the bytes of the load batch (load): an image is
	// written in batches of about loadChunk bytes.
	pending int
}

// Open opens partition id's state in dir (made if missing) on env: at the
// applied index of its last flush, with its transaction tables and cut
// progress, and locks taken again from its intents. A directory left by
// a load that did not finish is removed first (its image is loaded again
// from the materialization it came from).
func Open(env *engine.Env, dir string, id uint64) (*Partition, error) {
	fs := env.Config().FS
	for _, stale := range []string{dir + ".load", dir + ".old"} {
		if err := fs.RemoveAll(stale); err != nil {
			return nil, fmt.Errorf("partition %d: removing %s: %w", id, stale, err)
		}
	}
	if why, bad := engine.Corrupt(fs, dir); bad {
		// The last run found damage in these files.
		if err := moveAside(env, dir, id, why); err != nil {
			return nil, err
		}
	}
	p, err := openDir(env, dir, id)
	if err != nil && engine.IsCorruption(err) {
		// Damage found while opening (the tables are read in full).
		if err := moveAside(env, dir, id, err.Error()); err != nil {
			return nil, err
		}
		p, err = openDir(env, dir, id)
	}
	return p, err
}

// moveAside keeps a corrupt state directory for a look, under a new name,
// so that the partition starts from an empty state, which the node
// rebuilds from a materialization (verified: one sharing a damaged SST
// is refused) and the log.
func moveAside(env *engine.Env, dir string, id uint64, why string) error {
	fs := env.Config().FS
	aside := fmt.Sprintf("%s.corrupt-%d", dir, time.Now().UnixNano())
	if err := fs.Rename(dir, aside); err != nil {
		return fmt.Errorf("partition %d: moving the corrupt state %s aside: %w", id, dir, err)
	}
	env.Config().Logger.Warn("partition state is corrupt: moved aside; it is rebuilt from a materialization and the log",
		"partition", id, "moved_to", aside, "found", why)
	return nil
}

func openDir(env *engine.Env, dir string, id uint64) (*Partition, error) {
	db, err := engine.Open(env, dir, id)
	if err != nil {
		return nil, err
	}
	p, err := openOn(db, id)
	if err != nil {
		db.Close()
		return nil, err
	}
	return p, nil
}

// openOn reads partition id's state from db into a new Partition.
func openOn(db *engine.DB, id uint64) (*Partition, error) {
	s := &pebbleKVs{db: db}
	n, err := db.KeyCount()
	if err != nil {
		return nil, err
	}
	s.count, s.stored = n, n
	p := newWith(id, s)
	stream, err := s.tablesImage(id)
	if err != nil {
		return nil, err
	}
	d := &imageDecoder{r: bytesReader(stream), want: id, p: p, opening: true}
	if err := d.run(); err != nil {
		return nil, fmt.Errorf("partition %d: the state in %s: %w", id, db.Dir(), err)
	}
	p.cutGen = p.cut.Gen()
	return p, nil
}

// tablesImage builds an image stream of the tables db holds, without key-
// values (they stay in the DB): the frames the decoder validates as it
// validates a materialization.
func (s *pebbleKVs) tablesImage(id uint64) ([]byte, error) {
	var buf bytes.Buffer
	e := &imageEncoder{w: bufioWriter(&buf)}
	horizon, _, err := s.db.Horizon()
	if err != nil {
		return nil, err
	}
	e.header(id, s.db.Applied(), horizon)
	e.end()
	cutRow, ok, err := s.db.CutProgress()
	if err != nil {
		return nil, err
	}
	if !ok {
		var empty imageEncoder
		empty.cutProgress(newEmptyProgressState())
		cutRow = empty.buf
	}
	e.raw(cutRow)
	var n [4]uint64
	if err := s.db.Intents(func(_ []byte, _ uint64, data []byte) error {
		e.raw(data)
		n[1]++
		return e.err
	}); err != nil {
		return nil, err
	}
	if err := s.db.Records(func(_ []byte, data []byte) error {
		e.raw(data)
		n[2]++
		return e.err
	}); err != nil {
		return nil, err
	}
	if err := s.db.Finished(func(id []byte, at int64) error {
		e.finished(string(id), at)
		e.end()
		n[3]++
		return e.err
	}); err != nil {
		return nil, err
	}
	e.endFrame(n)
	e.end()
	if err := e.flush(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (s *pebbleKVs) get(key []byte) (*KV, bool, error) {
	if kv, ok := s.over[string(key)]; ok {
		return kv, kv != nil, nil
	}
	kv, ok, err := s.db.Get(key)
	if err != nil || !ok {
		return nil, false, err
	}
	return fromEngine(kv), true, nil
}

func (s *pebbleKVs) set(kv *KV, replaces bool) error {
	if s.b == nil {
		return errors.New("partition: a write outside an entry")
	}
	s.b.PutKV(kv.Key, engine.KV{Value: kv.Value, Version: uint64(kv.Version), CreateIndex: kv.CreateIndex, ModIndex: kv.ModIndex})
	s.over[string(kv.Key)] = kv
	if !replaces {
		s.count++
	}
	return nil
}

func (s *pebbleKVs) del(key []byte) (*KV, bool, error) {
	if s.b == nil {
		return nil, false, errors.New("partition: a write outside an entry")
	}
	prev, ok, err := s.get(key)
	if err != nil || !ok {
		return nil, false, err
	}
	s.b.DeleteKV(key)
	s.over[string(key)] = nil
	s.count--
	return prev, true, nil
}

// ascend merges the entry's writes into the DB's key-values.
func (s *pebbleKVs) ascend(start []byte, fn func(*KV) bool) error {
	if len(s.over) == 0 {
		return s.db.Ascend(start, func(kv engine.KV) bool { return fn(fromEngine(kv)) })
	}
	var keys []string
	for k := range s.over {
		if k >= string(start) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	stop := false
	emitOver := func(upTo string, inclusive bool) {
		for len(keys) > 0 && !stop && (keys[0] < upTo || inclusive && keys[0] == upTo) {
			if kv := s.over[keys[0]]; kv != nil && !fn(kv) {
				stop = true
			}
			keys = keys[1:]
		}
	}
	err := s.db.Ascend(start, func(kv engine.KV) bool {
		k := string(kv.Key)
		emitOver(k, false)
		if stop {
			return false
		}
		if _, shadowed := s.over[k]; shadowed {
			emitOver(k, true)
			return !stop
		}
		if !fn(fromEngine(kv)) {
			stop = true
		}
		return !stop
	})
	if err != nil {
		return err
	}
	for len(keys) > 0 && !stop {
		if kv := s.over[keys[0]]; kv != nil && !fn(kv) {
			stop = true
		}
		keys = keys[1:]
	}
	return nil
}

func (s *pebbleKVs) len() int { return int(s.count) }

func (s *pebbleKVs) view() (kvView, error) {
	v, err := s.db.NewReadView()
	if err != nil {
		return nil, err
	}
	return pebbleView{v: v, n: int(s.count)}, nil
}

func (s *pebbleKVs) begin() {
	if s.b != nil {
		s.b.Close() // an entry that failed before its commit
	}
	s.b = s.db.NewBatch()
	clear(s.over)
	if s.over == nil {
		s.over = map[string]*KV{}
	}
}

func (s *pebbleKVs) commit(index uint64) error {
	b := s.b
	s.b = nil
	clear(s.over)
	if s.count != s.stored {
		b.SetKeyCount(s.count)
	}
	if err := b.Commit(index); err != nil {
		s.count = s.stored
		return err
	}
	s.stored = s.count
	return nil
}

// commitInPlace commits the open batch at the applied index the DB is at
// (ResolveAtCut).
func (s *pebbleKVs) commitInPlace() error {
	b := s.b
	s.b = nil
	clear(s.over)
	if s.count != s.stored {
		b.SetKeyCount(s.count)
	}
	if err := b.CommitInPlace(); err != nil {
		s.count = s.stored
		return err
	}
	s.stored = s.count
	return nil
}

func (s *pebbleKVs) load(kv *KV) error {
	if s.b == nil {
		s.b = s.db.NewBatch()
	}
	s.b.PutKV(kv.Key, engine.KV{Value: kv.Value, Version: uint64(kv.Version), CreateIndex: kv.CreateIndex, ModIndex: kv.ModIndex})
	s.count++
	if s.pending += len(kv.Key) + len(kv.Value) + 16; s.pending >= loadChunk {
		return s.flushLoad()
	}
	return nil
}

// flushLoad commits the key-values loaded so far (no applied index yet:
// the DB is a fresh one that only counts once the load finished).
func (s *pebbleKVs) flushLoad() error {
	b := s.b
	s.b, s.pending = nil, 0
	if b == nil {
		return nil
	}
	b.SetKeyCount(s.count)
	if err := b.CommitPart(); err != nil {
		return err
	}
	s.stored = s.count
	return nil
}

func (s *pebbleKVs) loaded(uint64) error { return s.flushLoad() }

func (s *pebbleKVs) durable() bool   { return true }
func (s *pebbleKVs) rows() rowWriter { return pebbleRows{s} }
func (s *pebbleKVs) close() error    { return s.db.Close() }

type pebbleRows struct{ s *pebbleKVs }

func (r pebbleRows) putIntent(id string, index uint64, payload []byte) {
	if payload == nil {
		r.s.b.DeleteIntent([]byte(id))
		return
	}
	r.s.b.SetIntent([]byte(id), index, payload)
}

func (r pebbleRows) putRecord(id string, payload []byte) {
	if payload == nil {
		r.s.b.DeleteRecord([]byte(id))
		return
	}
	r.s.b.SetRecord([]byte(id), payload)
}

func (r pebbleRows) putFinished(id string, at int64, ok bool) {
	if !ok {
		r.s.b.DeleteFinished([]byte(id))
		return
	}
	r.s.b.SetFinished([]byte(id), at)
}

func (r pebbleRows) putHorizon(ms int64)   { r.s.b.SetHorizon(ms) }
func (r pebbleRows) putCut(payload []byte) { r.s.b.SetCutProgress(payload) }

type pebbleView struct {
	v *engine.ReadView
	n int
}

func (v pebbleView) ascend(start []byte, fn func(*KV) bool) error {
	return v.v.Ascend(start, func(kv engine.KV) bool { return fn(fromEngine(kv)) })
}

func (v pebbleView) len() int { return v.n }
func (v pebbleView) close()   { _ = v.v.Close() }

func fromEngine(kv engine.KV) *KV {
	return &KV{Key: kv.Key, Value: kv.Value, Version: int64(kv.Version), CreateIndex: kv.CreateIndex, ModIndex: kv.ModIndex}
}

// loadImagePebble replaces p's state (on Pebble) with the image read from
// r: decoded into a fresh DB beside p's, flushed, then swapped in. A
// damaged image, or a failure before the swap, leaves p as it was.
// REQUIRES: nothing held; p.kvs is a *pebbleKVs.
func (p *Partition) loadImagePebble(s *pebbleKVs, r io.Reader) error {
	env, dir := s.db.Env(), s.db.Dir()
	fs := env.Config().FS
	loadDir := dir + ".load"
	if err := fs.RemoveAll(loadDir); err != nil {
		return err
	}
	db, err := engine.Open(env, loadDir, p.id)
	if err != nil {
		return err
	}
	q := newWith(p.id, &pebbleKVs{db: db})
	ok := false
	defer func() {
		if !ok {
			db.Close()
			_ = fs.RemoveAll(loadDir)
		}
	}()
	if err := decodeInto(q, r); err != nil {
		return err
	}
	q.rows = map[rowKey]struct{}{}
	q.touchAll()
	q.kvs.begin()
	if err := q.writeRowsLocked(); err != nil {
		return err
	}
	if err := q.kvs.commit(q.applied); err != nil {
		return err
	}
	if err := db.Flush(); err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	ok = true
	return p.swapIn(s, loadDir)
}

// swapIn puts the closed DB directory next in the place of p's (s's),
// and opens it as p's state. A failure after p's DB closed stops p.
// REQUIRES: nothing held; p.kvs is s.
func (p *Partition) swapIn(s *pebbleKVs, next string) error {
	env, dir := s.db.Env(), s.db.Dir()
	fs := env.Config().FS
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := s.db.Close(); err != nil {
		p.fail(err)
		return p.failed
	}
	old := dir + ".old"
	if err := swapDirs(fs, dir, next, old); err != nil {
		p.fail(err)
		return p.failed
	}
	ndb, err := engine.Open(env, dir, p.id)
	if err != nil {
		p.fail(err)
		return p.failed
	}
	n, err := openOn(ndb, p.id)
	if err != nil {
		ndb.Close()
		p.fail(err)
		return p.failed
	}
	_ = fs.RemoveAll(old)
	p.kvs, p.applied = n.kvs, n.applied
	p.locks, p.intents, p.records, p.finished, p.horizon = n.locks, n.intents, n.records, n.finished, n.horizon
	p.cut, p.cutGen, p.rows = n.cut, n.cutGen, n.rows
	p.changed.Notify()
	return nil
}

// swapDirs puts next in cur's place, keeping cur as old until next is in
// place (a crash in between leaves cur or next where Open finds it, or
// neither: an empty state that loads its materialization again).
func swapDirs(fs vfs.FS, cur, next, old string) error {
	if err := fs.Rename(cur, old); err != nil {
		return err
	}
	if err := fs.Rename(next, cur); err != nil {
		return err
	}
	d, err := fs.OpenDir(fs.PathDir(cur))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
