//go:build failpoints

package clock

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Enabled reports whether this build lets a harness skew the clock.
const Enabled = true

// PollInterval is how often the skew file is read.
const PollInterval = 100 * time.Millisecond

// MaxOffset bounds the offset a skew file may set, either way: a day is
// past every timeout and retention the protocols have, and far from the
// ends of time.Time.
const MaxOffset = 24 * time.Hour

var offset atomic.Int64 // nanoseconds

// Now is the wall clock plus the offset the skew file sets. The result
// carries no monotonic reading: it is a wall-clock time, and compares as
// one across a change of offset.
func Now() time.Time { return time.Now().Add(Offset()).Round(0) }

// Offset is the offset Now adds.
func Offset() time.Duration { return time.Duration(offset.Load()) }

func init() {
	if path := os.Getenv(SkewFileEnv); path != "" {
		w := &watcher{path: path}
		w.poll()
		go func() {
			for range time.Tick(PollInterval) {
				w.poll()
			}
		}()
	}
}

// watcher applies the skew file's content to the offset. It is used by
// one goroutine at a time.
type watcher struct {
	path string
	seen string // the content last applied or refused
	read bool   // seen is valid
}

// poll reads the file once and applies its offset when the content
// changed since the last poll.
func (w *watcher) poll() {
	b, err := os.ReadFile(w.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if !w.read || w.seen != "\x00"+err.Error() {
			slog.Default().Error("clock skew file unreadable; the offset stays", "file", w.path, "offset", Offset(), "error", err)
			w.seen, w.read = "\x00"+err.Error(), true
		}
		return
	}
	s := strings.TrimSpace(string(b))
	if w.read && s == w.seen {
		return
	}
	w.seen, w.read = s, true
	var d time.Duration
	if s != "" {
		if d, err = time.ParseDuration(s); err == nil && (d > MaxOffset || d < -MaxOffset) {
			err = fmt.Errorf("offset %v beyond ±%v", d, MaxOffset)
		}
		if err != nil {
			slog.Default().Error("clock skew file holds no duration within ±"+MaxOffset.String()+" (write one such as -7m30s); the offset stays",
				"file", w.path, "content", s, "offset", Offset(), "error", err)
			return
		}
	}
	if old := time.Duration(offset.Swap(int64(d))); old != d {
		slog.Default().Info("clock skew set", "offset", d, "file", w.path)
	}
}

// Set sets the offset in this process (tests), as a change of the skew
// file would, and logs it the same way. The watcher, if any, applies the
// file again only when its content changes.
func Set(d time.Duration) error {
	if old := time.Duration(offset.Swap(int64(d))); old != d {
		slog.Default().Info("clock skew set", "offset", d, "file", "")
	}
	return nil
}
