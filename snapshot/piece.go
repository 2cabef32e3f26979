package snapshot

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/checkpoint"
)

// PieceFormatVersion is the changelog piece format this binary writes and
// the newest it reads.
const PieceFormatVersion = 1

const (
	pieceHeaderLen  = checkpoint.HeaderLen
	pieceTrailerLen = 52
	// maxEntryLen bounds one marshaled entry in the format; raft entries
	// are far smaller (requests are limited long before this).
	maxEntryLen = 64 << 20
	logExt      = ".log"
)

var (
	pieceMagic        = []byte("CUTKVLOG")
	pieceTrailerMagic = []byte("CUTKVEND")
	castagnoli        = crc32.MakeTable(crc32.Castagnoli)
)

// PieceHeader is what a changelog piece's header says: the committed
// entries Lo … Hi (inclusive) of raft group Group.
type PieceHeader struct {
	Version uint32
	Group   uint64
	Lo, Hi  uint64
}

// Piece returns the checkpoint piece the header describes.
func (h PieceHeader) Piece() checkpoint.Piece {
	return checkpoint.Piece{Group: h.Group, Lo: h.Lo, Hi: h.Hi}
}

// PieceName returns the object name of the changelog piece of group with
// entries lo … hi, e.g. g0003-00000000000000000011-00000000000000000030.log
// (checkpoint.Piece.Name).
func PieceName(group, lo, hi uint64) string {
	return checkpoint.Piece{Group: group, Lo: lo, Hi: hi}.Name()
}

// ParsePieceName returns the changelog piece a name names; false when the
// name is not one PieceName returns.
func ParsePieceName(name string) (checkpoint.Piece, bool) {
	rest, ok := strings.CutPrefix(name, "g")
	if !ok {
		return checkpoint.Piece{}, false
	}
	if rest, ok = strings.CutSuffix(rest, logExt); !ok {
		return checkpoint.Piece{}, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 {
		return checkpoint.Piece{}, false
	}
	var n [3]uint64
	for i, s := range parts {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return checkpoint.Piece{}, false
		}
		n[i] = v
	}
	p := checkpoint.Piece{Group: n[0], Lo: n[1], Hi: n[2]}
	if p.Name() != name || p.Lo == 0 || p.Lo > p.Hi {
		return checkpoint.Piece{}, false
	}
	return p, true
}

// EncodePiece writes the committed entries of raft group group as one
// changelog piece (the format is in the package doc). The entries must be
// non-empty, start at an index >= 1, follow each other without gaps and
// have non-decreasing terms; the piece's range is [first index, last
// index]. EncodePiece only reads the entries. It returns the first error
// of w.
func EncodePiece(w io.Writer, group uint64, entries []*raftpb.Entry) error {
	if len(entries) == 0 {
		return fmt.Errorf("%w: a changelog piece of group %d needs at least one entry", ErrInvalid, group)
	}
	lo := entries[0].GetIndex()
	if lo == 0 {
		return fmt.Errorf("%w: group %d: entry index 0 in a changelog piece", ErrInvalid, group)
	}
	var prevTerm uint64
	for i, e := range entries {
		if want := lo + uint64(i); e.GetIndex() != want {
			return fmt.Errorf("%w: group %d: entry %d where %d belongs (entries must be contiguous)", ErrInvalid, group, e.GetIndex(), want)
		}
		if e.GetTerm() < prevTerm {
			return fmt.Errorf("%w: group %d: entry %d has term %d below the previous entry's %d", ErrInvalid, group, e.GetIndex(), e.GetTerm(), prevTerm)
		}
		prevTerm = e.GetTerm()
	}
	hi := lo + uint64(len(entries)) - 1

	bw := bufio.NewWriterSize(w, 64<<10)
	hdr := checkpoint.EncodeHeader(pieceMagic, PieceFormatVersion, [3]uint64{group, lo, hi})
	if _, err := bw.Write(hdr[:]); err != nil {
		return err
	}
	sum := sha256.New()
	out := io.MultiWriter(bw, sum)
	var buf []byte
	for _, e := range entries {
		var err error
		// Room for the length in front, so the record is written at once.
		buf, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(append(buf[:0], 0, 0, 0, 0), e)
		if err != nil {
			return fmt.Errorf("snapshot: group %d: marshal entry %d: %w", group, e.GetIndex(), err)
		}
		n := len(buf) - 4
		if n == 0 || n > maxEntryLen {
			return fmt.Errorf("%w: group %d: entry %d marshals to %d bytes, outside 1..%d", ErrInvalid, group, e.GetIndex(), n, maxEntryLen)
		}
		binary.LittleEndian.PutUint32(buf, uint32(n))
		buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
		if _, err := out.Write(buf); err != nil {
			return err
		}
	}
	var t [pieceTrailerLen]byte
	copy(t[:], pieceTrailerMagic)
	binary.LittleEndian.PutUint64(t[8:], uint64(len(entries)))
	copy(t[16:48], sum.Sum(nil))
	binary.LittleEndian.PutUint32(t[48:], crc32.Checksum(t[:48], castagnoli))
	if _, err := bw.Write(t[:]); err != nil {
		return err
	}
	return bw.Flush()
}

