package process

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cutkv/cutkv/client"
)

// writeLog is what writers learned about their writes.
type writeLog struct {
	mu      sync.Mutex
	acked   map[string]string // key -> value, Put returned nil
	unknown map[string]string // key -> value, ErrOutcomeUnknown
	refused int               // definitely not applied (ErrUnavailable and the like)
	other   []error           // anything else: reported by the test
}

func newWriteLog() *writeLog {
	return &writeLog{acked: map[string]string{}, unknown: map[string]string{}}
}

// record files the outcome err of Put(key, value).
func (l *writeLog) record(key, value string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.acked[key] = value
	case errors.Is(err, client.ErrOutcomeUnknown):
		l.unknown[key] = value
	case errors.Is(err, client.ErrUnavailable):
		l.refused++
	default:
		l.other = append(l.other, err)
	}
}

func (l *writeLog) counts() (acked, unknown, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked), len(l.unknown), l.refused
}

// runWriters starts n writers that put unique keys under prefix until ctx
// ends, each through its own client of endpoints. The returned function
// waits for them to stop.
func runWriters(ctx context.Context, t testing.TB, c *Cluster, n int, prefix string, log *writeLog) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		cl := c.Client()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				// Every attempt uses a new key, so that a value read back
				// names exactly one attempt.
				key := fmt.Sprintf("%s/w%d/%07d", prefix, w, i)
				value := fmt.Sprintf("%s@%d", key, time.Now().UnixNano())
				octx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := cl.Put(octx, []byte(key), []byte(value))
				cancel()
				if err != nil && ctx.Err() != nil {
					// Stopped by the test: if the write was sent, its
					// outcome is unknown.
					if errors.Is(err, client.ErrOutcomeUnknown) {
						log.record(key, value, err)
					}
					return
				}
				log.record(key, value, err)
			}
		}()
	}
	return wg.Wait
}

// checkWrites asserts that every acknowledged write reads back its value
// through the client (every key) and through kvctl (a sample), that an
// unknown-outcome write reads back as its value or as missing, and that a
// scan of prefix finds no key nobody wrote.
func checkWrites(t *testing.T, c *Cluster, prefix string, log *writeLog, rng *rand.Rand, kvctlSample int) {
	t.Helper()
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, err := range log.other {
		t.Errorf("write failed neither definitely nor with unknown outcome: %v", err)
	}
	cl := c.Client()
	began := time.Now()

	// Every acknowledged key, by Get, a few readers at once.
	keys := make([]string, 0, len(log.acked))
	for k := range log.acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var lost, wrong atomic.Int64
	var mu sync.Mutex
	var reports []string
	report := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if len(reports) < 20 {
			reports = append(reports, s)
		}
	}
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for r := 0; r < 8; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(keys) {
					return
				}
				k := keys[i]
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				kv, err := cl.Get(ctx, []byte(k))
				cancel()
				switch {
				case errors.Is(err, client.ErrNotFound):
					lost.Add(1)
					report(fmt.Sprintf("acknowledged %q is missing", k))
				case err != nil:
					wrong.Add(1)
					report(fmt.Sprintf("get %q: %v", k, err))
				case string(kv.Value) != log.acked[k]:
					wrong.Add(1)
					report(fmt.Sprintf("acknowledged %q = %q, read %q", k, log.acked[k], kv.Value))
				}
			}
		}()
	}
	wg.Wait()
	for _, r := range reports {
		t.Error(r)
	}
	if lost.Load() > 0 || wrong.Load() > 0 {
		t.Errorf("%d of %d acknowledged writes lost, %d read wrong or failed", lost.Load(), len(keys), wrong.Load())
	}

	// The whole prefix by scan: nothing but what was written.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	kvs, err := cl.ScanAll(ctx, []byte(prefix+"/"), []byte(prefix+"0"))
	cancel()
	if err != nil {
		t.Fatalf("scan %s/: %v", prefix, err)
	}
	inScan := map[string]string{}
	for _, kv := range kvs {
		k, v := string(kv.Key), string(kv.Value)
		inScan[k] = v
		want, ok := log.acked[k]
		if !ok {
			want, ok = log.unknown[k]
		}
		switch {
		case !ok:
			t.Errorf("scan found %q = %q, which no write acknowledged or left unknown", k, v)
		case v != want:
			t.Errorf("scan found %q = %q, written %q", k, v, want)
		}
	}
	for k := range log.acked {
		if _, ok := inScan[k]; !ok {
			t.Errorf("scan misses acknowledged %q", k)
		}
	}
	unknownApplied := 0
	for k := range log.unknown {
		if _, ok := inScan[k]; ok {
			unknownApplied++
		}
	}

	// A sample through kvctl, each through one random running node.
	var up []string
	for _, n := range c.Nodes {
		if n.Running() {
			up = append(up, n.GRPC)
		}
	}
	for i := 0; i < kvctlSample && len(keys) > 0 && len(up) > 0; i++ {
		k := keys[rng.IntN(len(keys))]
		ep := up[rng.IntN(len(up))]
		r := runKvctl(t, nil, nil, "--endpoints", ep, "--timeout", "15s", "get", k)
		if r.code != 0 || r.stdout != log.acked[k]+"\n" {
			t.Errorf("acknowledged %q = %q; %v", k, log.acked[k], r)
		}
	}
	t.Logf("verified %d acknowledged writes by get and scan, %d by kvctl, in %v; %d of %d unknown-outcome writes were applied",
		len(keys), min(kvctlSample, len(keys)), time.Since(began).Round(time.Millisecond), unknownApplied, len(log.unknown))
}

