package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// testRecord returns a deterministic record that varies in type, group and
// size with i.
func testRecord(i int) Record {
	groups := []uint64{0, 1, 7, 127, 128, 1 << 20, 1 << 40}
	data := make([]byte, (i*37)%200)
	for k := range data {
		data[k] = byte(i + k*13)
	}
	return Record{
		Type:  RecordType(i%4) + RecordEntry,
		Group: groups[i%len(groups)] + uint64(i),
		Data:  data,
	}
}

func testRecords(from, n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = testRecord(from + i)
	}
	return recs
}

// openT opens dir and closes the WAL when the test ends, if the test has not.
func openT(t testing.TB, dir string, o Options) *WAL {
	t.Helper()
	w, err := Open(dir, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func closeT(t testing.TB, w *WAL) {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// appendT appends recs in calls of per records each and checks that the
// indexes continue the log.
func appendT(t testing.TB, w *WAL, recs []Record, per int) {
	t.Helper()
	for len(recs) > 0 {
		n := min(per, len(recs))
		want := w.LastIndex() + 1
		first, last, err := w.Append(recs[:n])
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		if first != want || last != want+uint64(n)-1 {
			t.Fatalf("Append of %d records returned [%d, %d], want [%d, %d]", n, first, last, want, want+uint64(n)-1)
		}
		if w.LastIndex() != last {
			t.Fatalf("LastIndex = %d after Append returned %d", w.LastIndex(), last)
		}
		recs = recs[n:]
	}
}

// replayT returns every record of w and checks that indexes run from
// FirstIndex to LastIndex without a gap.
func replayT(t testing.TB, w *WAL) []Record {
	t.Helper()
	var got []Record
	next := w.FirstIndex()
	err := w.Replay(func(index uint64, r Record) error {
		if index != next {
			return fmt.Errorf("replay gave index %d, want %d", index, next)
		}
		next++
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if next != w.LastIndex()+1 {
		t.Fatalf("replay ended before index %d, LastIndex is %d", next, w.LastIndex())
	}
	return got
}

func sameRecords(t testing.TB, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Type != w.Type || g.Group != w.Group || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("record %d: got {%v %d %d bytes}, want {%v %d %d bytes}", i, g.Type, g.Group, len(g.Data), w.Type, w.Group, len(w.Data))
		}
	}
}

// segmentFiles returns the plain segment file paths of dir, in order.
func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range entries {
		if len(e.Name()) == 20 {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	return paths
}

// dirNames returns every name in dir.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// frames returns the offset of each entry in a segment file, and the offset
// where each ends.
func frames(t testing.TB, path string) (offs, ends []int64) {
	t.Helper()
	data := readFile(t, path)
	for off := 0; off < len(data); {
		size, n := binary.Uvarint(data[off:])
		if n <= 0 || off+n+int(size) > len(data) {
			t.Fatalf("%s: bad frame at %d", path, off)
		}
		offs = append(offs, int64(off))
		off += n + int(size)
		ends = append(ends, int64(off))
	}
	return offs, ends
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t testing.TB, path string, b []byte) {
	t.Helper()
	writeFile(t, path, append(readFile(t, path), b...))
}

// snapshotDir returns every file of dir with its content.
func snapshotDir(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, name := range dirNames(t, dir) {
		m[name] = readFile(t, filepath.Join(dir, name))
	}
	return m
}

// logCapture is a slog.Handler that keeps every record.
type logCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, r.Clone())
	return nil
}
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCapture) WithGroup(string) slog.Handler      { return c }

// warnings returns the attributes of each warning logged, keyed by name,
// with the message under "msg".
func (c *logCapture) warnings() []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]any
	for _, r := range c.recs {
		if r.Level != slog.LevelWarn {
			continue
		}
		m := map[string]any{"msg": r.Message}
		r.Attrs(func(a slog.Attr) bool {
			m[a.Key] = a.Value.Any()
			return true
		})
		out = append(out, m)
	}
	return out
}

// errorCount returns how many records of level Error were logged.
func (c *logCapture) errorCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.recs {
		if r.Level == slog.LevelError {
			n++
		}
	}
	return n
}

func captureLogs() (*slog.Logger, *logCapture) {
	c := &logCapture{}
	return slog.New(c), c
}

// ioCounter counts hook calls and fails them on demand.
type ioCounter struct {
	mu                      sync.Mutex
	writes, syncs, dirSyncs int
	failWrite, failSync     error
	failDirSync             error
	syncedFiles, syncedDirs []string
	writtenFiles            []string
	blockSync               func(n int) // called with the sync count, may block
}

func (c *ioCounter) hooks() Hooks {
	return Hooks{
		BeforeWrite: func(seg string, _ int) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.writes++
			c.writtenFiles = append(c.writtenFiles, seg)
			return c.failWrite
		},
		BeforeSync: func(seg string) error {
			c.mu.Lock()
			c.syncs++
			n := c.syncs
			c.syncedFiles = append(c.syncedFiles, seg)
			err := c.failSync
			block := c.blockSync
			c.mu.Unlock()
			if block != nil {
				block(n)
			}
			return err
		},
		BeforeSyncDir: func(dir string) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.dirSyncs++
			c.syncedDirs = append(c.syncedDirs, dir)
			return c.failDirSync
		},
	}
}

func (c *ioCounter) counts() (writes, syncs, dirSyncs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes, c.syncs, c.dirSyncs
}

func (c *ioCounter) set(f func(c *ioCounter)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
}

// corruptAt asserts that err is a *CorruptError naming segment and offset.
func corruptAt(t testing.TB, err error, segment string, offset int64) *CorruptError {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v is not a *CorruptError", err)
	}
	if ce.Segment != segment || ce.Offset != offset {
		t.Fatalf("corruption reported in %s at offset %d, want %s at %d (%v)", ce.Segment, ce.Offset, segment, offset, err)
	}
	return ce
}

func remove(t testing.TB, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func hasName(names []string, name string) bool { return slices.Contains(names, name) }

// recordIndexes maps the tidwall index (slot) of every record in dir's
// segment files to its WAL index, counting records from 1: dir must hold a
// log whose front was never truncated. Chain records are left out.
func recordIndexes(t testing.TB, dir string) map[uint64]uint64 {
	t.Helper()
	m := map[uint64]uint64{}
	next := uint64(1)
	for _, f := range segmentFiles(t, dir) {
		data := readFile(t, f)
		offs, ends := frames(t, f)
		for k, off := range offs {
			_, n := binary.Uvarint(data[off:])
			r, err := decodeRecord(data[off+int64(n) : ends[k]])
			if err != nil {
				t.Fatalf("%s entry %d: %v", f, k, err)
			}
			if r.Type != RecordChain {
				m[segmentStart(t, f)+uint64(k)] = next
				next++
			}
		}
	}
	return m
}

// testChain is a chain record's content for tests.
func testChain() chain {
	c := chain{incarnation: 0x1122334455667788, slot: 42, prev: 40, node: "n1"}
	for i := range c.link {
		c.link[i] = byte(i)
	}
	return c
}

// testProgress is a progress file's content for tests.
func testProgress() progress {
	p := progress{incarnation: 0x8877665544332211, tail: 74, first: 61, chained: true, node: "n1"}
	for i := range p.link {
		p.link[i] = byte(100 + i)
	}
	return p
}
