package snapshot

import (
	"context"
	"io"
	"sync"
	"time"
)

// RateLimit paces the bytes a node reads and writes for snapshots to at
// most a number of bytes per second, shared by every reader and writer
// that goes through it: a full snapshot, or the new bases after a
// materialization round, otherwise compete for the disk and the CPU the
// node serves writes with. It lets a burst of a tenth of a second through
// after idling. A nil *RateLimit does not limit.
type RateLimit struct {
	perSec float64
	burst  time.Duration
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error

	mu sync.Mutex
	// next is when the bytes admitted so far have drained at perSec.
	next time.Time
}

// NewRateLimit returns a limit of bytesPerSec, or nil (no limit) for 0
// or less.
func NewRateLimit(bytesPerSec int64) *RateLimit {
	if bytesPerSec <= 0 {
		return nil
	}
	return &RateLimit{perSec: float64(bytesPerSec), burst: 100 * time.Millisecond, now: time.Now, sleep: sleepCtx}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// rateChunk bounds one read, so one Read never waits much longer than
// its share: 64 KiB at 1 MiB/s is 62 ms.
const rateChunk = 64 << 10

// Reader returns r read through the limit; a wait ends early, with the
// context's error, when ctx ends. A nil limit returns r.
func (l *RateLimit) Reader(ctx context.Context, r io.Reader) io.Reader {
	if l == nil {
		return r
	}
	return &limitedReader{ctx: ctx, r: r, l: l}
}

// admit books n bytes and returns how long their reader must wait.
func (l *RateLimit) admit(n int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if floor := now.Add(-l.burst); l.next.Before(floor) {
		l.next = floor // idle: at most a burst's worth is let through at once
	}
	l.next = l.next.Add(time.Duration(float64(n) / l.perSec * float64(time.Second)))
	return l.next.Sub(now)
}

// Writer returns w written through the limit, as Reader reads. A nil
// limit returns w.
func (l *RateLimit) Writer(ctx context.Context, w io.Writer) io.Writer {
	if l == nil {
		return w
	}
	return &limitedWriter{ctx: ctx, w: w, l: l}
}

type limitedWriter struct {
	ctx context.Context
	w   io.Writer
	l   *RateLimit
}

func (lw *limitedWriter) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		chunk := min(len(p)-done, rateChunk)
		if wait := lw.l.admit(chunk); wait > 0 {
			if err := lw.l.sleep(lw.ctx, wait); err != nil {
				return done, err
			}
		}
		n, err := lw.w.Write(p[done : done+chunk])
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

type limitedReader struct {
	ctx context.Context
	r   io.Reader
	l   *RateLimit
}

func (lr *limitedReader) Read(p []byte) (int, error) {
	if len(p) > rateChunk {
		p = p[:rateChunk]
	}
	n, err := lr.r.Read(p)
	if n > 0 {
		if wait := lr.l.admit(n); wait > 0 {
			if serr := lr.l.sleep(lr.ctx, wait); serr != nil {
				return n, serr
			}
		}
	}
	return n, err
}
