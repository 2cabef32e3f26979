package partition

import "io"

// materialized is raftstore.Image: what a materialization encodes.
type materialized = interface {
	Applied() uint64
	Encode(w io.Writer) error
	Close()
}

// Materialize returns the partition's state at its applied index for a
// materialization (raftstore.StateMachine); see Image.
func (p *Partition) Materialize() materialized { return p.Image() }

// LoadImage replaces the whole state with the image read from r (a
// materialization loaded at start, or a raft snapshot installed from the
// leader's). The image is decoded in full before anything changes: a
// damaged one leaves the partition as it was. The cut-ready callback and
// the partition id are kept.
func (p *Partition) LoadImage(r io.Reader) error {
	if s, ok := p.kvs.(*pebbleKVs); ok {
		return p.loadImagePebble(s, r)
	}
	q, err := Decode(p.id, r)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kvs, p.applied = q.kvs, q.applied
	p.locks, p.intents, p.records, p.finished, p.horizon = q.locks, q.intents, q.records, q.finished, q.horizon
	p.cut = q.cut
	p.changed.Notify()
	return nil
}

// MaterializeCheckpoint returns the state of the checkpoint directory
// ckpt (raftstore.Checkpointer); see CheckpointImage.
func (p *Partition) MaterializeCheckpoint(ckpt, scratch string) (materialized, error) {
	im, err := p.CheckpointImage(ckpt, scratch)
	if err != nil {
		return nil, err
	}
	return im, nil
}
