package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Result is a run's outcome; -o json prints it, --out writes it.
type Result struct {
	Workload string `json:"workload"`
	Target   string `json:"target"`
	// Start is when the measured phase started (UTC).
	Start time.Time `json:"start"`
	// ElapsedSec is the length of the measured phase: from its start until
	// the last operation in flight returned.
	ElapsedSec float64 `json:"elapsed_s"`
	OpStats
	// ByOp breaks the counts down by operation ("put", "get", "txn",
	// "transfer"); only kinds the workload sends are present.
	ByOp map[string]OpStats `json:"by_op"`
	// Txn describes the txn workload's keys.
	Txn *TxnInfo `json:"txn,omitempty"`
	// Bank describes the bank workload's accounts and audits.
	Bank *BankResult `json:"bank,omitempty"`
	// Preload describes the unmeasured write of every key (get, mixed)
	// or account (bank).
	Preload *Preload `json:"preload,omitempty"`
	// WAL is the cutkv nodes' group commit during the measured phase
	// (with --metrics-url).
	WAL *WALResult `json:"wal,omitempty"`
	// TxnRPCs counts the nodes' Txn attempts during the measured phase
	// (txn and bank, with --metrics-url).
	TxnRPCs *TxnRPCs `json:"txn_rpcs,omitempty"`
	// Cuts is what the cutter measured (--cut-interval).
	Cuts *CutsResult `json:"cuts,omitempty"`
	// StoppedEarly says why the run ended before its duration or total.
	StoppedEarly string    `json:"stopped_early,omitempty"`
	Config       RunConfig `json:"config"`
	Machine      Machine   `json:"machine"`

	cfg *Config
}

// RunConfig is the configuration as the JSON result shows it.
type RunConfig struct {
	Target    string   `json:"target"`
	Workload  string   `json:"workload"`
	Endpoints []string `json:"endpoints"`
	Clients   int      `json:"clients"`
	Conns     int      `json:"conns"`
	Duration  string   `json:"duration,omitempty"`
	Total     int64    `json:"total,omitempty"`
	Warmup    string   `json:"warmup"`
	// Rate is the --rate limit in ops/s, 0 for none.
	Rate      float64  `json:"rate"`
	KeySize   int      `json:"key_size"`
	ValueSize int      `json:"value_size"`
	Keyspace  int64    `json:"keyspace"`
	ReadRatio *float64 `json:"read_ratio,omitempty"`
	// TxnKeys and Partitions: the txn workload's flags (cutkv).
	TxnKeys    string `json:"txn_keys,omitempty"`
	Partitions int    `json:"partitions,omitempty"`
	// Accounts and AuditInterval: the bank workload's flags.
	Accounts      int64    `json:"accounts,omitempty"`
	AuditInterval string   `json:"audit_interval,omitempty"`
	Seed          uint64   `json:"seed"`
	OpTimeout     string   `json:"op_timeout"`
	MaxErrors     int64    `json:"max_errors"`
	Metrics       []string `json:"metrics_urls,omitempty"`
	// TLS names the files of --cacert, --cert and --key; absent for a
	// plaintext run.
	TLS *RunTLS `json:"tls,omitempty"`
}

// RunTLS is the TLS configuration as the JSON result shows it.
type RunTLS struct {
	CACert string `json:"cacert"`
	Cert   string `json:"cert,omitempty"`
	Key    string `json:"key,omitempty"`
}

func runConfig(c *Config) RunConfig {
	rc := RunConfig{
		Target: c.Target, Workload: c.Workload, Endpoints: c.Endpoints,
		Clients: c.Clients, Conns: c.Conns, Total: c.Total, Warmup: c.Warmup.String(), Rate: c.Rate,
		KeySize: c.KeySize, ValueSize: c.ValueSize, Keyspace: c.Keyspace, Seed: c.Seed,
		OpTimeout: c.OpTimeout.String(), MaxErrors: c.MaxErrors, Metrics: c.MetricsURLs,
	}
	if c.Duration > 0 {
		rc.Duration = c.Duration.String()
	}
	if t := c.TLS; t != nil {
		rc.TLS = &RunTLS{CACert: t.CACert, Cert: t.Cert, Key: t.Key}
	}
	if c.Workload == "mixed" {
		rr := c.ReadRatio
		rc.ReadRatio = &rr
	}
	if c.Workload == "txn" {
		rc.TxnKeys, rc.Partitions = c.TxnKeys, c.Partitions
	}
	if c.Workload == "bank" {
		rc.Accounts, rc.AuditInterval = c.Accounts, c.AuditInterval.String()
		rc.Keyspace, rc.ValueSize = 0, 0 // not used
	}
	return rc
}

