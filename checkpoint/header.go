package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// HeaderLen is the length of the header that opens a materialization
// file and, with another magic, a changelog piece (package snapshot):
//
//	offset  size  field
//	0       8     magic
//	8       4     format version (uint32, little-endian), >= 1
//	12      24    three uint64 fields (little-endian), the format's own
//	36      4     CRC-32C (Castagnoli) of bytes [0, 36)
const HeaderLen = 40

// Header is a decoded header: the format version and its three fields.
type Header struct {
	Version uint32
	Fields  [3]uint64
}

// HeaderError is a header that does not decode. Newer, when set, is the
// version of a format newer than the reader's (not damage: the caller
// reports it as a version error); otherwise Reason says what is wrong.
type HeaderError struct {
	Newer  uint32
	Reason string
}

func (e *HeaderError) Error() string {
	if e.Newer > 0 {
		return fmt.Sprintf("format version %d is newer than this binary's", e.Newer)
	}
	return e.Reason
}

// EncodeHeader returns the header of a file of the format with magic (8
// bytes) at version, holding the three fields.
func EncodeHeader(magic []byte, version uint32, fields [3]uint64) [HeaderLen]byte {
	var h [HeaderLen]byte
	copy(h[:8], magic)
	binary.LittleEndian.PutUint32(h[8:], version)
	for i, f := range fields {
		binary.LittleEndian.PutUint64(h[12+8*i:], f)
	}
	binary.LittleEndian.PutUint32(h[36:], crc32.Checksum(h[:36], castagnoli))
	return h
}

// ReadHeader reads a header of the format named what with magic, whose
// newest version is maxVersion, from r. It returns the bytes it consumed;
// the end of the input inside the header, a wrong magic, version 0 or a
// wrong checksum is a *HeaderError with a Reason, a version above
// maxVersion one with Newer set (the magic and version are checked
// before the rest is read), any other error comes from r as it is.
func ReadHeader(r io.Reader, what string, magic []byte, maxVersion uint32) (Header, int, error) {
	var h [HeaderLen]byte
	n, err := io.ReadFull(r, h[:12])
	if err == nil && !bytes.Equal(h[:8], magic) {
		return Header{}, n, &HeaderError{Reason: fmt.Sprintf("not a %s (magic %q)", what, h[:8])}
	}
	if err == nil {
		switch v := binary.LittleEndian.Uint32(h[8:]); {
		case v > maxVersion:
			return Header{}, n, &HeaderError{Newer: v}
		case v == 0:
			return Header{}, n, &HeaderError{Reason: "format version 0"}
		}
		var m int
		m, err = io.ReadFull(r, h[12:])
		n += m
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return Header{}, n, &HeaderError{Reason: fmt.Sprintf("the %s ends inside the header (%d of %d bytes)", what, n, HeaderLen)}
	}
	if err != nil {
		return Header{}, n, err
	}
	if got, want := crc32.Checksum(h[:36], castagnoli), binary.LittleEndian.Uint32(h[36:]); got != want {
		return Header{}, n, &HeaderError{Reason: fmt.Sprintf("header checksum %08x, stored %08x", got, want)}
	}
	out := Header{Version: binary.LittleEndian.Uint32(h[8:])}
	for i := range out.Fields {
		out.Fields[i] = binary.LittleEndian.Uint64(h[12+8*i:])
	}
	return out, n, nil
}
