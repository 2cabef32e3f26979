package partition

// A durable store (kvStore.durable) keeps, beside the key-values, the
// rows of the partition's transaction tables and cut progress, so that a
// restart opens the partition at its store's applied index with nothing
// else to load. Intents, records and the cut progress are kept as the
// payloads of the image frames that would hold them (image.go, "Layout"),
// finished ids with their prepare time and the horizon as numbers; on
// open they are read back through the image decoder, so they are
// validated as a materialization is. An entry's changed rows go into the
// entry's batch, with its applied index.

// rowHorizon is the kind of the horizon's row (not a frame kind: the
// horizon is a field of the header frame).
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
	p.touch(frameCut, "")
}

// rowWriter writes a durable store's rows into the entry's batch. A nil
// payload (or !ok) deletes the row; the writer copies what it keeps.
type rowWriter interface {
	putIntent(id string, index uint64, payload []byte)
	putRecord(id string, payload []byte)
	putFinished(id string, at int64, ok bool)
	putHorizon(ms int64)
	putCut(payload []byte)
}

// writeRowsLocked hands the store the rows this entry changed, as they are
// now (a row gone is deleted), and the cut progress when it changed.
// REQUIRES: mu held; a durable store.
func (p *Partition) writeRowsLocked() error {
	w := p.kvs.rows()
	var e imageEncoder
	cutChanged := p.cut.Gen() != p.cutGen
	for k := range p.rows {
		switch k.kind {
		case frameCut:
			cutChanged = true
		case frameIntent:
			var payload []byte
			var index uint64
			if in := p.intents[k.id]; in != nil {
				e.intent(in)
				payload, index = e.buf, in.Index
			}
			w.putIntent(k.id, index, payload)
		case frameRecord:
			var payload []byte
			if rec := p.records[k.id]; rec != nil {
				e.record(rec)
				payload = e.buf
			}
			w.putRecord(k.id, payload)
		case frameFinished:
			at, ok := p.finished[k.id]
			w.putFinished(k.id, at, ok)
		case rowHorizon:
			w.putHorizon(p.horizon)
		}
		if e.err != nil {
			return e.err
		}
		delete(p.rows, k)
	}
	if cutChanged {
		e.cutProgress(p.cut.State())
		if e.err != nil {
			return e.err
		}
		w.putCut(e.buf)
		p.cutGen = p.cut.Gen()
	}
	return nil
}
