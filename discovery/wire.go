package discovery

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Member metadata, as carried in memberlist's node meta (at most
// memberlist.MetaMaxSize = 512 bytes; we allow maxMetaSize):
//
//	byte     version (metaVersion)
//	uvarint  cluster id
//	uvarint  instance (random, chosen at Start; changes on every restart)
//	string   id         (uvarint length, then bytes)
//	string   gRPC address
//	string   HTTP address
//
// Bytes after the last field are ignored, so a later version may append
// fields that older members skip.
const (
	metaVersion = 1
	maxMetaSize = 256
)

// User messages (memberlist "user data", sent by gossip or over TCP) and the
// push/pull user state share one frame:
//
//	byte     kind
//	uvarint  cluster id of the sender
//	...      body, by kind:
//	           kindBroadcast: the application's bytes, as given to Broadcast
//	           kindDeparture: uvarint count, then count × (uvarint instance, string id)
type msgKind byte

const (
	kindBroadcast msgKind = 1
	kindDeparture msgKind = 2
)

// departure announces that the member id, in its process instance, leaves
// on purpose: its disappearance is StateLeft, not StateFailed.
type departure struct {
	ID       string
	Instance uint64
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// encodeMeta returns the wire form of m for the process instance.
func encodeMeta(m Meta, instance uint64) ([]byte, error) {
	b := make([]byte, 0, 24+len(m.ID)+len(m.GRPCAddr)+len(m.HTTPAddr))
	b = append(b, metaVersion)
	b = binary.AppendUvarint(b, m.ClusterID)
	b = binary.AppendUvarint(b, instance)
	b = appendString(b, m.ID)
	b = appendString(b, m.GRPCAddr)
	b = appendString(b, m.HTTPAddr)
	if len(b) > maxMetaSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrMetaTooLarge, len(b), maxMetaSize)
	}
	return b, nil
}

// decodeMeta parses what encodeMeta wrote. The returned strings do not
// alias b.
func decodeMeta(b []byte) (Meta, uint64, error) {
	r := reader{b: b}
	if v := r.byte(); r.err == nil && v != metaVersion {
		return Meta{}, 0, fmt.Errorf("%w: unknown version %d", ErrBadMeta, v)
	}
	var m Meta
	m.ClusterID = r.uvarint()
	instance := r.uvarint()
	m.ID = r.string()
	m.GRPCAddr = r.string()
	m.HTTPAddr = r.string()
	if r.err != nil {
		return Meta{}, 0, fmt.Errorf("%w: %v", ErrBadMeta, r.err)
	}
	if m.ID == "" {
		return Meta{}, 0, fmt.Errorf("%w: empty id", ErrBadMeta)
	}
	return m, instance, nil
}

// encodeFrame wraps a message body; see msgKind.
func encodeFrame(kind msgKind, cluster uint64, body []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(body))
	b = append(b, byte(kind))
	b = binary.AppendUvarint(b, cluster)
	return append(b, body...)
}

// decodeFrame splits a frame. body aliases b.
func decodeFrame(b []byte) (kind msgKind, cluster uint64, body []byte, err error) {
	r := reader{b: b}
	kind = msgKind(r.byte())
	cluster = r.uvarint()
	if r.err != nil {
		return 0, 0, nil, fmt.Errorf("%w: %v", ErrBadMessage, r.err)
	}
	if kind != kindBroadcast && kind != kindDeparture {
		return 0, 0, nil, fmt.Errorf("%w: unknown kind %d", ErrBadMessage, kind)
	}
	return kind, cluster, r.b, nil
}

func encodeDepartures(ds []departure) []byte {
	b := binary.AppendUvarint(nil, uint64(len(ds)))
	for _, d := range ds {
		b = binary.AppendUvarint(b, d.Instance)
		b = appendString(b, d.ID)
	}
	return b
}

func decodeDepartures(b []byte) ([]departure, error) {
	r := reader{b: b}
	n := r.uvarint()
	// Each entry takes at least two bytes; refuse counts the body cannot
	// hold before allocating for them.
	if r.err == nil && n > uint64(len(r.b)/2) {
		return nil, fmt.Errorf("%w: %d departures in %d bytes", ErrBadMessage, n, len(r.b))
	}
	ds := make([]departure, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		var d departure
		d.Instance = r.uvarint()
		d.ID = r.string()
		ds = append(ds, d)
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMessage, r.err)
	}
	return ds, nil
}

// reader consumes b front to back; the first failure sticks in err and
// makes every later read return a zero value.
type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errors.New("truncated")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("string of %d bytes, %d left", n, len(r.b))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
