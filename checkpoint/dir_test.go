package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fakeCheckpoint makes a temporary checkpoint directory of meta in dir with
// the files given (name → content).
func fakeCheckpoint(t *testing.T, dir string, meta Meta, files map[string]string) string {
	t.Helper()
	tmp := TempDir(dir, meta)
	if err := os.Mkdir(tmp, 0o750); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return tmp
}

func TestSealAndVerifyDir(t *testing.T) {
	dir := t.TempDir()
	meta := Meta{Partition: 3, Index: 120, Term: 4}
	tmp := fakeCheckpoint(t, dir, meta, map[string]string{"000005.sst": "sst five", "MANIFEST-000001": "manifest", "LOCK": ""})
	m, files, err := Seal(tmp, meta, "")
	if err != nil {
		t.Fatal(err)
	}
	if !m.Dir || m.Name() != "p0003-00000000000000000120.ckpt" {
		t.Fatalf("sealed as %+v (%s)", m, m.Name())
	}
	if len(files) != 2 || files[0].Name != "000005.sst" || files[0].SHA256 != sha256.Sum256([]byte("sst five")) || files[1].Size != 8 {
		t.Fatalf("files %+v", files)
	}
	path := filepath.Join(dir, m.Name())
	got, gf, err := VerifyDir(path)
	if err != nil || got != meta || !slices.Equal(gf, files) {
		t.Fatalf("VerifyDir = %+v %+v %v", got, gf, err)
	}
	// A file over an older .mat of the same index sorts after it.
	if err := os.WriteFile(filepath.Join(dir, Materialization{Partition: 3, Index: 120}.Name()), nil, 0o640); err != nil {
		t.Fatal(err)
	}
	list, err := List(dir)
	if err != nil || len(list[3]) != 2 || list[3][0].Dir || !list[3][1].Dir {
		t.Fatalf("List = %+v %v", list, err)
	}

	// Damage is found: a changed byte, a changed size, a missing file, a
	// changed manifest.
	sst := filepath.Join(path, "000005.sst")
	for _, tc := range []struct {
		name   string
		damage func()
		undo   func()
	}{
		{"changed byte", func() { must(t, os.WriteFile(sst, []byte("sst fivE"), 0o640)) }, func() { must(t, os.WriteFile(sst, []byte("sst five"), 0o640)) }},
		{"size", func() { must(t, os.WriteFile(sst, []byte("sst fiv"), 0o640)) }, func() { must(t, os.WriteFile(sst, []byte("sst five"), 0o640)) }},
		{"missing", func() { must(t, os.Rename(sst, sst+"x")) }, func() { must(t, os.Rename(sst+"x", sst)) }},
		{"manifest", func() { flipByte(t, filepath.Join(path, ManifestName), 50) }, func() { flipByte(t, filepath.Join(path, ManifestName), 50) }},
	} {
		tc.damage()
		if _, _, err := VerifyDir(path); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: VerifyDir = %v, want ErrCorrupt", tc.name, err)
		}
		tc.undo()
	}
	if _, _, err := VerifyDir(path); err != nil {
		t.Fatal(err)
	}

	// A directory renamed to another index's name is refused.
	other := filepath.Join(dir, Materialization{Partition: 3, Index: 121, Dir: true}.Name())
	must(t, os.Rename(path, other))
	if _, _, err := ReadManifest(other); !errors.Is(err, ErrCorrupt) {
		t.Errorf("manifest under another name: %v", err)
	}
	must(t, os.Rename(other, path))

	// Remove leaves nothing; RemoveTemp clears interrupted directories.
	left := fakeCheckpoint(t, dir, Meta{Partition: 3, Index: 130}, map[string]string{"000009.sst": "x"})
	if err := Remove(dir, m); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveTemp(dir)
	if err != nil || len(removed) != 1 || removed[0] != filepath.Base(left) {
		t.Fatalf("RemoveTemp = %v %v", removed, err)
	}
	es, _ := os.ReadDir(dir)
	if len(es) != 1 {
		t.Fatalf("left in the directory: %v", es)
	}
}

