package checkpoint

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// FormatVersion is the materialization file format this binary writes and
// the newest it reads.
const FormatVersion = 1

const (
	headerLen  = HeaderLen
	trailerLen = 60
	// chunkSize is the size of the chunks Write makes (the last one may be
	// shorter).
	chunkSize = 64 << 10
	// maxChunk bounds a chunk's length in the format.
	maxChunk = 16 << 20
	fileExt  = ".mat"
	tempMark = fileExt + ".tmp-"
)

var (
	headerMagic  = []byte("CUTKVMAT")
	trailerMagic = []byte("CUTKVEND")
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

// Materialization names one materialized state: partition Partition at
// applied index Index, the base of a checkpoint's handle; its file is
// Name() in the materialization directory (and the object name in a
// snapshot store).
type Materialization struct {
	Partition uint64
	Index     uint64
	// Dir: a checkpoint directory (dir.go), not an image file. A snapshot
	// store's object of a materialization is always an image file: its
	// object name is that of the Materialization without Dir.
	Dir bool
}

// Name returns the file name, e.g. p0003-00000000000000001234.mat.
// DirName is the materializations' directory inside a node's data dir.
const DirName = "materializations"

// Name is the file name of a materialization.
func (m Materialization) Name() string {
	ext := fileExt
	if m.Dir {
		ext = dirExt
	}
	return fmt.Sprintf("p%04d-%020d%s", m.Partition, m.Index, ext)
}

func (m Materialization) String() string { return fmt.Sprintf("p%d@%d", m.Partition, m.Index) }

// ParseName returns the materialization a file name names; false when the
// name is not one Name returns (a temporary file, another file).
func ParseName(name string) (Materialization, bool) {
	rest, ok := strings.CutPrefix(name, "p")
	if !ok {
		return Materialization{}, false
	}
	rest, isFile := strings.CutSuffix(rest, fileExt)
	rest, isDir := strings.CutSuffix(rest, dirExt)
	if !isFile && !isDir {
		return Materialization{}, false
	}
	ps, is, ok := strings.Cut(rest, "-")
	if !ok {
		return Materialization{}, false
	}
	p, err1 := strconv.ParseUint(ps, 10, 64)
	i, err2 := strconv.ParseUint(is, 10, 64)
	m := Materialization{Partition: p, Index: i, Dir: isDir}
	if err1 != nil || err2 != nil || m.Name() != name {
		return Materialization{}, false
	}
	return m, true
}

// Meta is what a materialization file's header says.
type Meta struct {
	Partition uint64
	Index     uint64 // the applied index m of the state
	Term      uint64 // the raft term of the entry at m, as the writer said
}

// Materialization returns the materialization the file holds.
func (m Meta) Materialization() Materialization {
	return Materialization{Partition: m.Partition, Index: m.Index}
}

// Files reads and writes materialization files through an FS. The zero
// value uses OS; the package-level functions are those of Files{}.
type Files struct {
	FS FS
}

func (s Files) fs() FS {
	if s.FS == nil {
		return OS
	}
	return s.FS
}

// Write is Files{}.Write.
func Write(dir string, meta Meta, encode func(io.Writer) error) (path, sha string, size int64, err error) {
	return Files{}.Write(dir, meta, encode)
}

// Write creates the materialization file of meta in dir, with the body
// encode writes (for example partition.Image.Encode), and returns its path,
// the SHA-256 of the whole file in hex and the file's size (what a blob
// store checks an upload against). It blocks for the I/O.
//
// The file appears under its name only complete and durable: it is written
// to a temporary file in dir, fsynced, renamed and the directory fsynced.
// An existing file of the same name is replaced (the state at an index is
// the same on every replica). On an error, encode's included, the
// temporary file is removed and no file of that name is created, except
// when only the final directory fsync failed: the complete file is then in
// place but may not survive a crash, and the caller should treat the write
// as failed.
func (s Files) Write(dir string, meta Meta, encode func(io.Writer) error) (path, sha string, size int64, err error) {
	fsys := s.fs()
	name := meta.Materialization().Name()
	path = filepath.Join(dir, name)
	f, tmp, err := fsys.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return "", "", 0, fmt.Errorf("checkpoint: creating a temporary file for %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			if f != nil {
				f.Close()
			}
			if rerr := fsys.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = fmt.Errorf("%w (and removing %s: %v)", err, tmp, rerr)
			}
		}
	}()
	ioErr := func(op string, err error) error {
		return fmt.Errorf("checkpoint: writing %s: %s %s: %w", path, op, tmp, err)
	}

	bw := bufio.NewWriterSize(f, 256<<10)
	fileSum := sha256.New()
	cw := &countWriter{w: io.MultiWriter(bw, fileSum)}
	var encErr error
	err = writeFile(cw, meta, func(w io.Writer) error { encErr = encode(w); return encErr }, chunkSize)
	switch {
	case encErr != nil:
		return "", "", 0, fmt.Errorf("checkpoint: writing %s: encoding the state: %w", path, encErr)
	case err != nil:
		return "", "", 0, ioErr("write", err)
	}
	if err := bw.Flush(); err != nil {
		return "", "", 0, ioErr("write", err)
	}
	if err := f.Sync(); err != nil {
		return "", "", 0, ioErr("fsync", err)
	}
	err = f.Close()
	f = nil
	if err != nil {
		return "", "", 0, ioErr("close", err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return "", "", 0, fmt.Errorf("checkpoint: writing %s: renaming %s: %w", path, tmp, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return "", "", 0, fmt.Errorf("checkpoint: writing %s: fsync of directory %s: %w", path, dir, err)
	}
	return path, hex.EncodeToString(fileSum.Sum(nil)), cw.n, nil
}

// writeFile writes a whole materialization file to w, cutting the body
// into chunks of chunk bytes.
func writeFile(w io.Writer, meta Meta, encode func(io.Writer) error, chunk int) error {
	hdr := EncodeHeader(headerMagic, FormatVersion, [3]uint64{meta.Partition, meta.Index, meta.Term})
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	body := &chunkWriter{w: w, sum: sha256.New(), buf: make([]byte, 0, chunk)}
	if err := encode(body); err != nil {
		return err
	}
	return body.finish()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// chunkWriter cuts the body into chunks of cap(buf) bytes. Its first
// error sticks.
type chunkWriter struct {
	w      io.Writer
	sum    hash.Hash
	buf    []byte
	length uint64 // body bytes written out
	chunks uint64
	err    error
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 && c.err == nil {
		k := min(len(p), cap(c.buf)-len(c.buf))
		c.buf = append(c.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(c.buf) == cap(c.buf) {
			c.flush()
		}
	}
	return n, c.err
}

func (c *chunkWriter) flush() {
	if len(c.buf) == 0 || c.err != nil {
		return
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(len(c.buf)))
	crc := crc32.Update(crc32.Checksum(b[:], castagnoli), castagnoli, c.buf)
	c.write(b[:])
	c.write(c.buf)
	binary.LittleEndian.PutUint32(b[:], crc)
	c.write(b[:])
	c.sum.Write(c.buf)
	c.length += uint64(len(c.buf))
	c.chunks++
	c.buf = c.buf[:0]
}

func (c *chunkWriter) write(b []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}

// finish writes the last chunk, the empty one and the trailer.
func (c *chunkWriter) finish() error {
	c.flush()
	c.write([]byte{0, 0, 0, 0})
	var t [trailerLen]byte
	copy(t[:], trailerMagic)
	binary.LittleEndian.PutUint64(t[8:], c.length)
	binary.LittleEndian.PutUint64(t[16:], c.chunks)
	copy(t[24:56], c.sum.Sum(nil))
	binary.LittleEndian.PutUint32(t[56:], crc32.Checksum(t[:56], castagnoli))
	c.write(t[:])
	return c.err
}

// Reader reads the body of a materialization file, checking it as it
// goes. It is an io.Reader of the body: it returns io.EOF only once the
// whole file checked out, and a *CorruptError (ErrCorrupt) at the first
// damage, before handing out any byte of a damaged chunk. Errors stick.
// Not safe for concurrent use.
type Reader struct {
	path string
	meta Meta
	f    File
	br   *bufio.Reader
	off  int64 // file offset of the next byte br returns

	chunk  int    // chunks read so far
	data   []byte // what is left of the current chunk
	sum    hash.Hash
	length uint64
	err    error // sticky: io.EOF at a checked end, or the failure
}

// Open is Files{}.Open.
func Open(path string) (*Reader, error) { return Files{}.Open(path) }

// Open opens a materialization file and checks its header: an error
// wrapping ErrVersion for a file of a newer format, a *CorruptError for a
// damaged header or a file whose name names another partition or index.
// The caller reads the body from the Reader and closes it.
func (s Files) Open(path string) (*Reader, error) {
	f, err := s.fs().Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: opening %s: %w", path, err)
	}
	r := &Reader{path: path, f: f, br: bufio.NewReaderSize(f, 256<<10), sum: sha256.New()}
	if err := r.readHeader(); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// Meta returns what the header says.
func (r *Reader) Meta() Meta { return r.meta }

// Path returns the file's path.
func (r *Reader) Path() string { return r.path }

// Read reads the body. See Reader.
func (r *Reader) Read(p []byte) (int, error) {
	for len(r.data) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.err = r.nextChunk()
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// Close closes the file. Reads after Close fail with ErrClosed.
func (r *Reader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f, r.data = nil, nil
	if r.err == nil || r.err == io.EOF {
		r.err = ErrClosed
	}
	return err
}

func (r *Reader) corrupt(off int64, chunk int, format string, args ...any) error {
	return &CorruptError{Path: r.path, Offset: off, Chunk: chunk, Reason: fmt.Sprintf(format, args...)}
}

// readFull reads len(b) bytes of what, which starts at offset start: the
// end of the file there is damage, other errors are I/O errors.
func (r *Reader) readFull(b []byte, start int64, chunk int, what string) error {
	n, err := io.ReadFull(r.br, b)
	r.off += int64(n)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return r.corrupt(start, chunk, "the file ends inside the %s (%d of %d bytes)", what, n, len(b))
	case err != nil:
		return fmt.Errorf("checkpoint: reading %s at offset %d: %w", r.path, r.off, err)
	}
	return nil
}

func (r *Reader) readHeader() error {
	h, n, err := ReadHeader(r.br, "materialization file", headerMagic, FormatVersion)
	r.off += int64(n)
	var he *HeaderError
	switch {
	case errors.As(err, &he) && he.Newer > 0:
		return fmt.Errorf("%w: materialization %s has format version %d; this binary reads version %d",
			ErrVersion, r.path, he.Newer, FormatVersion)
	case errors.As(err, &he):
		return r.corrupt(0, -1, "%s", he.Reason)
	case err != nil:
		return fmt.Errorf("checkpoint: reading %s: %w", r.path, err)
	}
	r.meta = Meta{Partition: h.Fields[0], Index: h.Fields[1], Term: h.Fields[2]}
	if named, ok := ParseName(filepath.Base(r.path)); ok && named != r.meta.Materialization() {
		return r.corrupt(0, -1, "the file's name says partition %d index %d, its header partition %d index %d",
			named.Partition, named.Index, r.meta.Partition, r.meta.Index)
	}
	return nil
}

// nextChunk reads the next chunk into data, or the trailer (io.EOF when
// all is well).
func (r *Reader) nextChunk() error {
	start := r.off
	var b [4]byte
	if err := r.readFull(b[:], start, r.chunk, "chunk length"); err != nil {
		return err
	}
	n := binary.LittleEndian.Uint32(b[:])
	if n == 0 {
		return r.readTrailer()
	}
	if n > maxChunk {
		return r.corrupt(start, r.chunk, "chunk length %d over the limit of %d", n, maxChunk)
	}
	// Grow the buffer as bytes arrive: a damaged length must not make a
	// short file allocate 16 MiB.
	data := make([]byte, 0, min(int(n), 1<<20))
	for len(data) < int(n) {
		k := min(int(n)-len(data), 1<<20)
		data = slices.Grow(data, k)[:len(data)+k]
		if err := r.readFull(data[len(data)-k:], start, r.chunk, "chunk"); err != nil {
			return err
		}
	}
	if err := r.readFull(b[:], start, r.chunk, "chunk checksum"); err != nil {
		return err
	}
	var lb [4]byte
	binary.LittleEndian.PutUint32(lb[:], n)
	if got, want := crc32.Update(crc32.Checksum(lb[:], castagnoli), castagnoli, data), binary.LittleEndian.Uint32(b[:]); got != want {
		return r.corrupt(start, r.chunk, "chunk checksum %08x, stored %08x", got, want)
	}
	r.sum.Write(data)
	r.length += uint64(n)
	r.chunk++
	r.data = data
	return nil
}

func (r *Reader) readTrailer() error {
	start := r.off
	var t [trailerLen]byte
	if err := r.readFull(t[:], start, -1, "trailer"); err != nil {
		return err
	}
	if !bytes.Equal(t[:8], trailerMagic) {
		return r.corrupt(start, -1, "no trailer after the body's %d chunks (magic %q)", r.chunk, t[:8])
	}
	if got, want := crc32.Checksum(t[:56], castagnoli), binary.LittleEndian.Uint32(t[56:]); got != want {
		return r.corrupt(start, -1, "trailer checksum %08x, stored %08x", got, want)
	}
	if l, c := binary.LittleEndian.Uint64(t[8:]), binary.LittleEndian.Uint64(t[16:]); l != r.length || c != uint64(r.chunk) {
		return r.corrupt(start, -1, "the trailer says %d bytes in %d chunks, the body has %d in %d", l, c, r.length, r.chunk)
	}
	if sum := r.sum.Sum(nil); !bytes.Equal(sum, t[24:56]) {
		return r.corrupt(start, -1, "body SHA-256 %x, stored %x", sum, t[24:56])
	}
	if _, err := r.br.ReadByte(); err == nil {
		return r.corrupt(start+trailerLen, -1, "bytes follow the trailer")
	} else if err != io.EOF {
		return fmt.Errorf("checkpoint: reading %s at offset %d: %w", r.path, r.off, err)
	}
	return io.EOF
}

// Verify is Files{}.Verify.
func Verify(path string) (Meta, error) { return Files{}.Verify(path) }

// Verify reads a materialization file through and checks everything Open
// and Reader check, without decoding the state. It returns the header.
func (s Files) Verify(path string) (Meta, error) {
	r, err := s.Open(path)
	if err != nil {
		return Meta{}, err
	}
	defer r.Close()
	if _, err := io.Copy(io.Discard, r); err != nil {
		return r.Meta(), err
	}
	return r.Meta(), nil
}

// List is Files{}.List.
func List(dir string) (map[uint64][]Materialization, error) { return Files{}.List(dir) }

// List returns the materializations in dir (files and checkpoint
// directories) by partition, each list sorted by index (a file before a
// directory of the same index). It reads names only: a damaged file shows up when it is
// opened or verified. Temporary files are not listed.
func (s Files) List(dir string) (map[uint64][]Materialization, error) {
	names, err := s.fs().ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: listing %s: %w", dir, err)
	}
	out := map[uint64][]Materialization{}
	for _, name := range names {
		if m, ok := ParseName(name); ok {
			out[m.Partition] = append(out[m.Partition], m)
		}
	}
	for _, ms := range out {
		slices.SortFunc(ms, func(a, b Materialization) int {
			if c := cmp.Compare(a.Index, b.Index); c != 0 {
				return c
			}
			return cmp.Compare(btoi(a.Dir), btoi(b.Dir))
		})
	}
	return out, nil
}

// Remove is Files{}.Remove.
func Remove(dir string, m Materialization) error { return Files{}.Remove(dir, m) }

// Remove deletes m's file from dir (a file already gone is no error) and
// fsyncs the directory.
func (s Files) Remove(dir string, m Materialization) error {
	if m.Dir {
		return removeDir(dir, m)
	}
	path := filepath.Join(dir, m.Name())
	if err := s.fs().Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint: removing %s: %w", path, err)
	}
	if err := s.fs().SyncDir(dir); err != nil {
		return fmt.Errorf("checkpoint: removing %s: fsync of directory %s: %w", path, dir, err)
	}
	return nil
}

// RemoveTemp is Files{}.RemoveTemp.
func RemoveTemp(dir string) ([]string, error) { return Files{}.RemoveTemp(dir) }

// RemoveTemp deletes the temporary files that Writes interrupted by a
// crash left in dir, and returns their names. Call it at start, before
// any Write.
func (s Files) RemoveTemp(dir string) ([]string, error) {
	names, err := s.fs().ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: listing %s: %w", dir, err)
	}
	var removed []string
	for _, name := range names {
		if strings.Contains(name, dirTemp) {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return removed, fmt.Errorf("checkpoint: removing %s: %w", filepath.Join(dir, name), err)
			}
			removed = append(removed, name)
			continue
		}
		if !strings.Contains(name, tempMark) {
			continue
		}
		if err := s.fs().Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("checkpoint: removing %s: %w", filepath.Join(dir, name), err)
		}
		removed = append(removed, name)
	}
	if len(removed) > 0 {
		if err := s.fs().SyncDir(dir); err != nil {
			return removed, fmt.Errorf("checkpoint: fsync of directory %s: %w", dir, err)
		}
	}
	return removed, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Stream writes a whole materialization file for meta to w, the body
