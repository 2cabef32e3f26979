package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cutkv/cutkv/client"
)

// The cutkv node metrics that describe WAL group commit (server/node.go).
const (
	metricFsyncs        = "cutkv_wal_fsyncs_total"
	metricRecordsSum    = "cutkv_wal_records_per_fsync_sum"
	metricRecordsCount  = "cutkv_wal_records_per_fsync_count"
	metricFsyncSecSum   = "cutkv_wal_fsync_duration_seconds_sum"
	metricFsyncSecCount = "cutkv_wal_fsync_duration_seconds_count"
	metricWALBytes      = "cutkv_wal_bytes_total"
)

var walMetricNames = []string{metricFsyncs, metricRecordsSum, metricRecordsCount, metricFsyncSecSum, metricFsyncSecCount, metricWALBytes}

// The Txn RPCs a node answered, by code (server/metrics.go): Aborted is a
// conflict the client retries by itself, so the txn and bank workloads
// see it only as latency. Optional: a node that served no Txn has no such
// series.
const (
	metricTxnOK      = `cutkv_grpc_requests_total{code="OK",method="/cutkv.kv.v1.KV/Txn"}`
	metricTxnAborted = `cutkv_grpc_requests_total{code="Aborted",method="/cutkv.kv.v1.KV/Txn"}`
)

var txnMetricNames = []string{metricTxnOK, metricTxnAborted}

// metricCPU is the CPU time (user + system) a node process used, which
// the Prometheus process collector exports on cutkv and etcd alike: node
// CPU per operation is the comparison a shared, noisy machine keeps
// stable where throughput is not.
const metricCPU = "process_cpu_seconds_total"

// requiredMetrics are the metrics a target's nodes must export for
// --metrics-url: cutkv's WAL group commit, etcd's CPU time only.
func requiredMetrics(target string) []string {
	if target == "etcd" {
		return []string{metricCPU}
	}
	return walMetricNames
}

// walSample is one scrape of one node: metric name → value.
type walSample map[string]float64

// WALNode is what one node's WAL did during the measured phase: the
// difference of two scrapes.
type WALNode struct {
	URL string `json:"url"`
	// Fsyncs is the number of group commits (one fsync each).
	Fsyncs float64 `json:"fsyncs"`
	// Records is the number of WAL records they covered.
	Records float64 `json:"records"`
	// RecordsPerFsync is Records / Fsyncs.
	RecordsPerFsync float64 `json:"records_per_fsync"`
	// FsyncMeanMs is the mean time of a batch write plus fsync.
	FsyncMeanMs float64 `json:"fsync_mean_ms"`
	// Bytes appended to the WAL.
	Bytes float64 `json:"bytes"`
	// CPUSeconds is the node process's CPU time (0: not exported).
	CPUSeconds float64 `json:"cpu_s"`
}

// WALResult sums the nodes.
type WALResult struct {
	Nodes           []WALNode `json:"nodes"`
	Fsyncs          float64   `json:"fsyncs"`
	Records         float64   `json:"records"`
	RecordsPerFsync float64   `json:"records_per_fsync"`
	// FsyncsPerSec is the fsyncs of all nodes per second of the measured
	// phase.
	FsyncsPerSec float64 `json:"fsyncs_per_sec"`
	// CPUSeconds is the CPU time of all nodes, CPUUsPerOp that divided
	// by the operations measured (µs), CPUCores that per second of the
	// measured phase.
	CPUSeconds float64 `json:"cpu_s"`
	CPUUsPerOp float64 `json:"cpu_us_per_op"`
	CPUCores   float64 `json:"cpu_cores"`
}

// metricsURL completes a --metrics-url value: http:// when no scheme is
// given, /metrics when no path is.
func metricsURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("invalid --metrics-url %q: %v", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("invalid --metrics-url %q: want http://host:port/metrics", s)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/metrics"
	}
	return u.String(), nil
}

