// Package dirstate describes a directory tree's files for tests that must
// show a tree was not changed: each file's path, size, modification time
// and a hash of its bytes.
package dirstate

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Describe returns one line per regular file under dir, in lexical order:
// its path relative to dir, size, modification time (ns) and SHA-256. Two
// descriptions are equal when no file was added, removed, written or
// touched.
func Describe(dir string) (string, error) {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(&b, "%s %d %d %x\n", rel, info.Size(), info.ModTime().UnixNano(), h.Sum(nil))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("dirstate: %w", err)
	}
	return b.String(), nil
}

// Must is Describe for tests: a failure to read the tree fails tb.
func Must(tb testing.TB, dir string) string {
	tb.Helper()
	s, err := Describe(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
