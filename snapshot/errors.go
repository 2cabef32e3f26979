package snapshot

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt means stored bytes fail their checks: a changelog piece
	// that does not decode (a *CorruptError says where), a piece whose
	// SHA-256 or size differs from what its manifest or its upload says,
	// a manifest that is not valid JSON.
	ErrCorrupt = errors.New("snapshot: corrupt")
	// ErrVersion means a piece or manifest has a format version this
	// binary does not read (written by a newer one).
	ErrVersion = errors.New("snapshot: unsupported format version")
	// ErrInvalid is returned for arguments that break the rules of a call:
	// a malformed name or id, entries that are not contiguous, a manifest
	// of the wrong shape.
	ErrInvalid = errors.New("snapshot: invalid argument")
	// ErrIncomplete means a partition's chain does not reach from its
	// base materialization to the cut: entries are missing between two
	// pieces, or the last entry is not the cut's CutFinish.
	ErrIncomplete = errors.New("snapshot: incomplete chain")
	// ErrMissing means a piece a manifest names is not in the store.
	ErrMissing = errors.New("snapshot: missing piece")
	// ErrNotFound means no snapshot or piece of that name exists.
	ErrNotFound = errors.New("snapshot: not found")
	// ErrNoStore means the store itself does not exist: a file:// URL's
	// directory or an s3:// URL's bucket. It matches ErrNotFound too.
	ErrNoStore error = &childError{msg: "snapshot: no such store", parent: ErrNotFound}
	// ErrExists means a piece, manifest or upload of that name exists
	// already; stored pieces and manifests are never overwritten.
	ErrExists = errors.New("snapshot: already exists")
	// ErrBusy means a conflicting operation holds the store: another
	// upload of the same snapshot, or a prune that BeginUpload waited for
	// until its context ended. Retry later.
	ErrBusy = errors.New("snapshot: store busy")
	// ErrLockLost means an upload's lock object vanished or was taken
	// over (it went stale: not refreshed within Options.LockTTL), so a
	// prune may have deleted pieces it counted on. Start the upload again.
	ErrLockLost = errors.New("snapshot: upload lock lost")
	// ErrAccess means the store refused the credentials (or there were
	// none): HTTP 401/403, an unknown access key, a bad signature.
	ErrAccess = errors.New("snapshot: access refused")
)

// childError is a sentinel that also matches a broader one: errors.Is(e,
// parent) holds.
type childError struct {
	msg    string
	parent error
}

func (e *childError) Error() string { return e.msg }
func (e *childError) Unwrap() error { return e.parent }

// CorruptError describes damage found in a changelog piece. It wraps
// ErrCorrupt: match it with errors.Is(err, ErrCorrupt), and use errors.As
// to read where the damage is.
type CorruptError struct {
	// Name is the piece (its object name, or what the caller called it).
	Name string
	// Offset is the byte offset in the piece of the damaged header, entry
	// record (its length field) or trailer.
	Offset int64
	// Entry is the position of the damaged entry record, from 0; -1 when
	// the damage is not in an entry (the header, the trailer, the name).
	Entry int
	// Reason says which check failed.
	Reason string
}

func (e *CorruptError) Error() string {
	where := fmt.Sprintf("at offset %d", e.Offset)
	if e.Entry >= 0 {
		where = fmt.Sprintf("in entry record %d at offset %d", e.Entry, e.Offset)
	}
	return fmt.Sprintf("%s piece %s %s: %s", ErrCorrupt.Error(), e.Name, where, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// CheckError is what Check reports: the first piece of a snapshot that is
// missing, damaged or leaves the chain incomplete. It wraps the cause
// (ErrMissing, ErrCorrupt, ErrIncomplete, ErrVersion or an I/O error).
type CheckError struct {
	// Snapshot is the snapshot's id.
	Snapshot string
	// Partition is the partition whose chain is broken.
	Partition uint64
	// Piece names the piece at fault; for a gap between pieces, the name
	// the missing piece would have.
	Piece string
	// Err is the cause.
	Err error
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("snapshot %s: partition %d: piece %s: %v", e.Snapshot, e.Partition, e.Piece, e.Err)
}

// Unwrap returns the cause.
func (e *CheckError) Unwrap() error { return e.Err }
