package chaos

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cutkv/cutkv/chaos/hosts"
	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/datadir"
)

// TestFatalNoSpace: the proof of a disk-full fault is the node's fatal
// line, and only one naming the no-space error and a file in the node's
// own data dir.
func TestFatalNoSpace(t *testing.T) {
	const data = "/tmp/r/n2"
	walLine := `kvnode: fatal: raftstore: persist: wal: write /tmp/r/n2/wal/00000000000000000007: no space left on device`
	for _, tt := range []struct {
		name, log string
		line      string
		ok        bool
	}{
		{"the WAL", "time=x level=ERROR msg=\"fatal: node stops serving\"\n" + walLine + "\n", walLine, true},
		{"Pebble", "kvnode: fatal: engine: partition 3 (dir /tmp/r/n2/state/p0003) stopped after flush: write /tmp/r/n2/state/p0003/000012.sst: no space left on device\n",
			"kvnode: fatal: engine: partition 3 (dir /tmp/r/n2/state/p0003) stopped after flush: write /tmp/r/n2/state/p0003/000012.sst: no space left on device", true},
		{"another node's file", "kvnode: fatal: write /tmp/r/n22/wal/1: no space left on device\n", "kvnode: fatal: write /tmp/r/n22/wal/1: no space left on device", false},
		{"no file", "kvnode: fatal: no space left on device\n", "kvnode: fatal: no space left on device", false},
		{"another error", "kvnode: fatal: write /tmp/r/n2/wal/1: input/output error\n", "kvnode: fatal: write /tmp/r/n2/wal/1: input/output error", false},
		{"no fatal line", "level=ERROR msg=\"wal: write failed\" err=\"write /tmp/r/n2/wal/1: no space left on device\"\npanic: boom\n", "", false},
	} {
		line, ok := fatalNoSpace(tt.log, data)
		if line != tt.line || ok != tt.ok {
			t.Errorf("%s: fatalNoSpace = %q, %v; want %q, %v", tt.name, line, ok, tt.line, tt.ok)
		}
	}
}

// smallTmpfs mounts a tmpfs of size bytes at a fresh directory, unmounted
// when the test ends; it skips without root.
func smallTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if err := unix.Mount("cutkvchaos-test", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// TestFillUp: the filler takes every byte of the disk, a second call
// adds what was freed meanwhile, and freeDisk gives it all back.
func TestFillUp(t *testing.T) {
	dir := smallTmpfs(t, 4<<20)
	if err := os.WriteFile(filepath.Join(dir, "other"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, fillerName)
	n, err := fillUp(filler)
	if err != nil {
		t.Fatal(err)
	}
	if n < 2<<20 || n > 3<<20 {
		t.Errorf("filled %d bytes of a 4 MiB disk holding 1 MiB", n)
	}
	if free, err := hosts.DiskFree(dir); err != nil || free != 0 {
		t.Errorf("after the fill %d bytes free (%v), want 0", free, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0o600); err == nil {
		t.Error("a write to the full disk succeeded")
	}
	if err := os.Remove(filepath.Join(dir, "other")); err != nil {
		t.Fatal(err)
	}
	more, err := fillUp(filler)
	if err != nil || more != 1<<20 {
		t.Errorf("the second fill wrote %d bytes (%v), want the 1 MiB freed", more, err)
	}
	c := &cluster{nodes: []*node{{id: "n1", data: dir, filler: filler}}}
	if err := c.freeDisk(0); err != nil {
		t.Fatal(err)
	}
	if free, _ := hosts.DiskFree(dir); free != 4<<20 {
		t.Errorf("after freeDisk %d bytes free, want 4 MiB", free)
	}
	if err := c.freeDisk(0); err != nil {
		t.Errorf("a second freeDisk: %v", err)
	}
}

// TestCopyDataDirsAcrossFilesystems: a node's data dir is a tmpfs of its
// own, the verifier's copy is not on it, so the checkpoints' hard links
// fail (EXDEV) and their files are copied instead.
func TestCopyDataDirsAcrossFilesystems(t *testing.T) {
	data := smallTmpfs(t, 8<<20)
	ckpt := filepath.Join(data, checkpoint.DirName, checkpoint.Materialization{Partition: 1, Index: 5, Dir: true}.Name())
	for _, d := range []string{filepath.Join(data, datadir.WALDir), ckpt} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ckpt, "000007.sst"), []byte("sst"), 0o640); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := os.Link(filepath.Join(ckpt, "000007.sst"), filepath.Join(out, "probe")); err == nil {
		t.Skip("the test's temporary directory is on the tmpfs's filesystem")
	}
	if _, err := copyDataDirs(&cluster{nodes: []*node{{id: "n1", data: data}}}, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "n1", checkpoint.DirName, filepath.Base(ckpt), "000007.sst"))
	if err != nil || string(b) != "sst" {
		t.Errorf("the checkpoint's file in the copy: %q, %v", b, err)
	}
}
