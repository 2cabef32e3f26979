package main

import (
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseParams(t *testing.T) {
	got := parseParams("# knobs\ncut_interval=1s\n\n snapshot_interval = 10s \nbad line\nempty=\n")
	want := map[string]string{"cut_interval": "1s", "snapshot_interval": "10s", "empty": ""}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestParseEvents(t *testing.T) {
	const text = `started n1 pid=12
open n1 0.331
open n2 0.340
ready n1 2.130
ready n2 2.140
applied n1 0.810
all-ready
stopped n1 status=0 took=1.2
ready n3 x
`
	ev := parseEvents(text)
	if ev["open"]["n1"] != 0.331 || ev["open"]["n2"] != 0.34 || ev["ready"]["n2"] != 2.14 || ev["applied"]["n1"] != 0.81 {
		t.Errorf("parseEvents = %v", ev)
	}
	if _, ok := ev["ready"]["n3"]; ok {
		t.Error("a malformed time was read")
	}
	if _, ok := ev["stopped"]; ok {
		t.Error("stopped lines were read")
	}
	if got := nodeTimes(ev["ready"]); got != "2.13 / 2.14 / -" {
		t.Errorf("nodeTimes = %q", got)
	}
	if v, ok := slowest(ev["ready"]); !ok || v != 2.14 {
		t.Errorf("slowest = %v, %v", v, ok)
	}
	if _, ok := slowest(nil); ok {
		t.Error("slowest of nothing is ok")
	}
}

func TestParseSizes(t *testing.T) {
	wal, mat := parseSizes("wal 1048576\nmaterializations 2097152\nother 3\nwal\n")
	if wal != 1<<20 || mat != 2<<20 {
		t.Errorf("parseSizes = %d, %d", wal, mat)
	}
}

func TestFitSlope(t *testing.T) {
	s, ok := fitSlope([]float64{0, 1, 2, 3}, []float64{10, 12, 14, 16})
	if !ok || math.Abs(s-2) > 1e-12 {
		t.Errorf("fitSlope = %v, %v; want 2", s, ok)
	}
	if _, ok := fitSlope([]float64{1}, []float64{1}); ok {
		t.Error("one point gave a slope")
	}
	if _, ok := fitSlope([]float64{2, 2}, []float64{1, 3}); ok {
		t.Error("equal xs gave a slope")
	}
}

func TestABSums(t *testing.T) {
	mk := func(w string, pass int, mode string, ops float64) ABRun {
		r := ABRun{Mode: mode}
		r.Workload, r.Pass, r.OpsPerSec = w, pass, ops
		return r
	}
	runs := []ABRun{mk("put", 1, "A", 100), mk("put", 1, "B", 90), mk("put", 2, "A", 200), mk("put", 2, "B", 150), mk("txn", 1, "A", 50)}
	a, b, na, nb, pairs := abSums(runs, "put")
	if a != 300 || b != 240 || na != 2 || nb != 2 || len(pairs) != 2 || pairs[0] != 0.9 || pairs[1] != 0.75 {
		t.Errorf("abSums = %v %v %v %v %v", a, b, na, nb, pairs)
	}
	if _, _, _, _, pairs := abSums(runs, "txn"); len(pairs) != 0 {
		t.Errorf("an unpaired run gave %v", pairs)
	}
	if got := abWorkloads(runs); strings.Join(got, ",") != "put,txn" {
		t.Errorf("abWorkloads = %v", got)
	}
}

func TestLogAxis(t *testing.T) {
	a := newAxis([]float64{1, 4, 16, 64, 0}, true)
	if a.lo != 1 || a.hi != 100 {
		t.Errorf("range %v..%v, want 1..100", a.lo, a.hi)
	}
	want := []float64{1, 2, 5, 10, 20, 50, 100}
	if len(a.ticks) != len(want) {
		t.Fatalf("ticks %v, want %v", a.ticks, want)
	}
	for i := range want {
		if math.Abs(a.ticks[i]-want[i]) > 1e-9 {
			t.Errorf("ticks %v, want %v", a.ticks, want)
		}
	}
	if f := a.frac(10); math.Abs(f-0.5) > 1e-12 {
		t.Errorf("frac(10) = %v", f)
	}
	if one := newAxis([]float64{10}, true); one.hi <= one.lo {
		t.Errorf("one value: range %v..%v", one.lo, one.hi)
	}
	if wide := logTicks(1e-3, 1e6); len(wide) != 10 {
		t.Errorf("many decades: %d ticks %v, want the 10 powers of ten", len(wide), wide)
	}
	lin := newAxis([]float64{3, 7.5}, false)
	if lin.lo != 0 || lin.hi < 7.5 || lin.ticks[0] != 0 {
		t.Errorf("linear axis %+v", lin)
	}
}

// wellFormed fails t unless svg parses as XML.
func wellFormed(t *testing.T, name, svg string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s: not well-formed: %v", name, err)
		}
	}
}

