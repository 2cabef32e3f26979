package partition

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cutkv/cutkv/engine"
)

func diskEnv(t *testing.T) *engine.Env {
	t.Helper()
	env, err := engine.NewEnv(engine.EnvConfig{CacheSize: 32 << 20, FS: vfs.Default})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Close() })
	return env
}

func openDisk(t *testing.T, env *engine.Env, dir string) *Partition {
	t.Helper()
	p, err := Open(env, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// memAt is a memory partition after the entries of es up to index.
func memAt(t *testing.T, es []imgEntry, index uint64) *Partition {
	m := newWith(1, newMemKVs())
	for _, e := range es {
		if e.index <= index {
			e.apply(t, m)
		}
	}
	return m
}

// TestPebbleReopen: a partition on Pebble opens again with everything the
// apply loop can observe — key-values, intents and their locks, records,
// finished ids, the horizon, the cut progress — at the applied index of its
// last flush, and goes on answering as a partition that never stopped.
// Without a flush, it opens at the older flushed index, the same state as
// a partition that stopped there (the node replays its WAL from it).
func TestPebbleReopen(t *testing.T) {
	env := diskEnv(t)
	dir := filepath.Join(t.TempDir(), "p1")
	es := imgScriptedEntries(t)
	later := imgLaterEntries(t, es[len(es)-1].index+1)
	all := append(append([]imgEntry(nil), es...), later...)

	p := openDisk(t, env, dir)
	imgApplyAll(t, p, es)
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	q := openDisk(t, env, dir)
	m := memAt(t, all, es[len(es)-1].index)
	sameImagePartition(t, m, q)
	for _, e := range later {
		if got, want := e.apply(t, q), e.apply(t, m); got != want {
			t.Fatalf("entry %s: reopened partition answered\n%s\none that never stopped\n%s", e.desc, got, want)
		}
	}
	sameImagePartition(t, m, q)
	if err := q.Close(); err != nil { // the later entries were never flushed
		t.Fatal(err)
	}
	r := openDisk(t, env, dir)
	defer r.Close()
	if a := r.Applied(); a != es[len(es)-1].index && a != later[len(later)-1].index {
		t.Fatalf("reopened without a flush at %d: neither the flushed index %d nor the last %d", a, es[len(es)-1].index, later[len(later)-1].index)
	}
	sameImagePartition(t, memAt(t, all, r.Applied()), r)
}

// TestPebbleLoadImage: an image loaded into a partition on Pebble (a raft
// snapshot's install) replaces its whole state through a fresh directory
// swapped in, leaves no directory behind, and survives a reopen.
func TestPebbleLoadImage(t *testing.T) {
	env := diskEnv(t)
	dir := filepath.Join(t.TempDir(), "p1")
	p := openDisk(t, env, dir)
	imgApplyAll(t, p, []imgEntry{mkImgEntry(t, 1, put("old", "x")), mkImgEntry(t, 2, put("zz", "y"))})

	es := imgScriptedEntries(t)
	m := memAt(t, es, es[len(es)-1].index)
	var buf bytes.Buffer
	img := m.Image()
	if err := img.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	img.Close()
	if err := p.LoadImage(&buf); err != nil {
		t.Fatal(err)
	}
	sameImagePartition(t, m, p)
	for _, leftover := range []string{dir + ".load", dir + ".old"} {
		if _, err := os.Stat(leftover); !os.IsNotExist(err) {
			t.Fatalf("%s left after the load: %v", leftover, err)
		}
	}
	if err := p.LoadImage(bytes.NewReader([]byte("not an image"))); err == nil {
		t.Fatal("a damaged image was loaded")
	}
	sameImagePartition(t, m, p) // unchanged by the damaged one
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	q := openDisk(t, env, dir)
	defer q.Close()
	sameImagePartition(t, m, q)
}

// TestPebbleErrorStops: a store error inside an apply stops the partition:
// the entry is not applied, ApplyCommand returns the error, every later
// apply is refused with it, and reads fail rather than answer from a
// store that stopped.
func TestPebbleErrorStops(t *testing.T) {
	env := diskEnv(t)
	p := openDisk(t, env, filepath.Join(t.TempDir(), "p1"))
	imgApplyAll(t, p, []imgEntry{mkImgEntry(t, 1, put("a", "1"))})
	s := p.kvs.(*pebbleKVs)
	if err := s.db.Close(); err != nil { // the store fails under the partition
		t.Fatal(err)
	}
	if _, err := p.ApplyCommand(2, put("b", "2")); err == nil {
		t.Fatal("an apply whose batch could not commit succeeded")
	}
	if p.Applied() != 1 || p.Err() == nil {
		t.Fatalf("after the failed apply: applied %d, err %v", p.Applied(), p.Err())
	}
	if _, err := p.ApplyCommand(3, put("c", "3")); err == nil || !errors.Is(err, p.Err()) && err.Error() != p.Err().Error() {
		t.Fatalf("a later apply: %v, want the first error %v", err, p.Err())
	}
	if _, _, err := p.Get([]byte("a")); err == nil {
		t.Fatal("a read of a stopped store answered")
	}
}
