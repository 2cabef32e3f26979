package checkpoint

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt means a materialization file fails its checks. The error
	// is a *CorruptError naming the file and where the damage is.
	ErrCorrupt = errors.New("checkpoint: corrupt materialization")
	// ErrVersion means a materialization file has a format version this
	// binary does not read (written by a newer one).
	ErrVersion = errors.New("checkpoint: unsupported format version")
	// ErrClosed is returned by reads of a closed Reader.
	ErrClosed = errors.New("checkpoint: reader closed")
)

// CorruptError describes damage found in a materialization file. It wraps
// ErrCorrupt: match it with errors.Is(err, ErrCorrupt), and use errors.As
// to read where the damage is.
type CorruptError struct {
	// Path is the file.
	Path string
	// Offset is the byte offset in the file of the damaged header, chunk
	// (its length field) or trailer.
	Offset int64
	// Chunk is the number of the damaged chunk, from 0; -1 when the damage
	// is not in a chunk (the header, the trailer, the file's name).
	Chunk int
	// Reason says which check failed.
	Reason string
}

func (e *CorruptError) Error() string {
	where := fmt.Sprintf("at offset %d", e.Offset)
	if e.Chunk >= 0 {
		where = fmt.Sprintf("in chunk %d at offset %d", e.Chunk, e.Offset)
	}
	return fmt.Sprintf("%s %s %s: %s", ErrCorrupt.Error(), e.Path, where, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
