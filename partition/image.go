package partition

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/txn"
)

// ErrBadImage is returned by Decode for a stream that is not an image
// Encode wrote: malformed, truncated, out of order, or describing a state
// no partition can be in. The error says which frame and why.
var ErrBadImage = errors.New("partition: bad image")

// ErrImageVersion is returned by Decode for an image written in a newer
// (or unknown) layout than this binary reads.
var ErrImageVersion = errors.New("partition: unsupported image version")

// ImageVersion is the image layout this binary writes and reads.
const ImageVersion = 1

// maxImageFrame bounds one frame of an image. A frame holds one key-value
// (a key and a value are bounded far below this) or one intent with its
// vote's reads.
const maxImageFrame = 1 << 30

// Image is the state of a partition at one applied index, detached from
// the partition (DESIGN.md, "Checkpoints": a materialization is written
// from a storage snapshot taken inside the apply loop). Taking it is
// cheap; encoding it is not and happens elsewhere. An Image never changes
// and is safe for concurrent use.
type Image struct {
	id      uint64
	applied uint64
	kvs     kvView // the key-values as they were: never written
	// The transaction tables are shallow copies: an *Intent and a recorded
	// *TxnDecideOp are never changed once in the partition's maps.
	intents  map[string]*Intent
	records  map[string]*internalpb.TxnDecideOp
	finished map[string]int64
	horizon  int64
	cut      *cut.ProgressState
	err      error  // the view could not be taken, or was closed
	release  func() // run once by Close (CheckpointImage's clone), or nil
}

// Image returns the partition's state at its applied index. It takes the
// partition's lock, so call it from the apply loop between entries to get
// the state at an exact index. The key-values are not copied (a view of
// the store: the in-memory B-tree is copy-on-write, O(1) here, later
// writes copy the nodes they change; Pebble's is a snapshot); the
// transaction tables and the cut progress are. Close it when done.
func (p *Partition) Image() *Image {
	p.mu.Lock() // Copy changes the tree's copy-on-write id: not a reader
	defer p.mu.Unlock()
	im := &Image{
		id:       p.id,
		applied:  p.applied,
		intents:  maps.Clone(p.intents),
		records:  maps.Clone(p.records),
		finished: maps.Clone(p.finished),
		horizon:  p.horizon,
		cut:      p.cut.State(),
	}
	im.kvs, im.err = p.kvs.view()
	return im
}

// Close releases the image's view of the store; Encode fails after it.
func (im *Image) Close() {
	if im.kvs != nil {
		im.kvs.close()
		im.kvs = nil
	}
	if im.err == nil {
		im.err = errImageClosed
	}
	if im.release != nil {
		im.release()
		im.release = nil
	}
}

var errImageClosed = errors.New("partition: image closed")

// ID returns the partition id.
func (im *Image) ID() uint64 { return im.id }

// Applied returns the index the image is at.
func (im *Image) Applied() uint64 { return im.applied }

// Len returns the number of key-values.
func (im *Image) Len() int {
	if im.kvs == nil {
		return 0
	}
	return im.kvs.len()
}

// Frame kinds, in the order they appear in an image.
const (
	frameHeader   = 1
	frameCut      = 2
	frameKV       = 3
	frameIntent   = 4
	frameRecord   = 5
	frameFinished = 6
	frameEnd      = 7
)

