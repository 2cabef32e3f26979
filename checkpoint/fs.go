package checkpoint

import (
	"io"
	"os"
	"path/filepath"
	"strings"
)

// FS is the file system materialization files live in. OS is the real
// one; tests inject failures and crashes through their own.
type FS interface {
	// CreateTemp creates a new file for writing in dir, named by pattern as
	// os.CreateTemp does, and returns it with its path.
	CreateTemp(dir, pattern string) (File, string, error)
	// Open opens a file for reading.
	Open(path string) (File, error)
	// Rename atomically replaces newPath with oldPath.
	Rename(oldPath, newPath string) error
	// Remove removes a file.
	Remove(path string) error
	// ReadDir returns the names of the files in dir, and of the
	// directories that are checkpoint directories or their temporary
	// names (dir.go).
	ReadDir(dir string) ([]string, error)
	// SyncDir makes the directory's entries (creations, renames, removals)
	// durable.
	SyncDir(dir string) error
}

// File is an open file of an FS.
type File interface {
	io.Reader
	io.Writer
	io.Closer
	// Sync makes what was written durable.
	Sync() error
}

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) CreateTemp(dir, pattern string) (File, string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, "", err
	}
	return f, f.Name(), nil
}

func (osFS) Open(path string) (File, error) { return os.Open(path) }

func (osFS) Rename(oldPath, newPath string) error { return os.Rename(oldPath, newPath) }

func (osFS) Remove(path string) error { return os.Remove(path) }

func (osFS) ReadDir(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(es))
	for _, e := range es {
		if e.Type().IsRegular() || e.IsDir() && strings.Contains(e.Name(), dirExt) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
