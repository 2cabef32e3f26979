package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// preloadWorkers is the least number of workers that write the keyspace
// before get and mixed: the preload is not measured, so it need not be as
// slow as one client.
const preloadWorkers = 32

// errTooManyErrors stops a run at Config.MaxErrors failed operations.
var errTooManyErrors = errors.New("too many failed operations")

// runner runs one benchmark: connections, workers and the phases
// (preload, warmup, measured).
type runner struct {
	cfg     *Config
	drv     Driver
	conns   []Conn
	workers []*worker // the first Config.Clients are the measured ones
	pacer   *pacer    // nil without --rate
	stderr  io.Writer
	// ctx ends when the run is interrupted; operations in flight are then
	// cancelled and not counted.
	ctx context.Context
}

// worker is one client: at most one operation in flight.
type worker struct {
	conn  Conn
	rng   *rand.Rand
	key   []byte // reused for every operation
	value []byte
}

// phase is one stretch of load.
type phase struct {
	name string
	// end: no operation starts at or after it; zero means no limit.
	end time.Time
	// total: at most this many operations start; 0 means no limit.
	total int64
	// paced: obey --rate.
	paced bool
	// pick returns the operation and key index for the seq-th operation
	// of the phase (seq is -1 without total).
	pick func(w *worker, seq int64) (opKind, int64)
	// workers is how many workers run the phase; 0 means Config.Clients.
	workers int
}

// opStats is what a phase measured for one kind of operation.
type opStats struct {
	hist     *histogram // latencies of successful operations
	notFound int64      // successful Gets of a missing key
	errs     [numErrKinds]int64
	// sample is the first error of each kind, as text.
	sample [numErrKinds]string
}

func newOpStats() *opStats { return &opStats{hist: newHistogram()} }

func (s *opStats) merge(o *opStats) {
	s.hist.merge(o.hist)
	s.notFound += o.notFound
	for k := range s.errs {
		s.errs[k] += o.errs[k]
		if s.sample[k] == "" {
			s.sample[k] = o.sample[k]
		}
	}
}

func (s *opStats) errors() int64 {
	var n int64
	for _, e := range s.errs {
		n += e
	}
	return n
}

// phaseResult is the outcome of one phase.
type phaseResult struct {
	elapsed time.Duration
	ops     [numOps]*opStats
	// stopped is why the phase ended before its end or total, if it did.
	stopped error
}

func (p *phaseResult) all() *opStats {
	s := newOpStats()
	for _, o := range p.ops {
		s.merge(o)
	}
	return s
}

// counters are shared by the workers of a phase, for the progress line
// and for the stop conditions.
type counters struct {
	claimed atomic.Int64
	done    atomic.Int64
	errs    atomic.Int64
	stop    atomic.Bool
}

func newRunner(ctx context.Context, cfg *Config, drv Driver, conns []Conn, stderr io.Writer) *runner {
	r := &runner{cfg: cfg, drv: drv, conns: conns, stderr: stderr, ctx: ctx}
	if cfg.Rate > 0 {
		r.pacer = &pacer{interval: time.Duration(float64(time.Second) / cfg.Rate)}
	}
	for i := range max(cfg.Clients, preloadWorkers) {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
		w := &worker{
			conn:  conns[i%len(conns)],
			rng:   rng,
			key:   make([]byte, cfg.KeySize),
			value: make([]byte, cfg.ValueSize),
		}
		for j := range w.value {
			w.value[j] = byte(rng.Uint32())
		}
		r.workers = append(r.workers, w)
	}
	return r
}

// randomPick is the pick function of warmup and measured phases.
func (r *runner) randomPick(w *worker, _ int64) (opKind, int64) {
	k := workloads[r.cfg.Workload].next(r.cfg, w.rng)
	return k, w.rng.Int64N(r.cfg.Keyspace)
}

// preloadPick writes key seq.
func preloadPick(_ *worker, seq int64) (opKind, int64) { return opPut, seq }

