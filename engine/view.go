package engine

import (
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// ReadView is a consistent read of a DB at one applied index (a Pebble
// snapshot), or of a materialization (see OpenMaterialization). Its methods
// are safe for concurrent use.
type ReadView struct {
	applied uint64
	what    string // for errors: "partition N view" or the directory

	// owner is the DB of a snapshot view, nil for a materialization. Lock
	// order: owner.viewsMu, then mu.
	owner *DB

	mu      sync.RWMutex
	r       reader // nil once closed; REQUIRES: mu held
	closeFn func() error
}

// NewReadView returns a view of the DB as of now. Writes committed later
// are not seen. Close it when done; DB.Close closes views still open.
func (d *DB) NewReadView() (*ReadView, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.life.RUnlock()
	snap := d.pdb.NewSnapshot()
	applied, err := readApplied(snap)
	if err != nil {
		_ = snap.Close()
		return nil, d.readErr("read view", err)
	}
	v := &ReadView{applied: applied, what: fmt.Sprintf("partition %d view at %d", d.id, applied), owner: d, r: snap}
	// REQUIRES: d.viewsMu held.
	v.closeFn = func() error {
		delete(d.views, v)
		return snap.Close()
	}
	d.viewsMu.Lock()
	d.views[v] = struct{}{}
	d.viewsMu.Unlock()
	return v, nil
}

// Applied returns the applied index the view reads at.
func (v *ReadView) Applied() uint64 { return v.applied }

func (v *ReadView) enter() error {
	v.mu.RLock()
	if v.r == nil {
		v.mu.RUnlock()
		return fmt.Errorf("engine: %s: %w", v.what, ErrClosed)
	}
	return nil
}

// Get is DB.Get at the view's index.
func (v *ReadView) Get(key []byte) (KV, bool, error) {
	if err := v.enter(); err != nil {
		return KV{}, false, err
	}
	defer v.mu.RUnlock()
	return getKV(v.r, key)
}

// Ascend is DB.Ascend at the view's index.
func (v *ReadView) Ascend(start []byte, fn func(KV) bool) error {
	if err := v.enter(); err != nil {
		return err
	}
	defer v.mu.RUnlock()
	return ascendKV(v.r, start, fn)
}

// Scan is DB.Scan at the view's index.
func (v *ReadView) Scan(start, end []byte, limit int) ([]KV, bool, error) {
	if err := v.enter(); err != nil {
		return nil, false, err
	}
	defer v.mu.RUnlock()
	return scanKV(v.r, start, end, limit)
}

// Close releases the view; closing twice returns ErrClosed.
func (v *ReadView) Close() error {
	if v.owner != nil {
		v.owner.viewsMu.Lock()
		defer v.owner.viewsMu.Unlock()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.r == nil {
		return fmt.Errorf("engine: %s: %w", v.what, ErrClosed)
	}
	v.r = nil
	return v.closeFn()
}

// closeLocked closes a snapshot view from DB.Close.
// REQUIRES: DB.viewsMu held.
func (v *ReadView) closeLocked() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.r == nil {
		return
	}
	snap := v.r.(*pebble.Snapshot)
	v.r = nil
	_ = snap.Close()
}