// TestNoAckedWriteLostAcrossKill9 checks DESIGN.md invariant 1 with real
// processes: writers put unique keys while a nemesis SIGKILLs a random node
// and restarts it (at most one down at a time), and once SIGKILLs all three
// and restarts them. Every acknowledged write must read back afterwards.
func TestNoAckedWriteLostAcrossKill9(t *testing.T) {
	soak := SoakDuration(t)
	rng := NewRand(t)
	c := NewCluster(t, Spec{Bin: bin.Kvnode})

	log := newWriteLog()
	ctx, stop := context.WithCancel(context.Background())
	wait := runWriters(ctx, t, c, 4, "soak", log)
	defer func() { stop(); wait() }() // also when the nemesis fails the test

	// pause waits d, or less when the soak ends first.
	began := time.Now()
	end := began.Add(soak)
	pause := func(lo, hi time.Duration) {
		d := lo + time.Duration(rng.Int64N(int64(hi-lo)))
		time.Sleep(min(d, max(time.Until(end), 0)))
	}
	var singleKills, fullKills int
	killAll := func() {
		t.Logf("%v: SIGKILL all nodes", time.Since(began).Round(time.Millisecond))
		c.Kill9All()
		fullKills++
		pause(100*time.Millisecond, 500*time.Millisecond)
		c.StartAll()
		t.Logf("%v: all nodes ready again", time.Since(began).Round(time.Millisecond))
	}
	for time.Now().Before(end) {
		if fullKills == 0 && time.Since(began) > soak*2/5 {
			killAll()
			continue
		}
		pause(300*time.Millisecond, 1200*time.Millisecond)
		n := c.Nodes[rng.IntN(len(c.Nodes))]
		n.Kill9()
		singleKills++
		pause(100*time.Millisecond, 800*time.Millisecond)
		n.Restart()
	}
	if fullKills == 0 {
		killAll()
	}
	// The cluster serves again after the last restart.
	lastAcked, _, _ := log.counts()
	if ok, _ := WaitFor(10*time.Second, func() (bool, string) {
		a, _, _ := log.counts()
		return a >= lastAcked+20, ""
	}); !ok {
		t.Errorf("fewer than 20 writes acknowledged within 10s of the last restart")
	}
	stop()
	wait()
	acked, unknown, refused := log.counts()
	t.Logf("soak %v (ran %v): %d writes acknowledged, %d with unknown outcome, %d refused; %d single-node SIGKILLs, %d SIGKILLs of all nodes",
		soak, time.Since(began).Round(time.Millisecond), acked, unknown, refused, singleKills, fullKills)

	checkWrites(t, c, "soak", log, rng, 10)

	// Counts, not speed: the run must have exercised something.
	if minAcked := 200; acked < minAcked {
		t.Errorf("only %d writes acknowledged; want at least %d for the check to mean something", acked, minAcked)
	}
	if minKills := max(1, int(soak/(4*time.Second))); singleKills < minKills {
		t.Errorf("only %d single-node SIGKILLs; want at least %d", singleKills, minKills)
	}
	if fullKills != 1 {
		t.Errorf("%d SIGKILLs of all nodes; want 1", fullKills)
	}
}