// OpStats are the counts and latencies of some operations.
type OpStats struct {
	// Ops counts successful operations (a Get of a missing key is a
	// success).
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	// NotFound counts Gets that found no value.
	NotFound int64 `json:"not_found"`
	// Aborts counts transactions that were not applied because of
	// concurrent ones (a failed compare, or cutkv's ErrConflict); they
	// are neither successes nor errors. AbortRate is Aborts over the
	// operations attempted (Ops + Aborts + Errors.Total).
	Aborts    int64   `json:"aborts"`
	AbortRate float64 `json:"abort_rate"`
	// Conflicts counts the Aborts that were cutkv's ErrConflict; the
	// others are failed compares.
	Conflicts int64       `json:"conflicts"`
	Errors    ErrorCounts `json:"errors"`
	// Latency of successful operations, in milliseconds.
	Latency Latency `json:"latency_ms"`
}

// ErrorCounts counts failed operations by kind (see errKind).
type ErrorCounts struct {
	Total          int64 `json:"total"`
	OutcomeUnknown int64 `json:"outcome_unknown"`
	Unavailable    int64 `json:"unavailable"`
	Other          int64 `json:"other"`
	// Samples holds the first error message of each kind seen.
	Samples map[string]string `json:"samples,omitempty"`
}

// Latency summarizes a histogram, in milliseconds. Percentiles are at most
// 0.4 % above the exact value (see hist.go); Min, Mean and Max are exact.
type Latency struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// TxnInfo describes the keys of the txn workload.
type TxnInfo struct {
	// Keys is "cross" (the two keys in different partitions) or "same"
	// (in one partition); empty for a target without partitions.
	Keys string `json:"keys,omitempty"`
	// Partitions is the cutkv cluster's partition count (from --partitions
	// or the cluster); 0 for a target without partitions.
	Partitions uint32 `json:"partitions,omitempty"`
}

// BankResult describes the bank workload's accounts and audits.
type BankResult struct {
	Accounts int64 `json:"accounts"`
	// Total is what the balances add up to, checked by every audit.
	Total int64 `json:"total"`
	// Audits are the audits during the measured phase: Ops counts those
	// that completed and found Total, Latency is theirs; errors and
	// aborts are audits that could not read the accounts.
	Audits OpStats `json:"audits"`
	// FinalAudit is the audit after the measured phase: "ok", or
	// "failed: " and why; empty when the run was interrupted.
	FinalAudit string `json:"final_audit,omitempty"`
	// Violation is the first wrong total (or missing account) an audit
	// found; the run then stopped at once and failed.
	Violation string `json:"violation,omitempty"`
}

// Preload describes the preload phase.
type Preload struct {
	Keys    int64   `json:"keys"`
	Seconds float64 `json:"seconds"`
	Errors  int64   `json:"errors"`
}

// Machine describes where kvbench ran.
type Machine struct {
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	NumCPU    int    `json:"num_cpu"`
	GoVersion string `json:"go_version"`
	// CPU is the processor model, when the system says (Linux).
	CPU string `json:"cpu,omitempty"`
	// LoadAvg is the 1, 5 and 15 minute load average when the measured
	// phase ended (Linux): high values mean something else shared the
	// CPUs.
	LoadAvg string `json:"load_avg,omitempty"`
}

func thisMachine() Machine {
	return Machine{
		GOOS:      runtime.GOOS,
		GOARCH:    runtime.GOARCH,
		NumCPU:    runtime.NumCPU(),
		GoVersion: runtime.Version(),
		CPU:       cpuModel(),
	}
}

// cpuModel reads the first "model name" of /proc/cpuinfo; "" elsewhere.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAvg reads the load averages from /proc/loadavg; "" elsewhere.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func newResult(cfg *Config) *Result {
	return &Result{Workload: cfg.Workload, Target: cfg.Target, Config: runConfig(cfg), Machine: thisMachine(), ByOp: map[string]OpStats{}, cfg: cfg}
}

// fill sets the measured numbers from the measured phase.
func (r *Result) fill(p *phaseResult) {
	r.ElapsedSec = p.elapsed.Seconds()
	r.Machine.LoadAvg = loadAvg()
	r.OpStats = summarize(p.all(), p.elapsed)
	for k, s := range p.ops {
		if s.hist.count() > 0 || s.errors() > 0 || s.aborts > 0 {
			r.ByOp[opKind(k).String()] = summarize(s, p.elapsed)
		}
	}
}

