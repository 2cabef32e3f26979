package engine

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newEnv(t testing.TB, fs vfs.FS) *Env {
	t.Helper()
	env, err := NewEnv(EnvConfig{CacheSize: 32 << 20, Logger: quietLogger(), FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func openDB(t testing.TB, env *Env, dir string, id uint64) *DB {
	t.Helper()
	d, err := Open(env, dir, id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// model is the expected user key-value state.
type model map[string]KV

func (m model) clone() model {
	c := make(model, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// write commits a batch of n puts (and a delete of an earlier key) at
// index and applies it to m.
func write(t testing.TB, d *DB, m model, index uint64, n int) {
	t.Helper()
	b := d.NewBatch()
	for i := range n {
		k := fmt.Sprintf("k%06d", (int(index)*7+i*13)%5000)
		old, ok := m[k]
		kv := KV{Key: []byte(k), Value: fmt.Appendf(nil, "v%d-%d", index, i), Version: old.Version + 1, CreateIndex: index, ModIndex: index}
		if ok {
			kv.CreateIndex = old.CreateIndex
		}
		b.PutKV([]byte(k), kv)
		m[k] = kv
	}
	del := fmt.Sprintf("k%06d", (int(index)*11)%5000)
	b.DeleteKV([]byte(del))
	delete(m, del)
	if err := b.Commit(index); err != nil {
		t.Fatal(err)
	}
}

type scanner interface {
	Scan(start, end []byte, limit int) ([]KV, bool, error)
}

// checkState asserts that s holds exactly m.
func checkState(t testing.TB, s scanner, m model) {
	t.Helper()
	kvs, more, err := s.Scan(nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if more {
		t.Fatal("unlimited scan reported more")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(kvs) != len(keys) {
		t.Fatalf("scan returned %d key-values, want %d", len(kvs), len(keys))
	}
	for i, kv := range kvs {
		want := m[keys[i]]
		if string(kv.Key) != keys[i] || !bytes.Equal(kv.Value, want.Value) || kv.Version != want.Version ||
			kv.CreateIndex != want.CreateIndex || kv.ModIndex != want.ModIndex {
			t.Fatalf("entry %d = %+v, want %+v", i, kv, want)
		}
	}
}