func TestXYChart(t *testing.T) {
	c := xyChart{
		Title: "t <&>", XLabel: "x", YLabel: "y", LogX: true, LogY: true, SameScale: true, Diagonal: true, DiagonalLabel: "y = x",
		Series: []series{{Name: "s", Color: "#000", Points: []point{{X: 1, Y: 1.1}, {X: 0, Y: 5}, {X: 64, Y: 66}}}},
	}
	svg := c.svg()
	wellFormed(t, "xy", svg)
	if n := strings.Count(svg, "<circle"); n != 2 {
		t.Errorf("%d markers, want 2 (x = 0 cannot be shown on a log axis)", n)
	}
	if n := strings.Count(svg, "<polyline"); n != 2 {
		t.Errorf("%d lines, want the series and y = x", n)
	}
	if !strings.Contains(svg, "t &lt;&amp;&gt;") {
		t.Error("title not escaped")
	}
}

// writeFile writes text to dir/name, creating directories.
func writeFile(t *testing.T, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// costsFixture writes a costs directory as bench-compare.sh would, one
// point or run of each part.
func costsFixture(t *testing.T) string {
	dir := t.TempDir()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	run := func(w, ops, cuts string) string {
		return `{"workload":"` + w + `","target":"cutkv","start":"` + start.Format(time.RFC3339) + `","elapsed_s":20,"ops":40000,"ops_per_sec":` + ops +
			`,"latency_ms":{"p50":10,"p99":50},"errors":{"total":0},"config":{"warmup":"2s","value_size":256,"key_size":16},` +
			`"machine":{"num_cpu":2,"cpu":"Test CPU","goos":"linux","goarch":"amd64","go_version":"go1.26","load_avg":"1.00 1.00 1.00"}` + cuts + `}`
	}
	writeFile(t, dir, "params", "cut_interval=1s\nsnapshot_interval=10s\nidle_cuts=20\n")
	writeFile(t, dir, "ab/command.txt", "bin/kvbench put ...\n")
	writeFile(t, dir, "ab/put-1-A.json", run("put", "2000", ""))
	writeFile(t, dir, "ab/put-1-B.json", run("put", "1800", `,"cuts":{"interval":"1s","completed":20,"failed":0,"errors":0,"latency_ms":{"p50":8.5,"p99":25,"max":30}}`))
	writeFile(t, dir, "ab/put-1-B.metrics.json", `{"nodes":[{"url":"a","samples":{"cutkv_snapshot_duration_seconds_count{result=\"ok\"}":3,"cutkv_snapshot_duration_seconds_sum{result=\"ok\"}":0.6,"cutkv_snapshot_uploaded_bytes_total":2097152}},{"url":"b","samples":{}}]}`)
	ms := func(d time.Duration) string { return strconv.FormatInt(start.Add(d).UnixMilli(), 10) }
	writeFile(t, dir, "ab/put-1-B.snapshots.json", `{"snapshots":[{"id":"a","time_unix_ms":`+ms(-5*time.Second)+`},{"id":"b","time_unix_ms":`+ms(5*time.Second)+`},{"id":"c","time_unix_ms":`+ms(25*time.Second)+`}]}`)
	writeFile(t, dir, "cuts/idle.json", `{"asked":20,"completed":20,"latency_ms":{"p50":4,"p99":9.5,"max":11},"server_ms":{"p50":3,"p99":8,"max":9}}`)
	writeFile(t, dir, "upload/full.json", `{"id":"cut-1","bytes_uploaded":1048576,"pieces_uploaded":32,"duration_ms":500,"total_bytes":1048576,"objects":32}`)
	writeFile(t, dir, "upload/step-0.json", `{"id":"cut-2","bytes_uploaded":2500,"pieces_uploaded":16,"pieces_reused":32}`)
	writeFile(t, dir, "upload/step-4.json", `{"id":"cut-3","bytes_uploaded":4404019,"pieces_uploaded":16,"pieces_reused":48}`)
	writeFile(t, dir, "upload/step-4.put.json", `{"workload":"put","ops":4096,"config":{"value_size":1024}}`)
	writeFile(t, dir, "upload/step-1.json", `{"id":"cut-4","error":"store busy"}`)
	writeFile(t, dir, "restart/25000.events", "open n1 0.3\nready n1 2.1\nready n2 2.2\nready n3 2.0\napplied n1 0.8\n")
	writeFile(t, dir, "restart/25000.sizes", "wal 10485760\nmaterializations 0\n")
	writeFile(t, dir, "restart/25000.start.events", "ready n1 9\n") // not a restart
	writeFile(t, dir, "memory/0.json", `{"nodes":[{"samples":{"go_memstats_heap_inuse_bytes":10485760,"process_resident_memory_bytes":20971520}}]}`)
	writeFile(t, dir, "memory/1000000.json", `{"nodes":[{"samples":{"go_memstats_heap_inuse_bytes":1059061760,"process_resident_memory_bytes":2118123520}}]}`)
	writeFile(t, dir, "memory/1000000.fill.json", `{"from":0,"to":1000000,"key_size":16,"value_size":256,"keys":1000000,"seconds":100}`)
	return dir
}

func TestLoadCostsAndMarkdown(t *testing.T) {
	c, err := loadCosts(costsFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.AB) != 2 || c.AB[0].Mode != "A" || c.AB[1].Mode != "B" {
		t.Fatalf("AB runs %+v", c.AB)
	}
	s := c.AB[1].Snaps
	if s == nil || s.OK != 3 || s.Listed != 3 || s.InRun != 1 || math.Abs(s.MeanS-0.2) > 1e-9 || s.Uploaded != 2<<20 {
		t.Errorf("B's snapshots %+v (want 3 ok, mean 0.2 s, 3 listed, 1 in the run: the others fell before the warm-up and after the end)", s)
	}
	if len(c.Upload.Steps) != 3 || c.Upload.Steps[0].MiB != 0 || c.Upload.Steps[2].MiB != 4 {
		t.Errorf("upload steps %+v", c.Upload.Steps)
	}
	if len(c.Restart) != 1 || c.Restart[0].WALBytes != 10<<20 || c.Restart[0].Ready["n2"] != 2.2 {
		t.Errorf("restart %+v", c.Restart)
	}
	if len(c.Memory) != 2 || c.Memory[1].Fill == nil || c.Memory[1].Heap[0] != 1059061760 {
		t.Errorf("memory %+v", c.Memory)
	}
	if len(c.runs()) != 3 { // A, B, the upload's put
		t.Errorf("runs() = %d", len(c.runs()))
	}

	links := map[string]string{}
	for name, svg := range costsSVGs(c) {
		wellFormed(t, name, svg)
		links[name] = "img/" + name
	}
	if len(links) != 5 {
		t.Errorf("%d charts, want 5: %v", len(links), links)
	}
	md := costsMarkdown(c, links)
	for _, want := range []string{
		"### Cost of a cut every 1s and a snapshot every 10s (cutkv)",
		"| put | 2,000 | 1,800 | **0.90** | 0.90 | 20 (0) | 8.5 / 25.0 | 1 |",
		"| put | 1 | B: cuts + snapshots | 1,800 | 10.00 | 50.00 | 0 | 20 (0, 0) | 8.5 / 25.0 / 30.0 | 1 | 3 (0), 0.20, 2.0 | 1.00 1.00 1.00 |",
		"| idle | 20 (0, 0) | 4.0 | 9.5 | 11.0 | yes |",
		"| put, B pass 1 | 20 (0, 0) | 8.5 | 25.0 | 30.0 | no |",
		"Idle, as the cluster recorded the same cuts (start to finish, whole ms): p50 3, p99 8, max 9.",
		"| full snapshot, after the setup | - | - | 1.00 | - | 32 / 0 | 0.50 | 1.0 (32) |",
		"| incremental, X = 0 MiB | 0.00 | 0 | 2,500 B | - | 16 / 32 |",
		"| incremental, X = 1 MiB | 0.00 | 0 | failed: `store busy` |",
		"| incremental, X = 4 MiB | 4.00 | 4096 (0) | 4.20 | 1.05 | 16 / 48 |",
		"| 25000 | - | 10.0 | 0.0 | 0.30 / - / - | 2.10 / 2.20 / 2.00 | 0.80 / - / - |",
		"| 1000000 | 259.4 | 1010 | 2020 | 1059 | 2118 | 1049 | 2097 | 1000000 keys in 100 s (10000 keys/s, 0 retries, 0 errors) |",
		"heap in use **1000 MiB**, RSS **2000 MiB** per node",
		"![ops/s per run: A (nothing) and B (cuts and snapshots)](img/bench-compare-costs-ab.svg)",
		"```sh\nbin/kvbench put ...\n```",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in:\n%s", want, md)
		}
	}
}

func TestSectionCostsOnly(t *testing.T) {
	c, err := loadCosts(costsFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	sec := section(sectionInput{Machine: "m", Commands: "COSTS=x make bench-compare", Costs: c, CostsTook: "60s", Date: time.Unix(0, 0)})
	if strings.Contains(sec, "etcd ops/s") || strings.Contains(sec, "* Runs:") {
		t.Errorf("etcd parts without etcd runs:\n%s", sec)
	}
	for _, want := range []string{"## " + sectionTitle, "* Command: `COSTS=x make bench-compare`", "They took 60s in all.", "### Memory per million keys"} {
		if !strings.Contains(sec, want) {
			t.Errorf("missing %q", want)
		}
	}
	plain := section(sectionInput{Groups: []Group{{Workload: "put"}}, Machine: "m"})
	if strings.Contains(plain, "own costs") || strings.Contains(plain, "### Cost") {
		t.Errorf("cost text without costs:\n%s", plain)
	}
}