func summarize(s *opStats, elapsed time.Duration) OpStats {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	o := OpStats{
		Ops:       int64(s.hist.count()),
		NotFound:  s.notFound,
		Aborts:    s.aborts,
		Conflicts: s.conflicts,
		Latency: Latency{
			Min:  ms(s.hist.minimum()),
			Mean: s.hist.mean() / 1e6,
			P50:  ms(s.hist.quantile(0.50)),
			P90:  ms(s.hist.quantile(0.90)),
			P99:  ms(s.hist.quantile(0.99)),
			P999: ms(s.hist.quantile(0.999)),
			Max:  ms(s.hist.max),
		},
	}
	if o.Ops == 0 {
		o.Latency.Max = 0
	}
	if sec := elapsed.Seconds(); sec > 0 {
		o.OpsPerSec = float64(o.Ops) / sec
	}
	if attempted := o.Ops + s.aborts + s.errors(); attempted > 0 {
		o.AbortRate = float64(s.aborts) / float64(attempted)
	}
	e := &o.Errors
	e.OutcomeUnknown = s.errs[errOutcomeUnknown]
	e.Unavailable = s.errs[errUnavailable]
	e.Other = s.errs[errOther]
	e.Total = s.errors()
	for k, msg := range s.sample {
		if msg != "" {
			if e.Samples == nil {
				e.Samples = map[string]string{}
			}
			e.Samples[errKind(k).String()] = msg
		}
	}
	return o
}

