package snapshot

import (
	"context"
	"fmt"
	"time"
)

// GC reports what Delete or Prune removed.
type GC struct {
	// Snapshots are the ids of the deleted snapshots, oldest cut first.
	Snapshots []string
	// Pieces are the deleted pieces, sorted: every piece of the cluster
	// that no remaining manifest names and no live upload reserves.
	Pieces []string
	// Reserved are unreferenced pieces kept because a live upload
	// reserves them; a later Prune or Delete removes those its manifest
	// does not name.
	Reserved []string
	// StaleLocks are the lock objects of dead uploads and prunes that
	// were removed.
	StaleLocks []string
}

// Delete removes snapshot id and then every piece that no remaining
// snapshot references (see Prune for how). ErrNotFound if there is no
// such snapshot; nothing is removed then.
func (s *Store) Delete(ctx context.Context, id string) (GC, error) {
	var gc GC
	if err := validateID(id); err != nil {
		return gc, err
	}
	err := s.withPruneLock(ctx, func(l *lock) error {
		key := s.manifestKey(id)
		if ok, err := s.bucket.Exists(ctx, key); err != nil {
			return s.wrap(OpStat, "looking up manifest "+id, err)
		} else if !ok {
			return fmt.Errorf("%w: snapshot %s in %s", ErrNotFound, id, s.url)
		}
		if err := s.bucket.Delete(ctx, key); err != nil && !notFound(err) {
			return s.wrap(OpDelete, "deleting manifest "+id, err)
		}
		gc.Snapshots = append(gc.Snapshots, id)
		return s.sweep(ctx, l, &gc)
	})
	return gc, err
}

// Prune expires snapshots: it keeps the keepLast snapshots of the highest
// cut versions and every snapshot whose Time is within keepWithin before
// now (either rule keeps a snapshot; 0 turns a rule off, and turning both
// off is refused), deletes the other manifests, oldest first, and then
// every piece that no remaining manifest references.
//
// References are counted from the manifests themselves: a piece is kept
// while any manifest of the cluster names it, or a live upload reserves
// it (BeginUpload); there is no counter to drift. Pieces of other
// clusters are never listed. A manifest that cannot be read stops Prune
// before it deletes anything (it could reference any piece).
func (s *Store) Prune(ctx context.Context, keepLast int, keepWithin time.Duration, now time.Time) (GC, error) {
	var gc GC
	if keepLast < 0 || keepWithin < 0 {
		return gc, fmt.Errorf("%w: prune keeping the last %d and those within %v", ErrInvalid, keepLast, keepWithin)
	}
	if keepLast == 0 && keepWithin == 0 {
		return gc, fmt.Errorf("%w: prune with neither keepLast nor keepWithin would delete every snapshot; use Delete", ErrInvalid)
	}
	err := s.withPruneLock(ctx, func(l *lock) error {
		ms, err := s.List(ctx)
		if err != nil {
			return err
		}
		for i, m := range ms {
			newest := i >= len(ms)-keepLast
			recent := keepWithin > 0 && !m.Time.Before(now.Add(-keepWithin))
			if newest || recent {
				continue
			}
			if err := l.maybeRefresh(ctx); err != nil {
				return err
			}
			if err := s.bucket.Delete(ctx, s.manifestKey(m.ID)); err != nil && !notFound(err) {
				return s.wrap(OpDelete, "deleting manifest "+m.ID, err)
			}
			gc.Snapshots = append(gc.Snapshots, m.ID)
		}
		return s.sweep(ctx, l, &gc)
	})
	return gc, err
}

// withPruneLock runs fn holding a new prune lock (pruning/<token>.json),
// which makes uploads that begin meanwhile wait in BeginUpload.
func (s *Store) withPruneLock(ctx context.Context, fn func(*lock) error) error {
	now := s.opts.Now()
	token := newToken()
	l, err := s.createLock(ctx, s.prefix+pruningDir+token+jsonExt,
		lockRecord{Kind: kindPrune, Token: token, Created: now, Refreshed: now})
	if err != nil {
		return fmt.Errorf("taking the prune lock: %w", err)
	}
	err = fn(l)
	if rerr := l.release(ctx); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// sweep deletes every piece of the cluster that no manifest names and no
// live upload reserves. REQUIRES: the prune lock l held, so that an
// upload beginning now waits until sweep is done.
//
// Order matters: the upload locks are read before the manifests, so an
// upload that finished in between has its manifest seen; one whose lock
// appeared after the read waits in BeginUpload until this prune's lock
// is gone, and only then looks at which pieces exist.
func (s *Store) sweep(ctx context.Context, l *lock, gc *GC) error {
	uploads, stale, err := s.liveLocks(ctx, uploadingDir, true)
	if err != nil {
		return err
	}
	gc.StaleLocks = append(gc.StaleLocks, stale...)
	_, stale, err = s.liveLocks(ctx, pruningDir, true)
	if err != nil {
		return err
	}
	gc.StaleLocks = append(gc.StaleLocks, stale...)
	if err := l.maybeRefresh(ctx); err != nil {
		return err
	}
	reserved := map[string]bool{}
	for _, rec := range uploads {
		for _, name := range rec.Pieces {
			reserved[name] = true
		}
	}
	ms, err := s.List(ctx)
	if err != nil {
		return err
	}
	referenced := map[string]bool{}
	for i := range ms {
		for _, o := range ms[i].Objects() {
			referenced[o.Name] = true
		}
	}
	if err := l.maybeRefresh(ctx); err != nil {
		return err
	}
	names, err := s.listNames(ctx, piecesDir)
	if err != nil {
		return err
	}
	for _, name := range names {
		switch {
		case !isPieceName(name) || referenced[name]:
			continue // not a piece (a file:// temporary file), or in use
		case reserved[name]:
			gc.Reserved = append(gc.Reserved, name)
			continue
		}
		// A lost prune lock means uploads may have stopped waiting for
		// this prune: stop deleting.
		if err := l.maybeRefresh(ctx); err != nil {
			return err
		}
		if err := s.bucket.Delete(ctx, s.pieceKey(name)); err != nil && !notFound(err) {
			return s.wrap(OpDelete, "deleting piece "+name, err)
		}
		gc.Pieces = append(gc.Pieces, name)
	}
	return nil
}
