package synclog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func ident(t *testing.T, path string) (uint64, uint64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Dev), st.Ino
}

func TestTruncate(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(filepath.Join(data, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, n int) string {
		p := filepath.Join(data, name)
		if err := os.WriteFile(p, []byte(strings.Repeat("x", n)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a", 100)    // synced at 40, then at 60: cut to 60
	b := write("sub/b", 10) // synced whole: untouched
	c := write("c", 30)     // created, never synced: cut to 0
	write("d", 50)          // not in the log: untouched
	link := filepath.Join(data, "sub", "a-link")
	if err := os.Link(a, link); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	rec := func(p string, n int) {
		dev, ino := ident(t, p)
		fmt.Fprintf(&log, "%d %d %d\n", dev, ino, n)
	}
	rec(a, 40)
	rec(b, 10)
	rec(c, 0)
	rec(a, 60)
	logPath := filepath.Join(dir, "synced.log")
	if err := os.WriteFile(logPath, []byte(log.String()+"123 45"), 0o644); err != nil { // torn last line
		t.Fatal(err)
	}
	pending, err := Unsynced(data, logPath)
	if err != nil {
		t.Fatal(err)
	}
	lost, err := Truncate(data, logPath)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(lost)
	want := fmt.Sprintf("[{%s 100 60} {%s 30 0} {%s 100 60}]", a, c, link)
	if fmt.Sprint(pending) != want {
		t.Fatalf("Unsynced = %s, want %s", fmt.Sprint(pending), want)
	}
	// The link is the same file: cut once, seen from both names (walk
	// order reports it twice, the second time already short).
	if got != fmt.Sprintf("[{%s 100 60} {%s 30 0}]", a, c) {
		t.Fatalf("Truncate = %s", got)
	}
	for p, n := range map[string]int64{a: 60, b: 10, c: 0, link: 60, filepath.Join(data, "d"): 50} {
		if st, err := os.Stat(p); err != nil || st.Size() != n {
			t.Errorf("%s: size %v (%v), want %d", p, st.Size(), err, n)
		}
	}
	if lost, err := Truncate(data, logPath); err != nil || len(lost) != 0 {
		t.Fatalf("second Truncate = %v, %v; want nothing", lost, err)
	}
	if lost, err := Truncate(data, filepath.Join(dir, "none")); err != nil || len(lost) != 0 {
		t.Fatalf("Truncate without a log = %v, %v", lost, err)
	}
	if err := os.WriteFile(logPath, []byte("1 2 x\n3 4 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Truncate(data, logPath); !errors.Is(err, ErrBadLog) {
		t.Fatalf("a bad line before the last: %v, want ErrBadLog", err)
	}
}
