package hosts

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseMountinfo(t *testing.T) {
	text := `22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
95 29 0:48 / /tmp/cutkv\040chaos/n1 rw,nosuid,nodev,relatime - tmpfs cutkvchaos-ck1n1 rw,size=262144k,mode=750
96 29 0:49 / /tmp/a\134b rw master:1 shared:7 - tmpfs cutkvchaos-ck12n3 rw
`
	got, err := parseMountinfo([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []mountEntry{
		{point: "/proc", fstype: "proc", source: "proc"},
		{point: "/tmp/cutkv chaos/n1", fstype: "tmpfs", source: "cutkvchaos-ck1n1"},
		{point: `/tmp/a\b`, fstype: "tmpfs", source: "cutkvchaos-ck12n3"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
	for _, bad := range []string{"22 1 0:21 / /proc rw - proc\n", "22 1 0:21\n", "22 1 0:21 / /proc rw shared:1 proc proc rw\n"} {
		if _, err := parseMountinfo([]byte(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("parseMountinfo(%q): %v, want an error naming line 1", bad, err)
		}
	}
	if u := unescapeMount(`a\04`); u != `a\04` {
		t.Errorf("a cut escape became %q", u)
	}
}

func TestIsRunDisk(t *testing.T) {
	for _, tt := range []struct {
		source, run string
		want        bool
	}{
		{diskSource("ck1", 3), "ck1", true},
		{diskSource("ck12", 1), "ck12", true},
		{diskSource("ck12", 1), "ck1", false},
		{diskSource("ck1", 1), "ck12", false},
		{"cutkvchaos-ck1sw", "ck1", false},
		{"ck1n1", "ck1", false},
		{"tmpfs", "ck1", false},
	} {
		if got := isRunDisk(tt.source, tt.run); got != tt.want {
			t.Errorf("isRunDisk(%q, %q) = %v, want %v", tt.source, tt.run, got, tt.want)
		}
	}
}

// isMountPoint says whether path is a mount point in this process's view.
func isMountPoint(t *testing.T, path string) bool {
	t.Helper()
	ms, err := readMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.point == path {
			return true
		}
	}
	return false
}

// TestDisk: a disk holds only its size, a process started on a host
// afterwards writes to it, and Close unmounts it keeping every file; a
// crashed run's disk is unmounted, its files kept, by CleanupStale.
func TestDisk(t *testing.T) {
	requireRoot(t)
	n := newNet(t, "d", 1)
	h := n.Host(1)
	path := filepath.Join(t.TempDir(), "n1")
	if err := h.MountDisk("relative", 1<<20); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a relative path: %v", err)
	}
	if err := h.MountDisk(path, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := h.MountDisk(path, 1<<20); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a second disk at the same path: %v", err)
	}
	if free, err := DiskFree(path); err != nil || free != 1<<20 {
		t.Errorf("a fresh 1 MiB disk has %d bytes free (%v)", free, err)
	}
	big := make([]byte, 2<<20)
	err := os.WriteFile(filepath.Join(path, "big"), big, 0o640)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writing 2 MiB to a 1 MiB disk: %v, want ENOSPC", err)
	}
	if err := os.Remove(filepath.Join(path, "big")); err != nil {
		t.Fatal(err)
	}
	p, err := h.Start("sh", []string{"-c", "mkdir " + path + "/sub && echo hello > " + path + "/sub/file"}, nil, filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	if exited, code := p.Wait(10 * time.Second); !exited || code != 0 {
		t.Fatalf("the process writing to the disk: exited %v, code %d", exited, code)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if isMountPoint(t, path) {
		t.Errorf("%s still mounted after Close", path)
	}
	if b, err := os.ReadFile(filepath.Join(path, "sub", "file")); err != nil || string(b) != "hello\n" {
		t.Errorf("the file the process wrote, after Close: %q, %v", b, err)
	}
	if _, err := os.Stat(path + ".keep"); !os.IsNotExist(err) {
		t.Errorf("the copy's directory is left: %v", err)
	}

	stale := newNet(t, "e", 1)
	spath := filepath.Join(t.TempDir(), "n1")
	if err := stale.Host(1).MountDisk(spath, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spath, "f"), []byte("kept"), 0o640); err != nil {
		t.Fatal(err)
	}
	stale.abandon()
	if err := CleanupStale(testPrefix); err != nil {
		t.Fatal(err)
	}
	if isMountPoint(t, spath) {
		t.Errorf("%s still mounted after CleanupStale", spath)
	}
	if b, err := os.ReadFile(filepath.Join(spath, "f")); err != nil || string(b) != "kept" {
		t.Errorf("the stale disk's file: %q, %v", b, err)
	}
}