// TestSealReusesHashOfSharedFile: a file that is the previous checkpoint's
// own (a hard link) is not read again; a file of the same name that is not
// is.
func TestSealReusesHashOfSharedFile(t *testing.T) {
	dir := t.TempDir()
	m1 := Meta{Partition: 1, Index: 10, Term: 1}
	tmp := fakeCheckpoint(t, dir, m1, map[string]string{"000001.sst": "one", "000002.sst": "two"})
	first, _, err := Seal(tmp, m1, "")
	if err != nil {
		t.Fatal(err)
	}
	prev := filepath.Join(dir, first.Name())
	// Plant a wrong hash for 000001.sst in prev's manifest: reused only if
	// the file is not read again.
	_, files, err := ReadManifest(prev)
	if err != nil {
		t.Fatal(err)
	}
	files[0].SHA256[0] ^= 1
	must(t, os.WriteFile(filepath.Join(prev, ManifestName), EncodeManifest(m1, files), 0o640))

	m2 := Meta{Partition: 1, Index: 20, Term: 1}
	tmp2 := TempDir(dir, m2)
	must(t, os.Mkdir(tmp2, 0o750))
	must(t, os.Link(filepath.Join(prev, "000001.sst"), filepath.Join(tmp2, "000001.sst")))
	must(t, os.WriteFile(filepath.Join(tmp2, "000002.sst"), []byte("two"), 0o640)) // same name and bytes, another file
	_, got, err := Seal(tmp2, m2, prev)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].SHA256 != files[0].SHA256 {
		t.Errorf("the linked file was hashed again")
	}
	if got[1].SHA256 != sha256.Sum256([]byte("two")) {
		t.Errorf("the unlinked file's hash %x", got[1].SHA256)
	}
}

// TestSealKnownHashes: a file linked from the directory the known hashes
// describe keeps its known hash (a planted wrong one shows it is not read);
// a file of the same name and size that is another inode, or of another
// size, is read.
func TestSealKnownHashes(t *testing.T) {
	dir := t.TempDir()
	placed := filepath.Join(dir, "placed")
	must(t, os.Mkdir(placed, 0o750))
	for name, body := range map[string]string{"000001.sst": "one", "000002.sst": "two", "000003.sst": "three"} {
		must(t, os.WriteFile(filepath.Join(placed, name), []byte(body), 0o640))
	}
	wrong := [32]byte{1, 2, 3}
	known := []DirFile{{Name: "000001.sst", Size: 3, SHA256: wrong}, {Name: "000002.sst", Size: 3, SHA256: wrong}, {Name: "000003.sst", Size: 4, SHA256: wrong}}
	meta := Meta{Partition: 2, Index: 7, Term: 1}
	tmp := TempDir(dir, meta)
	must(t, os.Mkdir(tmp, 0o750))
	must(t, os.Link(filepath.Join(placed, "000001.sst"), filepath.Join(tmp, "000001.sst")))
	must(t, os.WriteFile(filepath.Join(tmp, "000002.sst"), []byte("two"), 0o640)) // a copy, not a link
	must(t, os.Link(filepath.Join(placed, "000003.sst"), filepath.Join(tmp, "000003.sst")))
	_, got, err := SealKnown(tmp, meta, placed, known)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].SHA256 != wrong {
		t.Errorf("the linked file was hashed again: %x", got[0].SHA256)
	}
	if got[1].SHA256 != sha256.Sum256([]byte("two")) {
		t.Errorf("the copied file kept the known hash: %x", got[1].SHA256)
	}
	if got[2].SHA256 != sha256.Sum256([]byte("three")) {
		t.Errorf("a file whose size is not the known one kept the known hash: %x", got[2].SHA256)
	}
}

