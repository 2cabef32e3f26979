package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the fuzz seeds in testdata/fuzz from the current format")

func randomBody(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func writeBody(body []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		// Small writes and one big one: the chunking must not care.
		for i := 0; i < len(body) && i < 100; i++ {
			if _, err := w.Write(body[i : i+1]); err != nil {
				return err
			}
		}
		if len(body) > 100 {
			_, err := w.Write(body[100:])
			return err
		}
		return nil
	}
}

// fileBytes returns a whole file with chunks of chunk bytes.
func fileBytes(tb testing.TB, meta Meta, body []byte, chunk int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := writeFile(&buf, meta, writeBody(body), chunk); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// bytesFS serves data as every file it opens; it can only read.
type bytesFS struct{ data []byte }

type readOnlyFile struct{ *bytes.Reader }

func (readOnlyFile) Write([]byte) (int, error) { return 0, errors.New("read-only") }
func (readOnlyFile) Close() error              { return nil }
func (readOnlyFile) Sync() error               { return nil }

var errReadOnly = errors.New("bytesFS is read-only")

func (b bytesFS) Open(string) (File, error) { return readOnlyFile{bytes.NewReader(b.data)}, nil }
func (bytesFS) CreateTemp(string, string) (File, string, error) {
	return nil, "", errReadOnly
}
func (bytesFS) Rename(string, string) error      { return errReadOnly }
func (bytesFS) Remove(string) error              { return errReadOnly }
func (bytesFS) ReadDir(string) ([]string, error) { return nil, errReadOnly }
func (bytesFS) SyncDir(string) error             { return errReadOnly }
func readBytes(data []byte, name string) ([]byte, Meta, error) {
	r, err := Files{FS: bytesFS{data}}.Open(name)
	if err != nil {
		return nil, Meta{}, err
	}
	defer r.Close()
	body, err := io.ReadAll(r)
	return body, r.Meta(), err
}

func TestWriteReadRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	for i, n := range []int{0, 1, chunkSize - 1, chunkSize, chunkSize + 1, 3*chunkSize + 17} {
		meta := Meta{Partition: 3, Index: uint64(1000 + i), Term: 7}
		body := randomBody(r, n)
		path, sha, size, err := Write(dir, meta, writeBody(body))
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(dir, fmt.Sprintf("p0003-%020d.mat", 1000+i)); path != want {
			t.Fatalf("path %s, want %s", path, want)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(raw); sha != hex.EncodeToString(sum[:]) || size != int64(len(raw)) {
			t.Fatalf("body %d: Write said sha %s size %d, the file has %x and %d", n, sha, size, sum, len(raw))
		}
		chunks := (n + chunkSize - 1) / chunkSize
		if want := headerLen + n + 8*chunks + 4 + trailerLen; len(raw) != want {
			t.Fatalf("body %d: file of %d bytes, want %d", n, len(raw), want)
		}
		got, err := Verify(path)
		if err != nil || got != meta {
			t.Fatalf("Verify = %+v, %v, want %+v", got, err, meta)
		}
		rd, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		read, err := io.ReadAll(rd)
		if err != nil || !bytes.Equal(read, body) || rd.Meta() != meta || rd.Path() != path {
			t.Fatalf("body %d: read %d bytes, err %v, meta %+v", n, len(read), err, rd.Meta())
		}
		if err := rd.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := rd.Read(make([]byte, 1)); !errors.Is(err, ErrClosed) {
			t.Fatalf("read after close: %v", err)
		}
	}
	list, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || len(list[3]) != 6 || list[3][0].Index != 1000 || list[3][5].Index != 1005 {
		t.Fatalf("List = %v", list)
	}
}

// layout returns the file offset where chunk k starts, for a body cut
// into chunks of chunk bytes.
func chunkStart(k, chunk int) int64 { return int64(headerLen + k*(chunk+8)) }

// TestReadDetectsEveryFlip flips each bit of a small file with many
// chunks: every flip is reported, by chunk and offset when it hits a
// chunk's data or checksum, and no byte of a damaged chunk is handed out.
func TestReadDetectsEveryFlip(t *testing.T) {
	const chunk = 16
	body := randomBody(rand.New(rand.NewPCG(3, 4)), 5*chunk+7)
	meta := Meta{Partition: 1, Index: 42, Term: 2}
	good := fileBytes(t, meta, body, chunk)
	chunks := 6
	trailerAt := chunkStart(chunks, chunk) - int64(chunk-7) + 4 // the last chunk is short; then the empty one
	if int(trailerAt)+trailerLen != len(good) {
		t.Fatalf("layout: trailer at %d, file %d bytes", trailerAt, len(good))
	}
	for off := 0; off < len(good); off++ {
		for bit := 0; bit < 8; bit++ {
			bad := slices.Clone(good)
			bad[off] ^= 1 << bit
			read, _, err := readBytes(bad, "damaged.mat")
			var ce *CorruptError
			switch {
			case off >= 8 && off < 12 && errors.Is(err, ErrVersion):
				continue // a version above ours: refused, if not as damage
			case !errors.As(err, &ce):
				t.Fatalf("flip of bit %d at offset %d: %v, want a *CorruptError", bit, off, err)
			case ce.Path != "damaged.mat" || !strings.Contains(err.Error(), "damaged.mat"):
				t.Fatalf("flip at %d: error does not name the file: %v", off, err)
			}
			k := -1 // the chunk hit
			if int64(off) >= headerLen && int64(off) < trailerAt-4 {
				k = (off - headerLen) / (chunk + 8)
			}
			if k >= 0 && int64(off)-chunkStart(k, chunk) >= 4 { // data or checksum, not the length
				if ce.Chunk != k || ce.Offset != chunkStart(k, chunk) {
					t.Fatalf("flip at %d (chunk %d): reported chunk %d offset %d: %v", off, k, ce.Chunk, ce.Offset, err)
				}
			}
			if off < headerLen && (ce.Chunk != -1 || ce.Offset != 0) {
				t.Fatalf("flip at %d in the header: reported chunk %d offset %d", off, ce.Chunk, ce.Offset)
			}
			if k >= 0 && len(read) > k*chunk {
				t.Fatalf("flip at %d in chunk %d: %d bytes handed out, more than the chunks before it", off, k, len(read))
			}
			if !bytes.Equal(read, body[:len(read)]) {
				t.Fatalf("flip at %d: handed out bytes that are not the body's", off)
			}
		}
	}
}

func TestReadDetectsTruncationAndExtraBytes(t *testing.T) {
	body := randomBody(rand.New(rand.NewPCG(5, 6)), 50)
	good := fileBytes(t, Meta{Partition: 1, Index: 9}, body, 16)
	for n := 0; n < len(good); n++ {
		if _, _, err := readBytes(good[:n], "cut.mat"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("file cut to %d of %d bytes: %v", n, len(good), err)
		}
	}
	_, _, err := readBytes(append(slices.Clone(good), 0), "long.mat")
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "bytes follow the trailer") {
		t.Fatalf("a byte after the trailer: %v", err)
	}
	if _, _, err := readBytes(good, "good.mat"); err != nil {
		t.Fatal(err)
	}
}

