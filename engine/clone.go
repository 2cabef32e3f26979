package engine

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Clone makes dst, a directory that must not exist, a DB directory of its
// own holding what the DB directory src holds (a materialization): SSTs
// and blob files, which Pebble never changes once written, are hard links
// of src's; every other file (MANIFEST, OPTIONS, markers), which an open
// DB appends to or replaces, is copied. Opening dst read-write therefore
// never changes a byte of src, and costs no copy of the data. The files
// and dst are fsynced before Clone returns. On error dst is removed.
func Clone(fs vfs.FS, src, dst string) (err error) {
	if _, err := fs.Stat(dst); err == nil {
		return fmt.Errorf("%w: clone of %s: %s", ErrExists, src, dst)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("engine: clone of %s: stat %s: %w", src, dst, err)
	}
	files, err := listFiles(fs, src)
	if err != nil {
		return fmt.Errorf("engine: clone of %s: %w", src, err)
	}
	if err := fs.MkdirAll(dst, 0o750); err != nil {
		return fmt.Errorf("engine: clone of %s: %w", src, err)
	}
	defer func() {
		if err != nil {
			_ = fs.RemoveAll(dst)
		}
	}()
	for _, f := range files {
		from, to := fs.PathJoin(src, f.Name), fs.PathJoin(dst, f.Name)
		if Immutable(f.Name) {
			if err := vfs.LinkOrCopy(fs, from, to); err != nil {
				return fmt.Errorf("engine: clone of %s: link %s: %w", src, f.Name, err)
			}
			continue
		}
		// vfs.Copy fsyncs the copy.
		if err := vfs.Copy(fs, from, to); err != nil {
			return fmt.Errorf("engine: clone of %s: copy %s: %w", src, f.Name, err)
		}
	}
	if err := syncDir(fs, dst); err != nil {
		return fmt.Errorf("engine: clone of %s: %w", src, err)
	}
	return syncDir(fs, fs.PathDir(dst))
}

// Immutable says whether a file of a DB directory, by its name, is one
// Pebble never changes after writing it (an SST or a blob file): such a
// file can be shared between directories by hard links, and its bytes
// identify it.
func Immutable(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return d.Close()
}
