package partition

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// TestPebbleCorruptionMovedAside: damage in a partition's SST stops it at
// the read that finds it and marks the directory; the next Open keeps the
// damaged directory under another name and starts from an empty state (the
// node rebuilds it from a materialization and its log), instead of reading
// the damaged files again.
func TestPebbleCorruptionMovedAside(t *testing.T) {
	// Damage at the file's start is found by Open (it reads the tables);
	// in the middle, only among the key-values, by a read.
	for _, tc := range []struct {
		name     string
		from, to float64
		byRead   bool
	}{{"found opening", 0, 0.5, false}, {"found reading", 0.25, 0.5, true}} {
		t.Run(tc.name, func(t *testing.T) { testCorruptionMovedAside(t, tc.from, tc.to, tc.byRead) })
	}
}

func testCorruptionMovedAside(t *testing.T, from, to float64, byRead bool) {
	env := diskEnv(t)
	dir := filepath.Join(t.TempDir(), "p1")
	p := openDisk(t, env, dir)
	var es []imgEntry
	for i := uint64(1); i <= 200; i++ {
		es = append(es, mkImgEntry(t, i, put(fmt.Sprintf("key-%04d", i), strings.Repeat("v", 512))))
	}
	imgApplyAll(t, p, es)
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no SST after the flush")
	}
	for _, f := range ssts {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i := max(64, int(float64(len(b))*from)); i < int(float64(len(b))*to); i += 97 {
			b[i] ^= 0x55
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	q, err := Open(env, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if aside, _ := filepath.Glob(dir + ".corrupt-*"); (len(aside) == 0) != byRead {
		t.Fatalf("damage in [%.2f, %.2f) of the SSTs: moved aside at open: %v", from, to, aside)
	}
	if byRead {
		// The damage was not in what opening reads: a read finds it.
		_, _, rerr := q.Get([]byte("key-0100"))
		if rerr == nil {
			for i := 1; i <= 200 && rerr == nil; i++ {
				_, _, rerr = q.Get([]byte(fmt.Sprintf("key-%04d", i)))
			}
		}
		if !engine.IsCorruption(rerr) {
			t.Fatalf("reading damaged SSTs: %v, want a corruption error", rerr)
		}
		if _, bad := engine.Corrupt(vfs.Default, dir); !bad {
			t.Fatal("the corruption was not marked in the directory")
		}
		q.Close()
		if q, err = Open(env, dir, 1); err != nil {
			t.Fatal(err)
		}
	}
	defer q.Close()
	if q.Applied() != 0 || q.Len() != 0 {
		t.Fatalf("after the corruption: applied %d, %d keys; want an empty state", q.Applied(), q.Len())
	}
	aside, _ := filepath.Glob(dir + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("the damaged directory was not kept aside: %v", aside)
	}
}