// DecodePiece reads a whole changelog piece and returns its group and
// entries (index order, Lo … Hi). Damage of any kind (a bad checksum, a
// gap, an entry outside the header's bounds, a truncated piece, bytes
// after the trailer) is an error wrapping ErrCorrupt; a piece of a newer
// format one wrapping ErrVersion.
func DecodePiece(r io.Reader) (group uint64, entries []*raftpb.Entry, err error) {
	pr, err := NewPieceReader(r, "")
	if err != nil {
		return 0, nil, err
	}
	h := pr.Header()
	// The header's range is only a hint for the allocation: it is checked
	// against the entries that actually arrive.
	entries = make([]*raftpb.Entry, 0, int(min(h.Hi-h.Lo, 1023)+1))
	for {
		e, err := pr.Next()
		if err == io.EOF {
			return h.Group, entries, nil
		}
		if err != nil {
			return 0, nil, err
		}
		entries = append(entries, e)
	}
}

// PieceReader reads a changelog piece entry by entry, checking it as it
// goes: restore streams a piece through it without holding it whole. Next
// returns io.EOF only once the whole piece, trailer included, checked out,
// and a *CorruptError at the first damage, before handing out a damaged
// entry. Errors stick. Not safe for concurrent use.
type PieceReader struct {
	name   string
	br     *bufio.Reader
	off    int64
	hdr    PieceHeader
	next   uint64 // index of the next entry
	term   uint64 // term of the previous entry
	count  int    // entries read
	sum    hash.Hash
	buf    []byte
	err    error
	record [4]byte
}

// NewPieceReader reads and checks a piece's header from r. name, when
// not empty, is the piece's object name: the header must then hold the
// group and range the name says. Errors wrap ErrCorrupt or ErrVersion, or
// are r's.
func NewPieceReader(r io.Reader, name string) (*PieceReader, error) {
	label := name
	if label == "" {
		label = "(unnamed)"
	}
	pr := &PieceReader{name: label, br: bufio.NewReaderSize(r, 64<<10), sum: sha256.New()}
	if err := pr.readHeader(name); err != nil {
		return nil, err
	}
	return pr, nil
}

// Header returns what the header says.
func (r *PieceReader) Header() PieceHeader { return r.hdr }

func (r *PieceReader) corrupt(off int64, entry int, format string, args ...any) error {
	return &CorruptError{Name: r.name, Offset: off, Entry: entry, Reason: fmt.Sprintf(format, args...)}
}

// readFull reads len(b) bytes of what, which starts at offset start: the
// end of the input there is damage, other errors are I/O errors.
func (r *PieceReader) readFull(b []byte, start int64, entry int, what string) error {
	n, err := io.ReadFull(r.br, b)
	r.off += int64(n)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return r.corrupt(start, entry, "the piece ends inside the %s (%d of %d bytes)", what, n, len(b))
	case err != nil:
		return fmt.Errorf("snapshot: reading piece %s at offset %d: %w", r.name, r.off, err)
	}
	return nil
}

func (r *PieceReader) readHeader(name string) error {
	h, n, err := checkpoint.ReadHeader(r.br, "changelog piece", pieceMagic, PieceFormatVersion)
	r.off += int64(n)
	var he *checkpoint.HeaderError
	switch {
	case errors.As(err, &he) && he.Newer > 0:
		return fmt.Errorf("%w: changelog piece %s has format version %d; this binary reads version %d",
			ErrVersion, r.name, he.Newer, PieceFormatVersion)
	case errors.As(err, &he):
		return r.corrupt(0, -1, "%s", he.Reason)
	case err != nil:
		return fmt.Errorf("snapshot: reading piece %s: %w", r.name, err)
	}
	r.hdr = PieceHeader{Version: h.Version, Group: h.Fields[0], Lo: h.Fields[1], Hi: h.Fields[2]}
	if r.hdr.Lo == 0 || r.hdr.Lo > r.hdr.Hi {
		return r.corrupt(0, -1, "the header's range [%d, %d] is empty or starts at 0", r.hdr.Lo, r.hdr.Hi)
	}
	if name != "" {
		if want, ok := ParsePieceName(name); !ok || want != r.hdr.Piece() {
			return r.corrupt(0, -1, "the header holds %v, the name says otherwise", r.hdr.Piece())
		}
	}
	r.next = r.hdr.Lo
	return nil
}

