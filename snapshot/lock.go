package snapshot

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Lock kinds.
const (
	kindUpload = "upload"
	kindPrune  = "prune"
)

// lockRecord is a lock object's content (JSON).
type lockRecord struct {
	Kind string `json:"kind"`
	// ID is the snapshot an upload writes; empty for a prune.
	ID string `json:"id,omitempty"`
	// Token tells the holder's lock from a successor's that took over a
	// stale one.
	Token     string    `json:"token"`
	Created   time.Time `json:"created"`
	Refreshed time.Time `json:"refreshed"`
	// Pieces an upload reserves: every piece its manifest will name.
	Pieces []string `json:"pieces,omitempty"`
}

// stale says whether the lock's holder stopped refreshing it.
func (r *lockRecord) stale(now time.Time, ttl time.Duration) bool {
	return now.Sub(r.Refreshed) > ttl
}

// lock is a held lock object.
type lock struct {
	s   *Store
	key string
	mu  sync.Mutex // guards rec
	rec lockRecord
}

func newToken() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// createLock writes a new lock object at key; ErrExists if there is one.
func (s *Store) createLock(ctx context.Context, key string, rec lockRecord) (*lock, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if _, _, err := s.write(ctx, key, bytes.NewReader(b), "application/json", true); err != nil {
		return nil, err
	}
	return &lock{s: s, key: key, rec: rec}, nil
}

// readLock reads the lock object at key.
func (s *Store) readLock(ctx context.Context, key string) (*lockRecord, error) {
	b, err := s.bucket.ReadAll(ctx, key)
	if err != nil {
		return nil, err
	}
	rec := &lockRecord{}
	if err := json.Unmarshal(b, rec); err != nil || rec.Token == "" || rec.Refreshed.IsZero() {
		return nil, fmt.Errorf("%w: lock object %s/%s is not a lock: %v", ErrCorrupt, s.url, key, err)
	}
	return rec, nil
}

// refresh rewrites the lock with the current time, after making sure it
// is still this holder's: ErrLockLost if not.
func (l *lock) refresh(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refreshLocked(ctx)
}

// refreshLocked is refresh. REQUIRES: l.mu held.
//
// A lock that has gone stale is not refreshed, even if nobody removed it
// yet: meanwhile the other side may have gone on without regard to it (a
// sweep ignoring the upload's reservation, an upload no longer waiting
// for the prune), so its holder must stop.
func (l *lock) refreshLocked(ctx context.Context) error {
	now := l.s.opts.Now()
	if l.rec.stale(now, l.s.opts.LockTTL) {
		return fmt.Errorf("%w: %s/%s went stale (last refreshed %v, %v ago; LockTTL %v)",
			ErrLockLost, l.s.url, l.key, l.rec.Refreshed.Format(time.RFC3339), now.Sub(l.rec.Refreshed).Round(time.Millisecond), l.s.opts.LockTTL)
	}
	cur, err := l.s.readLock(ctx, l.key)
	if notFound(err) {
		return fmt.Errorf("%w: %s/%s is gone (it went stale and was removed)", ErrLockLost, l.s.url, l.key)
	}
	if err != nil {
		return l.s.wrap(OpRead, "reading lock "+l.key, err)
	}
	if cur.Token != l.rec.Token {
		return fmt.Errorf("%w: %s/%s was taken over (it went stale)", ErrLockLost, l.s.url, l.key)
	}
	rec := l.rec
	rec.Refreshed = now
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, _, err := l.s.write(ctx, l.key, bytes.NewReader(b), "application/json", false); err != nil {
		return err
	}
	l.rec = rec
	return nil
}

// maybeRefresh refreshes the lock when a third of LockTTL has passed
// since the last refresh.
func (l *lock) maybeRefresh(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s.opts.Now().Sub(l.rec.Refreshed) < l.s.opts.LockTTL/3 {
		return nil
	}
	return l.refreshLocked(ctx)
}

// release deletes the lock object if it is still this holder's. It runs
// even when ctx has ended, so that a cancelled operation does not leave
// its lock to go stale.
func (l *lock) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, err := l.s.readLock(ctx, l.key)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return l.s.wrap(OpRead, "reading lock "+l.key, err)
	}
	if cur.Token != l.rec.Token {
		return nil
	}
	if err := l.s.bucket.Delete(ctx, l.key); err != nil && !notFound(err) {
		return l.s.wrap(OpDelete, "removing lock "+l.key, err)
	}
	return nil
}

