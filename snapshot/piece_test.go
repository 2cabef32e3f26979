package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the fuzz seeds in testdata/fuzz from the current format")

// plainEntries returns entries lo … hi with term t and some data.
func plainEntries(lo, hi, t uint64) []*raftpb.Entry {
	var out []*raftpb.Entry
	for i := lo; ; i++ {
		out = append(out, ent(i, t, raftpb.EntryNormal, []byte(fmt.Sprintf("entry %d", i))))
		if i == hi { // not i <= hi: hi may be the largest index
			return out
		}
	}
}

func ent(i, t uint64, typ raftpb.EntryType, data []byte) *raftpb.Entry {
	return &raftpb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(t), Type: typ.Enum(), Data: data}
}

func encodeBytes(tb testing.TB, group uint64, ents []*raftpb.Entry) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := EncodePiece(&b, group, ents); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func sameEntries(t *testing.T, got, want []*raftpb.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("entry %d: %v, want %v", i, got[i], want[i])
		}
	}
}

func TestPieceRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		group uint64
		ents  []*raftpb.Entry
	}{
		{"one", 1, plainEntries(1, 1, 1)},
		{"many", 7, plainEntries(11, 300, 3)},
		{"terms rise", 2, append(plainEntries(5, 9, 2), plainEntries(10, 12, 5)...)},
		{"empty data and conf change", 3, []*raftpb.Entry{
			ent(4, 1, raftpb.EntryNormal, nil),
			ent(5, 1, raftpb.EntryConfChangeV2, []byte{1, 2, 3}),
		}},
		{"top of the index space", 1, plainEntries(math.MaxUint64-2, math.MaxUint64, 9)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := encodeBytes(t, tc.group, tc.ents)
			g, got, err := DecodePiece(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if g != tc.group {
				t.Fatalf("group %d, want %d", g, tc.group)
			}
			sameEntries(t, got, tc.ents)
			name := PieceName(tc.group, tc.ents[0].GetIndex(), tc.ents[len(tc.ents)-1].GetIndex())
			pr, err := NewPieceReader(bytes.NewReader(b), name)
			if err != nil {
				t.Fatalf("with its own name %s: %v", name, err)
			}
			if h := pr.Header(); h.Group != tc.group || h.Lo != tc.ents[0].GetIndex() || h.Version != PieceFormatVersion {
				t.Fatalf("header %+v", h)
			}
		})
	}
}

func TestEncodePieceRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		ents []*raftpb.Entry
	}{
		{"no entries", nil},
		{"index 0", plainEntries(0, 2, 1)},
		{"gap", append(plainEntries(1, 2, 1), plainEntries(4, 5, 1)...)},
		{"backwards", append(plainEntries(3, 4, 1), plainEntries(1, 2, 1)...)},
		{"term falls", append(plainEntries(1, 2, 5), plainEntries(3, 4, 4)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			err := EncodePiece(&b, 1, tc.ents)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err %v, want ErrInvalid", err)
			}
		})
	}
}

func TestPieceNames(t *testing.T) {
	name := PieceName(3, 11, 30)
	if name != "g0003-00000000000000000011-00000000000000000030.log" {
		t.Fatalf("name %s", name)
	}
	p, ok := ParsePieceName(name)
	if !ok || p.Group != 3 || p.Lo != 11 || p.Hi != 30 {
		t.Fatalf("parse: %v %v", p, ok)
	}
	for _, bad := range []string{
		"", "g3-11-30.log", "g0003-00000000000000000011-00000000000000000030",
		"g0003-00000000000000000030-00000000000000000011.log", // lo > hi
		"g0003-00000000000000000000-00000000000000000011.log", // lo 0
		"p0003-00000000000000000011.mat",
		"g0003-00000000000000000011-00000000000000000030.log.1a2b.tmp",
		"g0003-+0000000000000000011-00000000000000000030.log",
	} {
		if _, ok := ParsePieceName(bad); ok {
			t.Errorf("ParsePieceName(%q) accepted", bad)
		}
	}
}

// rawPiece builds a piece by hand with valid checksums, so that the
// reader's checks beyond the checksums can be reached: header bounds,
// entries (their indexes and terms), trailer count.
type rawPiece struct {
	version        uint32
	group, lo, hi  uint64
	ents           []*raftpb.Entry
	count          int    // trailer count; -1: len(ents)
	after          []byte // bytes after the trailer
	breakEntryCRC  int    // entry record whose CRC is wrong; -1: none
	breakTrailerSH bool
}

