package partition

import (
	"encoding/binary"
	"fmt"
	"math"
)

// A durable store (kvStore.durable) keeps, beside the key-values, the
// rows of the partition's transaction tables and cut progress, so that a
// restart opens the partition at its store's applied index with nothing
// else to load. Each row is the payload of the image frame that would
// hold it (image.go, "Layout"), validated by the same decoder when read
// back: an intent, a record or a finished id by transaction id, and the
// cut progress and the transaction horizon once. An entry's changed rows
// go into the entry's batch, with its applied index.

// rowHorizon is the kind of the horizon's row: its payload is a uvarint,
// the horizon in Unix ms.
const rowHorizon = 0x20

// rowKey names one row: a frame kind and, for the tables, the transaction
// id.
type rowKey struct {
	kind byte
	id   string
}

// touch notes that the row (kind, id) changed in this entry. REQUIRES: mu
// held.
func (p *Partition) touch(kind byte, id string) {
	if p.rows != nil {
		p.rows[rowKey{kind, id}] = struct{}{}
	}
}

// touchAll notes every row as changed (the tables are about to be
// replaced). REQUIRES: mu held.
func (p *Partition) touchAll() {
	if p.rows == nil {
		return
	}
	for id := range p.intents {
		p.touch(frameIntent, id)
	}
	for id := range p.records {
		p.touch(frameRecord, id)
	}
	for id := range p.finished {
		p.touch(frameFinished, id)
	}
	p.touch(rowHorizon, "")
}

// writeRowsLocked hands the store the rows this entry changed, as they are
// now (a row gone is deleted), and the cut progress when it changed.
// REQUIRES: mu held; a durable store.
func (p *Partition) writeRowsLocked() error {
	var e imageEncoder
	for k := range p.rows {
		var payload []byte
		switch k.kind {
		case frameIntent:
			if in := p.intents[k.id]; in != nil {
				e.intent(in)
				payload = e.buf
			}
		case frameRecord:
			if rec := p.records[k.id]; rec != nil {
				e.record(rec)
				payload = e.buf
			}
		case frameFinished:
			if at, ok := p.finished[k.id]; ok {
				e.finished(k.id, at)
				payload = e.buf
			}
		case rowHorizon:
			payload = binary.AppendUvarint(nil, uint64(p.horizon))
		}
		if e.err != nil {
			return e.err
		}
		if err := p.kvs.putRow(k.kind, k.id, payload); err != nil {
			return err
		}
		delete(p.rows, k)
	}
	if g := p.cut.Gen(); g != p.cutGen {
		e.cutProgress(p.cut.State())
		if e.err != nil {
			return e.err
		}
		if err := p.kvs.putRow(frameCut, "", e.buf); err != nil {
			return err
		}
		p.cutGen = g
	}
	return nil
}

// decodeHorizonRow reads the horizon row's payload.
func decodeHorizonRow(id uint64, b []byte) (int64, error) {
	h, n := binary.Uvarint(b)
	if n <= 0 || n != len(b) || h > math.MaxInt64 {
		return 0, fmt.Errorf("%w: partition %d: horizon row % x is not one uvarint below 2^63", ErrBadImage, id, b)
	}
	return int64(h), nil
}
