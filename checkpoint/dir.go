package checkpoint

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A materialization is a file (a partition image, above) or a directory:
// a checkpoint of the partition's Pebble (docs/design/2026-12-02-pebble-
// state.md), whose SSTs are hard links of the live DB's. Such a directory
// holds the checkpoint's files and ManifestName, which lists each of them
// with its size and SHA-256 and says which state it is (partition, index,
// term). The manifest is written last, then the directory is renamed from
// its temporary name to Materialization.Name: a directory under its name
// is complete and durable.

const (
	dirExt  = ".ckpt"
	dirTemp = dirExt + ".tmp-"
	// ManifestName is the manifest file of a checkpoint directory.
	ManifestName = "CUTKV-CHECKPOINT"
	// lockName is Pebble's lock file, never part of a checkpoint.
	lockName = "LOCK"

	manifestVersion = 1
	// MaxDirFiles bounds the files one checkpoint directory lists.
	MaxDirFiles = 1 << 16
	// maxDirFileName bounds a listed file's name.
	maxDirFileName = 128
	// MaxDirFileSize bounds a listed file's size (1 TiB).
	MaxDirFileSize = 1 << 40
)

var manifestMagic = []byte("CUTKVCKP")

// DirFile is one file of a checkpoint directory.
type DirFile struct {
	Name   string
	Size   int64
	SHA256 [32]byte
}

// Hex is the file's SHA-256 in hex.
func (f DirFile) Hex() string { return hex.EncodeToString(f.SHA256[:]) }

// ValidFileName says whether name can be a file of a checkpoint
// directory: a plain name of letters, digits, '.', '-' and '_', not a
// path, not the manifest.
func ValidFileName(name string) bool {
	if name == "" || len(name) > maxDirFileName || name == "." || name == ".." || name == ManifestName {
		return false
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_'
		if !ok {
			return false
		}
	}
	return true
}

// TempDir returns a path in dir, not yet existing, for the checkpoint of
// meta to be written to before Seal renames it into place (Pebble creates
// the checkpoint directory itself). RemoveTemp removes what a crash left.
func TempDir(dir string, meta Meta) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	m := meta.Materialization()
	m.Dir = true
	return filepath.Join(dir, m.Name()+".tmp-"+hex.EncodeToString(b[:]))
}

// Seal finishes the checkpoint directory tmp (TempDir's path, holding a
// complete, fsynced Pebble checkpoint of meta's state): it hashes its
// files, writes the manifest, fsyncs it and the directory, renames tmp to
// its name in the same parent and fsyncs the parent. A file that prev (a
// sealed checkpoint directory of the same DB, "" for none) also holds as
// the same file (a hard link of one inode) keeps prev's hash instead of
// being read again. On error, tmp is left for the caller to remove.
func Seal(tmp string, meta Meta, prev string) (Materialization, []DirFile, error) {
	var pf []DirFile
	if prev != "" {
		if _, files, err := ReadManifest(prev); err == nil {
			pf = files
		}
	}
	return SealKnown(tmp, meta, prev, pf)
}

