package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cutkv/cutkv/bench/internal/benchconn"
	"github.com/cutkv/cutkv/bench/internal/benchfmt"
	"github.com/cutkv/cutkv/client"
)

// floodConfig is what `benchtrust flood` is told.
type floodConfig struct {
	Client string `json:"client"` // the node's client (gRPC) address
	Peer   string `json:"peer"`   // its peer address
	HTTP   string `json:"http"`   // its HTTP address (/metrics, /healthz)
	// Conns is the number of connection slots flooding each port: each
	// dials, holds its connection until the node closes it, waits Redial
	// and dials again, until the flood ends or MaxAttempts dials were
	// made on that port.
	Conns       int           `json:"conns"`
	Redial      time.Duration `json:"-"`
	MaxAttempts int           `json:"max_attempts"`
	// Phase is the length of each measured phase (before, during, after
	// the flood); Warmup runs the Puts unmeasured before them.
	Phase  time.Duration `json:"-"`
	Warmup time.Duration `json:"-"`
	// Workers Put in a closed loop, each with one Put in flight, through
	// one client connected before the flood.
	Workers   int `json:"workers"`
	ValueSize int `json:"value_size"`
	Keyspace  int `json:"keyspace"`
	// ProbeEvery: a new client connects and Puts once this often in each
	// phase (0: never).
	ProbeEvery  time.Duration `json:"-"`
	SampleEvery time.Duration `json:"-"`

	// Durations as text, for the JSON.
	RedialS      string `json:"redial"`
	PhaseS       string `json:"phase"`
	WarmupS      string `json:"warmup"`
	ProbeEveryS  string `json:"probe_every"`
	SampleEveryS string `json:"sample_every"`
}

// Bounds on the flags: every loop of the flood is bounded by them.
const (
	maxConnsPerPort    = 5000
	maxAttemptsBound   = 1000000
	maxPhase           = 5 * time.Minute
	maxWorkers         = 256
	dialTimeout        = 2 * time.Second
	putTimeout         = 5 * time.Second
	maxSamplesPerPhase = 2000000
	// refusedWithin: a connection the node closed within this time of the
	// dial was refused at the limit (closed at once); the node closes a
	// connection it took but that never completed its handshake after
	// 10 s (rpc.handshakeTimeout).
	refusedWithin = 5 * time.Second
	// fdSpare: descriptors the flood needs besides its connections (the
	// client, probes, scrapes, the runtime).
	fdSpare = 128
)

// loopbackAddr checks that s is 127.0.0.1:PORT: the flood targets nothing
// else.
func loopbackAddr(name, s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("-%s %q: %v", name, s, err)
	}
	if host != "127.0.0.1" {
		return fmt.Errorf("-%s %q: only 127.0.0.1 addresses are allowed", name, s)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("-%s %q: bad port", name, s)
	}
	return nil
}

func (c *floodConfig) validate() error {
	for _, a := range []struct{ name, v string }{{"client", c.Client}, {"peer", c.Peer}, {"http", c.HTTP}} {
		if err := loopbackAddr(a.name, a.v); err != nil {
			return err
		}
	}
	switch {
	case c.Conns < 1 || c.Conns > maxConnsPerPort:
		return fmt.Errorf("-conns %d: want 1 to %d", c.Conns, maxConnsPerPort)
	case c.MaxAttempts < c.Conns || c.MaxAttempts > maxAttemptsBound:
		return fmt.Errorf("-max-attempts %d: want -conns (%d) to %d", c.MaxAttempts, c.Conns, maxAttemptsBound)
	case c.Redial < 10*time.Millisecond:
		return fmt.Errorf("-redial %v: at least 10ms", c.Redial)
	case c.Phase < time.Second || c.Phase > maxPhase:
		return fmt.Errorf("-phase %v: want 1s to %v", c.Phase, maxPhase)
	case c.Warmup < 0 || c.Warmup > maxPhase:
		return fmt.Errorf("-warmup %v: want 0 to %v", c.Warmup, maxPhase)
	case c.Workers < 1 || c.Workers > maxWorkers:
		return fmt.Errorf("-workers %d: want 1 to %d", c.Workers, maxWorkers)
	case c.ValueSize < 1 || c.ValueSize > 1<<20:
		return fmt.Errorf("-value-size %d: want 1 to %d", c.ValueSize, 1<<20)
	case c.Keyspace < 1 || c.Keyspace > 100000000:
		return fmt.Errorf("-keyspace %d: want 1 to 100000000", c.Keyspace)
	case c.ProbeEvery < 0 || c.ProbeEvery > 0 && c.ProbeEvery < 100*time.Millisecond:
		return fmt.Errorf("-probe-every %v: 0 or at least 100ms", c.ProbeEvery)
	case c.SampleEvery < 50*time.Millisecond || c.SampleEvery > c.Phase:
		return fmt.Errorf("-sample-every %v: want 50ms to -phase", c.SampleEvery)
	}
	c.RedialS, c.PhaseS, c.WarmupS = c.Redial.String(), c.Phase.String(), c.Warmup.String()
	c.ProbeEveryS, c.SampleEveryS = c.ProbeEvery.String(), c.SampleEvery.String()
	return nil
}