// Next returns the next entry, or io.EOF after the last one once the
// trailer checked out. The caller owns the entry.
func (r *PieceReader) Next() (*raftpb.Entry, error) {
	if r.err != nil {
		return nil, r.err
	}
	e, err := r.nextEntry()
	if err != nil {
		r.err = err
		return nil, err
	}
	return e, nil
}

func (r *PieceReader) nextEntry() (*raftpb.Entry, error) {
	// Past hi comes the trailer, even when the bytes look like more
	// entries: the header fixed the count.
	if r.next > r.hdr.Hi || r.next == 0 {
		return nil, r.readTrailer()
	}
	start := r.off
	if err := r.readFull(r.record[:], start, r.count, "entry length"); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(r.record[:])
	if bytes.Equal(r.record[:], pieceTrailerMagic[:4]) {
		return nil, r.corrupt(start, r.count, "the trailer follows entry %d, the header's range ends at %d", r.next-1, r.hdr.Hi)
	}
	if n == 0 || n > maxEntryLen {
		return nil, r.corrupt(start, r.count, "entry length %d outside 1..%d", n, maxEntryLen)
	}
	// Grow the buffer as bytes arrive: a damaged length must not make a
	// short piece allocate 64 MiB.
	data := append(r.buf[:0], r.record[:]...)
	for len(data) < 4+int(n) {
		k := min(4+int(n)-len(data), 1<<20)
		data = slices.Grow(data, k)[:len(data)+k]
		if err := r.readFull(data[len(data)-k:], start, r.count, "entry"); err != nil {
			return nil, err
		}
	}
	r.buf = data
	var c [4]byte
	if err := r.readFull(c[:], start, r.count, "entry checksum"); err != nil {
		return nil, err
	}
	if got, want := crc32.Checksum(data, castagnoli), binary.LittleEndian.Uint32(c[:]); got != want {
		return nil, r.corrupt(start, r.count, "entry checksum %08x, stored %08x", got, want)
	}
	e := &raftpb.Entry{}
	if err := proto.Unmarshal(data[4:], e); err != nil {
		return nil, r.corrupt(start, r.count, "entry does not unmarshal: %v", err)
	}
	switch {
	case e.GetIndex() != r.next:
		return nil, r.corrupt(start, r.count, "entry %d where %d belongs", e.GetIndex(), r.next)
	case e.GetTerm() < r.term:
		return nil, r.corrupt(start, r.count, "entry %d has term %d below the previous entry's %d", e.GetIndex(), e.GetTerm(), r.term)
	}
	r.sum.Write(data)
	r.sum.Write(c[:])
	r.term = e.GetTerm()
	r.next++ // wraps to 0 after MaxUint64; nextEntry then reads the trailer
	r.count++
	return e, nil
}

func (r *PieceReader) readTrailer() error {
	start := r.off
	var t [pieceTrailerLen]byte
	if err := r.readFull(t[:], start, -1, "trailer"); err != nil {
		return err
	}
	if !bytes.Equal(t[:8], pieceTrailerMagic) {
		return r.corrupt(start, -1, "no trailer after entry %d (magic %q)", r.hdr.Hi, t[:8])
	}
	if got, want := crc32.Checksum(t[:48], castagnoli), binary.LittleEndian.Uint32(t[48:]); got != want {
		return r.corrupt(start, -1, "trailer checksum %08x, stored %08x", got, want)
	}
	if c := binary.LittleEndian.Uint64(t[8:]); c != uint64(r.count) {
		return r.corrupt(start, -1, "the trailer says %d entries, the piece has %d", c, r.count)
	}
	if sum := r.sum.Sum(nil); !bytes.Equal(sum, t[16:48]) {
		return r.corrupt(start, -1, "entries' SHA-256 %x, stored %x", sum, t[16:48])
	}
	if _, err := r.br.ReadByte(); err == nil {
		return r.corrupt(start+pieceTrailerLen, -1, "bytes follow the trailer")
	} else if err != io.EOF {
		return fmt.Errorf("snapshot: reading piece %s at offset %d: %w", r.name, r.off, err)
	}
	return io.EOF
}
