package chaos

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/datadir"
)

// TestCopyDataDirsTakesCheckpoints: the verifier's copy of a node's data
// dir holds its materializations of both kinds — image files, and
// checkpoint directories (as hard links of their files) — and leaves out
// what a write in progress left.
func TestCopyDataDirsTakesCheckpoints(t *testing.T) {
	data := t.TempDir()
	wal := filepath.Join(data, datadir.WALDir)
	mats := filepath.Join(data, checkpoint.DirName)
	ckpt := filepath.Join(mats, checkpoint.Materialization{Partition: 2, Index: 9, Dir: true}.Name())
	for _, d := range []string{wal, ckpt, filepath.Join(mats, "p0002-00000000000000000010.ckpt.tmp-ab")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(wal, "00000000000000000001"):                                     "segment",
		filepath.Join(mats, checkpoint.Materialization{Partition: 0, Index: 3}.Name()): "image",
		filepath.Join(ckpt, "000004.sst"):                                              "sst",
		filepath.Join(ckpt, checkpoint.ManifestName):                                   "manifest",
	}
	for p, b := range files {
		if err := os.WriteFile(p, []byte(b), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	if _, err := copyDataDirs(&cluster{nodes: []*node{{id: "n1", data: data}}}, out); err != nil {
		t.Fatal(err)
	}
	got := filepath.Join(out, "n1", checkpoint.DirName)
	for _, name := range []string{"p0000-00000000000000000003.mat", "p0002-00000000000000000009.ckpt/000004.sst", "p0002-00000000000000000009.ckpt/" + checkpoint.ManifestName} {
		if _, err := os.Stat(filepath.Join(got, name)); err != nil {
			t.Errorf("copy lacks %s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(got, "p0002-00000000000000000010.ckpt.tmp-ab")); !os.IsNotExist(err) {
		t.Errorf("copy holds an unfinished checkpoint: %v", err)
	}
}
