package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutkv/cutkv/bench/internal/benchfmt"
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
	// ctx ends when the run is interrupted or fails (fail); operations in
	// flight are then cancelled and not counted.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// pairs picks the txn workload's keys; bank is the bank workload's
	// state. nil for other workloads.
	pairs *keyPairs
	bank  *bank

	mu      sync.Mutex
	failure error // REQUIRES mu; see fail
}

// worker is one client: at most one operation in flight.
type worker struct {
	conn  Conn
	rng   *rand.Rand
	key   []byte // reused for every operation
	key2  []byte // the second key of txn and bank
	value []byte
	// bal1 and bal2 hold a bank transfer's new balances.
	bal1, bal2 []byte
}

// outcome is how an operation that returned no error ended.
type outcome int

const (
	outcomeOK outcome = iota
	// outcomeNotFound: a Get found no value (a success).
	outcomeNotFound
	// outcomeAborted: a transaction's compare failed; nothing was
	// written. Counted as an abort, not an error.
	outcomeAborted
)

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
	// aborts counts transactions that were not applied because of
	// concurrent ones: a failed compare, or ErrConflict.
	aborts int64
	// conflicts counts the aborts that were ErrConflict.
	conflicts int64
	errs      [numErrKinds]int64
	// sample is the first error of each kind, as text.
	sample [numErrKinds]string
}

func newOpStats() *opStats { return &opStats{hist: newHistogram()} }

func (s *opStats) merge(o *opStats) {
	s.hist.merge(o.hist)
	s.notFound += o.notFound
	s.aborts += o.aborts
	s.conflicts += o.conflicts
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
	aborts  atomic.Int64
	errs    atomic.Int64
	stop    atomic.Bool
}

func newRunner(ctx context.Context, cfg *Config, drv Driver, conns []Conn, stderr io.Writer) *runner {
	r := &runner{cfg: cfg, drv: drv, conns: conns, stderr: stderr}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	if cfg.Rate > 0 {
		r.pacer = &pacer{interval: time.Duration(float64(time.Second) / cfg.Rate)}
	}
	for i := range max(cfg.Clients, preloadWorkers) {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
		w := &worker{
			conn:  conns[i%len(conns)],
			rng:   rng,
			key:   make([]byte, cfg.KeySize),
			key2:  make([]byte, cfg.KeySize),
			value: make([]byte, cfg.ValueSize),
		}
		for j := range w.value {
			w.value[j] = byte(rng.Uint32())
		}
		r.workers = append(r.workers, w)
	}
	return r
}

// fail stops the run at once: a check failed (the bank audit). The first
// error is kept.
func (r *runner) fail(err error) {
	r.mu.Lock()
	if r.failure == nil {
		r.failure = err
	}
	r.mu.Unlock()
	r.cancel(err)
}

// failed returns the error given to fail, if any.
func (r *runner) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failure
}

// randomPick is the pick function of warmup and measured phases.
func (r *runner) randomPick(w *worker, _ int64) (opKind, int64) {
	k := workloads[r.cfg.Workload].next(r.cfg, w.rng)
	return k, w.rng.Int64N(r.cfg.Keyspace)
}

// preloadPick writes key seq.
func preloadPick(_ *worker, seq int64) (opKind, int64) { return opPut, seq }

// initPick writes account seq's initial balance.
func initPick(_ *worker, seq int64) (opKind, int64) { return opInit, seq }

// initTries bounds the attempts to write one account's initial balance.
const initTries = 5

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
	case r.failed() != nil:
		res.stopped = r.failed()
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
		ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
		start := time.Now()
		out, err := r.execute(ctx, w, kind, idx)
		took := time.Since(start)
		cancel()
		if err != nil && r.ctx.Err() != nil {
			return // interrupted: the failure says nothing of the cluster
		}
		s := stats[kind]
		if err != nil {
			k := r.drv.Classify(err)
			if k == errConflict {
				out = outcomeAborted
				s.conflicts++
			} else {
				s.errs[k]++
				if s.sample[k] == "" {
					s.sample[k] = err.Error()
				}
				if n := c.errs.Add(1); r.cfg.MaxErrors > 0 && n >= r.cfg.MaxErrors {
					c.stop.Store(true)
				}
				continue
			}
		}
		switch out {
		case outcomeAborted:
			s.aborts++
			c.aborts.Add(1)
			continue
		case outcomeNotFound:
			s.notFound++
		}
		s.hist.record(int64(took))
		c.done.Add(1)
	}
}

