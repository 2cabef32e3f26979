package main

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/client"
)

func TestUpsertRow(t *testing.T) {
	row := func(wl, clients, ops string) []string {
		return []string{"cutkv", wl, clients, "4", "256", ops, "1.00", "2.00", "3.00", "0", "-"}
	}
	doc := "# Benchmarks\n\nSome prose.\n"
	doc, err := upsertRow(doc, "local", row("put", "1", "100"))
	if err != nil {
		t.Fatal(err)
	}
	doc, _ = upsertRow(doc, "local", row("put", "16", "900"))
	doc, _ = upsertRow(doc, "local", row("put", "1", "120")) // replaces the first row
	doc += "\nMore prose.\n"
	doc, _ = upsertRow(doc, "other", row("get", "1", "7"))
	doc, _ = upsertRow(doc, "local", row("get", "64", "5000"))

	want := `# Benchmarks

Some prose.

<!-- kvbench:begin local -->
| target | workload | clients | conns | value B | ops/s | p50 ms | p99 ms | p99.9 ms | errors | records/fsync |
| --- | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: |
| cutkv | put | 1 | 4 | 256 | 120 | 1.00 | 2.00 | 3.00 | 0 | - |
| cutkv | put | 16 | 4 | 256 | 900 | 1.00 | 2.00 | 3.00 | 0 | - |
| cutkv | get | 64 | 4 | 256 | 5000 | 1.00 | 2.00 | 3.00 | 0 | - |
<!-- kvbench:end local -->

More prose.

<!-- kvbench:begin other -->
| target | workload | clients | conns | value B | ops/s | p50 ms | p99 ms | p99.9 ms | errors | records/fsync |
| --- | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: |
| cutkv | get | 1 | 4 | 256 | 7 | 1.00 | 2.00 | 3.00 | 0 | - |
<!-- kvbench:end other -->
`
	if doc != want {
		t.Errorf("got:\n%s\nwant:\n%s", doc, want)
	}
	if _, err := upsertRow("<!-- kvbench:end x -->\n<!-- kvbench:begin x -->\n", "x", row("put", "1", "1")); err == nil {
		t.Error("markers out of order: no error")
	}
}

// TestUpsertTxnRow: a transactional row adds the aborts column to its
// table, and the other rows show "-" there; tables without one keep their
// columns.
func TestUpsertTxnRow(t *testing.T) {
	old := []string{"cutkv", "put", "16", "4", "256", "900", "1.00", "2.00", "3.00", "0", "5.9"}
	doc, _ := upsertRow("", "t", old)
	cfg := &Config{Workload: "bank", Target: "cutkv", Clients: 16, Conns: 4, Accounts: 1000}
	res := newResult(cfg)
	res.fill(emptyPhase())
	res.Aborts, res.AbortRate = 25, 0.25
	doc, err := upsertRow(doc, "t", reportRow(res))
	if err != nil {
		t.Fatal(err)
	}
	cfg = &Config{Workload: "txn", Target: "cutkv", Clients: 64, Conns: 4, ValueSize: 256}
	res = newResult(cfg)
	res.fill(emptyPhase())
	res.Txn = &TxnInfo{Keys: "same", Partitions: 16}
	doc, _ = upsertRow(doc, "t", reportRow(res))
	doc, _ = upsertRow(doc, "t", old) // replaces the put row, in the new layout
	want := `<!-- kvbench:begin t -->
| target | workload | clients | conns | value B | ops/s | p50 ms | p99 ms | p99.9 ms | errors | aborts | records/fsync |
| --- | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |
| cutkv | put | 16 | 4 | 256 | 900 | 1.00 | 2.00 | 3.00 | 0 | - | 5.9 |
| cutkv | bank n=1000 | 16 | 4 | - | 0 | 0.00 | 0.00 | 0.00 | 0 | 25 (25.0 %) | - |
| cutkv | txn same | 64 | 4 | 256 | 0 | 0.00 | 0.00 | 0.00 | 0 | 0 (0.0 %) | - |
<!-- kvbench:end t -->
`
	if doc != want {
		t.Errorf("got:\n%s\nwant:\n%s", doc, want)
	}
}

func TestUpdateReportFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.md")
	cfg := &Config{Workload: "mixed", Target: "cutkv", Clients: 8, Conns: 2, ValueSize: 100, ReadRatio: 0.9}
	res := newResult(cfg)
	res.fill(emptyPhase())
	res.WAL = &WALResult{Fsyncs: 4, RecordsPerFsync: 3.25}
	if err := updateReport(path, "s1", reportRow(res)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "| cutkv | mixed r=0.9 | 8 | 2 | 100 | 0 | 0.00 | 0.00 | 0.00 | 0 | 3.2 |") {
		t.Errorf("file:\n%s", b)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP cutkv_wal_fsyncs_total WAL group commits (one fsync each).
# TYPE cutkv_wal_fsyncs_total counter
cutkv_wal_fsyncs_total 120
cutkv_wal_records_per_fsync_bucket{le="1"} 3
cutkv_wal_records_per_fsync_sum 600
cutkv_wal_records_per_fsync_count 120
cutkv_wal_fsync_duration_seconds_sum 0.06
cutkv_wal_fsync_duration_seconds_count 120
cutkv_wal_bytes_total 1e+06
process_cpu_seconds_total 1.5
go_goroutines 42
`
	before, err := parseMetrics(strings.NewReader(text), walMetricNames, metricCPU)
	if err != nil {
		t.Fatal(err)
	}
	after := walSample{}
	for k, v := range before {
		after[k] = v * 2
	}
	n := walDelta("u", before, after)
	if n.Fsyncs != 120 || n.Records != 600 || n.RecordsPerFsync != 5 || n.FsyncMeanMs != 0.5 || n.Bytes != 1e6 || n.CPUSeconds != 1.5 {
		t.Errorf("delta %+v", n)
	}
	s := sumWAL([]WALNode{n, n}, 2*time.Second, 1000)
	if s.RecordsPerFsync != 5 || s.FsyncsPerSec != 120 || s.CPUSeconds != 3 || s.CPUUsPerOp != 3000 || s.CPUCores != 1.5 {
		t.Errorf("sum %+v", s)
	}
	// etcd's nodes need only export their CPU time.
	etcd, err := parseMetrics(strings.NewReader("process_cpu_seconds_total 7\n"), requiredMetrics("etcd"))
	if err != nil || etcd[metricCPU] != 7 {
		t.Errorf("etcd metrics %v, %v", etcd, err)
	}
	if _, err := parseMetrics(strings.NewReader("process_cpu_seconds_total 7\n"), requiredMetrics("cutkv")); err == nil {
		t.Error("cutkv metrics without the WAL's accepted")
	}
	if _, err := parseMetrics(strings.NewReader("go_goroutines 1\n"), walMetricNames); err == nil || !strings.Contains(err.Error(), "missing metrics") {
		t.Errorf("no WAL metrics: err %v", err)
	}
	for in, want := range map[string]string{
		"127.0.0.1:7201":                 "http://127.0.0.1:7201/metrics",
		"http://127.0.0.1:7201/":         "http://127.0.0.1:7201/metrics",
		"http://127.0.0.1:7201/m?x=1":    "http://127.0.0.1:7201/m?x=1",
		"https://node:9000/metrics":      "https://node:9000/metrics",
		"http://127.0.0.1:7201/metrics/": "http://127.0.0.1:7201/metrics/",
	} {
		if got, err := metricsURL(in); got != want || err != nil {
			t.Errorf("metricsURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// emptyPhase is a measured phase of one second in which nothing happened.
func emptyPhase() *phaseResult {
	p := &phaseResult{elapsed: time.Second}
	for k := range p.ops {
		p.ops[k] = newOpStats()
	}
	return p
}

func TestTxnMetrics(t *testing.T) {
	text := `cutkv_wal_fsyncs_total 1
cutkv_wal_records_per_fsync_sum 1
cutkv_wal_records_per_fsync_count 1
cutkv_wal_fsync_duration_seconds_sum 1
cutkv_wal_fsync_duration_seconds_count 1
cutkv_wal_bytes_total 1
cutkv_grpc_requests_total{code="Aborted",method="/cutkv.kv.v1.KV/Txn"} 10
cutkv_grpc_requests_total{code="OK",method="/cutkv.kv.v1.KV/Txn"} 90
cutkv_grpc_requests_total{code="OK",method="/cutkv.kv.v1.KV/Put"} 7
`
	after, err := parseMetrics(strings.NewReader(text), walMetricNames, txnMetricNames...)
	if err != nil {
		t.Fatal(err)
	}
	// The optional series may be missing (a node that served no Txn).
	before, err := parseMetrics(strings.NewReader(strings.Join(strings.Split(text, "\n")[:6], "\n")), walMetricNames, txnMetricNames...)
	if err != nil {
		t.Fatal(err)
	}
	d := txnDelta([]walSample{before, before}, []walSample{after, after})
	if d.OK != 180 || d.Aborted != 20 || d.AbortedShare != 0.1 {
		t.Errorf("%+v", d)
	}
}

// TestMetricsClientTrustsCACert: with --cacert the scraper trusts that CA
// for an https:// metrics URL (a node with client TLS serves its HTTP port
// over TLS), and an unreadable or empty CA file fails naming it.
func TestMetricsClientTrustsCACert(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "cutkv_wal_fsyncs_total 3")
	}))
	defer ts.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	hc, err := metricsClient(&client.TLSFiles{CACert: ca})
	if err != nil {
		t.Fatal(err)
	}
	s, err := scrapeWAL(context.Background(), hc, ts.URL+"/metrics", []string{"cutkv_wal_fsyncs_total"})
	if err != nil || s["cutkv_wal_fsyncs_total"] != 3 {
		t.Fatalf("scrape over TLS: %v %v", s, err)
	}
	if _, err := scrapeWAL(context.Background(), &http.Client{}, ts.URL+"/metrics", nil); err == nil {
		t.Fatal("a client without the CA trusted the server")
	}
	empty := filepath.Join(t.TempDir(), "empty.crt")
	_ = os.WriteFile(empty, nil, 0o600)
	for _, f := range []string{empty, filepath.Join(t.TempDir(), "missing.crt")} {
		if _, err := metricsClient(&client.TLSFiles{CACert: f}); err == nil || !strings.Contains(err.Error(), filepath.Base(f)) {
			t.Errorf("CA file %s: %v", f, err)
		}
	}
}