// withVersion returns file with its header's version set and checksum fixed.
func withVersion(file []byte, v uint32) []byte {
	f := slices.Clone(file)
	binary.LittleEndian.PutUint32(f[8:], v)
	binary.LittleEndian.PutUint32(f[36:], crc32.Checksum(f[:36], castagnoli))
	return f
}

func TestNewerVersionRefused(t *testing.T) {
	good := fileBytes(t, Meta{Partition: 1, Index: 9}, []byte("state"), 16)
	_, _, err := readBytes(withVersion(good, FormatVersion+1), "new.mat")
	if !errors.Is(err, ErrVersion) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("newer version: %v", err)
	}
	want := fmt.Sprintf("new.mat has format version %d; this binary reads version %d", FormatVersion+1, FormatVersion)
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if _, _, err := readBytes(withVersion(good, 0), "zero.mat"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 0: %v", err)
	}
}

func TestNameMustMatchHeader(t *testing.T) {
	dir := t.TempDir()
	path, _, _, err := Write(dir, Meta{Partition: 1, Index: 7}, writeBody([]byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, Materialization{Partition: 2, Index: 7}.Name())
	if err := os.WriteFile(other, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(other); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "name says partition 2") {
		t.Fatalf("misnamed file: %v", err)
	}
	// A name that is not a materialization's (a download, say) is not checked.
	plain := filepath.Join(dir, "download")
	if err := os.WriteFile(plain, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := Verify(plain); err != nil || m.Partition != 1 || m.Index != 7 {
		t.Fatalf("Verify(%s) = %+v, %v", plain, m, err)
	}
}

func TestParseName(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Materialization
		ok   bool
	}{
		{"p0003-00000000000000001234.mat", Materialization{Partition: 3, Index: 1234}, true},
		{"p12345-18446744073709551615.mat", Materialization{Partition: 12345, Index: 1<<64 - 1}, true},
		{"p0003-00000000000000001234.ckpt", Materialization{Partition: 3, Index: 1234, Dir: true}, true},
		{"p0003-00000000000000001234.ckpt.tmp-1f", Materialization{}, false},
		{"p0003-00000000000000001234.mat.ckpt", Materialization{}, false},
		{"p3-00000000000000001234.mat", Materialization{}, false},
		{"p0003-1234.mat", Materialization{}, false},
		{"p0003-00000000000000001234.mat.tmp-123", Materialization{}, false},
		{"p0003-00000000000000001234", Materialization{}, false},
		{"g0003-00000000000000001234.mat", Materialization{}, false},
		{"p-0003-0000000000000001234.mat", Materialization{}, false},
		{"p00a3-00000000000000001234.mat", Materialization{}, false},
	} {
		m, ok := ParseName(tc.name)
		if ok != tc.ok || m != tc.m {
			t.Errorf("ParseName(%q) = %v %v, want %v %v", tc.name, m, ok, tc.m, tc.ok)
		}
		if ok && m.Name() != tc.name {
			t.Errorf("%v.Name() = %q", m, m.Name())
		}
	}
}

// faultFS is the OS file system with one operation failing.
type faultFS struct {
	fail string // "create", "write", "sync", "close", "rename", "syncdir"
}

var errInjected = errors.New("injected I/O error")

type faultFile struct {
	File
	fail string
}

func (f faultFile) Write(b []byte) (int, error) {
	if f.fail == "write" {
		return 0, errInjected
	}
	return f.File.Write(b)
}

func (f faultFile) Sync() error {
	if f.fail == "sync" {
		return errInjected
	}
	return f.File.Sync()
}

func (f faultFile) Close() error {
	err := f.File.Close()
	if f.fail == "close" {
		return errInjected
	}
	return err
}

func (f faultFS) CreateTemp(dir, pattern string) (File, string, error) {
	if f.fail == "create" {
		return nil, "", errInjected
	}
	file, name, err := OS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, "", err
	}
	return faultFile{File: file, fail: f.fail}, name, nil
}

