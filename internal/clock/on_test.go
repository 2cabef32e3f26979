//go:build failpoints

package clock

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// captureLog sends slog.Default to a buffer for the test.
func captureLog(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return &buf
}

func TestSkewFileSetsOffset(t *testing.T) {
	buf := captureLog(t)
	t.Cleanup(func() { offset.Store(0) })
	path := filepath.Join(t.TempDir(), "skew")
	w := &watcher{path: path}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sets := func() int { return strings.Count(buf.String(), "clock skew set") }

	w.poll() // no file: no offset, nothing logged
	if Offset() != 0 || buf.Len() != 0 {
		t.Fatalf("missing file: offset %v, log %q", Offset(), buf.String())
	}
	for i, step := range []struct {
		content string
		want    time.Duration
		sets    int // "clock skew set" lines so far
	}{
		{"15m\n", 15 * time.Minute, 1},
		{"15m", 15 * time.Minute, 1}, // same offset: not logged again
		{"-7m30s", -7*time.Minute - 30*time.Second, 2},
		{"soon", -7*time.Minute - 30*time.Second, 2}, // refused, offset kept
		{"-25h", -7*time.Minute - 30*time.Second, 2}, // beyond MaxOffset: refused
		{"", 0, 3},
		{"1m", time.Minute, 4},
	} {
		write(step.content)
		w.poll()
		w.poll() // a second poll of the same content changes nothing
		if Offset() != step.want || sets() != step.sets {
			t.Fatalf("step %d (%q): offset %v, want %v; %d lines 'clock skew set', want %d; log:\n%s",
				i, step.content, Offset(), step.want, sets(), step.sets, buf.String())
		}
		if skew := time.Until(Now()); skew < step.want-time.Second || skew > step.want+time.Second {
			t.Fatalf("step %d: Now is %v from time.Now, want about %v", i, skew, step.want)
		}
	}
	if !strings.Contains(buf.String(), "offset=1m0s") || strings.Count(buf.String(), "holds no duration") != 2 {
		t.Fatalf("log lacks the offset or logs the refusal other than once:\n%s", buf.String())
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	w.poll()
	if Offset() != 0 {
		t.Fatalf("removed file: offset %v, want 0", Offset())
	}
}

func TestNowIsAWallClock(t *testing.T) {
	if s := Now().String(); strings.Contains(s, "m=") {
		t.Fatalf("Now carries a monotonic reading: %s", s)
	}
}

func TestSet(t *testing.T) {
	buf := captureLog(t)
	t.Cleanup(func() { offset.Store(0) })
	if err := Set(-3 * time.Minute); err != nil || Offset() != -3*time.Minute {
		t.Fatalf("Set(-3m): %v, offset %v", err, Offset())
	}
	if err := Set(-3 * time.Minute); err != nil || strings.Count(buf.String(), "clock skew set") != 1 {
		t.Fatalf("Set twice: %v; log:\n%s", err, buf.String())
	}
}
