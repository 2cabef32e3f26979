package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

func TestUpdateReportFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.md")
	cfg := &Config{Workload: "mixed", Target: "cutkv", Clients: 8, Conns: 2, ValueSize: 100, ReadRatio: 0.9}
	res := newResult(cfg)
	res.fill(&phaseResult{elapsed: time.Second, ops: [numOps]*opStats{newOpStats(), newOpStats()}})
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
go_goroutines 42
`
	before, err := parseMetrics(strings.NewReader(text), walMetricNames)
	if err != nil {
		t.Fatal(err)
	}
	after := walSample{}
	for k, v := range before {
		after[k] = v * 2
	}
	n := walDelta("u", before, after)
	if n.Fsyncs != 120 || n.Records != 600 || n.RecordsPerFsync != 5 || n.FsyncMeanMs != 0.5 || n.Bytes != 1e6 {
		t.Errorf("delta %+v", n)
	}
	s := sumWAL([]WALNode{n, n}, 2*time.Second)
	if s.RecordsPerFsync != 5 || s.FsyncsPerSec != 120 {
		t.Errorf("sum %+v", s)
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