// floodResult is what `benchtrust flood` prints.
type floodResult struct {
	Start  time.Time   `json:"start"`
	Config floodConfig `json:"config"`
	// FileLimit is this process's RLIMIT_NOFILE (soft, after the Go
	// runtime raised it to the hard limit).
	FileLimit uint64        `json:"file_limit"`
	Phases    []phaseResult `json:"phases"`
	Flood     []portResult  `json:"flood"`
	// FinalHealthz is /healthz once the last phase ended.
	FinalHealthz string `json:"final_healthz"`
}

// phaseResult is one phase: the Puts of the client connected before the
// flood, new clients' probes, and the node's metrics.
type phaseResult struct {
	Name       string  `json:"name"`
	Seconds    float64 `json:"seconds"`
	Puts       int64   `json:"puts"`
	PutsPerSec float64 `json:"puts_per_sec"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	Errors     int64   `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`

	// Probes: new clients that connected and Put once during the phase.
	Probes          int     `json:"probes"`
	ProbesOK        int     `json:"probes_ok"`
	ProbeMaxMs      float64 `json:"probe_max_ms"`
	ProbeFirstError string  `json:"probe_first_error,omitempty"`

	// From /metrics: the highest of the gauges sampled during the phase,
	// and the counters' increase over it.
	ClientOpenMax  float64 `json:"client_open_max"`
	PeerOpenMax    float64 `json:"peer_open_max"`
	OpenFDsMax     float64 `json:"open_fds_max"`
	ClientRejected float64 `json:"client_rejected"`
	PeerRejected   float64 `json:"peer_rejected"`
	WALFsyncs      float64 `json:"wal_fsyncs"`
	NodeCPUSeconds float64 `json:"node_cpu_s"`
	// SelfCPUSeconds is this process's CPU time in the phase (the Put
	// workers, the probes, the flood), on the same cores as the node.
	SelfCPUSeconds float64 `json:"benchtrust_cpu_s"`
	// Healthz counts the /healthz answers sampled: "SERVING",
	// "NOT_SERVING", "error" (no answer).
	Healthz       map[string]int `json:"healthz"`
	ScrapeErrors  int            `json:"scrape_errors"`
	FirstScrapeEr string         `json:"first_scrape_error,omitempty"`
}

// portResult is the flood of one port.
type portResult struct {
	Listener string `json:"listener"`
	Addr     string `json:"addr"`
	Slots    int    `json:"slots"`
	// Attempts are the dials made; Connected those the kernel completed
	// (the node's listener then takes or refuses them).
	Attempts   int64 `json:"attempts"`
	Connected  int64 `json:"connected"`
	DialErrors int64 `json:"dial_errors"`
	// ClosedAtOnce: closed by the node within refusedWithin (refused at
	// the limit); ClosedLater: closed later (the handshake timeout);
	// HeldAtEnd: still open when the flood ended.
	ClosedAtOnce    int64   `json:"closed_at_once"`
	ClosedLater     int64   `json:"closed_later"`
	HeldAtEnd       int64   `json:"held_at_end"`
	MaxHeld         int64   `json:"max_held"`
	AtOnceP50Ms     float64 `json:"closed_at_once_p50_ms"`
	LaterP50Ms      float64 `json:"closed_later_p50_ms"`
	FirstDialError  string  `json:"first_dial_error,omitempty"`
	MaxAttemptsHits bool    `json:"max_attempts_reached"`
}

func floodMain(args []string, stdout, stderr io.Writer) error {
	var c floodConfig
	fs := flag.NewFlagSet("flood", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Client, "client", "", "the node's client address, 127.0.0.1:PORT (Puts, and a flood)")
	fs.StringVar(&c.Peer, "peer", "", "the node's peer address, 127.0.0.1:PORT (a flood)")
	fs.StringVar(&c.HTTP, "http", "", "the node's HTTP address, 127.0.0.1:PORT (/metrics, /healthz)")
	fs.IntVar(&c.Conns, "conns", 1000, "connection slots flooding each port")
	fs.DurationVar(&c.Redial, "redial", time.Second, "a slot whose connection the node closed dials again after this")
	fs.IntVar(&c.MaxAttempts, "max-attempts", 50000, "most dials per port")
	fs.DurationVar(&c.Phase, "phase", 10*time.Second, "length of each phase: before, during and after the flood")
	fs.DurationVar(&c.Warmup, "warmup", 2*time.Second, "unmeasured Puts before the first phase")
	fs.IntVar(&c.Workers, "workers", 8, "Put workers (one Put in flight each) on the client connected before the flood")
	fs.IntVar(&c.ValueSize, "value-size", 256, "bytes per value")
	fs.IntVar(&c.Keyspace, "keyspace", 10000, "distinct keys")
	fs.DurationVar(&c.ProbeEvery, "probe-every", 2*time.Second, "a new client connects and Puts once this often (0: never)")
	fs.DurationVar(&c.SampleEvery, "sample-every", 250*time.Millisecond, "how often /metrics and /healthz are read")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := c.validate(); err != nil {
		return err
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("file limit: %w", err)
	}
	if need := uint64(2*c.Conns + c.Workers + fdSpare); rl.Cur < need {
		return fmt.Errorf("-conns %d needs %d file descriptors, the limit is %d (ulimit -n)", c.Conns, need, rl.Cur)
	}
	// Everything below ends within this bound, whatever the node does.
	total := c.Warmup + 3*c.Phase + time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), total)
	defer cancel()
	res, err := flood(ctx, &c, stderr)
	if err != nil {
		return err
	}
	res.FileLimit = rl.Cur
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

var phaseNames = []string{"before", "during", "after"}

// recorder collects the Puts' latencies by the phase they started in.
type recorder struct {
	phase atomic.Int32 // index into phaseNames; -1: warmup, -2: stopped

	mu       sync.Mutex
	lat      [][]time.Duration
	errs     []int64
	firstErr []string
}

func (r *recorder) record(ph int32, took time.Duration, err error) {
	if ph < 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs[ph]++
		if r.firstErr[ph] == "" {
			r.firstErr[ph] = err.Error()
		}
		return
	}
	if len(r.lat[ph]) < maxSamplesPerPhase {
		r.lat[ph] = append(r.lat[ph], took)
	}
}

func flood(ctx context.Context, c *floodConfig, stderr io.Writer) (*floodResult, error) {
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "%s benchtrust flood: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	cl, err := client.NewWithConfig(ctx, client.Config{Endpoints: []string{c.Client}, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("connecting the client: %w", err)
	}
	defer cl.Close()

	n := len(phaseNames)
	rec := &recorder{lat: make([][]time.Duration, n), errs: make([]int64, n), firstErr: make([]string, n)}
	rec.phase.Store(-1)
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range c.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w)+1, uint64(time.Now().UnixNano())))
			key := make([]byte, 16)
			val := make([]byte, c.ValueSize)
			for wctx.Err() == nil {
				ph := rec.phase.Load()
				benchfmt.PutKey(key, int64(rng.IntN(c.Keyspace)))
				for i := range val {
					val[i] = byte(rng.Uint32())
				}
				pctx, cancel := context.WithTimeout(wctx, putTimeout)
				start := time.Now()
				err := cl.Put(pctx, key, val)
				took := time.Since(start)
				cancel()
				if wctx.Err() != nil {
					return
				}
				rec.record(ph, took, err)
			}
		}()
	}
	defer func() {
		stopWorkers()
		wg.Wait()
	}()

	// The sampler reads the gauges and /healthz all along.
	samp := newSampler(n)
	sctx, stopSampler := context.WithCancel(ctx)
	var swg sync.WaitGroup
	swg.Add(1)
	go func() {
		defer swg.Done()
		t := time.NewTicker(c.SampleEvery)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			if ph := rec.phase.Load(); ph >= 0 {
				samp.sample(sctx, hc, c.HTTP, int(ph))
			}
		}
	}()
	defer func() {
		stopSampler()
		swg.Wait()
	}()

	logf("client connected to %s; %d workers warming up for %v", c.Client, c.Workers, c.Warmup)
	if !sleepCtx(ctx, c.Warmup) {
		return nil, ctx.Err()
	}
	res := &floodResult{Start: time.Now().UTC(), Config: *c}
	ports := []*portFlood{
		{listener: "client", addr: c.Client},
		{listener: "peer", addr: c.Peer},
	}
	for i, name := range phaseNames {
		before, err := scrape(ctx, hc, c.HTTP)
		if err != nil {
			return nil, fmt.Errorf("phase %s: %w", name, err)
		}
		cpu0 := selfCPU()
		start := time.Now()
		rec.phase.Store(int32(i))
		var fctx context.Context
		var stopFlood context.CancelFunc
		var fwg sync.WaitGroup
		if name == "during" {
			fctx, stopFlood = context.WithCancel(ctx)
			for _, p := range ports {
				p.start(fctx, &fwg, c)
			}
			logf("flooding %s and %s with %d connection slots each", c.Client, c.Peer, c.Conns)
		} else {
			logf("phase %s", name)
		}
		probes := runProbes(ctx, c, time.Now().Add(c.Phase))
		end := start.Add(c.Phase)
		if !sleepCtx(ctx, time.Until(end)) {
			if stopFlood != nil {
				stopFlood()
			}
			return nil, ctx.Err()
		}
		if stopFlood != nil {
			stopFlood()
			fwg.Wait()
		}
		pr := probes.wait()
		after, err := scrape(ctx, hc, c.HTTP)
		if err != nil {
			return nil, fmt.Errorf("phase %s: %w", name, err)
		}
		elapsed := time.Since(start)
		ph := phaseResult{Name: name, Seconds: elapsed.Seconds()}
		ph.Probes, ph.ProbesOK, ph.ProbeMaxMs, ph.ProbeFirstError = pr.n, pr.ok, ms(pr.max), pr.firstErr
		ph.ClientRejected = after[metricRejectedClient] - before[metricRejectedClient]
		ph.PeerRejected = after[metricRejectedPeer] - before[metricRejectedPeer]
		ph.WALFsyncs = after[metricFsyncs] - before[metricFsyncs]
		ph.NodeCPUSeconds = after[metricCPU] - before[metricCPU]
		ph.SelfCPUSeconds = selfCPU() - cpu0
		samp.fill(i, &ph)
		res.Phases = append(res.Phases, ph)
		logf("phase %s done: rejected client %.0f peer %.0f, open max client %.0f peer %.0f, healthz %v",
			name, ph.ClientRejected, ph.PeerRejected, ph.ClientOpenMax, ph.PeerOpenMax, ph.Healthz)
	}
	// Stop the workers before reading their latencies: a Put in flight
	// at the end of the last phase still counts for it.
	rec.phase.Store(-2)
	stopWorkers()
	wg.Wait()
	for i := range res.Phases {
		ph := &res.Phases[i]
		lat := rec.lat[i]
		slices.Sort(lat)
		ph.Puts = int64(len(lat))
		ph.PutsPerSec = float64(len(lat)) / ph.Seconds
		ph.P50Ms, ph.P99Ms = ms(quantile(lat, 0.50)), ms(quantile(lat, 0.99))
		if len(lat) > 0 {
			ph.MaxMs = ms(lat[len(lat)-1])
		}
		ph.Errors, ph.FirstError = rec.errs[i], rec.firstErr[i]
	}
	for _, p := range ports {
		res.Flood = append(res.Flood, p.result(c))
	}
	res.FinalHealthz = healthz(ctx, hc, c.HTTP)
	return res, nil
}

// selfCPU is this process's CPU time so far (user + system), seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// quantile of sorted durations (nearest rank); 0 when empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// sleepCtx sleeps d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// portFlood floods one port.
type portFlood struct {
	listener, addr string

	attempts, connected, dialErrors      atomic.Int64
	closedAtOnce, closedLater, heldAtEnd atomic.Int64
	held, maxHeld                        atomic.Int64
	mu                                   sync.Mutex
	atOnce, later                        []time.Duration
	firstDialErr                         string
	maxAttemptsHit                       atomic.Bool
}

func (p *portFlood) start(ctx context.Context, wg *sync.WaitGroup, c *floodConfig) {
	for range c.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.slot(ctx, c)
		}()
	}
}

// slot holds one connection at a time until the flood ends, dialing
// again Redial after the node closes it; at most MaxAttempts dials per
// port in all.
func (p *portFlood) slot(ctx context.Context, c *floodConfig) {
	d := net.Dialer{Timeout: dialTimeout}
	for ctx.Err() == nil {
		if p.attempts.Add(1) > int64(c.MaxAttempts) {
			p.attempts.Add(-1)
			p.maxAttemptsHit.Store(true)
			return
		}
		conn, err := d.DialContext(ctx, "tcp", p.addr)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.dialErrors.Add(1)
			p.mu.Lock()
			if p.firstDialErr == "" {
				p.firstDialErr = err.Error()
			}
			p.mu.Unlock()
			if !sleepCtx(ctx, c.Redial) {
				return
			}
			continue
		}
		p.connected.Add(1)
		start := time.Now()
		if h := p.held.Add(1); h > p.maxHeld.Load() {
			for {
				m := p.maxHeld.Load()
				if h <= m || p.maxHeld.CompareAndSwap(m, h) {
					break
				}
			}
		}
		closedByNode := holdUntilClosed(ctx, conn)
		p.held.Add(-1)
		took := time.Since(start)
		if !closedByNode {
			p.heldAtEnd.Add(1)
			return
		}
		p.mu.Lock()
		if took < refusedWithin {
			p.closedAtOnce.Add(1)
			p.atOnce = append(p.atOnce, took)
		} else {
			p.closedLater.Add(1)
			p.later = append(p.later, took)
		}
		p.mu.Unlock()
		if !sleepCtx(ctx, c.Redial) {
			return
		}
	}
}

// holdUntilClosed reads (and drops) what the node sends on conn until it
// closes it, or until ctx ends; it closes conn and says whether the node
// closed it first.
func holdUntilClosed(ctx context.Context, conn net.Conn) bool {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	buf := make([]byte, 512)
	for {
		if _, err := conn.Read(buf); err != nil {
			conn.Close()
			return ctx.Err() == nil
		}
	}
}

func (p *portFlood) result(c *floodConfig) portResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	slices.Sort(p.atOnce)
	slices.Sort(p.later)
	return portResult{
		Listener: p.listener, Addr: p.addr, Slots: c.Conns,
		Attempts: p.attempts.Load(), Connected: p.connected.Load(), DialErrors: p.dialErrors.Load(),
		ClosedAtOnce: p.closedAtOnce.Load(), ClosedLater: p.closedLater.Load(), HeldAtEnd: p.heldAtEnd.Load(),
		MaxHeld: p.maxHeld.Load(), AtOnceP50Ms: ms(quantile(p.atOnce, 0.5)), LaterP50Ms: ms(quantile(p.later, 0.5)),
		FirstDialError: p.firstDialErr, MaxAttemptsHits: p.maxAttemptsHit.Load(),
	}
}

// probeResult counts the new clients of a phase.
type probeResult struct {
	n, ok    int
	max      time.Duration
	firstErr string
}

type probes struct {
	done chan probeResult
}

func (p probes) wait() probeResult { return <-p.done }

// runProbes connects a new client and Puts once every ProbeEvery until
// end; each probe is bounded by its dial timeout and Put timeout.
func runProbes(ctx context.Context, c *floodConfig, end time.Time) probes {
	p := probes{done: make(chan probeResult, 1)}
	go func() {
		var r probeResult
		defer func() { p.done <- r }()
		if c.ProbeEvery <= 0 {
			return
		}
		for next := time.Now().Add(c.ProbeEvery / 2); next.Before(end); next = next.Add(c.ProbeEvery) {
			if !sleepCtx(ctx, time.Until(next)) {
				return
			}
			start := time.Now()
			err := probe(ctx, c.Client)
			took := time.Since(start)
			r.n++
			r.max = max(r.max, took)
			if err == nil {
				r.ok++
			} else if r.firstErr == "" {
				r.firstErr = err.Error()
			}
		}
	}()
	return p
}

// probe is a new client: connect, one Put, close.
func probe(ctx context.Context, addr string) error {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second+putTimeout)
	defer cancel()
	cl, err := client.NewWithConfig(pctx, client.Config{Endpoints: []string{addr}, DialTimeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.Put(pctx, []byte("benchtrust-probe"), []byte("x"))
}

// The node metrics the flood reads (server/trust.go, server/node.go, and
// the Prometheus process collector).
const (
	metricOpenClient     = `cutkv_connections_open{listener="client"}`
	metricOpenPeer       = `cutkv_connections_open{listener="peer"}`
	metricRejectedClient = `cutkv_connections_rejected_total{listener="client"}`
	metricRejectedPeer   = `cutkv_connections_rejected_total{listener="peer"}`
	metricFsyncs         = "cutkv_wal_fsyncs_total"
	metricCPU            = "process_cpu_seconds_total"
	metricOpenFDs        = "process_open_fds"
)

var floodMetrics = []string{metricOpenClient, metricOpenPeer, metricRejectedClient, metricRejectedPeer, metricFsyncs, metricCPU, metricOpenFDs}

// scrape reads floodMetrics from http://addr/metrics; all must be there.
func scrape(ctx context.Context, hc *http.Client, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape: %s", resp.Status)
	}
	return parseMetrics(resp.Body, floodMetrics)
}

// parseMetrics reads the series named in names from the Prometheus text
// format (a labelled series named as the format prints it); all must be
// there.
func parseMetrics(r io.Reader, names []string) (map[string]float64, error) {
	families := make([]string, len(names))
	for i, n := range names {
		families[i], _, _ = strings.Cut(n, "{")
	}
	got, err := benchconn.ParseExposition(r, families)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, n := range names {
		if _, ok := got[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("metrics missing: %s", strings.Join(missing, ", "))
	}
	return got, nil
}

// healthz returns the body of /healthz ("SERVING", "NOT_SERVING"), or
// "error" when the node does not answer.
func healthz(ctx context.Context, hc *http.Client, addr string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return "error"
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "error"
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	if err != nil {
		return "error"
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "error"
	}
	return s
}

// sampler keeps, per phase, the highest gauges and the /healthz answers.
type sampler struct {
	mu      sync.Mutex
	max     []map[string]float64
	health  []map[string]int
	errs    []int
	firstEr []string
}

func newSampler(n int) *sampler {
	s := &sampler{max: make([]map[string]float64, n), health: make([]map[string]int, n), errs: make([]int, n), firstEr: make([]string, n)}
	for i := range n {
		s.max[i] = map[string]float64{}
		s.health[i] = map[string]int{}
	}
	return s
}

func (s *sampler) sample(ctx context.Context, hc *http.Client, addr string, ph int) {
	h := healthz(ctx, hc, addr)
	m, err := scrape(ctx, hc, addr)
	if ctx.Err() != nil {
		return // stopped while asking: not a sample
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.health[ph][h]++
	if err != nil {
		s.errs[ph]++
		if s.firstEr[ph] == "" {
			s.firstEr[ph] = err.Error()
		}
		return
	}
	for _, k := range []string{metricOpenClient, metricOpenPeer, metricOpenFDs} {
		s.max[ph][k] = max(s.max[ph][k], m[k])
	}
}

func (s *sampler) fill(ph int, r *phaseResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.ClientOpenMax, r.PeerOpenMax, r.OpenFDsMax = s.max[ph][metricOpenClient], s.max[ph][metricOpenPeer], s.max[ph][metricOpenFDs]
	r.Healthz = s.health[ph]
	r.ScrapeErrors, r.FirstScrapeEr = s.errs[ph], s.firstEr[ph]
}