func (f faultFS) Open(path string) (File, error) { return OS.Open(path) }
func (f faultFS) Rename(o, n string) error {
	if f.fail == "rename" {
		return errInjected
	}
	return OS.Rename(o, n)
}
func (f faultFS) Remove(path string) error             { return OS.Remove(path) }
func (f faultFS) ReadDir(dir string) ([]string, error) { return OS.ReadDir(dir) }
func (f faultFS) SyncDir(dir string) error {
	if f.fail == "syncdir" {
		return errInjected
	}
	return OS.SyncDir(dir)
}

// TestWriteFailuresLeaveNoFile: whichever step of Write fails, the error
// says so and no file is left under the final name nor any temporary one
// (except after a failed directory fsync, when the complete file is there).
func TestWriteFailuresLeaveNoFile(t *testing.T) {
	body := randomBody(rand.New(rand.NewPCG(7, 8)), 2*chunkSize+3)
	meta := Meta{Partition: 4, Index: 99, Term: 3}
	for _, op := range []string{"create", "write", "sync", "close", "rename", "syncdir"} {
		dir := t.TempDir()
		_, _, _, err := Files{FS: faultFS{fail: op}}.Write(dir, meta, writeBody(body))
		if !errors.Is(err, errInjected) {
			t.Fatalf("%s failing: Write = %v", op, err)
		}
		if !strings.Contains(err.Error(), meta.Materialization().Name()) {
			t.Errorf("%s failing: the error does not name the file: %v", op, err)
		}
		names, _ := OS.ReadDir(dir)
		if op == "syncdir" {
			if len(names) != 1 || names[0] != meta.Materialization().Name() {
				t.Fatalf("directory fsync failing: files %v", names)
			}
			if _, err := Verify(filepath.Join(dir, names[0])); err != nil {
				t.Fatalf("directory fsync failing: the file in place is bad: %v", err)
			}
			continue
		}
		if len(names) != 0 {
			t.Fatalf("%s failing: files left: %v", op, names)
		}
	}

	// An encoder's error aborts the same way and is passed on.
	dir := t.TempDir()
	boom := errors.New("boom")
	_, _, _, err := Write(dir, meta, func(w io.Writer) error {
		w.Write(body[:chunkSize+5])
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("encoder error: %v", err)
	}
	if names, _ := OS.ReadDir(dir); len(names) != 0 {
		t.Fatalf("encoder error: files left: %v", names)
	}
}

// TestCrashLeavesTempOnly: a crash in the middle of Write (simulated by a
// half-written temporary file, which is all a crash before the rename can
// leave) is invisible to List and cleaned by RemoveTemp.
func TestCrashLeavesTempOnly(t *testing.T) {
	dir := t.TempDir()
	meta := Meta{Partition: 1, Index: 5}
	if _, _, _, err := Write(dir, meta, writeBody([]byte("old"))); err != nil {
		t.Fatal(err)
	}
	next := Meta{Partition: 1, Index: 9}
	full := fileBytes(t, next, []byte("a half-written state"), 8)
	tmp := filepath.Join(dir, next.Materialization().Name()+".tmp-12345")
	if err := os.WriteFile(tmp, full[:len(full)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "unrelated.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := List(dir)
	if err != nil || len(list) != 1 || !slices.Equal(list[1], []Materialization{{Partition: 1, Index: 5}}) {
		t.Fatalf("List = %v, %v", list, err)
	}
	removed, err := RemoveTemp(dir)
	if err != nil || !slices.Equal(removed, []string{filepath.Base(tmp)}) {
		t.Fatalf("RemoveTemp = %v, %v", removed, err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temporary file still there: %v", err)
	}
}

func TestListAndRemove(t *testing.T) {
	dir := t.TempDir()
	for _, m := range []Meta{{Partition: 2, Index: 30}, {Partition: 1, Index: 200}, {Partition: 2, Index: 4}, {Partition: 1, Index: 7}} {
		if _, _, _, err := Write(dir, m, writeBody([]byte("s"))); err != nil {
			t.Fatal(err)
		}
	}
	list, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64][]Materialization{1: {{Partition: 1, Index: 7}, {Partition: 1, Index: 200}}, 2: {{Partition: 2, Index: 4}, {Partition: 2, Index: 30}}}
	if fmt.Sprint(list) != fmt.Sprint(want) {
		t.Fatalf("List = %v, want %v", list, want)
	}
	if err := Remove(dir, Materialization{Partition: 1, Index: 7}); err != nil {
		t.Fatal(err)
	}
	if err := Remove(dir, Materialization{Partition: 1, Index: 7}); err != nil {
		t.Fatalf("removing again: %v", err)
	}
	list, _ = List(dir)
	if !slices.Equal(list[1], []Materialization{{Partition: 1, Index: 200}}) {
		t.Fatalf("after Remove: %v", list)
	}
	if _, err := List(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("List of a missing directory succeeded")
	}
}

func TestCorruptErrorMessage(t *testing.T) {
	e := &CorruptError{Path: "/d/p0001-00000000000000000007.mat", Offset: 112, Chunk: 3, Reason: "chunk checksum 1, stored 2"}
	want := "checkpoint: corrupt materialization /d/p0001-00000000000000000007.mat in chunk 3 at offset 112: chunk checksum 1, stored 2"
	if e.Error() != want {
		t.Fatalf("%q\nwant %q", e.Error(), want)
	}
	e.Chunk = -1
	if !strings.Contains(e.Error(), "p0001-00000000000000000007.mat at offset 112:") {
		t.Fatal(e.Error())
	}
}

// fuzzSeeds are files for FuzzReadMaterialization: valid ones of several
// shapes and a newer version, kept in testdata/fuzz (rewrite them with
// -rewrite after a format change).
func fuzzSeeds(tb testing.TB) map[string][]byte {
	r := rand.New(rand.NewPCG(9, 10))
	return map[string][]byte{
		"empty-body":    fileBytes(tb, Meta{Partition: 1, Index: 1, Term: 1}, nil, 16),
		"one-chunk":     fileBytes(tb, Meta{Partition: 2, Index: 300, Term: 4}, []byte("partition state"), 64),
		"small-chunks":  fileBytes(tb, Meta{Partition: 3, Index: 1 << 40, Term: 9}, randomBody(r, 100), 7),
		"newer-version": withVersion(fileBytes(tb, Meta{Partition: 1, Index: 2}, []byte("v2"), 16), FormatVersion+1),
	}
}

func TestFuzzSeedsCurrent(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReadMaterialization")
	seeds := fuzzSeeds(t)
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		path := filepath.Join(dir, "seed-"+name)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", seeds[name])
		if *rewrite {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -rewrite to create the seeds)", err)
		}
		if string(got) != want {
			t.Errorf("%s is out of date; rerun with -rewrite", path)
		}
	}
}

// FuzzReadMaterialization: reading any bytes never panics and fails only
// with ErrCorrupt or ErrVersion (there is no I/O to fail).
func FuzzReadMaterialization(f *testing.F) {
	seeds := fuzzSeeds(f)
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, err := readBytes(data, "fuzz.mat")
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
			t.Fatalf("error of another kind: %v", err)
		}
	})
}