// SealKnown is Seal with the hashes of files known otherwise: a file of tmp
// that is the same file (one inode) as the file of the same name in dir,
// and of the size known lists, keeps known's hash instead of being read.
// known must be hashes the caller verified (a restore's downloaded files,
// checked as they were received).
func SealKnown(tmp string, meta Meta, dir string, known []DirFile) (Materialization, []DirFile, error) {
	m := meta.Materialization()
	m.Dir = true
	parent := filepath.Dir(tmp)
	final := filepath.Join(parent, m.Name())
	byName := make(map[string]DirFile, len(known))
	for _, f := range known {
		byName[f.Name] = f
	}
	es, err := os.ReadDir(tmp)
	if err != nil {
		return m, nil, fmt.Errorf("checkpoint: sealing %s: %w", tmp, err)
	}
	var files []DirFile
	for _, e := range es {
		name := e.Name()
		if name == lockName {
			continue
		}
		if !e.Type().IsRegular() || !ValidFileName(name) {
			return m, nil, fmt.Errorf("checkpoint: sealing %s: unexpected entry %q", tmp, name)
		}
		path := filepath.Join(tmp, name)
		fi, err := os.Stat(path)
		if err != nil {
			return m, nil, fmt.Errorf("checkpoint: sealing %s: %w", tmp, err)
		}
		f := DirFile{Name: name, Size: fi.Size()}
		if k, ok := byName[name]; ok && k.Size == f.Size && dir != "" && sameFile(fi, filepath.Join(dir, name)) {
			f.SHA256 = k.SHA256
		} else if f.SHA256, err = hashFile(path, f.Size); err != nil {
			return m, nil, fmt.Errorf("checkpoint: sealing %s: %w", tmp, err)
		}
		files = append(files, f)
	}
	if len(files) > MaxDirFiles {
		return m, nil, fmt.Errorf("checkpoint: sealing %s: %d files, at most %d", tmp, len(files), MaxDirFiles)
	}
	slices.SortFunc(files, func(a, b DirFile) int { return strings.Compare(a.Name, b.Name) })
	if err := writeManifest(tmp, meta, files); err != nil {
		return m, nil, fmt.Errorf("checkpoint: sealing %s: %w", tmp, err)
	}
	if err := OS.SyncDir(tmp); err != nil {
		return m, nil, fmt.Errorf("checkpoint: sealing %s: fsync: %w", tmp, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return m, nil, fmt.Errorf("checkpoint: sealing %s: %w", tmp, err)
	}
	if err := OS.SyncDir(parent); err != nil {
		return m, nil, fmt.Errorf("checkpoint: sealing %s: fsync of directory %s: %w", final, parent, err)
	}
	return m, files, nil
}

func sameFile(fi os.FileInfo, other string) bool {
	fo, err := os.Stat(other)
	return err == nil && os.SameFile(fi, fo)
}

func hashFile(path string, size int64) ([32]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return [32]byte{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return [32]byte{}, fmt.Errorf("reading %s: %w", path, err)
	}
	if n != size {
		return [32]byte{}, fmt.Errorf("%s: read %d bytes, its size is %d", path, n, size)
	}
	return [32]byte(h.Sum(nil)), nil
}

// EncodeManifest returns a manifest: the header (ReadHeader's, with the
// partition, index and term), the number of files (uint32), each file's
// name length (uint16), name, size (uint64) and SHA-256, then the CRC-32C
// of all the bytes before it (little-endian throughout).
func EncodeManifest(meta Meta, files []DirFile) []byte {
	hdr := EncodeHeader(manifestMagic, manifestVersion, [3]uint64{meta.Partition, meta.Index, meta.Term})
	b := append([]byte(nil), hdr[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(files)))
	for _, f := range files {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(f.Name)))
		b = append(b, f.Name...)
		b = binary.LittleEndian.AppendUint64(b, uint64(f.Size))
		b = append(b, f.SHA256[:]...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// DecodeManifest decodes and validates a manifest (EncodeManifest): the
// header, the checksum, every bound (file count, name, size), names
// sorted and unique. what names it in errors.
func DecodeManifest(what string, b []byte) (Meta, []DirFile, error) {
	bad := func(format string, args ...any) (Meta, []DirFile, error) {
		return Meta{}, nil, &CorruptError{Path: what, Chunk: -1, Reason: fmt.Sprintf(format, args...)}
	}
	if len(b) > HeaderLen+4+MaxDirFiles*(2+maxDirFileName+8+32)+4 {
		return bad("manifest of %d bytes is larger than any valid one", len(b))
	}
	h, _, err := ReadHeader(bytes.NewReader(b), "checkpoint manifest", manifestMagic, manifestVersion)
	if err != nil {
		var he *HeaderError
		if errors.As(err, &he) && he.Newer > 0 {
			return Meta{}, nil, fmt.Errorf("%w: %s: manifest version %d", ErrVersion, what, he.Newer)
		}
		return bad("%v", err)
	}
	if len(b) < HeaderLen+8 {
		return bad("manifest ends after its header")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return bad("manifest checksum %08x, stored %08x", got, sum)
	}
	meta := Meta{Partition: h.Fields[0], Index: h.Fields[1], Term: h.Fields[2]}
	rest := body[HeaderLen:]
	n := binary.LittleEndian.Uint32(rest)
	rest = rest[4:]
	if n > MaxDirFiles {
		return bad("manifest lists %d files, at most %d", n, MaxDirFiles)
	}
	files := make([]DirFile, 0, n)
	for i := range n {
		if len(rest) < 2 {
			return bad("manifest ends inside file %d", i)
		}
		l := int(binary.LittleEndian.Uint16(rest))
		rest = rest[2:]
		if l > maxDirFileName || len(rest) < l+8+32 {
			return bad("manifest file %d: name of %d bytes, or the manifest ends inside it", i, l)
		}
		f := DirFile{Name: string(rest[:l])}
		size := binary.LittleEndian.Uint64(rest[l:])
		copy(f.SHA256[:], rest[l+8:])
		rest = rest[l+8+32:]
		if !ValidFileName(f.Name) || f.Name == lockName {
			return bad("manifest file %d: name %q is not a checkpoint file's", i, f.Name)
		}
		if size > MaxDirFileSize {
			return bad("manifest file %q: size %d is past the bound %d", f.Name, size, int64(MaxDirFileSize))
		}
		f.Size = int64(size)
		if i > 0 && files[i-1].Name >= f.Name {
			return bad("manifest file %q: names not sorted or not unique", f.Name)
		}
		files = append(files, f)
	}
	if len(rest) != 0 {
		return bad("manifest has %d bytes after its last file", len(rest))
	}
	return meta, files, nil
}

func writeManifest(dir string, meta Meta, files []DirFile) error {
	tmp := filepath.Join(dir, ManifestName+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.Write(EncodeManifest(meta, files)); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync of %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, ManifestName))
}

// ReadManifest reads the manifest of the checkpoint directory path and
// checks it against the directory's name (partition and index).
func ReadManifest(path string) (Meta, []DirFile, error) {
	f, err := os.Open(filepath.Join(path, ManifestName))
	if err != nil {
		return Meta{}, nil, &CorruptError{Path: path, Chunk: -1, Reason: fmt.Sprintf("no manifest: %v", err)}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, HeaderLen+8+MaxDirFiles*(2+maxDirFileName+8+32)+1))
	if err != nil {
		return Meta{}, nil, fmt.Errorf("checkpoint: reading the manifest of %s: %w", path, err)
	}
	meta, files, err := DecodeManifest(path, b)
	if err != nil {
		return Meta{}, nil, err
	}
	if m, ok := ParseName(filepath.Base(path)); ok && (m.Partition != meta.Partition || m.Index != meta.Index || !m.Dir) {
		return Meta{}, nil, &CorruptError{Path: path, Chunk: -1, Reason: fmt.Sprintf("the manifest is of partition %d at %d", meta.Partition, meta.Index)}
	}
	return meta, files, nil
}

