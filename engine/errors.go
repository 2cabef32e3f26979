package engine

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt reports a key or value that does not decode; the wrapping
	// error names the table and the key.
	ErrCorrupt = errors.New("engine: corrupt value")
	// ErrStopped wraps the sticky error of a DB that hit a Pebble failure.
	ErrStopped = errors.New("engine: stopped")
	// ErrFatal is the error EnvConfig.Fatal gets: Pebble cannot go on
	// (a failed MANIFEST write), and the process must end.
	ErrFatal = errors.New("engine: pebble fatal")
	// ErrClosed is returned by every call on a closed DB, view or Env.
	ErrClosed = errors.New("engine: closed")
	// ErrAppliedNotIncreasing is returned by Batch.Commit for an applied
	// index at or below the current one; nothing is written.
	ErrAppliedNotIncreasing = errors.New("engine: applied index not increasing")
	// ErrInvalidKey is returned for an empty or oversized user key.
	ErrInvalidKey = errors.New("engine: invalid key")
	// ErrInvalidTxnID is returned for an empty or oversized transaction id.
	ErrInvalidTxnID = errors.New("engine: invalid transaction id")
	// ErrInvalidConfig is returned by EnvConfig.Validate.
	ErrInvalidConfig = errors.New("engine: invalid config")
	// ErrExists is returned by Materialize when its destination exists.
	ErrExists = errors.New("engine: destination exists")
	// ErrFormat is returned by Open for a DB whose format major version is
	// not FormatVersion.
	ErrFormat = errors.New("engine: unexpected format version")
	// ErrEnvInUse is returned by Env.Close while DBs of the Env are open.
	ErrEnvInUse = errors.New("engine: env has open databases")
)

// stoppedError is the sticky error of a DB: it matches ErrStopped and the
// Pebble error that stopped the DB.
type stoppedError struct {
	id    uint64
	dir   string
	op    string
	cause error
}

func (e *stoppedError) Error() string {
	return fmt.Sprintf("engine: partition %d (dir %s) stopped after %s: %v", e.id, e.dir, e.op, e.cause)
}

func (e *stoppedError) Unwrap() []error { return []error{ErrStopped, e.cause} }

func corruptf(table string, key []byte, format string, args ...any) error {
	return fmt.Errorf("%w: table %s key %q: %s", ErrCorrupt, table, key, fmt.Sprintf(format, args...))
}
