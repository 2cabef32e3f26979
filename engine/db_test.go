package engine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

func TestRoundTripAndReopenAfterFlush(t *testing.T) {
	dir := t.TempDir()
	env := newEnv(t, nil)
	d := openDB(t, env, filepath.Join(dir, "p1"), 1)
	m := model{}
	for i := uint64(1); i <= 50; i++ {
		write(t, d, m, i, 20)
	}
	b := d.NewBatch()
	b.SetIntent([]byte("tx1"), 48, []byte("intent-one"))
	b.SetIntent([]byte("tx2"), 49, nil)
	b.SetRecord([]byte("tx1"), []byte("rec"))
	b.SetRecord([]byte("tx9"), []byte("gone"))
	b.SetFinished([]byte("tx0"), 1_700_000_000_123)
	b.SetFinished([]byte("tx8"), -5)
	b.SetHorizon(1_700_000_000_000)
	b.SetCutProgress([]byte{1, 2, 3})
	if err := b.Commit(51); err != nil {
		t.Fatal(err)
	}
	b = d.NewBatch()
	b.DeleteRecord([]byte("tx9"))
	b.DeleteFinished([]byte("tx8"))
	b.DeleteIntent([]byte("tx3")) // absent: harmless
	if err := b.Commit(52); err != nil {
		t.Fatal(err)
	}

	check := func(d *DB) {
		t.Helper()
		if got := d.Applied(); got != 52 {
			t.Fatalf("Applied = %d, want 52", got)
		}
		checkState(t, d, m)
		for k, want := range m {
			kv, ok, err := d.Get([]byte(k))
			if err != nil || !ok || !bytes.Equal(kv.Value, want.Value) || kv.ModIndex != want.ModIndex {
				t.Fatalf("Get(%s) = %+v %v %v, want %+v", k, kv, ok, err, want)
			}
			break
		}
		if _, ok, err := d.Get([]byte("absent")); ok || err != nil {
			t.Fatalf("Get(absent) = %v %v", ok, err)
		}
		var intents []string
		if err := d.Intents(func(id []byte, index uint64, data []byte) error {
			intents = append(intents, fmt.Sprintf("%s@%d=%q", id, index, data))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(intents) != `[tx1@48="intent-one" tx2@49=""]` {
			t.Fatalf("intents %v", intents)
		}
		var recs []string
		if err := d.Records(func(id, data []byte) error {
			recs = append(recs, fmt.Sprintf("%s=%s", id, data))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(recs) != "[tx1=rec]" {
			t.Fatalf("records %v", recs)
		}
		var fin []string
		if err := d.Finished(func(id []byte, ms int64) error {
			fin = append(fin, fmt.Sprintf("%s=%d", id, ms))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(fin) != "[tx0=1700000000123]" {
			t.Fatalf("finished %v", fin)
		}
		if h, ok, err := d.Horizon(); err != nil || !ok || h != 1_700_000_000_000 {
			t.Fatalf("Horizon = %d %v %v", h, ok, err)
		}
		if c, ok, err := d.CutProgress(); err != nil || !ok || !bytes.Equal(c, []byte{1, 2, 3}) {
			t.Fatalf("CutProgress = %v %v %v", c, ok, err)
		}
	}
	check(d)
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openDB(t, env, filepath.Join(dir, "p1"), 1)
	check(d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestScanBoundsAndLimit(t *testing.T) {
	env := newEnv(t, vfs.NewMem())
	d := openDB(t, env, "p", 1)
	b := d.NewBatch()
	for _, k := range []string{"a", "b", "c", "d"} {
		b.PutKV([]byte(k), KV{Value: []byte(k)})
	}
	if err := b.Commit(1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		start, end string
		limit      int
		want       string
		more       bool
	}{
		{"", "", 0, "abcd", false},
		{"b", "d", 0, "bc", false},
		{"b", "", 2, "bc", true},
		{"", "", 4, "abcd", false},
		{"c", "c", 0, "", false},
	} {
		var end []byte
		if tc.end != "" {
			end = []byte(tc.end)
		}
		kvs, more, err := d.Scan([]byte(tc.start), end, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, kv := range kvs {
			got += string(kv.Key)
		}
		if got != tc.want || more != tc.more {
			t.Errorf("Scan(%q, %q, %d) = %q more=%v, want %q more=%v", tc.start, tc.end, tc.limit, got, more, tc.want, tc.more)
		}
	}
	// Returned slices are copies: scribbling on them changes nothing.
	kvs, _, _ := d.Scan(nil, nil, 1)
	kvs[0].Value[0] = 'X'
	if kv, _, _ := d.Get([]byte("a")); string(kv.Value) != "a" {
		t.Fatalf("scan result aliases the DB: %q", kv.Value)
	}
	closeAll(t, env, d)
}

func closeAll(t testing.TB, env *Env, dbs ...*DB) {
	t.Helper()
	for _, d := range dbs {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCommitRefusesNonIncreasingApplied(t *testing.T) {
	env := newEnv(t, vfs.NewMem())
	d := openDB(t, env, "p", 1)
	b := d.NewBatch()
	b.PutKV([]byte("a"), KV{Value: []byte("1")})
	if err := b.Commit(5); err != nil {
		t.Fatal(err)
	}
	for _, idx := range []uint64{5, 4, 0} {
		b := d.NewBatch()
		b.PutKV([]byte("a"), KV{Value: []byte("stale")})
		b.PutKV([]byte("b"), KV{Value: []byte("stale")})
		if err := b.Commit(idx); !errors.Is(err, ErrAppliedNotIncreasing) {
			t.Fatalf("Commit(%d) = %v, want ErrAppliedNotIncreasing", idx, err)
		}
	}
	if d.Applied() != 5 {
		t.Fatalf("Applied = %d after refused commits", d.Applied())
	}
	checkState(t, d, model{"a": {Key: []byte("a"), Value: []byte("1")}})
	// A bad argument also writes nothing, not even the applied index.
	b = d.NewBatch()
	b.PutKV([]byte("c"), KV{})
	b.PutKV(nil, KV{})
	if err := b.Commit(6); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("Commit with empty key = %v", err)
	}
	b = d.NewBatch()
	b.SetIntent(make([]byte, MaxTxnIDLen+1), 1, nil)
	if err := b.Commit(6); !errors.Is(err, ErrInvalidTxnID) {
		t.Fatalf("Commit with long txn id = %v", err)
	}
	if d.Applied() != 5 {
		t.Fatalf("Applied = %d", d.Applied())
	}
	checkState(t, d, model{"a": {Key: []byte("a"), Value: []byte("1")}})
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openDB(t, env, "p", 1)
	if d.Applied() != 5 {
		t.Fatalf("Applied after reopen = %d", d.Applied())
	}
	closeAll(t, env, d)
}

// TestReopenWithoutFlush loses the memtable twice: by Close, and by a
// simulated crash that keeps only synced data. Either way the state found
// is exactly the model's state at the Applied() found.
func TestReopenWithoutFlush(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			env := newEnv(t, fs)
			d := openDB(t, env, "p", 1)
			m := model{}
			history := map[uint64]model{0: {}}
			for i := uint64(1); i <= 30; i++ {
				write(t, d, m, i, 10)
				history[i] = m.clone()
				if i == 20 {
					if err := d.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if crash {
				crashed := fs.CrashClone(vfs.CrashCloneCfg{})
				closeAll(t, env, d)
				env = newEnv(t, crashed)
			} else if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			d = openDB(t, env, "p", 1)
			got := d.Applied()
			if got < 20 || got > 30 {
				t.Fatalf("Applied after reopen = %d, want in [20, 30]", got)
			}
			if got == 30 {
				t.Fatalf("Applied = 30: the unflushed memtable survived, the test proves nothing")
			}
			checkState(t, d, history[got])
			// The caller replays from Applied()+1.
			for i := got + 1; i <= 30; i++ {
				write(t, d, history[i-1].clone(), i, 10)
			}
			checkState(t, d, history[30])
			closeAll(t, env, d)
		})
	}
}

func TestReadViewFixedWhileWritesContinue(t *testing.T) {
	env := newEnv(t, vfs.NewMem())
	d := openDB(t, env, "p", 1)
	m := model{}
	for i := uint64(1); i <= 10; i++ {
		write(t, d, m, i, 10)
	}
	at10 := m.clone()
	v, err := d.NewReadView()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		mm := m.clone()
		for i := uint64(11); i <= 60; i++ {
			write(t, d, mm, i, 10)
			if i == 30 {
				if err := d.Flush(); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	for range 5 {
		if v.Applied() != 10 {
			t.Fatalf("view Applied = %d", v.Applied())
		}
		checkState(t, v, at10)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkState(t, v, at10)
	if d.Applied() != 60 {
		t.Fatalf("Applied = %d", d.Applied())
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Scan(nil, nil, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Scan on closed view = %v", err)
	}
	// A view left open is closed by DB.Close.
	if _, err := d.NewReadView(); err != nil {
		t.Fatal(err)
	}
	closeAll(t, env, d)
}

func TestClosedDB(t *testing.T) {
	env := newEnv(t, vfs.NewMem())
	d := openDB(t, env, "p", 1)
	if err := env.Close(); !errors.Is(err, ErrEnvInUse) {
		t.Fatalf("Env.Close with an open DB = %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Get([]byte("a")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
	if err := d.NewBatch().Commit(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close = %v", err)
	}
	if _, err := d.Materialize("m"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Materialize after Close = %v", err)
	}
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(env, "q", 2); !errors.Is(err, ErrClosed) {
		t.Fatalf("Open in a closed Env = %v", err)
	}
}

// TestManifestWriteFailureIsFatal: a flush whose MANIFEST write fails on
// a full disk is a failure Pebble cannot return (its Fatalf); it goes to
// EnvConfig.Fatal, naming the DB's directory, the MANIFEST file and the
// error, instead of panicking on Pebble's goroutine (which would end a
// node with a stack trace instead of its fatal path).
func TestManifestWriteFailureIsFatal(t *testing.T) {
	var full atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.Contains(op.Path, "MANIFEST") {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	}))
	fatal := make(chan error, 1)
	env, err := NewEnv(EnvConfig{CacheSize: 32 << 20, Logger: quietLogger(), FS: fs, Fatal: func(err error) {
		fatal <- err
		select {} // must not return: the process would end here
	}})
	if err != nil {
		t.Fatal(err)
	}
	d := openDB(t, env, "/db/p0001", 1)
	b := d.NewBatch()
	b.PutKV([]byte("k"), KV{Value: []byte("v")})
	if err := b.Commit(1); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	go func() { _ = d.Flush() }() // blocks for good: the flush never ends
	// The DB is not closed: Pebble's goroutine holds its lock forever.
	select {
	case err := <-fatal:
		if !errors.Is(err, ErrFatal) {
			t.Errorf("fatal error %v does not match ErrFatal", err)
		}
		for _, want := range []string{"/db/p0001", "/db/p0001/MANIFEST-", syscall.ENOSPC.Error()} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("fatal error %q does not name %q", err, want)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a failed MANIFEST write did not reach EnvConfig.Fatal within 10s")
	}
}

// TestStoppedIsReported: a flush that fails on a full disk stops the DB,
// and EnvConfig.Stopped hears of it once, with the sticky error naming
// the partition, the table file and the error, so that a node stops at
// once rather than at the next write to that partition.
func TestStoppedIsReported(t *testing.T) {
	var full atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && op.Kind == errorfs.OpFileWrite && strings.HasSuffix(op.Path, ".sst") {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	}))
	stopped := make(chan error, 4)
	var d *DB
	env, err := NewEnv(EnvConfig{CacheSize: 32 << 20, Logger: quietLogger(), FS: fs, Stopped: func(db *DB, err error) {
		if db != d {
			err = fmt.Errorf("reported for another DB: %w", err)
		}
		stopped <- err
	}})
	if err != nil {
		t.Fatal(err)
	}
	d = openDB(t, env, "/db/p0002", 2)
	b := d.NewBatch()
	b.PutKV([]byte("k"), KV{Value: []byte("v")})
	if err := b.Commit(1); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	if err := d.Flush(); !errors.Is(err, ErrStopped) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("flush on a full disk: %v, want ErrStopped and ENOSPC", err)
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, ErrStopped) {
			t.Errorf("reported %v, not an ErrStopped", err)
		}
		for _, want := range []string{"partition 2", "/db/p0002/", ".sst", syscall.ENOSPC.Error()} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("reported %q, which does not name %q", err, want)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("EnvConfig.Stopped not called within 10s of the failed flush")
	}
	b = d.NewBatch()
	b.PutKV([]byte("k2"), KV{Value: []byte("v")})
	if err := b.Commit(2); !errors.Is(err, ErrStopped) {
		t.Errorf("a commit after the failure: %v, want ErrStopped", err)
	}
	full.Store(false)
	if d.Closed() {
		t.Error("Closed before Close")
	}
	if err := d.Close(); err != nil {
		t.Logf("close of the stopped DB: %v", err)
	}
	if !d.Closed() {
		t.Error("not Closed after Close")
	}
	select {
	case err := <-stopped:
		t.Errorf("Stopped called a second time: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
}