// execute sends one operation of the given kind; idx is the key index
// for put, get and init (txn and bank pick their own keys).
func (r *runner) execute(ctx context.Context, w *worker, kind opKind, idx int64) (outcome, error) {
	switch kind {
	case opPut:
		benchfmt.PutKey(w.key, idx)
		return outcomeOK, w.conn.Put(ctx, w.key, w.value)
	case opGet:
		benchfmt.PutKey(w.key, idx)
		found, err := w.conn.Get(ctx, w.key)
		if err == nil && !found {
			return outcomeNotFound, nil
		}
		return outcomeOK, err
	case opTxn:
		if err := r.pairs.pick(w.rng, w.key, w.key2); err != nil {
			return outcomeOK, err
		}
		return outcomeOK, w.conn.PutPair(ctx, w.key, w.value, w.key2, w.value)
	case opTransfer:
		return r.bank.transfer(ctx, w)
	case opInit:
		accountKey(w.key, idx)
		// Before any transfer runs, writing the initial balance again is
		// harmless: a write that failed, even with its outcome unknown
		// (a leader cut off, on either database), is simply written
		// again rather than failing the run.
		var err error
		for try := 0; try < initTries; try++ {
			if err = w.conn.Put(ctx, w.key, r.bank.init); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Duration(try+1) * 50 * time.Millisecond)
		}
		return outcomeOK, err
	}
	return outcomeOK, fmt.Errorf("unknown operation kind %d", kind)
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
				aborts := ""
				if workloads[r.cfg.Workload].transactional {
					aborts = fmt.Sprintf(" aborts=%d", c.aborts.Load())
				}
				fmt.Fprintf(r.stderr, "kvbench: %-7s elapsed=%-6s ops=%-9d ops/s=%-8.0f errors=%d%s\n",
					name, now.Sub(start).Round(100*time.Millisecond), ops, rate, c.errs.Load(), aborts)
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
	hc, err := metricsClient(cfg.TLS)
	if err != nil {
		return nil, err
	}
	var before []walSample
	for _, u := range cfg.MetricsURLs {
		// Fail before loading the cluster if a metrics URL is wrong.
		s, err := scrapeWAL(ctx, hc, u, requiredMetrics(cfg.Target))
		if err != nil {
			return nil, err
		}
		before = append(before, s)
	}

	conns, err := connectAll(ctx, drv, cfg.Endpoints, cfg.Conns, cfg.connectOptions())
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)
	r := newRunner(ctx, cfg, drv, conns, stderr)
	defer r.cancel(nil)
	res := newResult(cfg)

	var auditConn Conn
	switch cfg.Workload {
	case "txn":
		if r.pairs, err = newKeyPairs(r.ctx, cfg, conns[0]); err != nil {
			return nil, err
		}
		res.Txn = &TxnInfo{Keys: cfg.TxnKeys, Partitions: r.pairs.partitions}
	case "bank":
		r.bank = newBank(cfg)
		if err := r.initBank(res); err != nil {
			return nil, err
		}
		// The auditor has a connection of its own, so that its reads are
		// not queued behind the workers' requests in a client.
		if auditConn, err = drv.Connect(r.ctx, cfg.Endpoints, cfg.connectOptions()); err != nil {
			return nil, fmt.Errorf("auditor: %w", err)
		}
		defer auditConn.Close()
	}

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
			s, err := scrapeWAL(ctx, hc, u, requiredMetrics(cfg.Target))
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
	var aud *auditor
	if auditConn != nil {
		aud = r.startAuditor(auditConn)
	}
	var cuts *cutter
	if cfg.CutInterval > 0 {
		if cuts, err = startCutter(cfg.Endpoints[0], cfg.CutInterval, cfg.TLS); err != nil {
			return nil, err
		}
	}
	p := r.runPhase(m)
	if cuts != nil {
		res.Cuts = cuts.halt()
	}
	res.fill(p)
	if aud != nil {
		aud.halt()
		res.Bank.Audits = summarize(aud.stats, p.elapsed)
		// A last audit once every transfer has returned.
		if r.ctx.Err() == nil {
			if err := aud.once(); err != nil {
				res.Bank.FinalAudit = "failed: " + err.Error()
			} else {
				res.Bank.FinalAudit = "ok"
			}
		}
		if err := r.failed(); err != nil {
			res.Bank.Violation = err.Error()
			if p.stopped == nil {
				p.stopped = err
			}
		}
	}

	if len(cfg.MetricsURLs) > 0 {
		var nodes []WALNode
		var befores, afters []walSample
		for i, u := range cfg.MetricsURLs {
			// A fresh context: an interrupted run still reports the WAL.
			after, err := scrapeWAL(context.WithoutCancel(ctx), hc, u, requiredMetrics(cfg.Target))
			if err != nil {
				fmt.Fprintf(stderr, "kvbench: warning: %v\n", err)
				continue
			}
			nodes = append(nodes, walDelta(u, before[i], after))
			befores, afters = append(befores, before[i]), append(afters, after)
		}
		if len(nodes) > 0 {
			res.WAL = sumWAL(nodes, p.elapsed, res.Ops)
			if wl.transactional {
				res.TxnRPCs = txnDelta(befores, afters)
			}
		}
	}
	if p.stopped != nil {
		res.StoppedEarly = p.stopped.Error()
		return res, p.stopped
	}
	return res, nil
}

// initBank writes every account's initial balance (unmeasured) and checks
// the total with one audit.
func (r *runner) initBank(res *Result) error {
	cfg := r.cfg
	fmt.Fprintf(r.stderr, "kvbench: initialising %d accounts to %d each\n", cfg.Accounts, initialBalance)
	p := r.runPhase(phase{name: "init", total: cfg.Accounts, pick: initPick, workers: max(cfg.Clients, preloadWorkers)})
	all := p.all()
	res.Preload = &Preload{Keys: cfg.Accounts, Seconds: p.elapsed.Seconds(), Errors: all.errors()}
	if p.stopped != nil {
		return fmt.Errorf("init: %w", p.stopped)
	}
	if n := all.errors(); n > 0 {
		return fmt.Errorf("init: %d of %d account writes failed (first: %s)", n, cfg.Accounts, firstSample(all))
	}
	ctx, cancel := context.WithTimeout(r.ctx, cfg.OpTimeout)
	defer cancel()
	violation, err := r.bank.audit(ctx, r.conns[0])
	switch {
	case err != nil:
		return fmt.Errorf("init: reading the accounts back: %w", err)
	case violation != "":
		// A transaction of an earlier run that finished late could do this.
		return fmt.Errorf("init: after writing every account: %s", violation)
	}
	res.Bank = &BankResult{Accounts: cfg.Accounts, Total: r.bank.total}
	return nil
}

func firstSample(s *opStats) string {
	for _, e := range s.sample {
		if e != "" {
			return e
		}
	}
	return ""
}
