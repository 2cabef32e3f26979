package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"strings"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		{Type: RecordEntry, Group: 0, Data: nil},
		{Type: RecordEntry, Group: 7, Data: []byte("hi")},
		{Type: RecordHardState, Group: 127, Data: []byte{0}},
		{Type: RecordHardState, Group: 128, Data: bytes.Repeat([]byte{0xff}, 300)},
		{Type: RecordMaterialized, Group: 1 << 40, Data: []byte("marker")},
		{Type: RecordMeta, Group: math.MaxUint64, Data: []byte("meta")},
	} {
		b := appendRecord([]byte("prefix"), r)
		enc := b[len("prefix"):]
		if len(enc) != encodedLen(r) {
			t.Fatalf("%+v: encoded %d bytes, encodedLen says %d", r, len(enc), encodedLen(r))
		}
		got, err := decodeRecord(enc)
		if err != nil {
			t.Fatalf("%+v: decode: %v", r, err)
		}
		if got.Type != r.Type || got.Group != r.Group || !bytes.Equal(got.Data, r.Data) {
			t.Fatalf("round trip: got %+v, want %+v", got, r)
		}
	}
}

// TestDocExample keeps the worked example in doc.go true.
func TestDocExample(t *testing.T) {
	rec := appendRecord(nil, Record{Type: RecordEntry, Group: 7, Data: []byte("hi")})
	want := []byte{0x01, 0x07, 0x68, 0x69, 0x06, 0x2b, 0x2e, 0xe5}
	if !bytes.Equal(rec, want) {
		t.Fatalf("record = % x, doc.go says % x", rec, want)
	}
	framed := binary.AppendUvarint(nil, uint64(len(rec)))
	framed = append(framed, rec...)
	if want := append([]byte{0x08}, want...); !bytes.Equal(framed, want) {
		t.Fatalf("framed = % x, doc.go says % x", framed, want)
	}
}

// withCRC appends a valid CRC32C to body, so that a test can build records
// that pass the checksum but fail a later check.
func withCRC(body ...byte) []byte {
	return binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
}

func TestDecodeRecordRejects(t *testing.T) {
	good := appendRecord(nil, Record{Type: RecordHardState, Group: 300, Data: []byte("state")})
	flipped := bytes.Clone(good)
	flipped[4] ^= 0x10
	for _, tc := range []struct {
		name, reason string
		b            []byte
	}{
		{"empty", "shorter than the minimum", nil},
		{"five bytes", "shorter than the minimum", []byte{1, 0, 0, 0, 0}},
		{"flipped bit", "checksum mismatch", flipped},
		{"bad crc byte", "checksum mismatch", append(bytes.Clone(good[:len(good)-1]), good[len(good)-1]^1)},
		{"type zero", "unknown record type 0", withCRC(0, 1)},
		{"type six", "unknown record type 6", withCRC(6, 1, 'x')},
		{"chain record of group 1", "chain record of group 1", withCRC(append([]byte{5, 1}, appendChain(nil, testChain())...)...)},
		{"chain record too short", "chain record: 57 bytes", withCRC(append([]byte{5, 0}, appendChain(nil, testChain())[:57]...)...)},
		{"group varint runs off", "malformed group varint", withCRC(1, 0x80, 0x80)},
		{"group varint not shortest", "malformed group varint", withCRC(1, 0x80, 0x00)},
		{"group varint overflows", "malformed group varint",
			withCRC(1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeRecord(tc.b)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("err = %v, want it to say %q", err, tc.reason)
			}
		})
	}
}

// FuzzDecodeRecord checks that the decoder never panics, that whatever it
// accepts re-encodes to the same bytes, that whatever it rejects is
// ErrCorrupt, and that a record built from the input round-trips.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte{})
	f.Add(appendRecord(nil, Record{Type: RecordEntry, Group: 7, Data: []byte("hi")}))
	f.Add(appendRecord(nil, Record{Type: RecordMeta, Group: math.MaxUint64}))
	f.Add(withCRC(1, 0x80, 0x00))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error %v does not wrap ErrCorrupt", err)
			}
		} else {
			if !r.Type.Valid() {
				t.Fatalf("decoded unknown type %d", r.Type)
			}
			if enc := appendRecord(nil, r); !bytes.Equal(enc, b) {
				t.Fatalf("decode then encode changed the bytes:\n in  % x\n out % x", b, enc)
			}
		}

		// Build a valid record from the input and round-trip it.
		var want Record
		if len(b) > 0 {
			want.Type = RecordType(b[0]%4) + RecordEntry
		} else {
			want.Type = RecordMeta
		}
		if len(b) >= 9 {
			want.Group = binary.LittleEndian.Uint64(b[1:9])
			want.Data = b[9:]
		}
		got, err := decodeRecord(appendRecord(nil, want))
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", want, err)
		}
		if got.Type != want.Type || got.Group != want.Group || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("round trip: got %+v, want %+v", got, want)
		}
	})
}