func (r rawPiece) bytes(tb testing.TB) []byte {
	tb.Helper()
	var b bytes.Buffer
	var hdr [pieceHeaderLen]byte
	copy(hdr[:], pieceMagic)
	binary.LittleEndian.PutUint32(hdr[8:], r.version)
	binary.LittleEndian.PutUint64(hdr[12:], r.group)
	binary.LittleEndian.PutUint64(hdr[20:], r.lo)
	binary.LittleEndian.PutUint64(hdr[28:], r.hi)
	binary.LittleEndian.PutUint32(hdr[36:], crc32.Checksum(hdr[:36], castagnoli))
	b.Write(hdr[:])
	sum := sha256.New()
	for i, e := range r.ents {
		data, err := proto.Marshal(e)
		if err != nil {
			tb.Fatal(err)
		}
		rec := binary.LittleEndian.AppendUint32(nil, uint32(len(data)))
		rec = append(rec, data...)
		c := crc32.Checksum(rec, castagnoli)
		if i == r.breakEntryCRC {
			c++
		}
		rec = binary.LittleEndian.AppendUint32(rec, c)
		b.Write(rec)
		sum.Write(rec)
	}
	count := r.count
	if count < 0 {
		count = len(r.ents)
	}
	var t [pieceTrailerLen]byte
	copy(t[:], pieceTrailerMagic)
	binary.LittleEndian.PutUint64(t[8:], uint64(count))
	copy(t[16:48], sum.Sum(nil))
	if r.breakTrailerSH {
		t[16] ^= 1
	}
	binary.LittleEndian.PutUint32(t[48:], crc32.Checksum(t[:48], castagnoli))
	b.Write(t[:])
	b.Write(r.after)
	return b.Bytes()
}

func TestDecodePieceRefuses(t *testing.T) {
	good := func() rawPiece {
		return rawPiece{version: PieceFormatVersion, group: 2, lo: 5, hi: 8, ents: plainEntries(5, 8, 3), count: -1, breakEntryCRC: -1}
	}
	if _, _, err := DecodePiece(bytes.NewReader(good().bytes(t))); err != nil {
		t.Fatalf("the good raw piece: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*rawPiece)
		want   error
		reason string
	}{
		{"newer version", func(r *rawPiece) { r.version = PieceFormatVersion + 1 }, ErrVersion, ""},
		{"version 0", func(r *rawPiece) { r.version = 0 }, ErrCorrupt, "format version 0"},
		{"lo 0", func(r *rawPiece) { r.lo = 0 }, ErrCorrupt, "starts at 0"},
		{"lo above hi", func(r *rawPiece) { r.lo, r.hi = 9, 8 }, ErrCorrupt, "empty"},
		{"gap", func(r *rawPiece) { r.ents = append(plainEntries(5, 6, 3), plainEntries(8, 9, 3)...) }, ErrCorrupt, "entry 8 where 7 belongs"},
		{"starts late", func(r *rawPiece) { r.ents = plainEntries(6, 9, 3) }, ErrCorrupt, "entry 6 where 5 belongs"},
		{"fewer entries than the range", func(r *rawPiece) { r.ents = plainEntries(5, 7, 3) }, ErrCorrupt, "the trailer follows entry 7, the header's range ends at 8"},
		{"more entries than the range", func(r *rawPiece) { r.ents = plainEntries(5, 9, 3) }, ErrCorrupt, "no trailer after entry 8"},
		{"term falls", func(r *rawPiece) { r.ents = append(plainEntries(5, 6, 3), plainEntries(7, 8, 2)...) }, ErrCorrupt, "below the previous"},
		{"entry checksum", func(r *rawPiece) { r.breakEntryCRC = 2 }, ErrCorrupt, "entry checksum"},
		{"trailer count", func(r *rawPiece) { r.count = 3 }, ErrCorrupt, "the trailer says 3 entries"},
		{"trailer sha", func(r *rawPiece) { r.breakTrailerSH = true }, ErrCorrupt, "SHA-256"},
		{"bytes after the trailer", func(r *rawPiece) { r.after = []byte{0} }, ErrCorrupt, "bytes follow the trailer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			tc.change(&r)
			_, _, err := DecodePiece(bytes.NewReader(r.bytes(t)))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if tc.reason != "" && !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("err %q does not say %q", err, tc.reason)
			}
		})
	}
}

