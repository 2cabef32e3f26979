package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Ascend walks the key-values from start in order and stops when asked;
// a view's Ascend sees the state of its index while writes go on.
func TestAscend(t *testing.T) {
	env := newEnv(t, vfs.NewMem())
	d := openDB(t, env, "p1", 1)
	defer env.Close()
	defer d.Close()
	b := d.NewBatch()
	for i := range 10 {
		k := fmt.Sprintf("k%02d", i)
		b.PutKV([]byte(k), KV{Value: []byte(k), Version: 1, CreateIndex: 1, ModIndex: 1})
	}
	b.SetKeyCount(10)
	if err := b.Commit(1); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := d.Ascend([]byte("k03"), func(kv KV) bool {
		got = append(got, string(kv.Key))
		return len(got) < 4
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[k03 k04 k05 k06]" {
		t.Fatalf("ascend from k03, 4 keys: %v", got)
	}
	v, err := d.NewReadView()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	b = d.NewBatch()
	b.DeleteKV([]byte("k00"))
	b.SetKeyCount(9)
	if err := b.Commit(2); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := v.Ascend(nil, func(KV) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != 10 {
		t.Fatalf("the view at 1 holds %d keys after a delete at 2, want 10", n)
	}
	if c, err := d.KeyCount(); err != nil || c != 9 {
		t.Fatalf("key count %d, %v; want 9", c, err)
	}
}

// CommitPart fills a fresh DB without an applied index, and is refused
// once the DB has one.
func TestCommitPart(t *testing.T) {
	env := newEnv(t, vfs.NewMem())
	d := openDB(t, env, "p1", 1)
	defer env.Close()
	defer d.Close()
	b := d.NewBatch()
	b.PutKV([]byte("a"), KV{Value: []byte("1"), Version: 1, CreateIndex: 3, ModIndex: 3})
	if err := b.CommitPart(); err != nil {
		t.Fatal(err)
	}
	if d.Applied() != 0 {
		t.Fatalf("applied %d after a partial batch", d.Applied())
	}
	if err := d.NewBatch().Commit(5); err != nil {
		t.Fatal(err)
	}
	b = d.NewBatch()
	b.PutKV([]byte("b"), KV{Value: []byte("2"), Version: 1, CreateIndex: 6, ModIndex: 6})
	if err := b.CommitPart(); !errors.Is(err, ErrAppliedNotIncreasing) {
		t.Fatalf("a partial batch into a DB at 5: %v", err)
	}
	if _, ok, _ := d.Get([]byte("b")); ok {
		t.Fatal("the refused partial batch was written")
	}
}

// Metrics report what the DB holds: after writes and a flush, an SST in
// level 0 (or below), a flush counted and bytes on disk.
func TestMetrics(t *testing.T) {
	env := newEnv(t, vfs.NewMem())
	d := openDB(t, env, "p1", 1)
	defer env.Close()
	defer d.Close()
	b := d.NewBatch()
	for i := range 100 {
		b.PutKV(fmt.Appendf(nil, "k%03d", i), KV{Value: []byte("v"), Version: 1, CreateIndex: 1, ModIndex: 1})
	}
	if err := b.Commit(1); err != nil {
		t.Fatal(err)
	}
	before, err := d.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	m, err := d.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if m.Files < 1 || m.Flushes <= before.Flushes || m.DiskBytes == 0 || m.TableBytes == 0 {
		t.Fatalf("after a flush: %+v (before %+v)", m, before)
	}
}
