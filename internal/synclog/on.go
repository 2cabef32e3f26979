//go:build failpoints

package synclog

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Enabled reports whether this build records synced lengths (when
// CUTKV_SYNCED_LOG is set).
const Enabled = true

var rec struct {
	once sync.Once
	mu   sync.Mutex
	f    *os.File // nil: not recording
	// last is the length last written for each file: the WAL records its
	// whole directory after every batch, and only the tail has grown, so
	// a line equal to the file's last one is not written again (the log's
	// last line per file is what counts). REQUIRES: mu held.
	last map[fileID]int64
}

func recording() bool {
	rec.once.Do(func() {
		if p := os.Getenv(EnvVar); p != "" {
			rec.f, _ = os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		}
	})
	return rec.f != nil
}

// record appends path's identity and current size as durable. Failures
// are ignored: the log serves a test, and a missing line only makes the
// simulated loss smaller.
func record(path string) {
	var st syscall.Stat_t
	if recording() && syscall.Stat(path, &st) == nil {
		write(&st)
	}
}

// recordFile is record for an open file, by its descriptor (the name may
// have been renamed since).
func recordFile(f vfs.File, name string) {
	if !recording() {
		return
	}
	if fd := f.Fd(); fd != vfs.InvalidFd {
		var st syscall.Stat_t
		if syscall.Fstat(int(fd), &st) == nil {
			write(&st)
		}
		return
	}
	record(name)
}

func write(st *syscall.Stat_t) {
	id := fileID{uint64(st.Dev), st.Ino}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if n, ok := rec.last[id]; ok && n == st.Size {
		return
	}
	if rec.last == nil {
		rec.last = map[fileID]int64{}
	}
	if _, err := fmt.Fprintf(rec.f, "%d %d %d\n", id.dev, id.ino, st.Size); err == nil {
		rec.last[id] = st.Size
	}
}

// RecordDir records every regular file directly in dir as durable at its
// current length (the WAL, after fsyncing a batch: see doc.go).
func RecordDir(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			record(filepath.Join(dir, e.Name()))
		}
	}
}

// WrapFS returns fs with every file it creates or opens for writing
// recorded: at length 0 when created, at its length after each Sync,
// SyncData or SyncTo that synced the whole file.
func WrapFS(fs vfs.FS) vfs.FS { return syncFS{fs} }

type syncFS struct{ vfs.FS }

func (s syncFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := s.FS.Create(name, cat)
	if err != nil {
		return nil, err
	}
	recordFile(f, name)
	return syncFile{f, name}, nil
}

func (s syncFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := s.FS.ReuseForWrite(oldname, newname, cat)
	if err != nil {
		return nil, err
	}
	return syncFile{f, newname}, nil
}

func (s syncFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := s.FS.OpenReadWrite(name, cat, opts...)
	if err != nil {
		return nil, err
	}
	return syncFile{f, name}, nil
}

type syncFile struct {
	vfs.File
	name string
}

func (f syncFile) Sync() error {
	err := f.File.Sync()
	if err == nil {
		recordFile(f.File, f.name)
	}
	return err
}

func (f syncFile) SyncData() error {
	err := f.File.SyncData()
	if err == nil {
		recordFile(f.File, f.name)
	}
	return err
}

func (f syncFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if err == nil && full {
		recordFile(f.File, f.name)
	}
	return full, err
}
