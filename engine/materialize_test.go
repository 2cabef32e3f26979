package engine

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// fileSums maps each file of dir (LOCK aside) to its SHA-256.
func fileSums(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	files, err := listFiles(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][32]byte{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name] = sha256.Sum256(b)
	}
	return out
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(fa, fb)
}

// TestMaterializeLinksFiles: a materialization is a checkpoint whose SSTs
// are the live DB's files (same inodes, nothing copied), at the applied
// index read back from it; the next one shares the SSTs nothing compacted
// away; a clone links SSTs and copies the rest, and writing to the clone
// changes no byte of the materialization.
func TestMaterializeLinksFiles(t *testing.T) {
	root := t.TempDir()
	env := newEnv(t, vfs.Default)
	defer env.Close()
	live := filepath.Join(root, "live")
	d := openDB(t, env, live, 7)
	m := model{}
	for i := uint64(1); i <= 40; i++ {
		write(t, d, m, i, 50)
	}
	m40 := m.clone()
	m1, err := d.Materialize(filepath.Join(root, "m1"))
	if err != nil {
		t.Fatal(err)
	}
	if m1.Index != 40 {
		t.Fatalf("materialization index %d, want 40", m1.Index)
	}
	ssts := 0
	for _, f := range m1.Files {
		if !Immutable(f.Name) {
			continue
		}
		ssts++
		if !sameFile(t, filepath.Join(live, f.Name), filepath.Join(m1.Dir, f.Name)) {
			t.Errorf("%s: the materialization's file is not the live DB's (copied, not linked)", f.Name)
		}
	}
	if ssts == 0 {
		t.Fatalf("materialization holds no SST: %+v", m1.Files)
	}
	before := fileSums(t, m1.Dir)

	for i := uint64(41); i <= 45; i++ {
		write(t, d, m, i, 20)
	}
	m2, err := d.Materialize(filepath.Join(root, "m2"))
	if err != nil {
		t.Fatal(err)
	}
	if m2.Index != 45 {
		t.Fatalf("second materialization index %d, want 45", m2.Index)
	}
	shared := 0
	for _, f := range m2.Files {
		if _, ok := before[f.Name]; ok && Immutable(f.Name) {
			if !sameFile(t, filepath.Join(m1.Dir, f.Name), filepath.Join(m2.Dir, f.Name)) {
				t.Errorf("%s: in both materializations but not one file", f.Name)
			}
			shared++
		}
	}
	if shared == 0 {
		t.Errorf("the second materialization shares no SST with the first")
	}

	clone := filepath.Join(root, "clone")
	if err := Clone(vfs.Default, m1.Dir, clone); err != nil {
		t.Fatal(err)
	}
	for _, f := range m1.Files {
		linked := sameFile(t, filepath.Join(m1.Dir, f.Name), filepath.Join(clone, f.Name))
		if linked != Immutable(f.Name) {
			t.Errorf("%s: linked=%v in the clone, want %v", f.Name, linked, Immutable(f.Name))
		}
	}
	c := openDB(t, env, clone, 7)
	if c.Applied() != 40 {
		t.Fatalf("clone opened at %d, want 40", c.Applied())
	}
	cm := m40
	checkState(t, c, cm)
	for i := uint64(41); i <= 80; i++ {
		write(t, c, cm, i, 50)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := c.pdb.Compact(context.Background(), nil, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	after := fileSums(t, m1.Dir)
	if len(after) != len(before) {
		t.Fatalf("materialization has %d files after the clone was written, %d before", len(after), len(before))
	}
	for name, sum := range before {
		if after[name] != sum {
			t.Errorf("%s changed when its clone was written", name)
		}
	}
	v, err := OpenMaterialization(env, m1.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if v.Applied() != 40 {
		t.Errorf("materialization reads back at %d", v.Applied())
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Clone(vfs.Default, m1.Dir, clone); err == nil {
		t.Error("a clone onto an existing directory was not refused")
	}
}

// TestCompactionOutputNamed: the SSTs a compaction wrote are known as
// compaction outputs, a flush's are not, and so are the files of a
// materialization taken after the compaction (hard links: the same names).
func TestCompactionOutputNamed(t *testing.T) {
	root := t.TempDir()
	env := newEnv(t, vfs.Default)
	defer env.Close()
	d := openDB(t, env, filepath.Join(root, "live"), 3)
	defer d.Close()
	m := model{}
	flushed := map[string]bool{}
	for i := uint64(1); i <= 3; i++ {
		write(t, d, m, i, 200)
		m1, err := d.Materialize(filepath.Join(root, fmt.Sprintf("f%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m1.Files {
			if strings.HasSuffix(f.Name, ".sst") && !d.CompactionOutput(f.Name) {
				flushed[f.Name] = true
			}
		}
	}
	if len(flushed) == 0 {
		t.Fatal("no flushed SST")
	}
	for name := range flushed {
		if d.CompactionOutput(name) {
			t.Errorf("flushed %s said to be a compaction's output", name)
		}
	}
	if err := d.pdb.Compact(context.Background(), []byte{0}, []byte{0xff, 0xff}, false); err != nil {
		t.Fatal(err)
	}
	mc, err := d.Materialize(filepath.Join(root, "after"))
	if err != nil {
		t.Fatal(err)
	}
	var compacted int
	for _, f := range mc.Files {
		if !strings.HasSuffix(f.Name, ".sst") {
			continue
		}
		if flushed[f.Name] {
			t.Errorf("%s survived a full compaction", f.Name)
		}
		if d.CompactionOutput(f.Name) {
			compacted++
		}
	}
	if compacted == 0 {
		t.Errorf("no SST of the materialization after a full compaction is a compaction's output: %+v", mc.Files)
	}
}