// runPhase runs the workers until the phase ends and merges their stats.
func (r *runner) runPhase(p phase) *phaseResult {
	var c counters
	workers := r.workers[:r.cfg.Clients]
	if p.workers > 0 {
		workers = r.workers[:p.workers]
	}
	stats := make([][numOps]*opStats, len(workers))
	start := time.Now()
	stopProgress := r.startProgress(p.name, start, &c)
	var wg sync.WaitGroup
	for i, w := range workers {
		for k := range stats[i] {
			stats[i][k] = newOpStats()
		}
		wg.Go(func() { r.work(w, &p, &c, &stats[i]) })
	}
	wg.Wait()
	res := &phaseResult{elapsed: time.Since(start)}
	stopProgress()
	for k := range res.ops {
		res.ops[k] = newOpStats()
		for i := range stats {
			res.ops[k].merge(stats[i][k])
		}
	}
	switch {
	case r.ctx.Err() != nil:
		res.stopped = fmt.Errorf("interrupted: %w", context.Cause(r.ctx))
	case r.cfg.MaxErrors > 0 && c.errs.Load() >= r.cfg.MaxErrors:
		res.stopped = fmt.Errorf("%w: %d (--max-errors %d)", errTooManyErrors, c.errs.Load(), r.cfg.MaxErrors)
	}
	return res
}

// work is one worker's loop.
func (r *runner) work(w *worker, p *phase, c *counters, stats *[numOps]*opStats) {
	for !c.stop.Load() && r.ctx.Err() == nil {
		seq := int64(-1)
		if p.total > 0 {
			if seq = c.claimed.Add(1) - 1; seq >= p.total {
				return
			}
		}
		if p.paced && r.pacer != nil && !r.pacer.wait(r.ctx, p.end) {
			return
		}
		if !p.end.IsZero() && !time.Now().Before(p.end) {
			return
		}
		kind, idx := p.pick(w, seq)
		putKey(w.key, idx)
		ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
		found := true
		var err error
		start := time.Now()
		switch kind {
		case opPut:
			err = w.conn.Put(ctx, w.key, w.value)
		case opGet:
			found, err = w.conn.Get(ctx, w.key)
		}
		took := time.Since(start)
		cancel()
		if err != nil && r.ctx.Err() != nil {
			return // interrupted: the failure says nothing of the cluster
		}
		s := stats[kind]
		if err != nil {
			k := r.drv.Classify(err)
			s.errs[k]++
			if s.sample[k] == "" {
				s.sample[k] = err.Error()
			}
			if n := c.errs.Add(1); r.cfg.MaxErrors > 0 && n >= r.cfg.MaxErrors {
				c.stop.Store(true)
			}
			continue
		}
		s.hist.record(int64(took))
		if !found {
			s.notFound++
		}
		c.done.Add(1)
	}
}

