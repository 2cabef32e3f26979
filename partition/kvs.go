package partition

import (
	"bytes"

	"github.com/tidwall/btree"
)

// kvStore holds a partition's committed key-values: in memory (memKVs, a
// copy-on-write B-tree) or on disk (package engine, Pebble). The partition
// calls it under its lock: reads under the read lock, writes under the
// write lock, inside an apply.
//
// Writes of one entry are made between begin and commit(index), which
// makes them and the applied index durable together where the store is
// durable; reads inside an apply see the entry's own writes.
type kvStore interface {
	// get returns key's value. The returned KV must not be modified.
	get(key []byte) (*KV, bool, error)
	// set stores kv (owned by the store from now on); replaces says
	// whether kv.Key holds a value now, as a get in the same entry just
	// said (a put reads the previous version anyway; set does not read it
	// again).
	set(kv *KV, replaces bool) error
	// del removes key and returns the value it had.
	del(key []byte) (prev *KV, ok bool, err error)
	// ascend calls fn for the key-values from start on, in key order,
	// until fn returns false.
	ascend(start []byte, fn func(*KV) bool) error
	// len returns the number of keys.
	len() int
	// view returns a read-only copy of the key-values as they are now
	// (between entries): later writes do not change it. Close it.
	view() (kvView, error)
	// begin and commit bracket the writes of the entry at index.
	begin()
	commit(index uint64) error
	// load adds kv, whose key follows every key held, to a store being
	// filled from an image (no begin needed); loaded(applied) ends the
	// filling, making it durable at applied where the store is durable.
	load(kv *KV) error
	loaded(applied uint64) error
	// durable says whether the store keeps what it holds across
	// restarts; such a store also keeps the partition's rows (rows.go).
	durable() bool
	// rows stores, in the entry's batch, rows of the transaction tables
	// and the cut progress (rows.go). Only durable stores have one.
	rows() rowWriter
	// close releases the store.
	close() error
}

// kvView is a kvStore's read-only copy (an image, a hash).
type kvView interface {
	ascend(start []byte, fn func(*KV) bool) error
	len() int
	close()
}

// memKVs is the in-memory kvStore.
type memKVs struct{ t *btree.BTreeG[*KV] }

func newMemKVs() *memKVs {
	return &memKVs{t: btree.NewBTreeGOptions(lessKV, btree.Options{NoLocks: true})}
}

func (m *memKVs) get(key []byte) (*KV, bool, error) {
	kv, ok := m.t.Get(&KV{Key: key})
	return kv, ok, nil
}

func (m *memKVs) set(kv *KV, _ bool) error {
	m.t.Set(kv)
	return nil
}

func (m *memKVs) del(key []byte) (*KV, bool, error) {
	prev, ok := m.t.Delete(&KV{Key: key})
	return prev, ok, nil
}

func (m *memKVs) ascend(start []byte, fn func(*KV) bool) error {
	ascendTree(m.t, start, fn)
	return nil
}

func (m *memKVs) len() int { return m.t.Len() }

// view is O(1): the copy shares the tree's nodes until either side writes.
func (m *memKVs) view() (kvView, error) { return memView{m.t.Copy()}, nil }

func (m *memKVs) begin()              {}
func (m *memKVs) commit(uint64) error { return nil }
func (m *memKVs) close() error        { return nil }

func (m *memKVs) load(kv *KV) error   { m.t.Load(kv); return nil }
func (m *memKVs) loaded(uint64) error { return nil }
func (m *memKVs) durable() bool       { return false }

func (m *memKVs) rows() rowWriter { return nil }

type memView struct{ t *btree.BTreeG[*KV] }

func (v memView) ascend(start []byte, fn func(*KV) bool) error {
	ascendTree(v.t, start, fn)
	return nil
}

func (v memView) len() int { return v.t.Len() }
func (v memView) close()   {}

func ascendTree(t *btree.BTreeG[*KV], start []byte, fn func(*KV) bool) {
	if len(start) == 0 {
		t.Scan(fn)
		return
	}
	t.Ascend(&KV{Key: start}, fn)
}

// scanKVs collects up to limit key-values of s with start <= key < end
// (end nil: no bound; limit <= 0: no limit) and says whether more exist.
func scanKVs(s interface {
	ascend([]byte, func(*KV) bool) error
}, start, end []byte, limit int) (kvs []*KV, more bool, err error) {
	err = s.ascend(start, func(kv *KV) bool {
		if end != nil && bytes.Compare(kv.Key, end) >= 0 {
			return false
		}
		if limit > 0 && len(kvs) == limit {
			more = true
			return false
		}
		kvs = append(kvs, kv)
		return true
	})
	return kvs, more, err
}
