//go:build !failpoints

package synclog

import "github.com/cockroachdb/pebble/v2/vfs"

// Enabled reports whether this build records synced lengths.
const Enabled = false

// WrapFS returns fs: this build records nothing.
func WrapFS(fs vfs.FS) vfs.FS { return fs }

// RecordDir does nothing in a build without the failpoints tag.
func RecordDir(string) {}