// startProgress prints a progress line every cfg.Progress until the
// returned func is called: elapsed time, operations done, operations per
// second over the last interval, and errors.
func (r *runner) startProgress(name string, start time.Time, c *counters) func() {
	if r.cfg.Progress <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(r.cfg.Progress)
		defer t.Stop()
		last, lastOps := start, int64(0)
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				ops := c.done.Load()
				rate := float64(ops-lastOps) / now.Sub(last).Seconds()
				fmt.Fprintf(r.stderr, "kvbench: %-7s elapsed=%-6s ops=%-9d ops/s=%-8.0f errors=%d\n",
					name, now.Sub(start).Round(100*time.Millisecond), ops, rate, c.errs.Load())
				last, lastOps = now, ops
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// pacer spaces operations of all workers evenly to a rate. It does not
// catch up: time lost while the workers were slower than the rate is not
// made up by a burst.
type pacer struct {
	interval time.Duration

	mu   sync.Mutex
	next time.Time // REQUIRES mu; the next free slot
}

// wait blocks until the caller's slot. It returns false, at once, when
// the slot is at or after end (unless end is zero) or ctx ends first.
func (p *pacer) wait(ctx context.Context, end time.Time) bool {
	p.mu.Lock()
	now := time.Now()
	slot := p.next
	if slot.Before(now) {
		slot = now
	}
	p.next = slot.Add(p.interval)
	p.mu.Unlock()
	if !end.IsZero() && !slot.Before(end) {
		return false
	}
	d := time.Until(slot)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// benchmark runs cfg (validated) against its target and returns the
// result. A result is returned with an error when the run stopped early
// (interrupted, too many errors), so that what was measured is still
// shown.
func benchmark(ctx context.Context, cfg *Config, stderr io.Writer) (*Result, error) {
	drv := drivers[cfg.Target]
	wl := workloads[cfg.Workload]
	hc := &http.Client{}
	var before []walSample
	for _, u := range cfg.MetricsURLs {
		// Fail before loading the cluster if a metrics URL is wrong.
		s, err := scrapeWAL(ctx, hc, u)
		if err != nil {
			return nil, err
		}
		before = append(before, s)
	}

	conns, err := connectAll(ctx, drv, cfg.Endpoints, cfg.Conns, ConnectOptions{DialTimeout: cfg.DialTimeout})
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)
	r := newRunner(ctx, cfg, drv, conns, stderr)
	res := newResult(cfg)

	if wl.preload {
		fmt.Fprintf(stderr, "kvbench: preloading %d keys\n", cfg.Keyspace)
		p := r.runPhase(phase{name: "preload", total: cfg.Keyspace, pick: preloadPick, workers: max(cfg.Clients, preloadWorkers)})
		all := p.all()
		res.Preload = &Preload{Keys: cfg.Keyspace, Seconds: p.elapsed.Seconds(), Errors: all.errors()}
		if p.stopped != nil {
			return nil, fmt.Errorf("preload: %w", p.stopped)
		}
		if n := all.errors(); n > 0 {
			fmt.Fprintf(stderr, "kvbench: warning: %d preload writes failed (first: %s); reads of those keys may miss\n", n, firstSample(all))
		}
	}
	if cfg.Warmup > 0 {
		fmt.Fprintf(stderr, "kvbench: warming up for %v\n", cfg.Warmup)
		p := r.runPhase(phase{name: "warmup", end: time.Now().Add(cfg.Warmup), paced: true, pick: r.randomPick})
		if p.stopped != nil {
			return nil, fmt.Errorf("warmup: %w", p.stopped)
		}
	}
	if len(cfg.MetricsURLs) > 0 {
		// Scrape again, so that preload and warmup are left out.
		before = before[:0]
		for _, u := range cfg.MetricsURLs {
			s, err := scrapeWAL(ctx, hc, u)
			if err != nil {
				return nil, err
			}
			before = append(before, s)
		}
	}

	m := phase{name: cfg.Workload, total: cfg.Total, paced: true, pick: r.randomPick}
	res.Start = time.Now().UTC()
	if cfg.Duration > 0 {
		m.end = time.Now().Add(cfg.Duration)
	}
	p := r.runPhase(m)
	res.fill(p)

	if len(cfg.MetricsURLs) > 0 {
		var nodes []WALNode
		for i, u := range cfg.MetricsURLs {
			// A fresh context: an interrupted run still reports the WAL.
			after, err := scrapeWAL(context.WithoutCancel(ctx), hc, u)
			if err != nil {
				fmt.Fprintf(stderr, "kvbench: warning: %v\n", err)
				continue
			}
			nodes = append(nodes, walDelta(u, before[i], after))
		}
		if len(nodes) > 0 {
			res.WAL = sumWAL(nodes, p.elapsed)
		}
	}
	if p.stopped != nil {
		res.StoppedEarly = p.stopped.Error()
		return res, p.stopped
	}
	return res, nil
}

func firstSample(s *opStats) string {
	for _, e := range s.sample {
		if e != "" {
			return e
		}
	}
	return ""
}