// Encode writes the image to w. The encoding is deterministic: equal
// states encode to equal bytes. It does not close w.
//
// # Layout
//
// An image is a sequence of frames, then the end of the stream. A frame is
//
//	uvarint L                  length of the rest of the frame, 1 ≤ L ≤ 2^30
//	byte    kind
//	        fields             L-1 bytes of protobuf wire format (protowire):
//	                           only varint and length-delimited fields, each
//	                           number at most once unless marked repeated,
//	                           no unknown numbers
//
// The frames come in this order, and Decode refuses any other:
//
//	kind 1 header, once:   1 layout version (ImageVersion), 2 partition
//	                       id, 3 applied index, 4 transaction horizon
//	                       (Unix ms; absent: none)
//	kind 2 cut, once:      the cut.ProgressState: 1 version, 2 pos,
//	                       3 active id (repeated, sorted), 4 before and
//	                       5 after (repeated internalpb.CutTxn), 6 aborted
//	                       id (repeated), 7 finished (bool), 8 done
//	                       (repeated, oldest first: a message of
//	                       1 internalpb.CutFinishOp, 2 index)
//	kind 3 key-value:      1 key, 2 value, 3 version (int64 as uint64),
//	                       4 create index, 5 mod index; one per key, keys
//	                       strictly increasing (bytewise)
//	kind 4 intent:         1 internalpb.TxnPrepareOp, 2 index of the
//	                       prepare entry, then its vote: 3 prepared,
//	                       4 conflicts (repeated), 5 compares hold,
//	                       6 success reads, 7 failure reads (repeated
//	                       kvpb.ResponseOp), 8 version of the prepare
//	                       entry (absent: 0, written before parallel
//	                       commits); by transaction id, strictly
//	                       increasing
//	kind 5 record:         1 internalpb.TxnDecideOp; by transaction id,
//	                       strictly increasing
//	kind 6 finished:       1 transaction id, 2 its prepare time (Unix ms;
//	                       absent: unknown); by id, strictly increasing
//	kind 7 end, once:      1 key-values, 2 intents, 3 records, 4 finished:
//	                       the number of frames of each kind
//
// Messages are marshaled deterministically. Nothing follows the end frame.
// The image carries no checksum of its own: the file or message holding it
// does (package checkpoint). Locks are not stored: they are taken again
// from the intents' shares, as prepare took them.
func (im *Image) Encode(w io.Writer) error {
	if im.err != nil {
		return im.err
	}
	e := &imageEncoder{w: bufio.NewWriterSize(w, 64<<10)}
	e.header(im.id, im.applied, im.horizon)
	e.end()
	e.cutProgress(im.cut)
	e.end()

	var n [4]uint64
	err := im.kvs.ascend(nil, func(kv *KV) bool {
		e.kv(kv)
		e.end()
		n[0]++
		return e.err == nil
	})
	if err != nil {
		return err
	}
	for _, id := range sortedKeys(im.intents) {
		e.intent(im.intents[id])
		e.end()
		n[1]++
	}
	for _, id := range sortedKeys(im.records) {
		e.record(im.records[id])
		e.end()
		n[2]++
	}
	for _, id := range sortedKeys(im.finished) {
		e.finished(id, im.finished[id])
		e.end()
		n[3]++
	}
	e.endFrame(n)
	e.end()
	if e.err != nil {
		return fmt.Errorf("partition %d: encoding image at %d: %w", im.id, im.applied, e.err)
	}
	return e.w.Flush()
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// imageEncoder builds one frame at a time in buf and writes it to w. The
// first error sticks and makes every later call a no-op.
type imageEncoder struct {
	w   *bufio.Writer
	buf []byte
	err error
}

var marshalOpts = proto.MarshalOptions{Deterministic: true}

func (e *imageEncoder) begin(kind byte) { e.buf = append(e.buf[:0], kind) }

func (e *imageEncoder) varint(num protowire.Number, v uint64) {
	e.buf = protowire.AppendTag(e.buf, num, protowire.VarintType)
	e.buf = protowire.AppendVarint(e.buf, v)
}

func (e *imageEncoder) bool(num protowire.Number, v bool) {
	e.varint(num, protowire.EncodeBool(v))
}

func (e *imageEncoder) bytes(num protowire.Number, b []byte) {
	e.buf = protowire.AppendTag(e.buf, num, protowire.BytesType)
	e.buf = protowire.AppendBytes(e.buf, b)
}

func (e *imageEncoder) message(num protowire.Number, m proto.Message) {
	e.buf = protowire.AppendTag(e.buf, num, protowire.BytesType)
	e.buf = protowire.AppendVarint(e.buf, uint64(marshalOpts.Size(m)))
	var err error
	e.buf, err = marshalOpts.MarshalAppend(e.buf, m)
	if err != nil && e.err == nil {
		e.err = err
	}
}

// The frame builders below put one frame's payload (kind and fields) in
// e.buf; end writes it. A durable store keeps the transaction tables' rows
// as these payloads too.

func (e *imageEncoder) header(id, applied uint64, horizon int64) {
	e.begin(frameHeader)
	e.varint(1, ImageVersion)
	e.varint(2, id)
	e.varint(3, applied)
	if horizon > 0 {
		e.varint(4, uint64(horizon))
	}
}

func (e *imageEncoder) cutProgress(c *cut.ProgressState) {
	e.begin(frameCut)
	e.varint(1, c.Version)
	e.varint(2, c.Pos)
	for _, id := range c.Active {
		e.bytes(3, []byte(id))
	}
	for _, t := range c.Before {
		e.message(4, t)
	}
	for _, t := range c.After {
		e.message(5, t)
	}
	for _, id := range c.Aborted {
		e.bytes(6, id)
	}
	e.bool(7, c.Finished)
	for _, f := range c.Done {
		var sub imageEncoder
		sub.message(1, f.Op)
		sub.varint(2, f.Index)
		e.bytes(8, sub.buf)
	}
}

func (e *imageEncoder) kv(kv *KV) {
	e.begin(frameKV)
	e.bytes(1, kv.Key)
	e.bytes(2, kv.Value)
	e.varint(3, uint64(kv.Version))
	e.varint(4, kv.CreateIndex)
	e.varint(5, kv.ModIndex)
}

func (e *imageEncoder) intent(in *Intent) {
	e.begin(frameIntent)
	e.message(1, in.Op)
	e.varint(2, in.Index)
	e.bool(3, in.Vote.Prepared)
	for _, c := range in.Vote.Conflicts {
		e.bytes(4, []byte(c))
	}
	e.bool(5, in.Vote.ComparesHold)
	for _, r := range in.Vote.SuccessReads {
		e.message(6, r)
	}
	for _, r := range in.Vote.FailureReads {
		e.message(7, r)
	}
	if in.Vote.Version != 0 {
		e.varint(8, in.Vote.Version)
	}
}

func (e *imageEncoder) record(rec *internalpb.TxnDecideOp) {
	e.begin(frameRecord)
	e.message(1, rec)
}

func (e *imageEncoder) finished(id string, at int64) {
	e.begin(frameFinished)
	e.bytes(1, []byte(id))
	if at > 0 {
		e.varint(2, uint64(at))
	}
}

func (e *imageEncoder) end() {
	if e.err != nil {
		return
	}
	if len(e.buf) > maxImageFrame {
		e.err = fmt.Errorf("a frame of kind %d has %d bytes, more than %d", e.buf[0], len(e.buf), maxImageFrame)
		return
	}
	var hdr [binary.MaxVarintLen64]byte
	if _, err := e.w.Write(hdr[:binary.PutUvarint(hdr[:], uint64(len(e.buf)))]); err != nil {
		e.err = err
		return
	}
	if _, err := e.w.Write(e.buf); err != nil {
		e.err = err
	}
}

// Decode reads an image Encode wrote and returns the partition it
// describes, with locks taken again from the intents. It reads r to its
// end: the image must be all of it. id is the partition expected; an
// image of another one is refused.
//
// Bad input never panics: a stream that is not a valid image gives an
// error wrapping ErrBadImage (or ErrImageVersion), naming the frame and
// its offset; a read error of r is returned wrapped (%w), so a caller
// can match the reader's own errors, such as a checksum failure found
// while streaming a file. The partition has no SetCutReady function.
func Decode(id uint64, r io.Reader) (*Partition, error) {
	p := New(id)
	if err := decodeInto(p, r); err != nil {
		return nil, err
	}
	return p, nil
}

// decodeInto decodes the image r holds into p, a new partition.
func decodeInto(p *Partition, r io.Reader) error {
	br, ok := r.(byteReader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	d := &imageDecoder{r: br, want: p.id, p: p}
	return d.run()
}

var schemas = map[byte]schema{
	frameHeader: headerSchema, frameCut: cutSchema, frameKV: kvSchema, frameIntent: intentSchema,
	frameRecord: recordSchema, frameFinished: finishedSchema, frameEnd: endSchema,
}

type byteReader interface {
	io.Reader
	io.ByteReader
}

type imageDecoder struct {
	r    byteReader
	want uint64
	p    *Partition
	// opening: the image holds a durable store's tables, whose key-values
	// are in the store already (pebble.go, openOn).
	opening bool

	off   int64 // of the next frame
	start int64 // of the frame being read
	frame int   // its number, from 0
	kind  byte  // its kind (0 until known)
	n     [4]uint64
	last  []byte // key or id of the previous frame of the same kind
}

// bad returns an ErrBadImage error about the current frame.
func (d *imageDecoder) bad(format string, args ...any) error {
	return fmt.Errorf("%w: partition %d, frame %d (kind %d) at offset %d: %s",
		ErrBadImage, d.want, d.frame, d.kind, d.start, fmt.Sprintf(format, args...))
}

func (d *imageDecoder) run() error {
	for {
		prev := d.kind
		d.start, d.kind = d.off, 0
		payload, err := d.next()
		if err != nil {
			return err
		}
		kind := payload[0]
		d.kind = kind
		if err := d.order(prev, kind); err != nil {
			return err
		}
		f, err := parseFields(payload[1:], schemas[kind])
		if err != nil {
			return d.bad("%v", err)
		}
		switch kind {
		case frameHeader:
			err = d.header(f)
		case frameCut:
			err = d.cutProgress(f)
		case frameKV:
			err = d.kv(f)
		case frameIntent:
			err = d.intent(f)
		case frameRecord:
			err = d.record(f)
		case frameFinished:
			err = d.finished(f)
		case frameEnd:
			if err := d.endFrame(f); err != nil {
				return err
			}
			return d.finish()
		}
		if err != nil {
			return err
		}
		d.frame++
	}
}

// next reads one frame. A frame's buffer is its own: decoded key-values
// keep slices of it.
func (d *imageDecoder) next() ([]byte, error) {
	cr := &countingByteReader{r: d.r}
	l, err := binary.ReadUvarint(cr)
	switch {
	case err == nil:
	case cr.readErr:
		return nil, fmt.Errorf("partition %d: reading image frame %d at offset %d: %w", d.want, d.frame, d.start, err)
	case err == io.EOF:
		return nil, d.bad("the stream ends before the end frame")
	case err == io.ErrUnexpectedEOF:
		return nil, d.bad("the stream ends inside a frame's length")
	default:
		return nil, d.bad("frame length: %v", err)
	}
	if l == 0 || l > maxImageFrame {
		return nil, d.bad("frame length %d out of range [1, %d]", l, maxImageFrame)
	}
	buf, err := readFull(d.r, int(l))
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return nil, d.bad("the stream ends inside the frame (%d of %d bytes)", len(buf), l)
	case err != nil:
		return nil, fmt.Errorf("partition %d: reading image frame %d at offset %d: %w", d.want, d.frame, d.start, err)
	}
	d.off += int64(cr.n) + int64(l)
	return buf, nil
}

// readFull reads n bytes, growing the buffer as they arrive, so that a
// damaged length cannot make it allocate a gigabyte for a short stream.
// At the end of the stream it returns what it read and io.EOF or
// io.ErrUnexpectedEOF.
func readFull(r io.Reader, n int) ([]byte, error) {
	const step = 1 << 20
	buf := make([]byte, 0, min(n, step))
	for len(buf) < n {
		k := min(n-len(buf), step)
		buf = slices.Grow(buf, k)
		got, err := io.ReadFull(r, buf[len(buf):len(buf)+k])
		buf = buf[:len(buf)+got]
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// order checks that a frame of kind may follow the frames so far, the
// last of kind prev.
func (d *imageDecoder) order(prev, kind byte) error {
	switch {
	case kind < frameHeader || kind > frameEnd:
		return d.bad("unknown frame kind %d", kind)
	case d.frame == 0 && kind != frameHeader:
		return d.bad("the image does not start with a header (kind %d)", kind)
	case d.frame == 1 && kind != frameCut:
		return d.bad("the header is not followed by the cut progress (kind %d)", kind)
	case d.frame > 1 && (kind <= frameCut || kind < prev):
		return d.bad("frame of kind %d after kind %d", kind, prev)
	}
	return nil
}

// countingByteReader counts the bytes ReadUvarint takes and tells a read
// error of the underlying reader from a malformed varint.
type countingByteReader struct {
	r       io.ByteReader
	n       int
	readErr bool
}

func (c *countingByteReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err != nil {
		c.readErr = err != io.EOF
		return b, err
	}
	c.n++
	return b, nil
}

// finish checks the end of the stream and the state as a whole.
func (d *imageDecoder) finish() error {
	d.frame++
	d.start, d.kind = d.off, 0
	if _, err := d.r.ReadByte(); err == nil {
		return d.bad("bytes follow the end frame")
	} else if err != io.EOF {
		return fmt.Errorf("partition %d: reading image after its end frame at offset %d: %w", d.want, d.off, err)
	}
	p := d.p
	// Locks are taken again as prepare took them; intents that a live
	// partition holds never conflict with one another.
	ins := slices.Collect(maps.Values(p.intents))
	sort.Slice(ins, func(i, j int) bool {
		if ins[i].Index != ins[j].Index {
			return ins[i].Index < ins[j].Index
		}
		return string(ins[i].Op.GetTxnId()) < string(ins[j].Op.GetTxnId())
	})
	for _, in := range ins {
		id := string(in.Op.GetTxnId())
		if c := p.locks.Acquire(id, txn.Wants(in.Op.GetShare())); len(c) > 0 {
			return fmt.Errorf("%w: partition %d: the locks of intent %x conflict with those of %q", ErrBadImage, d.want, id, c)
		}
	}
	if p.cut.Running() {
		for _, id := range p.cut.Active() {
			if p.intents[id] == nil {
				return fmt.Errorf("%w: partition %d: cut %d waits for transaction %x, which has no intent", ErrBadImage, d.want, p.cut.Version(), id)
			}
		}
	}
	if d.opening {
		return nil
	}
	return p.kvs.loaded(p.applied)
}

func (d *imageDecoder) header(f fields) error {
	if v := f.varint(1); v != ImageVersion {
		return fmt.Errorf("%w: partition %d: the image has layout version %d; this binary reads version %d",
			ErrImageVersion, d.want, v, ImageVersion)
	}
	if id := f.varint(2); id != d.want {
		return d.bad("the image is of partition %d", id)
	}
	d.p.applied = f.varint(3)
	h := f.varint(4)
	if h > math.MaxInt64 {
		return d.bad("horizon %d out of range", h)
	}
	d.p.horizon = int64(h)
	return nil
}

func (d *imageDecoder) cutProgress(f fields) error {
	s := &cut.ProgressState{Version: f.varint(1), Pos: f.varint(2), Finished: f.varint(7) != 0}
	for _, b := range f.all(3) {
		s.Active = append(s.Active, string(b))
	}
	for i, num := range []protowire.Number{4, 5} {
		for _, b := range f.all(num) {
			t := &internalpb.CutTxn{}
			if err := proto.Unmarshal(b, t); err != nil {
				return d.bad("cut transaction: %v", err)
			}
			if i == 0 {
				s.Before = append(s.Before, t)
			} else {
				s.After = append(s.After, t)
			}
		}
	}
	s.Aborted = append(s.Aborted, f.all(6)...)
	for _, b := range f.all(8) {
		df, err := parseFields(b, doneSchema)
		if err != nil {
			return d.bad("finished cut: %v", err)
		}
		op := &internalpb.CutFinishOp{}
		if err := proto.Unmarshal(df.bytes(1), op); err != nil {
			return d.bad("finished cut: %v", err)
		}
		s.Done = append(s.Done, cut.Finished{Op: op, Index: df.varint(2)})
	}
	if s.Pos > d.p.applied {
		return d.bad("cut %d at position %d past the applied index %d", s.Version, s.Pos, d.p.applied)
	}
	c, err := cut.RestoreProgress(s)
	if err != nil {
		return d.bad("%v", err)
	}
	d.p.cut = c
	return nil
}

// increasing checks that key follows the previous frame's of this kind.
func (d *imageDecoder) increasing(key []byte) error {
	if d.n[d.kind-frameKV] > 0 && bytes.Compare(d.last, key) >= 0 {
		return d.bad("%q does not follow %q", key, d.last)
	}
	d.last = append(d.last[:0], key...)
	d.n[d.kind-frameKV]++
	return nil
}

func (d *imageDecoder) kv(f fields) error {
	kv := &KV{Key: f.bytes(1), Value: f.bytes(2), Version: int64(f.varint(3)), CreateIndex: f.varint(4), ModIndex: f.varint(5)}
	if err := d.increasing(kv.Key); err != nil {
		return err
	}
	if kv.Version < 1 || kv.CreateIndex > kv.ModIndex || kv.ModIndex > d.p.applied {
		return d.bad("key %q: version %d, created at %d, changed at %d, applied %d", kv.Key, kv.Version, kv.CreateIndex, kv.ModIndex, d.p.applied)
	}
	return d.p.kvs.load(kv)
}

func (d *imageDecoder) intent(f fields) error {
	in := &Intent{Op: &internalpb.TxnPrepareOp{}, Index: f.varint(2)}
	if err := proto.Unmarshal(f.bytes(1), in.Op); err != nil {
		return d.bad("prepare: %v", err)
	}
	id := in.Op.GetTxnId()
	if err := d.increasing(id); err != nil {
		return err
	}
	if in.Index == 0 || in.Index > d.p.applied {
		return d.bad("intent %x prepared at %d, applied %d", id, in.Index, d.p.applied)
	}
	in.Vote.Prepared = f.varint(3) != 0
	for _, c := range f.all(4) {
		in.Vote.Conflicts = append(in.Vote.Conflicts, string(c))
	}
	if !in.Vote.Prepared || len(in.Vote.Conflicts) > 0 {
		return d.bad("intent %x with a refused vote", id)
	}
	in.Vote.ComparesHold = f.varint(5) != 0
	in.Vote.Version = f.varint(8)
	var err error
	// Prepare's reads are never nil slices; keep them so.
	if in.Vote.SuccessReads, err = responses(f.all(6)); err != nil {
		return d.bad("intent %x: %v", id, err)
	}
	if in.Vote.FailureReads, err = responses(f.all(7)); err != nil {
		return d.bad("intent %x: %v", id, err)
	}
	d.p.intents[string(id)] = in
	return nil
}

func responses(bs [][]byte) ([]*kvpb.ResponseOp, error) {
	out := make([]*kvpb.ResponseOp, 0, len(bs))
	for _, b := range bs {
		r := &kvpb.ResponseOp{}
		if err := proto.Unmarshal(b, r); err != nil {
			return nil, fmt.Errorf("vote read: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

func (d *imageDecoder) record(f fields) error {
	rec := &internalpb.TxnDecideOp{}
	if err := proto.Unmarshal(f.bytes(1), rec); err != nil {
		return d.bad("decision: %v", err)
	}
	if err := d.increasing(rec.GetTxnId()); err != nil {
		return err
	}
	if rec.GetStaging() && d.p.intents[string(rec.GetTxnId())] == nil {
		// The record partition's prepare writes a STAGING record with its
		// intent, and its finish decides the record.
		return d.bad("STAGING record %x without an intent", rec.GetTxnId())
	}
	d.p.records[string(rec.GetTxnId())] = rec
	return nil
}

func (d *imageDecoder) finished(f fields) error {
	id := f.bytes(1)
	if err := d.increasing(id); err != nil {
		return err
	}
	if d.p.intents[string(id)] != nil {
		return d.bad("transaction %x both finished and prepared", id)
	}
	at := f.varint(2)
	if at > math.MaxInt64 {
		return d.bad("transaction %x: prepare time %d out of range", id, at)
	}
	d.p.finished[string(id)] = int64(at)
	return nil
}

func (d *imageDecoder) endFrame(f fields) error {
	for i, name := range []string{"key-values", "intents", "records", "finished transactions"} {
		if want := f.varint(protowire.Number(i + 1)); want != d.n[i] {
			return d.bad("the image holds %d %s, its end frame says %d", d.n[i], name, want)
		}
	}
	return nil
}

// fieldKind says how a field of a frame may appear.
type fieldKind uint8

const (
	varintField   fieldKind = iota + 1 // a varint, at most once
	bytesField                         // length-delimited, at most once
	repeatedField                      // length-delimited, any number of times
)

// schema lists the fields a frame may hold.
type schema map[protowire.Number]fieldKind

var (
	headerSchema   = schema{1: varintField, 2: varintField, 3: varintField, 4: varintField}
	cutSchema      = schema{1: varintField, 2: varintField, 3: repeatedField, 4: repeatedField, 5: repeatedField, 6: repeatedField, 7: varintField, 8: repeatedField}
	doneSchema     = schema{1: bytesField, 2: varintField}
	kvSchema       = schema{1: bytesField, 2: bytesField, 3: varintField, 4: varintField, 5: varintField}
	intentSchema   = schema{1: bytesField, 2: varintField, 3: varintField, 4: repeatedField, 5: varintField, 6: repeatedField, 7: repeatedField, 8: varintField}
	recordSchema   = schema{1: bytesField}
	finishedSchema = schema{1: bytesField, 2: varintField}
	endSchema      = schema{1: varintField, 2: varintField, 3: varintField, 4: varintField}
)

// fields is a parsed frame: each field number's varint value or
// length-delimited values, in order.
type fields struct {
	varints map[protowire.Number]uint64
	bytess  map[protowire.Number][][]byte
}

// parseFields parses protobuf wire format that holds only the fields s
// allows, each with its wire type and at most once unless repeated. The
// byte slices alias b.
func parseFields(b []byte, s schema) (fields, error) {
	f := fields{varints: map[protowire.Number]uint64{}, bytess: map[protowire.Number][][]byte{}}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return f, protowire.ParseError(n)
		}
		b = b[n:]
		kind := s[num]
		switch {
		case kind == 0:
			return f, fmt.Errorf("unknown field %d", num)
		case typ == protowire.VarintType && kind == varintField:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return f, fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			if _, dup := f.varints[num]; dup {
				return f, fmt.Errorf("field %d repeated", num)
			}
			f.varints[num] = v
		case typ == protowire.BytesType && kind != varintField:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return f, fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			if kind == bytesField && len(f.bytess[num]) > 0 {
				return f, fmt.Errorf("field %d repeated", num)
			}
			f.bytess[num] = append(f.bytess[num], v)
		default:
			return f, fmt.Errorf("field %d has wire type %d", num, typ)
		}
	}
	return f, nil
}

// varint returns field num's value, 0 when absent.
func (f fields) varint(num protowire.Number) uint64 { return f.varints[num] }

// bytes returns length-delimited field num, nil when absent.
func (f fields) bytes(num protowire.Number) []byte {
	if vs := f.bytess[num]; len(vs) > 0 {
		return vs[0]
	}
	return nil
}

// all returns every value of repeated field num, in order.
func (f fields) all(num protowire.Number) [][]byte { return f.bytess[num] }