// liveLocks reads the lock objects under dir/ and returns the live ones
// by key. Stale ones are removed when removeStale says so, and listed
// in removed.
func (s *Store) liveLocks(ctx context.Context, dir string, removeStale bool) (live map[string]*lockRecord, removed []string, err error) {
	names, err := s.listNames(ctx, dir)
	if err != nil {
		return nil, nil, err
	}
	now := s.opts.Now()
	live = map[string]*lockRecord{}
	for _, name := range names {
		if !strings.HasSuffix(name, jsonExt) {
			continue // a file:// driver's temporary file
		}
		key := s.prefix + dir + name
		rec, err := s.readLock(ctx, key)
		if notFound(err) {
			continue // released since the listing
		}
		if err != nil {
			// A lock that cannot be read could reserve anything: stop
			// rather than guess. Removing the object by hand unblocks.
			return nil, nil, s.wrap(OpRead, "reading lock", err)
		}
		if !rec.stale(now, s.opts.LockTTL) {
			live[key] = rec
			continue
		}
		if removeStale {
			if err := s.bucket.Delete(ctx, key); err != nil && !notFound(err) {
				return nil, nil, s.wrap(OpDelete, "removing stale lock "+key, err)
			}
			removed = append(removed, key)
		}
	}
	return live, removed, nil
}

// Upload is a snapshot upload in flight: it holds the lock object
// uploading/<id>.json, which reserves the pieces the snapshot will name
// against Prune and Delete (see the package doc). Get one from
// BeginUpload; end it with Finish or Abort. Its methods are safe for
// concurrent use (pieces may be uploaded in parallel).
type Upload struct {
	s      *Store
	id     string
	plan   map[string]bool // read-only
	pieces []string        // read-only, sorted
	lock   *lock
	ended  atomic.Bool // Finish succeeded or Abort was called
}

// BeginUpload starts the upload of snapshot id, which will name exactly
// the pieces listed (its partitions' bases and changelog pieces, uploaded
// or already stored). It writes the upload's lock object, then waits while
// a prune or delete is in flight (polling every Options.PollInterval): once
// it returns, no prune or delete removes a listed piece until Finish or
// Abort, so the caller may now ask HasPiece and upload only what is
// missing. Deciding what to upload before BeginUpload returns is unsafe.
//
// Errors: ErrExists when snapshot id exists; ErrBusy when another live
// upload of id holds the lock, or when ctx ends while a prune holds the
// store.
func (s *Store) BeginUpload(ctx context.Context, id string, pieces []string) (*Upload, error) {
	if err := validateID(id); err != nil {
		return nil, err
	}
	plan := map[string]bool{}
	for _, name := range pieces {
		if err := checkPieceName(name); err != nil {
			return nil, err
		}
		plan[name] = true
	}
	if ok, err := s.bucket.Exists(ctx, s.manifestKey(id)); err != nil {
		return nil, s.wrap(OpStat, "looking up manifest "+id, err)
	} else if ok {
		return nil, fmt.Errorf("%w: snapshot %s in %s", ErrExists, id, s.url)
	}
	now := s.opts.Now()
	rec := lockRecord{Kind: kindUpload, ID: id, Token: newToken(), Created: now, Refreshed: now}
	for name := range plan {
		rec.Pieces = append(rec.Pieces, name)
	}
	slices.Sort(rec.Pieces)
	key := s.prefix + uploadingDir + id + jsonExt
	l, err := s.createLock(ctx, key, rec)
	if errors.Is(err, ErrExists) {
		// A stale lock of the same id (its uploader died) is taken over.
		cur, rerr := s.readLock(ctx, key)
		switch {
		case rerr != nil && !notFound(rerr):
			return nil, s.wrap(OpRead, "reading lock "+key, rerr)
		case rerr == nil && !cur.stale(now, s.opts.LockTTL):
			return nil, fmt.Errorf("%w: another upload of snapshot %s is in flight (since %v, refreshed %v)",
				ErrBusy, id, cur.Created.Format(time.RFC3339), cur.Refreshed.Format(time.RFC3339))
		}
		if derr := s.bucket.Delete(ctx, key); derr != nil && !notFound(derr) {
			return nil, s.wrap(OpDelete, "removing stale lock "+key, derr)
		}
		l, err = s.createLock(ctx, key, rec)
	}
	if errors.Is(err, ErrExists) {
		return nil, fmt.Errorf("%w: another upload of snapshot %s started just now", ErrBusy, id)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: taking the upload lock: %w", id, err)
	}
	u := &Upload{s: s, id: id, plan: plan, pieces: rec.Pieces, lock: l}
	if err := u.waitForPrunes(ctx); err != nil {
		if rerr := l.release(ctx); rerr != nil {
			err = fmt.Errorf("%w (and releasing the lock: %v)", err, rerr)
		}
		return nil, err
	}
	return u, nil
}