// VerifyDir checks a checkpoint directory through: its manifest, and every
// file it lists present with its size and SHA-256. Files it does not list
// (Pebble's LOCK of a reader) are ignored.
func VerifyDir(path string) (Meta, []DirFile, error) { return checkDir(path, true) }

// CheckDir is VerifyDir without reading the files: the manifest, and every
// file present with its size. Whoever reads the files later checks their
// hashes (an upload, a follower receiving them, an install).
func CheckDir(path string) (Meta, []DirFile, error) { return checkDir(path, false) }

func checkDir(path string, hash bool) (Meta, []DirFile, error) {
	meta, files, err := ReadManifest(path)
	if err != nil {
		return Meta{}, nil, err
	}
	for _, f := range files {
		p := filepath.Join(path, f.Name)
		fi, err := os.Stat(p)
		if err != nil {
			return meta, nil, &CorruptError{Path: path, Chunk: -1, Reason: fmt.Sprintf("file %s: %v", f.Name, err)}
		}
		if fi.Size() != f.Size {
			return meta, nil, &CorruptError{Path: path, Chunk: -1, Reason: fmt.Sprintf("file %s has %d bytes, the manifest says %d", f.Name, fi.Size(), f.Size)}
		}
		if !hash {
			continue
		}
		sum, err := hashFile(p, f.Size)
		if err != nil {
			return meta, nil, fmt.Errorf("checkpoint: verifying %s: %w", path, err)
		}
		if sum != f.SHA256 {
			return meta, nil, &CorruptError{Path: path, Chunk: -1, Reason: fmt.Sprintf("file %s has SHA-256 %x, the manifest says %x", f.Name, sum, f.SHA256)}
		}
	}
	return meta, files, nil
}

// removeDir removes a checkpoint directory: renamed out of its name first
// (so a crash never leaves a partial directory under it), then deleted.
func removeDir(dir string, m Materialization) error {
	path := filepath.Join(dir, m.Name())
	gone := path + ".tmp-del"
	if err := os.Rename(path, gone); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("checkpoint: removing %s: %w", path, err)
	}
	if err := OS.SyncDir(dir); err != nil {
		return fmt.Errorf("checkpoint: removing %s: fsync of directory %s: %w", path, dir, err)
	}
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("checkpoint: removing %s: %w", gone, err)
	}
	return nil
}
