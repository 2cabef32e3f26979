package snapshot

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// pacingClock is a clock that moves only when a limited reader sleeps.
type pacingClock struct {
	t     time.Time
	slept time.Duration
}

func limitOnFakeClock(bytesPerSec int64) (*RateLimit, *pacingClock) {
	c := &pacingClock{t: time.Unix(1000, 0)}
	l := NewRateLimit(bytesPerSec)
	l.now = func() time.Time { return c.t }
	l.sleep = func(ctx context.Context, d time.Duration) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.t = c.t.Add(d)
		c.slept += d
		return nil
	}
	return l, c
}

func near(got, want time.Duration) bool {
	d := got - want
	return d > -time.Millisecond && d < time.Millisecond
}

// TestRateLimitPaces: reading 10 MiB at 1 MiB/s waits 10 s less the
// first burst; two readers share the limit; idling earns one burst only.
func TestRateLimitPaces(t *testing.T) {
	l, c := limitOnFakeClock(1 << 20)
	body := bytes.Repeat([]byte("x"), 10<<20)
	n, err := io.Copy(io.Discard, l.Reader(context.Background(), bytes.NewReader(body)))
	if err != nil || n != int64(len(body)) {
		t.Fatalf("copied %d, %v", n, err)
	}
	if want := 10*time.Second - 100*time.Millisecond; !near(c.slept, want) {
		t.Fatalf("10 MiB at 1 MiB/s slept %v, want %v", c.slept, want)
	}

	// An hour idle: one burst (0.1 s) goes at once, the rest is paced,
	// now for two readers taking turns.
	c.t, c.slept = c.t.Add(time.Hour), 0
	a := l.Reader(context.Background(), bytes.NewReader(body[:2<<20]))
	b := l.Reader(context.Background(), bytes.NewReader(body[:2<<20]))
	buf := make([]byte, 1<<20) // longer than a chunk: reads are cut to 64 KiB
	for done := 0; done < 2; {
		done = 0
		for _, r := range []io.Reader{a, b} {
			k, err := r.Read(buf)
			if k > rateChunk {
				t.Fatalf("read %d bytes at once, want at most %d", k, rateChunk)
			}
			if err == io.EOF {
				done++
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := 4*time.Second - 100*time.Millisecond; !near(c.slept, want) {
		t.Fatalf("2 × 2 MiB at 1 MiB/s slept %v, want %v", c.slept, want)
	}
}

// TestRateLimitCancel: a wait ends with the context.
func TestRateLimitCancel(t *testing.T) {
	l, _ := limitOnFakeClock(1024)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := io.Copy(io.Discard, l.Reader(ctx, bytes.NewReader(make([]byte, 1<<20))))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("copy under a cancelled context: %v, want context.Canceled", err)
	}
	// The real sleep too.
	l = NewRateLimit(1024)
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = io.Copy(io.Discard, l.Reader(ctx, bytes.NewReader(make([]byte, 1<<20))))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("copy past its deadline: %v, want context.DeadlineExceeded", err)
	}
}

// TestRateLimitNone: no limit reads straight through.
func TestRateLimitNone(t *testing.T) {
	for _, rate := range []int64{0, -1} {
		l := NewRateLimit(rate)
		if l != nil {
			t.Fatalf("NewRateLimit(%d) = %v", rate, l)
		}
		r := bytes.NewReader(nil)
		if l.Reader(context.Background(), r) != io.Reader(r) {
			t.Fatal("a nil limit wrapped the reader")
		}
	}
	if l := NewRateLimit(5 << 20); l == nil || l.perSec != 5<<20 {
		t.Fatalf("NewRateLimit(5 MiB) = %+v", l)
	}
}

// TestRateLimitWriter: writes are paced as reads are, in chunks, and a
// wait ends with the context.
func TestRateLimitWriter(t *testing.T) {
	l, c := limitOnFakeClock(1 << 20)
	var dst bytes.Buffer
	w := l.Writer(context.Background(), &dst)
	body := bytes.Repeat([]byte("y"), 3<<20+5)
	if n, err := w.Write(body); err != nil || n != len(body) {
		t.Fatalf("wrote %d, %v", n, err)
	}
	if !bytes.Equal(dst.Bytes(), body) {
		t.Fatal("written bytes differ")
	}
	if want := 3*time.Second + 5*time.Second/(1<<20) - 100*time.Millisecond; !near(c.slept, want) {
		t.Fatalf("3 MiB at 1 MiB/s slept %v, want %v", c.slept, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n, err := l.Writer(ctx, io.Discard).Write(body); !errors.Is(err, context.Canceled) || n >= len(body) {
		t.Fatalf("write under a cancelled context: %d, %v", n, err)
	}
	if NewRateLimit(0).Writer(context.Background(), &dst) != io.Writer(&dst) {
		t.Fatal("a nil limit wrapped the writer")
	}
}