// waitForPrunes returns once no live prune lock exists. A prune that
// started before our lock existed may not have seen it; one that starts
// after sees it. So once none is live, none can delete a reserved piece.
func (u *Upload) waitForPrunes(ctx context.Context) error {
	for {
		live, _, err := u.s.liveLocks(ctx, pruningDir, false)
		if err != nil {
			return err
		}
		if len(live) == 0 {
			return nil
		}
		if err := u.lock.maybeRefresh(ctx); err != nil {
			return err
		}
		t := time.NewTimer(u.s.opts.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			keys := make([]string, 0, len(live))
			for k := range live {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			return fmt.Errorf("%w: snapshot %s: waited for the prune holding %s: %w", ErrBusy, u.id, strings.Join(keys, ", "), ctx.Err())
		case <-t.C:
		}
	}
}

// ID returns the snapshot's id.
func (u *Upload) ID() string { return u.id }

// Pieces returns the reserved pieces, sorted.
func (u *Upload) Pieces() []string { return slices.Clone(u.pieces) }

// checkOpen refuses calls after Finish or Abort.
func (u *Upload) checkOpen() error {
	if u.ended.Load() {
		return fmt.Errorf("%w: the upload of %s has ended", ErrInvalid, u.id)
	}
	return nil
}

// PutPiece is Store.PutPiece for a reserved piece; it refreshes the lock
// when due. A piece not reserved is refused (ErrInvalid): a prune could
// delete it before the manifest names it.
func (u *Upload) PutPiece(ctx context.Context, name string, r io.Reader) (sha string, size int64, err error) {
	if err := u.checkOpen(); err != nil {
		return "", 0, err
	}
	if !u.plan[name] {
		return "", 0, fmt.Errorf("%w: upload of %s did not reserve piece %q", ErrInvalid, u.id, name)
	}
	if err := u.lock.maybeRefresh(ctx); err != nil {
		return "", 0, err
	}
	return u.s.PutPiece(ctx, name, r)
}

// Refresh rewrites the lock's time so that it stays live; call it at
// least every Options.LockTTL/3 during a long upload (PutPiece does when
// due). ErrLockLost if the lock went stale and was removed or taken over.
func (u *Upload) Refresh(ctx context.Context) error {
	if err := u.checkOpen(); err != nil {
		return err
	}
	return u.lock.refresh(ctx)
}

// Finish stores the snapshot's manifest (Store.PutManifest) and releases
// the lock. m.ID must be the upload's id and m may name only reserved
// pieces. The lock is refreshed first: if it was lost, Finish fails with
// ErrLockLost and stores nothing. On any error the lock stays (call
// Abort, or Finish again).
func (u *Upload) Finish(ctx context.Context, m *Manifest) error {
	if err := u.checkOpen(); err != nil {
		return err
	}
	if m.ID != u.id {
		return fmt.Errorf("%w: upload of %s cannot finish with manifest %q", ErrInvalid, u.id, m.ID)
	}
	for _, o := range m.Objects() {
		if !u.plan[o.Name] {
			return fmt.Errorf("%w: manifest %s names piece %s, which its upload did not reserve", ErrInvalid, m.ID, o.Name)
		}
	}
	if err := u.lock.refresh(ctx); err != nil {
		return err
	}
	if err := u.s.PutManifest(ctx, m); err != nil {
		return err
	}
	u.ended.Store(true)
	return u.lock.release(ctx)
}

// Abort releases the lock without storing a manifest. The pieces the
// upload stored stay until a Prune or Delete finds them unreferenced.
func (u *Upload) Abort(ctx context.Context) error {
	u.ended.Store(true)
	return u.lock.release(ctx)
}
