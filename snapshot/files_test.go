package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cutkv/cutkv/checkpoint"
)

// withCheckpointBase turns partition 1's base in m into a checkpoint base
// of the files given (name → content), made in w.
func (w *world) withCheckpointBase(m *Manifest, files map[string]string) {
	w.t.Helper()
	b := m.Partitions[0].Base
	var bf []BaseFile
	var names []string
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	var df []checkpoint.DirFile
	for _, name := range names {
		sum := sha256.Sum256([]byte(files[name]))
		obj := FileObjectName(hex.EncodeToString(sum[:]))
		w.bytes[obj] = []byte(files[name])
		bf = append(bf, BaseFile{File: name, Object: w.object(obj)})
		df = append(df, checkpoint.DirFile{Name: name, Size: int64(len(files[name])), SHA256: sum})
	}
	mf := checkpoint.Materialization{Partition: 1, Index: b.Index, Dir: true}.Name()
	w.bytes[mf] = checkpoint.EncodeManifest(checkpoint.Meta{Partition: 1, Index: b.Index, Term: 1}, df)
	b.Object, b.Files = w.object(mf), bf
}

// TestCheckpointBaseFiles: a checkpoint base's files are objects named by
// their content; a file two snapshots share is stored once, uploaded
// once, and pruned only with the last snapshot that names it.
func TestCheckpointBaseFiles(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	w.logs[1] = partitionLog(30, cutMark{3, 5, 8}, cutMark{4, 20, 22})
	s, _ := openFileStore(t, 1, Options{})
	a := w.manifest("a", 3, t0, handle{p: 1, pos: 5, end: 8, base: 2, pieces: [][2]uint64{{3, 8}}})
	w.withCheckpointBase(a, map[string]string{"000004.sst": "shared sst", "000005.sst": "only in a", "MANIFEST-000001": "manifest a"})
	b := w.manifest("b", 4, t0.Add(time.Minute), handle{p: 1, pos: 20, end: 22, base: 15, pieces: [][2]uint64{{16, 22}}})
	w.withCheckpointBase(b, map[string]string{"000004.sst": "shared sst", "000009.sst": "only in b", "MANIFEST-000001": "manifest b"})
	for _, m := range []*Manifest{a, b} {
		m.Format, m.Cluster = ManifestVersion, clusterHex(1)
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	// Format 2: a binary that knows no checkpoint base refuses it as newer.
	a.Format = 1
	if err := a.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("format 1 with a checkpoint base: %v", err)
	}
	a.Format = 2
	shared := a.Partitions[0].Base.Files[0].Name
	if b.Partitions[0].Base.Files[0].Name != shared {
		t.Fatal("the shared file has two object names")
	}
	w.upload(ctx, s, a)
	up := w.upload(ctx, s, b)
	if slices.Contains(up, shared) {
		t.Errorf("the file b shares with a was uploaded again: %v", up)
	}
	mustCheck(t, s, "a", "b")

	gc, err := s.Prune(ctx, 1, 0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	names := pieceNames(t, s)
	if !slices.Contains(names, shared) {
		t.Errorf("prune removed the file b still names: %v", names)
	}
	if only := a.Partitions[0].Base.Files[1].Name; slices.Contains(names, only) {
		t.Errorf("prune kept %s, named only by the pruned snapshot (deleted %v)", only, gc.Pieces)
	}
	mustCheck(t, s, "b")

	// Validation of checkpoint bases.
	for _, tc := range []struct {
		name   string
		change func(*Base)
	}{
		{"files under a file's name", func(b *Base) { b.Name = checkpoint.Materialization{Partition: 1, Index: b.Index}.Name() }},
		{"no files under a directory's name", func(b *Base) { b.Files = nil }},
		{"object not named by its content", func(b *Base) { b.Files[0].Name = FileObjectName(b.Files[1].SHA256) }},
		{"unsorted", func(b *Base) { b.Files[0], b.Files[1] = b.Files[1], b.Files[0] }},
		{"a path", func(b *Base) { b.Files[0].File = "../000004.sst" }},
		{"negative size", func(b *Base) { b.Files[0].Size = -1 }},
		{"size past the bound", func(b *Base) { b.Files[0].Size = checkpoint.MaxDirFileSize + 1 }},
	} {
		m := *b
		m.Partitions = slices.Clone(b.Partitions)
		base := *b.Partitions[0].Base
		base.Files = slices.Clone(base.Files)
		m.Partitions[0].Base = &base
		tc.change(&base)
		if err := m.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", tc.name, err)
		}
	}
	if err := checkPieceName(FileObjectName(fmt.Sprintf("%064x", 1))); err != nil {
		t.Errorf("a file object's name is refused: %v", err)
	}
	if err := checkPieceName("f-abc"); err == nil {
		t.Error("a file object name that is no SHA-256 is accepted")
	}
}
