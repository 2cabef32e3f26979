package discovery

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestSplitMemberlistLine(t *testing.T) {
	for _, tc := range []struct {
		line, level, msg string
	}{
		{"[DEBUG] memberlist: Initiating push/pull sync with: n1 127.0.0.1:1\n", "DEBUG", "Initiating push/pull sync with: n1 127.0.0.1:1"},
		{"[ERR] Failed to shutdown transport: x\n", "ERR", "Failed to shutdown transport: x"},
		{"Err: Could not set the deadline: y", "", "Err: Could not set the deadline: y"},
		{"[WARN]memberlist: tight\r\n", "WARN", "tight"},
		{"[unterminated", "", "[unterminated"},
	} {
		level, msg := splitMemberlistLine(tc.line)
		if level != tc.level || msg != tc.msg {
			t.Errorf("splitMemberlistLine(%q) = %q, %q; want %q, %q", tc.line, level, msg, tc.level, tc.msg)
		}
	}
}

func TestMemberlistLoggerIsDebug(t *testing.T) {
	var buf bytes.Buffer
	l := newMemberlistLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Printf("[ERR] memberlist: Failed to send ping: %s", "boom")
	out := buf.String()
	if !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, `msg="Failed to send ping: boom"`) ||
		!strings.Contains(out, "memberlist_level=ERR") {
		t.Fatalf("log line = %q", out)
	}

	buf.Reset()
	l = newMemberlistLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Printf("[WARN] memberlist: hidden")
	if buf.Len() != 0 {
		t.Fatalf("debug line logged at info level: %q", buf.String())
	}
}
