package wal

import (
	"errors"
	"fmt"
	"io/fs"
)

var (
	// ErrCorrupt means the log holds a record that fails its checks, its
	// segments do not fit together, or its progress file is damaged. Open
	// refuses such a log; the error is a *CorruptError naming the file and
	// byte offset (or a *ChainError, which also matches ErrChain).
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
	// ErrChain means the segments do not continue one another, or the log
	// is behind what its progress file recorded (doc.go, "Segment chain"):
	// an old or foreign segment was copied in, segments were swapped, or
	// the newest segment is gone. Open refuses such a log; the error is a
	// *ChainError naming the files, and it matches ErrCorrupt too.
	ErrChain = errors.New("wal: log went backwards or is foreign")
)

// CorruptError describes damage found in the log. It wraps ErrCorrupt:
// match it with errors.Is(err, ErrCorrupt), and use errors.As to read where
// the damage is.
type CorruptError struct {
	// Segment is the path of the damaged file — a segment file, or the
	// progress file — "" when unknown (as for a record given straight to
	// the decoder).
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
// "fsync", "truncate", ...). The result matches both ErrWrite and err. An
// err that already says op and path (the *fs.PathError of a write to the
// file) is not prefixed with them again.
func writeError(op, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == op && pe.Path == path && err.Error() == pe.Error() {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	return fmt.Errorf("%w: %s %s: %w", ErrWrite, op, path, err)
}

// ChainError says which segment does not continue the log (doc.go,
// "Segment chain"). It matches both ErrChain and ErrCorrupt.
type ChainError struct {
	// Segment is the path of the file that does not fit: a segment file,
	// or the progress file.
	Segment string
	// Other is the path of the file it was checked against (the previous
	// segment, or the progress file), "" when none.
	Other string
	// Reason says what did not match.
	Reason string
}

func (e *ChainError) Error() string {
	msg := ErrChain.Error() + ": " + e.Segment + ": " + e.Reason
	if e.Other != "" {
		msg += " (checked against " + e.Other + ")"
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrChain) and errors.Is(err, ErrCorrupt)
// hold.
func (e *ChainError) Unwrap() []error { return []error{ErrChain, ErrCorrupt} }
