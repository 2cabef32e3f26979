package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Defaults filled in by EnvConfig.Validate.
const (
	DefaultCacheSize    = 128 << 20
	DefaultMaxOpenFiles = 1000

	// minCacheSize leaves room for a few DBs' memtable reservations.
	minCacheSize = 8 << 20
	// minMaxOpenFiles keeps the file cache usable: Pebble's own per-DB
	// minimum (pebble.FileCacheSize) is 64.
	minMaxOpenFiles = 64
)

// EnvConfig sizes the resources shared by every partition DB of a node.
type EnvConfig struct {
	// CacheSize is the block cache in bytes. Pebble reserves each DB's
	// memtables (up to 2 × MemTableSize per DB) inside this cache, so it is
	// the whole storage memory budget of the node's partitions. 0 means
	// DefaultCacheSize; at least 8 MiB.
	CacheSize int64
	// MaxOpenFiles is the capacity of the shared file cache: open table
	// files of all DBs together. Each open DB also holds a few descriptors
	// outside it (its LOCK file, MANIFEST and directory). 0 means
	// DefaultMaxOpenFiles; at least 64.
	MaxOpenFiles int
	// Logger receives Pebble's messages; nil means slog.Default().
	Logger *slog.Logger
	// FS is the file system of every DB; nil means vfs.Default. Tests pass
	// a vfs.MemFS or an errorfs wrapper.
	FS vfs.FS
	// Stopped, if set, is called once for each DB that stops on a
	// Pebble failure, with the DB and its sticky error (ErrStopped,
	// naming the partition, its directory and Pebble's error, which
	// names the file), on a goroutine of its own, so possibly after the
	// DB was closed. A stopped DB refuses every later call, so its owner
	// must stop using it: a node stops serving and exits, as on a WAL
	// failure, unless it discards the DB (a state found corrupt while it
	// opens, which partition.Open moves aside).
	Stopped func(db *DB, err error)
	// Fatal is called, on a Pebble goroutine that may hold the DB's
	// locks, when Pebble reports a failure it cannot go on from: a
	// MANIFEST write or sync that failed (a full disk, say), or a broken
	// invariant. err matches ErrFatal and names the partition's directory
	// and Pebble's message (which names the file). Fatal must not return:
	// it ends the process (the DB can no longer be used nor closed, so
	// the node cannot shut down); a node restarts from its WAL as after a
	// crash. nil means a panic with the message.
	Fatal func(err error)
}

// Validate fills defaults and refuses values out of range.
func (c *EnvConfig) Validate() error {
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.CacheSize < minCacheSize {
		return fmt.Errorf("%w: CacheSize %d below %d", ErrInvalidConfig, c.CacheSize, minCacheSize)
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = DefaultMaxOpenFiles
	}
	if c.MaxOpenFiles < minMaxOpenFiles {
		return fmt.Errorf("%w: MaxOpenFiles %d below %d", ErrInvalidConfig, c.MaxOpenFiles, minMaxOpenFiles)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
	return nil
}

// Env holds the block cache and file cache shared by the DBs of a node.
//
// Order: NewEnv, then Open any number of DBs, Close every DB, then
// Env.Close. Each DB takes its own references on both caches, so the Env's
// references can be dropped only once no DB is open; Close refuses earlier.
type Env struct {
	cfg       EnvConfig
	cache     *pebble.Cache
	fileCache *pebble.FileCache

	mu     sync.Mutex
	open   int // DBs and read-only views opened in this Env and not closed
	closed bool
}

// NewEnv validates cfg and creates the shared caches.
func NewEnv(cfg EnvConfig) (*Env, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := pebble.NewCache(cfg.CacheSize)
	fc := pebble.NewFileCache(runtime.GOMAXPROCS(0), cfg.MaxOpenFiles)
	return &Env{cfg: cfg, cache: c, fileCache: fc}, nil
}

// Config returns the validated configuration.
func (e *Env) Config() EnvConfig { return e.cfg }

// acquire counts one more open DB; it fails once the Env is closed.
func (e *Env) acquire() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("env: %w", ErrClosed)
	}
	e.open++
	return nil
}

func (e *Env) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.open--
}

// Close drops the Env's references on the caches. It returns ErrEnvInUse
// while a DB or materialization view of the Env is open, and ErrClosed the
// second time.
func (e *Env) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("env: %w", ErrClosed)
	}
	if e.open > 0 {
		return fmt.Errorf("%w: %d open", ErrEnvInUse, e.open)
	}
	e.closed = true
	e.fileCache.Unref()
	e.cache.Unref()
	return nil
}

// pebbleLogger routes Pebble's messages to slog, and its fatal ones to
// EnvConfig.Fatal.
type pebbleLogger struct {
	l     *slog.Logger
	dir   string
	fatal func(error)
}

// Infof logs at debug level: Pebble reports each open, WAL replay, flush
// and compaction, which at 16+ DBs a node would drown its log in.
func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug(fmt.Sprintf(format, args...))
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
}

// Fatalf must not return: Pebble calls it when its in-memory state can no
// longer be trusted (a failed MANIFEST write, a broken invariant), and code
// after the call assumes the process stops. It is the one failure this
// package cannot turn into an error.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("pebble fatal", "msg", msg)
	err := fmt.Errorf("%w in %s: %s", ErrFatal, p.dir, msg)
	if p.fatal != nil {
		p.fatal(err)
	}
	panic(err.Error())
}
