package discovery

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// newMemberlistLogger returns a standard logger whose lines go to l at
// debug level. memberlist is chatty (it logs an error for every failed
// probe of a dead member, for instance); its own level travels as the
// attribute "memberlist_level" so it can still be filtered on.
func newMemberlistLogger(l *slog.Logger) *log.Logger {
	return log.New(logBridge{l}, "", 0)
}

type logBridge struct{ l *slog.Logger }

// Write logs one line; log.Logger calls it once per message.
func (b logBridge) Write(p []byte) (int, error) {
	ctx := context.Background()
	if b.l.Enabled(ctx, slog.LevelDebug) {
		level, msg := splitMemberlistLine(string(p))
		b.l.DebugContext(ctx, msg, "memberlist_level", level)
	}
	return len(p), nil
}

// splitMemberlistLine splits "[WARN] memberlist: text\n" into "WARN" and
// "text". A line without a bracketed level has level "".
func splitMemberlistLine(line string) (level, msg string) {
	msg = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(msg, "[") {
		if end := strings.IndexByte(msg, ']'); end > 0 {
			level = msg[1:end]
			msg = strings.TrimLeft(msg[end+1:], " ")
		}
	}
	msg = strings.TrimPrefix(msg, "memberlist: ")
	return level, msg
}