// metricsClient scrapes the nodes' /metrics. With TLS (--cacert) it
// trusts that CA for https:// metrics URLs: a node with client TLS serves
// its HTTP port over TLS with the same certificate (it asks for no client
// certificate there).
func metricsClient(files *client.TLSFiles) (*http.Client, error) {
	if files == nil {
		return &http.Client{}, nil
	}
	pem, err := os.ReadFile(files.CACert)
	if err != nil {
		return nil, fmt.Errorf("--cacert for https metrics URLs: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--cacert %s holds no PEM certificate", files.CACert)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
}

// scrapeWAL reads the node metrics from a Prometheus text endpoint. Every
// metric in required must be there.
func scrapeWAL(ctx context.Context, hc *http.Client, u string, required []string) (walSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", u, resp.Status)
	}
	s, err := parseMetrics(resp.Body, required, append([]string{metricCPU}, txnMetricNames...)...)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", u, err)
	}
	return s, nil
}

// parseMetrics reads the samples named in names, which must all be
// there, and in optional from the Prometheus text format. A labelled
// series is named as the format prints it: name{label="value",...}.
func parseMetrics(r io.Reader, names []string, optional ...string) (walSample, error) {
	want := make(map[string]bool, len(names)+len(optional))
	for _, n := range append(append([]string{}, names...), optional...) {
		want[n] = true
	}
	s := make(walSample)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 || !want[fields[0]] {
			continue
		}
		v, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: bad value %q", fields[0], fields[1])
		}
		s[fields[0]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var missing []string
	for _, n := range names {
		if _, ok := s[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing metrics %s (is this a node of the --target database?)", strings.Join(missing, ", "))
	}
	return s, nil
}

// walDelta computes what happened between two scrapes of the same node.
func walDelta(u string, before, after walSample) WALNode {
	d := func(name string) float64 { return after[name] - before[name] }
	n := WALNode{URL: u, Fsyncs: d(metricFsyncs), Records: d(metricRecordsSum), Bytes: d(metricWALBytes), CPUSeconds: d(metricCPU)}
	if c := d(metricRecordsCount); c > 0 {
		n.RecordsPerFsync = n.Records / c
	}
	if c := d(metricFsyncSecCount); c > 0 {
		n.FsyncMeanMs = d(metricFsyncSecSum) / c * 1000
	}
	return n
}

// TxnRPCs counts the Txn RPCs all nodes answered during the measured
// phase (with --metrics-url): each is one attempt of a transaction (the
// workers' and the auditor's), and Aborted ones were retried by the
// client.
type TxnRPCs struct {
	OK      float64 `json:"ok"`
	Aborted float64 `json:"aborted"`
	// AbortedShare is Aborted / (OK + Aborted).
	AbortedShare float64 `json:"aborted_share"`
}

// txnDelta sums what the nodes' Txn RPC counters did between the scrapes.
func txnDelta(before, after []walSample) *TxnRPCs {
	t := &TxnRPCs{}
	for i := range before {
		t.OK += after[i][metricTxnOK] - before[i][metricTxnOK]
		t.Aborted += after[i][metricTxnAborted] - before[i][metricTxnAborted]
	}
	if n := t.OK + t.Aborted; n > 0 {
		t.AbortedShare = t.Aborted / n
	}
	return t
}

// sumWAL adds the nodes up over a measured phase of the given length in
// which ops operations completed.
func sumWAL(nodes []WALNode, elapsed time.Duration, ops int64) *WALResult {
	r := &WALResult{Nodes: nodes}
	for _, n := range nodes {
		r.Fsyncs += n.Fsyncs
		r.Records += n.Records
		r.CPUSeconds += n.CPUSeconds
	}
	if r.Fsyncs > 0 {
		r.RecordsPerFsync = r.Records / r.Fsyncs
	}
	if s := elapsed.Seconds(); s > 0 {
		r.FsyncsPerSec = r.Fsyncs / s
		r.CPUCores = r.CPUSeconds / s
	}
	if ops > 0 {
		r.CPUUsPerOp = r.CPUSeconds / float64(ops) * 1e6
	}
	return r
}
