package cut

import (
	"bytes"
	"testing"
)

func TestGossipRoundTrip(t *testing.T) {
	for _, v := range []uint64{0, 1, 42, 1 << 40, ^uint64(0)} {
		msg := EncodeGossip(v)
		if got, ok := DecodeGossip(msg); !ok || got != v {
			t.Errorf("DecodeGossip(EncodeGossip(%d)) = %d, %v", v, got, ok)
		}
	}
	for name, msg := range map[string][]byte{
		"empty":        nil,
		"prefix only":  []byte("cut1"),
		"short":        append([]byte("cut1"), 1, 2, 3),
		"long":         append(EncodeGossip(7), 0),
		"other prefix": append([]byte("cut2"), 0, 0, 0, 0, 0, 0, 0, 7),
		"other kind":   []byte("member joined: n4 at 10.0.0.4"),
	} {
		if v, ok := DecodeGossip(msg); ok {
			t.Errorf("%s: DecodeGossip(%q) = %d, accepted", name, msg, v)
		}
	}
}

// FuzzDecodeGossip: anything decodes or is refused without panicking, and
// what decodes is exactly what EncodeGossip makes of its version.
func FuzzDecodeGossip(f *testing.F) {
	f.Add(EncodeGossip(3))
	f.Add([]byte("cut1"))
	f.Add([]byte("cut1\x00\x00\x00\x00\x00\x00\x00"))
	f.Add(append(EncodeGossip(9), 1))
	f.Fuzz(func(t *testing.T, msg []byte) {
		v, ok := DecodeGossip(msg)
		if ok && !bytes.Equal(EncodeGossip(v), msg) {
			t.Fatalf("DecodeGossip(%x) = %d, which encodes as %x", msg, v, EncodeGossip(v))
		}
	})
}
