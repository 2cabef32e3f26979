package wal

import (
	"fmt"
	"log/slog"
	"os"
	"time"
)

// DefaultSegmentSize is the segment size Options.Validate fills in. The
// segment layer (tidwall/wal) holds the tail segment's bytes in memory and
// the last segment it closed or read, so this bounds about two segments of
// heap (three while the tail's buffer grows); at 64 MiB that was most of a
// node's heap under write load (docs/benchmarks.md, "WAL segments and the
// heap").
const DefaultSegmentSize = 16 << 20

// Options configure a WAL. The zero value is valid: Validate fills defaults.
type Options struct {
	// SegmentSize is the target size in bytes of one segment file; a segment
	// is closed and a new one started once it holds at least this many
	// bytes (tidwall/wal's rule, so a segment may end up larger by one
	// entry). 0 means DefaultSegmentSize; negative is invalid. A size not
	// above a chain record (about 64 bytes plus the node id) is raised to
	// one byte more than one.
	SegmentSize int
	// NodeID names the node whose log this is; it is written into every
	// chain record and the progress file (doc.go, "Segment chain"), at most
	// 255 bytes. Open refuses a log written for another node. "" checks
	// nothing and keeps the node id the log already records; a log that
	// records none takes the first one given.
	NodeID string
	// NoSync skips every fsync, of segments and of the directory. Appends
	// are then not durable: for benchmarks and tests only.
	NoSync bool
	// Logger receives the warnings of repairs at Open and an error when a
	// write fails. nil means slog.Default().
	Logger *slog.Logger
	// OnSync, if set, is called once after each committed batch with the
	// number of records it held, the bytes it wrote (as framed in the
	// segment, a chain record the WAL added included) and how long writing
	// and syncing it took. It runs on the committer goroutine
	// before the batch's Append calls return, so it must not block and must
	// not call Append.
	OnSync func(records, bytes int, took time.Duration)
	// Hooks observe the WAL's I/O and inject failures; see Hooks.
	Hooks Hooks
}

// Hooks are the seam through which tests watch and fail the WAL's I/O,
// and take crash images of the directory at each step.
// Production code leaves them nil. Every hook is called right before the
// operation it names; a non-nil return is handled exactly as if the
// operation had failed with that error (the operation is then not
// performed), so it becomes the WAL's sticky error. Hooks of one WAL are
// never called concurrently with each other.
//
// tidwall/wal does its own file I/O with package os, so these wrap its calls
// instead of replacing a file system.
type Hooks struct {
	// BeforeWrite is called before bytes are written: a batch of framed
	// entries, with segment the tail segment file the write starts in, or
	// the progress file's content, with segment its temporary file.
	BeforeWrite func(segment string, bytes int) error
	// BeforeSync is called before a file is fsynced: the tail segment once
	// per committed batch, a segment whose torn tail Open cut off, and the
	// progress file's temporary file before it is renamed into place.
	// tidwall/wal also fsyncs a full segment itself when it starts the next
	// one, inside the batch write; that fsync is not seen here.
	BeforeSync func(segment string) error
	// AfterSync is called after a file named to BeforeSync was fsynced
	// without error (it cannot fail anything: the fsync is done).
	AfterSync func(segment string)
	// BeforeSyncDir is called before a directory is fsynced: at Open, after
	// a batch that started a new segment, after TruncateFront, and after
	// the progress file is renamed into place.
	BeforeSyncDir func(dir string) error
}

// Validate checks o and fills its defaults.
func (o *Options) Validate() error {
	if o.SegmentSize < 0 {
		return fmt.Errorf("%w: SegmentSize %d is negative", ErrInvalidOptions, o.SegmentSize)
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if len(o.NodeID) > maxNodeIDLen {
		return fmt.Errorf("%w: NodeID of %d bytes is longer than %d", ErrInvalidOptions, len(o.NodeID), maxNodeIDLen)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// env performs the I/O the WAL itself owns (as opposed to tidwall/wal's),
// going through the hooks.
type env struct {
	hooks  Hooks
	noSync bool
}

// beforeWrite gives the write hook its chance to fail a batch write.
func (e env) beforeWrite(segment string, n int) error {
	if e.hooks.BeforeWrite != nil {
		return e.hooks.BeforeWrite(segment, n)
	}
	return nil
}

// syncFile fsyncs segment by calling sync, which performs the fsync (the
// caller may hold the file only inside tidwall/wal).
func (e env) syncFile(segment string, sync func() error) error {
	if e.noSync {
		return nil
	}
	if e.hooks.BeforeSync != nil {
		if err := e.hooks.BeforeSync(segment); err != nil {
			return err
		}
	}
	if err := sync(); err != nil {
		return err
	}
	if e.hooks.AfterSync != nil {
		e.hooks.AfterSync(segment)
	}
	return nil
}

// syncDir fsyncs directory dir through f, an open handle on it, making file
// creations, renames and removals in it durable. The WAL keeps its
// directory open for this, so that a process out of file descriptors can
// still sync it.
func (e env) syncDir(dir string, f *os.File) error {
	if e.noSync {
		return nil
	}
	if e.hooks.BeforeSyncDir != nil {
		if err := e.hooks.BeforeSyncDir(dir); err != nil {
			return err
		}
	}
	return f.Sync()
}