func TestPieceReaderNameMismatch(t *testing.T) {
	b := encodeBytes(t, 2, plainEntries(5, 8, 1))
	for _, name := range []string{PieceName(3, 5, 8), PieceName(2, 5, 9), "not-a-piece"} {
		_, err := NewPieceReader(bytes.NewReader(b), name)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Name != name {
			t.Fatalf("name %s: err %v, want a CorruptError naming it", name, err)
		}
	}
}

// Every single-bit flip and every truncation of a piece is caught, and
// the error says where.
func TestDecodePieceDamage(t *testing.T) {
	b := encodeBytes(t, 4, append(plainEntries(10, 12, 2), plainEntries(13, 14, 3)...))
	for off := range b {
		for bit := range 8 {
			d := bytes.Clone(b)
			d[off] ^= 1 << bit
			_, _, err := DecodePiece(bytes.NewReader(d))
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("flip of bit %d at offset %d: err %v", bit, off, err)
			}
		}
	}
	for n := range len(b) {
		_, _, err := DecodePiece(bytes.NewReader(b[:n]))
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("truncated to %d bytes: err %v", n, err)
		}
		if ce.Offset > int64(n) {
			t.Fatalf("truncated to %d bytes: damage reported at offset %d", n, ce.Offset)
		}
	}
}

// An I/O error of the source is passed on, not reported as damage.
func TestDecodePieceIOError(t *testing.T) {
	b := encodeBytes(t, 1, plainEntries(1, 50, 1))
	boom := errors.New("boom")
	for _, n := range []int{0, 20, pieceHeaderLen + 10, len(b) - 3} {
		_, _, err := DecodePiece(io.MultiReader(bytes.NewReader(b[:n]), iotestErr{boom}))
		if !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("error after %d bytes: %v", n, err)
		}
	}
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

// pieceFuzzSeeds are kept in testdata/fuzz/FuzzDecodePiece (rewrite them
// with -rewrite after a format change); crashers found by fuzzing are
// kept there too.
func pieceFuzzSeeds(tb testing.TB) map[string][]byte {
	return map[string][]byte{
		"one-entry":     encodeBytes(tb, 1, plainEntries(1, 1, 1)),
		"terms":         encodeBytes(tb, 3, append(plainEntries(7, 9, 1), plainEntries(10, 11, 4)...)),
		"empty-entries": encodeBytes(tb, 2, []*raftpb.Entry{ent(1, 0, raftpb.EntryNormal, nil), ent(2, 1, raftpb.EntryNormal, nil)}),
		"newer-version": rawPiece{version: PieceFormatVersion + 1, group: 1, lo: 1, hi: 1, ents: plainEntries(1, 1, 1), count: -1, breakEntryCRC: -1}.bytes(tb),
		"gap":           rawPiece{version: PieceFormatVersion, group: 1, lo: 1, hi: 3, ents: []*raftpb.Entry{ent(1, 1, raftpb.EntryNormal, nil), ent(3, 1, raftpb.EntryNormal, nil)}, count: -1, breakEntryCRC: -1}.bytes(tb),
	}
}

func TestPieceFuzzSeedsCurrent(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodePiece")
	seeds := pieceFuzzSeeds(t)
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

// FuzzDecodePiece: decoding any bytes never panics and fails only with
// ErrCorrupt or ErrVersion (there is no I/O to fail); what decodes
// encodes again to a piece that decodes to the same entries.
func FuzzDecodePiece(f *testing.F) {
	seeds := pieceFuzzSeeds(f)
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, ents, err := DecodePiece(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("error of another kind: %v", err)
			}
			return
		}
		var b bytes.Buffer
		if err := EncodePiece(&b, g, ents); err != nil {
			t.Fatalf("a decoded piece does not encode: %v", err)
		}
		g2, ents2, err := DecodePiece(&b)
		if err != nil || g2 != g {
			t.Fatalf("re-encoded piece: group %d, %v", g2, err)
		}
		sameEntries(t, ents2, ents)
	})
}