func TestDecodeManifestBounds(t *testing.T) {
	meta := Meta{Partition: 2, Index: 9, Term: 3}
	files := []DirFile{{Name: "000001.sst", Size: 5}, {Name: "OPTIONS-000003", Size: 9}}
	good := EncodeManifest(meta, files)
	if m, f, err := DecodeManifest("m", good); err != nil || m != meta || !slices.Equal(f, files) {
		t.Fatalf("round trip: %+v %+v %v", m, f, err)
	}
	for name, fs := range map[string][]DirFile{
		"unsorted":  {files[1], files[0]},
		"duplicate": {files[0], files[0]},
		"path":      {{Name: "../x.sst"}},
		"lock":      {{Name: "LOCK"}},
		"manifest":  {{Name: ManifestName}},
		"size":      {{Name: "1.sst", Size: MaxDirFileSize + 1}},
	} {
		if _, _, err := DecodeManifest("m", EncodeManifest(meta, fs)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	for i := range good {
		if _, _, err := DecodeManifest("m", good[:i]); err == nil {
			t.Errorf("truncated to %d bytes: no error", i)
		}
	}
}

func FuzzDecodeManifest(f *testing.F) {
	f.Add(EncodeManifest(Meta{Partition: 1, Index: 2, Term: 3}, []DirFile{{Name: "000001.sst", Size: 5}}))
	f.Add(EncodeManifest(Meta{}, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		meta, files, err := DecodeManifest("fuzz", b)
		if err != nil {
			return
		}
		// What decodes encodes back to the same bytes.
		if again := EncodeManifest(meta, files); string(again) != string(b) {
			t.Fatalf("decoded %+v %+v re-encodes differently", meta, files)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, off int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x40
	must(t, os.WriteFile(path, b, 0o640))
}

// TestArchiveRoundTrip: a checkpoint directory shipped as an archive
// arrives as the same directory under its name; any damage to the stream
// (a flipped byte anywhere, a truncation, extra bytes, another index) is
// refused and leaves nothing.
func TestArchiveRoundTrip(t *testing.T) {
	src := t.TempDir()
	meta := Meta{Partition: 2, Index: 77, Term: 3}
	tmp := fakeCheckpoint(t, src, meta, map[string]string{"000004.sst": "sst four", "000007.sst": "sst seven!", "MANIFEST-000001": "m", "marker.x": ""})
	m, files, err := Seal(tmp, meta, "")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteArchive(&buf, filepath.Join(src, m.Name())); err != nil {
		t.Fatal(err)
	}
	archive := buf.Bytes()
	if !IsArchive(archive) {
		t.Fatal("not recognized as an archive")
	}
	dst := t.TempDir()
	path, got, err := ReadArchive(bytes.NewReader(archive), filepath.Join(dst, "in"), Materialization{Partition: 2, Index: 77})
	if err != nil {
		t.Fatal(err)
	}
	if got != meta || filepath.Base(path) != m.Name() {
		t.Fatalf("received %+v at %s", got, path)
	}
	if _, gf, err := VerifyDir(path); err != nil || !slices.Equal(gf, files) {
		t.Fatalf("received directory: %v %v", gf, err)
	}
	must(t, os.RemoveAll(path))

	bad := map[string][]byte{
		"truncated": archive[:len(archive)-3],
		"extra":     append(slices.Clone(archive), 'x'),
		"header":    archive[:10],
	}
	for i := 0; i < len(archive); i += 7 {
		b := slices.Clone(archive)
		b[i] ^= 0x20
		bad[fmt.Sprintf("byte %d", i)] = b
	}
	for name, b := range bad {
		if _, _, err := ReadArchive(bytes.NewReader(b), filepath.Join(dst, "in"), Materialization{Partition: 2, Index: 77}); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if es, _ := os.ReadDir(dst); len(es) != 0 {
			t.Fatalf("%s: left %v", name, es)
		}
	}
	if _, _, err := ReadArchive(bytes.NewReader(archive), filepath.Join(dst, "in"), Materialization{Partition: 2, Index: 78}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("archive of another index: %v", err)
	}
}

func FuzzReadArchive(f *testing.F) {
	dir := f.TempDir()
	meta := Meta{Partition: 1, Index: 5, Term: 1}
	tmp := TempDir(dir, meta)
	if err := os.Mkdir(tmp, 0o750); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "000001.sst"), []byte("abc"), 0o640); err != nil {
		f.Fatal(err)
	}
	m, _, err := Seal(tmp, meta, "")
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteArchive(&buf, filepath.Join(dir, m.Name())); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		out := t.TempDir()
		path, _, err := ReadArchive(bytes.NewReader(b), filepath.Join(out, "in"), Materialization{Partition: 1, Index: 5})
		if err != nil {
			return
		}
		// What is accepted verifies.
		if _, _, err := VerifyDir(path); err != nil {
			t.Fatalf("accepted archive does not verify: %v", err)
		}
	})
}
