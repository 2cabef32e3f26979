package discovery

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []Meta{
		{ID: "n1", ClusterID: 7, GRPCAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8001"},
		{ID: "x"},
		{ID: "node-with-a-long-name", ClusterID: 1<<64 - 1, GRPCAddr: "[::1]:65535"},
	} {
		b, err := encodeMeta(m, 42)
		if err != nil {
			t.Fatalf("encodeMeta(%+v): %v", m, err)
		}
		if len(b) > maxMetaSize || maxMetaSize > memberlist.MetaMaxSize/2 {
			t.Fatalf("meta of %d bytes; limit %d of memberlist's %d", len(b), maxMetaSize, memberlist.MetaMaxSize)
		}
		got, inst, err := decodeMeta(b)
		if err != nil || got != m || inst != 42 {
			t.Fatalf("decodeMeta = %+v, %d, %v; want %+v, 42", got, inst, err, m)
		}
		// Fields appended by a later version are skipped.
		if got, _, err := decodeMeta(append(b, 9, 9, 9)); err != nil || got != m {
			t.Fatalf("decodeMeta with trailing bytes = %+v, %v", got, err)
		}
	}
}

func TestMetaErrors(t *testing.T) {
	if _, err := encodeMeta(Meta{ID: "n1", GRPCAddr: strings.Repeat("a", 300)}, 1); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("oversized meta: %v, want ErrMetaTooLarge", err)
	}
	good, _ := encodeMeta(Meta{ID: "n1", ClusterID: 3, GRPCAddr: "a:1"}, 5)
	for name, b := range map[string][]byte{
		"empty":       nil,
		"version":     append([]byte{2}, good[1:]...),
		"truncated":   good[:len(good)-2],
		"empty id":    mustMeta(t, Meta{ID: ""}),
		"bad varint":  {metaVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"long string": {metaVersion, 1, 1, 50, 'a'},
	} {
		if _, _, err := decodeMeta(b); !errors.Is(err, ErrBadMeta) {
			t.Errorf("%s: decodeMeta = %v, want ErrBadMeta", name, err)
		}
	}
}

// mustMeta encodes without the checks encodeMeta's callers rely on.
func mustMeta(t *testing.T, m Meta) []byte {
	t.Helper()
	b, err := encodeMeta(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFrames(t *testing.T) {
	f := encodeFrame(kindBroadcast, 99, []byte("hello"))
	kind, cluster, body, err := decodeFrame(f)
	if err != nil || kind != kindBroadcast || cluster != 99 || string(body) != "hello" {
		t.Fatalf("decodeFrame = %d, %d, %q, %v", kind, cluster, body, err)
	}
	deps := []departure{{ID: "n1", Instance: 3}, {ID: "n22", Instance: 1 << 60}}
	kind, _, body, err = decodeFrame(encodeFrame(kindDeparture, 1, encodeDepartures(deps)))
	if err != nil || kind != kindDeparture {
		t.Fatalf("decodeFrame(departures) = %d, %v", kind, err)
	}
	got, err := decodeDepartures(body)
	if err != nil || len(got) != 2 || got[0] != deps[0] || got[1] != deps[1] {
		t.Fatalf("decodeDepartures = %+v, %v", got, err)
	}
	for name, b := range map[string][]byte{
		"empty":        nil,
		"unknown kind": {9, 1},
		"no cluster":   {byte(kindBroadcast)},
	} {
		if _, _, _, err := decodeFrame(b); !errors.Is(err, ErrBadMessage) {
			t.Errorf("%s: decodeFrame = %v, want ErrBadMessage", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"huge count": {0xff, 0xff, 0xff, 0xff, 0x0f, 1, 1, 'a'},
		"truncated":  encodeDepartures(deps)[:5],
	} {
		if _, err := decodeDepartures(b); !errors.Is(err, ErrBadMessage) {
			t.Errorf("%s: decodeDepartures = %v, want ErrBadMessage", name, err)
		}
	}
}

func FuzzDecodeMeta(f *testing.F) {
	good, _ := encodeMeta(Meta{ID: "n1", ClusterID: 3, GRPCAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"}, 5)
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{metaVersion, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, inst, err := decodeMeta(b)
		if err != nil {
			if !errors.Is(err, ErrBadMeta) {
				t.Fatalf("error %v is not ErrBadMeta", err)
			}
			return
		}
		again, err := encodeMeta(m, inst)
		if err != nil {
			return // decodable but longer than we would ever send
		}
		m2, inst2, err := decodeMeta(again)
		if err != nil || m2 != m || inst2 != inst {
			t.Fatalf("round trip: %+v %d %v, want %+v %d", m2, inst2, err, m, inst)
		}
	})
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add(encodeFrame(kindBroadcast, 1, []byte("x")))
	f.Add(encodeFrame(kindDeparture, 1, encodeDepartures([]departure{{ID: "n1", Instance: 2}})))
	f.Add([]byte{byte(kindDeparture), 1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, _, body, err := decodeFrame(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v is not ErrBadMessage", err)
			}
			return
		}
		if !bytes.HasSuffix(b, body) {
			t.Fatalf("body %x is not the tail of %x", body, b)
		}
		if kind == kindDeparture {
			deps, err := decodeDepartures(body)
			if err != nil {
				if !errors.Is(err, ErrBadMessage) {
					t.Fatalf("error %v is not ErrBadMessage", err)
				}
				return
			}
			again, err := decodeDepartures(encodeDepartures(deps))
			if err != nil || len(again) != len(deps) {
				t.Fatalf("round trip: %+v, %v", again, err)
			}
		}
	})
}
