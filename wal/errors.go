package wal

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt means the log holds a record that fails its checks, or its
	// segments do not fit together. Open refuses such a log; the error is a
	// *CorruptError naming the segment file and byte offset.
	ErrCorrupt = errors.New("wal: corrupt record")
	// ErrWrite means a write, fsync, truncation or directory sync failed.
	// It is sticky: once one happened, every later Append, TruncateFront and
	// Replay returns the same error. The error names the file.
	ErrWrite = errors.New("wal: write failed")
	// ErrClosed is returned by every call on a closed WAL.
	ErrClosed = errors.New("wal: closed")
	// ErrOutOfRange is returned by TruncateFront for an index past
	// LastIndex()+1.
	ErrOutOfRange = errors.New("wal: index out of range")
	// ErrInvalidRecord is returned by Append for a record it must not write
	// (an unknown type). Nothing of that Append is written; it is not sticky.
	ErrInvalidRecord = errors.New("wal: invalid record")
	// ErrInvalidOptions is returned by Options.Validate and Open.
	ErrInvalidOptions = errors.New("wal: invalid options")
)

// CorruptError describes damage found in the log. It wraps ErrCorrupt:
// match it with errors.Is(err, ErrCorrupt), and use errors.As to read where
// the damage is.
type CorruptError struct {
	// Segment is the path of the damaged segment file, "" when unknown (as
	// for a record given straight to the decoder).
	Segment string
	// Offset is the byte offset in Segment of the tidwall entry (its length
	// prefix) that is damaged, or -1 when unknown.
	Offset int64
	// Index is the WAL index the damaged entry has or would have had, 0 when
	// unknown.
	Index uint64
	// Reason says what check failed.
	Reason string
}

func (e *CorruptError) Error() string {
	msg := ErrCorrupt.Error()
	if e.Segment != "" {
		msg += " in segment " + e.Segment
	}
	if e.Offset >= 0 {
		msg += fmt.Sprintf(" at offset %d", e.Offset)
	}
	if e.Index != 0 {
		msg += fmt.Sprintf(" (index %d)", e.Index)
	}
	return msg + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// writeError wraps an I/O failure: op says what was done to path ("write",
// "fsync", "truncate", ...). The result matches both ErrWrite and err.
func writeError(op, path string, err error) error {
	return fmt.Errorf("%w: %s %s: %w", ErrWrite, op, path, err)
}
