package chaos

import (
	"io"
	"os"
	"strings"
)

// The nodes' logs, as the faults read them for their proofs.

// fileSize is path's size, 0 when it cannot be read: the offset a
// proof reads a log from.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logSince returns what the file at path holds from offset on ("" if it
// cannot be read).
func logSince(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, offset, 1<<40))
	if err != nil {
		return ""
	}
	return string(b)
}

// lastLines returns the last k lines of s.
func lastLines(s string, k int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > k {
		lines = lines[len(lines)-k:]
	}
	return strings.Join(lines, "\n")
}

// tail returns the last n lines of a file, or why it cannot be read.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return lastLines(string(b), n)
}