// being what encode writes: the bytes Write would put in the file. It
// serves a materialization kept in another form (a checkpoint directory)
// as a file.
func Stream(w io.Writer, meta Meta, encode func(io.Writer) error) error {
	return writeFile(w, meta, encode, chunkSize)
}

// NewReader reads a materialization file from rc (a download, a stream),
// named name (the file's name, checked against its header, or ""), as
// Open reads one from disk. Close closes rc.
func NewReader(rc io.ReadCloser, name string) (*Reader, error) {
	return Files{FS: readerFS{rc}}.Open(name)
}

// readerFS is an FS whose only file is an open reader (NewReader).
type readerFS struct{ rc io.ReadCloser }

// readerFile is readerFS's file.
type readerFile struct{ rc io.ReadCloser }

var errStreamOnly = errors.New("checkpoint: read-only")

func (f readerFS) Open(string) (File, error) { return readerFile(f), nil }
func (readerFS) CreateTemp(string, string) (File, string, error) {
	return nil, "", errStreamOnly
}
func (readerFS) Rename(string, string) error      { return errStreamOnly }
func (readerFS) Remove(string) error              { return errStreamOnly }
func (readerFS) ReadDir(string) ([]string, error) { return nil, errStreamOnly }
func (readerFS) SyncDir(string) error             { return errStreamOnly }
func (r readerFile) Write([]byte) (int, error)    { return 0, errStreamOnly }
func (r readerFile) Sync() error                  { return errStreamOnly }
func (r readerFile) Read(p []byte) (int, error)   { return r.rc.Read(p) }
func (r readerFile) Close() error                 { return r.rc.Close() }