// writeText prints the result as a short report with a table.
func (r *Result) writeText(w io.Writer) error {
	c := r.cfg
	bw := &errWriter{w: w}
	fmt.Fprintf(bw, "kvbench %s on %s (%s)", r.Workload, r.Target, strings.Join(c.Endpoints, ","))
	switch t := c.TLS; {
	case t == nil:
	case t.Cert != "":
		fmt.Fprintf(bw, " over TLS, client certificate %s", t.Cert)
	default:
		fmt.Fprintf(bw, " over TLS")
	}
	fmt.Fprintf(bw, "\n")
	switch r.Workload {
	case "bank":
		fmt.Fprintf(bw, "%d clients, %d conns, %d B keys, %d accounts, audit every %v, seed %d\n",
			c.Clients, c.Conns, c.KeySize, c.Accounts, c.AuditInterval, c.Seed)
	default:
		mix := ""
		if r.Workload == "mixed" {
			mix = fmt.Sprintf(", read ratio %g", c.ReadRatio)
		}
		fmt.Fprintf(bw, "%d clients, %d conns, %d B keys, %d B values, keyspace %d%s, seed %d\n",
			c.Clients, c.Conns, c.KeySize, c.ValueSize, c.Keyspace, mix, c.Seed)
	}
	if t := r.Txn; t != nil {
		switch {
		case t.Partitions == 0:
			fmt.Fprintf(bw, "two different keys per transaction\n")
		case t.Keys == txnKeysSame:
			fmt.Fprintf(bw, "two keys per transaction in the same partition of %d (1PC)\n", t.Partitions)
		default:
			fmt.Fprintf(bw, "two keys per transaction in different partitions of %d (2PC)\n", t.Partitions)
		}
	}
	fmt.Fprintf(bw, "measured %.1fs", r.ElapsedSec)
	if c.Warmup > 0 {
		fmt.Fprintf(bw, " after %v warmup", c.Warmup)
	}
	if r.Preload != nil && r.Bank != nil {
		fmt.Fprintf(bw, " (initialised %d accounts in %.1fs)", r.Preload.Keys, r.Preload.Seconds)
	} else if r.Preload != nil {
		fmt.Fprintf(bw, " (preloaded %d keys in %.1fs)", r.Preload.Keys, r.Preload.Seconds)
	}
	fmt.Fprintf(bw, "; %s/%s, %d CPUs, %s", r.Machine.GOOS, r.Machine.GOARCH, r.Machine.NumCPU, r.Machine.GoVersion)
	if r.Machine.LoadAvg != "" {
		fmt.Fprintf(bw, ", load %s", r.Machine.LoadAvg)
	}
	fmt.Fprintf(bw, "\n\n")

	txn := workloads[r.Workload].transactional
	rows := [][]string{{"op", "ops", "ops/s", "p50", "p90", "p99", "p99.9", "max", "errors"}}
	if txn {
		rows[0] = append(rows[0], "aborts", "abort %")
	}
	row := func(name string, s OpStats) {
		l := s.Latency
		cells := []string{name, strconv.FormatInt(s.Ops, 10), strconv.FormatFloat(s.OpsPerSec, 'f', 0, 64),
			fmtMs(l.P50), fmtMs(l.P90), fmtMs(l.P99), fmtMs(l.P999), fmtMs(l.Max), strconv.FormatInt(s.Errors.Total, 10)}
		if txn {
			cells = append(cells, strconv.FormatInt(s.Aborts, 10), strconv.FormatFloat(100*s.AbortRate, 'f', 2, 64))
		}
		rows = append(rows, cells)
	}
	for _, k := range opKinds {
		if s, ok := r.ByOp[k.String()]; ok {
			row(k.String(), s)
		}
	}
	if b := r.Bank; b != nil {
		row("audit", b.Audits)
	}
	if len(r.ByOp) != 1 {
		row("all", r.OpStats)
	}
	writeTable(bw, rows)
	e := r.Errors
	fmt.Fprintf(bw, "\nerrors: %d outcome unknown, %d unavailable, %d other\n", e.OutcomeUnknown, e.Unavailable, e.Other)
	for _, k := range []string{"outcome_unknown", "unavailable", "other"} {
		if msg, ok := e.Samples[k]; ok {
			fmt.Fprintf(bw, "  first %s: %s\n", k, msg)
		}
	}
	if txn {
		fmt.Fprintf(bw, "aborts: %d of %d transactions attempted (%.2f %%): not applied because of concurrent ones (%d failed compares, %d conflicts); not errors\n",
			r.Aborts, r.Ops+r.Aborts+r.Errors.Total, 100*r.AbortRate, r.Aborts-r.Conflicts, r.Conflicts)
	}
	if b := r.Bank; b != nil {
		a := b.Audits
		fmt.Fprintf(bw, "bank: %d accounts, total %d; %d audits during the run (every %v) found it intact, %d failed to read, %d kept conflicting",
			b.Accounts, b.Total, a.Ops, c.AuditInterval, a.Errors.Total, a.Aborts)
		if b.FinalAudit != "" {
			fmt.Fprintf(bw, "; final audit: %s", b.FinalAudit)
		}
		fmt.Fprintln(bw)
		for _, k := range []string{"outcome_unknown", "unavailable", "other"} {
			if msg, ok := a.Errors.Samples[k]; ok {
				fmt.Fprintf(bw, "  first audit %s: %s\n", k, msg)
			}
		}
		if b.Violation != "" {
			fmt.Fprintf(bw, "BANK INVARIANT VIOLATED: %s\n", b.Violation)
		}
	}
	if r.NotFound > 0 {
		fmt.Fprintf(bw, "gets of missing keys: %d\n", r.NotFound)
	}
	if wal := r.WAL; wal != nil && wal.CPUSeconds > 0 {
		fmt.Fprintf(bw, "node CPU: %.0f µs per operation, %.2f cores, over %d node(s)\n", wal.CPUUsPerOp, wal.CPUCores, len(wal.Nodes))
	}
	if wal := r.WAL; wal != nil && wal.Fsyncs == 0 && r.Target != "etcd" {
		fmt.Fprintf(bw, "WAL: no fsyncs on %d node(s)\n", len(wal.Nodes))
	} else if wal != nil && r.Target != "etcd" {
		fmt.Fprintf(bw, "WAL: %.1f records/fsync, %.0f fsyncs/s over %d node(s)\n", wal.RecordsPerFsync, wal.FsyncsPerSec, len(wal.Nodes))
		for _, n := range wal.Nodes {
			fmt.Fprintf(bw, "  %s: %.0f fsyncs, %.1f records/fsync, write+fsync mean %.3f ms, %.1f MB\n",
				n.URL, n.Fsyncs, n.RecordsPerFsync, n.FsyncMeanMs, n.Bytes/1e6)
		}
	}
	if t := r.TxnRPCs; t != nil {
		fmt.Fprintf(bw, "Txn RPCs on the nodes: %.0f OK, %.0f Aborted (%.1f %% of attempts; conflicts the client retried)\n",
			t.OK, t.Aborted, 100*t.AbortedShare)
	}
	if cu := r.Cuts; cu != nil {
		fmt.Fprintf(bw, "cuts every %s: %d completed (p50 %s, p99 %s, max %s), %d failed, %d errors\n",
			cu.Interval, cu.Completed, fmtMs(cu.Latency.P50), fmtMs(cu.Latency.P99), fmtMs(cu.Latency.Max), cu.Failed, cu.Errors)
		if cu.FirstError != "" {
			fmt.Fprintf(bw, "  first cut failure: %s\n", cu.FirstError)
		}
	}
	if r.StoppedEarly != "" {
		fmt.Fprintf(bw, "stopped early: %s\n", r.StoppedEarly)
	}
	return bw.err
}

// writeTable prints rows as columns two spaces apart: the first column
// left-aligned, the others right-aligned.
func writeTable(w io.Writer, rows [][]string) {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(w, b.String())
	}
}

// fmtMs renders milliseconds with three significant digits and a unit.
func fmtMs(ms float64) string {
	switch {
	case ms == 0:
		return "-"
	case ms < 1:
		return fmt.Sprintf("%.0fµs", ms*1000)
	case ms < 10:
		return fmt.Sprintf("%.2fms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1fms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.0fms", ms)
	}
	return fmt.Sprintf("%.2fs", ms/1000)
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
