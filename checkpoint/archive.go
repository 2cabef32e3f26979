package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// An archive is a checkpoint directory as one byte stream, the way a
// leader ships its materialization to a follower (a raft snapshot): the
// magic "CUTKVARC", the length of the directory's manifest (uint32,
// little-endian), the manifest (EncodeManifest), then every file it lists,
// in its order, each exactly its size. Nothing else: the receiver checks
// each file's size and SHA-256 against the manifest as it writes it, and
// that the stream ends right after the last one.

var archiveMagic = []byte("CUTKVARC")

// maxManifestLen bounds an archive's manifest.
const maxManifestLen = HeaderLen + 8 + MaxDirFiles*(2+maxDirFileName+8+32)

// IsArchive says whether a stream that starts with b (at least 8 bytes
// of it) is an archive rather than a materialization file.
func IsArchive(b []byte) bool { return bytes.HasPrefix(b, archiveMagic) }

// WriteArchive writes the sealed checkpoint directory path to w as an
// archive.
func WriteArchive(w io.Writer, path string) error {
	b, err := os.ReadFile(filepath.Join(path, ManifestName))
	if err != nil {
		return fmt.Errorf("checkpoint: archive of %s: %w", path, err)
	}
	_, files, err := DecodeManifest(path, b)
	if err != nil {
		return err
	}
	hdr := binary.LittleEndian.AppendUint32(append([]byte(nil), archiveMagic...), uint32(len(b)))
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	for _, f := range files {
		if err := copyFile(w, filepath.Join(path, f.Name), f.Size); err != nil {
			return fmt.Errorf("checkpoint: archive of %s: %w", path, err)
		}
	}
	return nil
}

func copyFile(w io.Writer, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size))
	if err == nil && n != size {
		err = fmt.Errorf("%s has %d bytes, its manifest says %d", path, n, size)
	}
	return err
}

// ReadArchive reads an archive of the materialization want from r into
// the directory dir (it is made; its parent must exist), fsyncs every file
// and the directory, and renames it to the checkpoint's name beside it,
// returning that path. Every byte is checked: the manifest's bounds and
// checksum, that it is want's (want.Index 0: any index of want's
// partition), each file's size and SHA-256, nothing after the last file.
// On any error nothing is left under either name.
func ReadArchive(r io.Reader, dir string, want Materialization) (string, Meta, error) {
	want.Dir = true
	fail := func(format string, args ...any) (string, Meta, error) {
		return "", Meta{}, &CorruptError{Path: "archive of " + want.Name(), Chunk: -1, Reason: fmt.Sprintf(format, args...)}
	}
	br := bufio.NewReaderSize(r, 256<<10)
	var hdr [12]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return fail("the stream ends inside the archive header: %v", err)
	}
	if !IsArchive(hdr[:]) {
		return fail("not an archive (magic %q)", hdr[:8])
	}
	n := binary.LittleEndian.Uint32(hdr[8:])
	if n > maxManifestLen {
		return fail("manifest of %d bytes, at most %d", n, maxManifestLen)
	}
	mb := make([]byte, n)
	if _, err := io.ReadFull(br, mb); err != nil {
		return fail("the stream ends inside the manifest: %v", err)
	}
	meta, files, err := DecodeManifest("archive of "+want.Name(), mb)
	if err != nil {
		return "", Meta{}, err
	}
	if meta.Partition != want.Partition || (want.Index != 0 && meta.Index != want.Index) || meta.Index == 0 {
		return fail("it holds partition %d at %d", meta.Partition, meta.Index)
	}
	want.Index = meta.Index
	final := filepath.Join(filepath.Dir(dir), want.Name())
	if err := os.Mkdir(dir, 0o750); err != nil {
		return "", Meta{}, fmt.Errorf("checkpoint: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir)
		}
	}()
	for _, f := range files {
		if err := ReceiveFile(br, filepath.Join(dir, f.Name), f); err != nil {
			var ce *CorruptError
			if errors.As(err, &ce) {
				return "", Meta{}, err
			}
			return "", Meta{}, fmt.Errorf("checkpoint: archive of %s: %w", want.Name(), err)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return fail("bytes after the last file")
	}
	if err := writeManifest(dir, meta, files); err != nil {
		return "", Meta{}, fmt.Errorf("checkpoint: archive of %s: %w", want.Name(), err)
	}
	if err := OS.SyncDir(dir); err != nil {
		return "", Meta{}, fmt.Errorf("checkpoint: archive of %s: fsync: %w", want.Name(), err)
	}
	if err := os.Rename(dir, final); err != nil {
		return "", Meta{}, fmt.Errorf("checkpoint: archive of %s: %w", want.Name(), err)
	}
	ok = true
	if err := OS.SyncDir(filepath.Dir(final)); err != nil {
		return final, meta, fmt.Errorf("checkpoint: archive of %s: fsync of %s: %w", want.Name(), filepath.Dir(final), err)
	}
	return final, meta, nil
}

// ReceiveFile writes exactly f.Size bytes of r to path, a file it
// creates, checks their SHA-256 (a *CorruptError when they differ or r
// ends early) and fsyncs the file. It reads nothing past f.Size.
func ReceiveFile(r io.Reader, path string, f DirFile) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(r, f.Size))
	if err == nil && n != f.Size {
		err = &CorruptError{Path: path, Chunk: -1, Reason: fmt.Sprintf("the stream ends after %d of its %d bytes", n, f.Size)}
	}
	if err == nil && [32]byte(h.Sum(nil)) != f.SHA256 {
		err = &CorruptError{Path: path, Chunk: -1, Reason: fmt.Sprintf("SHA-256 %x, the manifest says %x", h.Sum(nil), f.SHA256)}
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
