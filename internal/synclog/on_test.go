//go:build failpoints

package synclog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestWrapFSRecordsSyncs: files written through WrapFS and directories
// given to RecordDir are cut back to what was synced. The recorder opens
// its log on first use, so the variable is set before anything in this
// test binary records (no other test here does).
func TestWrapFSRecordsSyncs(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "synced.log")
	t.Setenv(EnvVar, logPath)
	data := filepath.Join(dir, "data")
	fs := WrapFS(vfs.Default)
	if err := fs.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(data, "000001.sst")
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 23)); err != nil {
		t.Fatal(err)
	}
	never, err := fs.Create(filepath.Join(data, "tmp"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := never.Write(make([]byte, 7)); err != nil {
		t.Fatal(err)
	}
	wal := filepath.Join(dir, "wal")
	if err := os.MkdirAll(wal, 0o755); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(wal, "seg")
	if err := os.WriteFile(seg, make([]byte, 9), 0o644); err != nil {
		t.Fatal(err)
	}
	RecordDir(wal)
	lines := func() int {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "\n")
	}
	before := lines()
	RecordDir(wal) // nothing grew: nothing written
	if n := lines(); n != before {
		t.Fatalf("RecordDir of an unchanged directory wrote %d lines", n-before)
	}
	if err := os.WriteFile(seg, make([]byte, 15), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []vfs.File{f, never} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	lost, err := Truncate(dir, logPath)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{name: {123, 100}, filepath.Join(data, "tmp"): {7, 0}, seg: {15, 9}}
	if len(lost) != len(want) {
		t.Fatalf("Truncate = %v, want %v", lost, want)
	}
	for _, l := range lost {
		if w, ok := want[l.Path]; !ok || l.Size != w[0] || l.Synced != w[1] {
			t.Fatalf("Truncate = %v, want %v", lost, want)
		}
	}
}
