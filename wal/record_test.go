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
	f.Add(chainRecord(testChain()))
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

// FuzzDecodeChain checks that the chain record decoder never panics, that
// whatever it accepts re-encodes to the same bytes and is a chain the WAL
// could write, and that a chain built from the input round-trips, also as
// a whole record.
func FuzzDecodeChain(f *testing.F) {
	f.Add(appendChain(nil, testChain()))
	f.Add(appendChain(nil, chain{incarnation: 1, slot: 1}))
	f.Add(appendChain(nil, chain{incarnation: 1, slot: 1})[:chainFixedLen-1])
	f.Add(appendChain(nil, chain{incarnation: 1, slot: 5, prev: 5}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, reason := decodeChain(b)
		if reason == "" {
			if c.incarnation == 0 || c.slot == 0 || c.prev >= c.slot {
				t.Fatalf("accepted an impossible chain %+v", c)
			}
			if enc := appendChain(nil, c); !bytes.Equal(enc, b) {
				t.Fatalf("decode then encode changed the bytes:\n in  % x\n out % x", b, enc)
			}
		}

		// Build a valid chain from the input and round-trip it.
		want := chain{incarnation: 1, slot: 1}
		if len(b) >= 24 {
			want.incarnation = binary.LittleEndian.Uint64(b) | 1
			want.slot = binary.LittleEndian.Uint64(b[8:]) | 1
			want.prev = binary.LittleEndian.Uint64(b[16:]) % want.slot
			copy(want.link[:], b[24:])
			if len(b) > 24+linkLen {
				want.node = string(b[24+linkLen : min(len(b), 24+linkLen+maxNodeIDLen)])
			}
		}
		got, reason := decodeChain(appendChain(nil, want))
		if reason != "" || got != want {
			t.Fatalf("decode(encode(%+v)) = %+v, %q", want, got, reason)
		}
		r, err := decodeRecord(chainRecord(want))
		if err != nil || r.Type != RecordChain || r.Group != 0 {
			t.Fatalf("chain record of %+v decodes to %+v, %v", want, r, err)
		}
		if len(chainRecord(want))+uvarintLen(uint64(len(chainRecord(want)))) != chainEntryLen(want.node) {
			t.Fatalf("chainEntryLen(%d-byte node) is wrong", len(want.node))
		}
	})
}

// FuzzDecodeProgress checks the progress file decoder the same way.
func FuzzDecodeProgress(f *testing.F) {
	f.Add(encodeProgress(testProgress()))
	f.Add(encodeProgress(progress{incarnation: 1, tail: 1, first: 1}))
	f.Add(encodeProgress(progress{incarnation: 1, tail: 1, first: 1})[:progressFixedLen-1])
	f.Fuzz(func(t *testing.T, b []byte) {
		p, reason := decodeProgress(b)
		if reason == "" {
			if enc := encodeProgress(p); !bytes.Equal(enc, b) {
				t.Fatalf("decode then encode changed the bytes:\n in  % x\n out % x", b, enc)
			}
		}

		want := progress{incarnation: 1, tail: 1, first: 1}
		if len(b) >= 25 {
			want.incarnation = binary.LittleEndian.Uint64(b) | 1
			want.tail = binary.LittleEndian.Uint64(b[8:])>>1 | 1
			want.chained = b[24]&1 == 1
			slots := want.tail
			if want.chained {
				slots++
				copy(want.link[:], b[25:])
			}
			want.first = 1 + binary.LittleEndian.Uint64(b[16:])%slots
			if len(b) > 25+linkLen {
				want.node = string(b[25+linkLen : min(len(b), 25+linkLen+maxNodeIDLen)])
			}
		}
		got, reason := decodeProgress(encodeProgress(want))
		if reason != "" || got != want {
			t.Fatalf("decode(encode(%+v)) = %+v, %q", want, got, reason)
		}
	})
}

func TestDecodeChainRejects(t *testing.T) {
	good := appendChain(nil, testChain())
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tc := range []struct {
		name, reason string
		b            []byte
	}{
		{"short", "shorter than the minimum", good[:chainFixedLen-1]},
		{"version", "unknown version 2", mod(func(b []byte) []byte { b[0] = 2; return b })},
		{"incarnation 0", "incarnation 0", mod(func(b []byte) []byte { clear(b[1:9]); return b })},
		{"slot 0", "slot 0", mod(func(b []byte) []byte { clear(b[9:17]); return b })},
		{"prev at slot", "42 records before slot 42", mod(func(b []byte) []byte { b[17] = 42; return b })},
		{"node cut", "node id of 2 bytes", good[:len(good)-1]},
		{"node longer", "node id of 2 bytes", append(bytes.Clone(good), 'x')},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, reason := decodeChain(tc.b); !strings.Contains(reason, tc.reason) {
				t.Fatalf("reason %q, want it to say %q", reason, tc.reason)
			}
		})
	}
}

func TestDecodeProgressRejects(t *testing.T) {
	good := testProgress()
	resum := func(b []byte) []byte { return withCRC(b[:len(b)-crcLen]...) }
	mod := func(f func(b []byte)) []byte { b := encodeProgress(good); f(b); return resum(b) }
	for _, tc := range []struct {
		name, reason string
		b            []byte
	}{
		{"short", "shorter than the minimum", encodeProgress(good)[:progressFixedLen-1]},
		{"flipped bit", "checksum mismatch", func() []byte { b := encodeProgress(good); b[20] ^= 1; return b }()},
		{"magic", `does not start with "WALP"`, mod(func(b []byte) { b[0] = 'X' })},
		{"version", "unknown version 9", mod(func(b []byte) { b[4] = 9 })},
		{"flags", "unknown flags 0x2", mod(func(b []byte) { b[5] = 2 })},
		{"incarnation 0", "incarnation 0", mod(func(b []byte) { clear(b[6:14]) })},
		{"first 0", "indexes start at 1", mod(func(b []byte) { clear(b[22:30]) })},
		{"first past the tail", "lies beyond slot", mod(func(b []byte) { b[29] = 0x80 })},
		{"link without chain", "link set", mod(func(b []byte) { b[5] = 0 })},
		{"node cut", "node id of 2 bytes", resum(append(encodeProgress(good)[:len(encodeProgress(good))-crcLen-1], 0, 0, 0, 0))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, reason := decodeProgress(tc.b); !strings.Contains(reason, tc.reason) {
				t.Fatalf("reason %q, want it to say %q", reason, tc.reason)
			}
		})
	}
}

// TestDocChainExample keeps the sizes doc.go gives for a chain record true.
func TestDocChainExample(t *testing.T) {
	rec := chainRecord(chain{incarnation: 1, slot: 1, node: "n1"})
	if len(rec) != 66 || chainEntryLen("n1") != 67 {
		t.Fatalf("chain record for node n1: %d bytes, %d framed; doc.go says 66 and 67", len(rec), chainEntryLen("n1"))
	}
	if len(encodeProgress(progress{incarnation: 1, tail: 1, first: 1, node: "n1"})) != 63+2+crcLen {
		t.Fatal("progress file size differs from doc.go")
	}
}
