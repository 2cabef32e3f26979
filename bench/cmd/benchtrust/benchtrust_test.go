package main

import (
	"strings"
	"testing"
	"time"
)

func TestLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:7001": true,
		"127.0.0.2:7001": false,
		"localhost:7001": false,
		"10.0.0.1:7001":  false,
		"[::1]:7001":     false,
		"127.0.0.1":      false,
		"127.0.0.1:0":    false,
		"127.0.0.1:x":    false,
	} {
		if err := loopbackAddr("client", addr); (err == nil) != ok {
			t.Errorf("%s: err %v, want ok %v", addr, err, ok)
		}
	}
}

func TestFloodConfigBounds(t *testing.T) {
	good := func() floodConfig {
		return floodConfig{Client: "127.0.0.1:1", Peer: "127.0.0.1:2", HTTP: "127.0.0.1:3", Conns: 1000, Redial: time.Second,
			MaxAttempts: 50000, Phase: 10 * time.Second, Warmup: time.Second, Workers: 8, ValueSize: 256, Keyspace: 10000,
			ProbeEvery: 2 * time.Second, SampleEvery: 250 * time.Millisecond}
	}
	c := good()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*floodConfig){
		"remote peer":     func(c *floodConfig) { c.Peer = "192.168.1.1:7301" },
		"conns":           func(c *floodConfig) { c.Conns = maxConnsPerPort + 1 },
		"attempts":        func(c *floodConfig) { c.MaxAttempts = maxAttemptsBound + 1 },
		"fewer dials":     func(c *floodConfig) { c.MaxAttempts = c.Conns - 1 },
		"phase":           func(c *floodConfig) { c.Phase = maxPhase + time.Second },
		"redial":          func(c *floodConfig) { c.Redial = time.Millisecond },
		"sample":          func(c *floodConfig) { c.SampleEvery = time.Millisecond },
		"workers":         func(c *floodConfig) { c.Workers = 0 },
		"probe too often": func(c *floodConfig) { c.ProbeEvery = time.Millisecond },
	} {
		c := good()
		edit(&c)
		if err := c.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP x
cutkv_connections_open{listener="client"} 100
cutkv_connections_open{listener="peer"} 99
cutkv_connections_rejected_total{listener="client"} 12345
cutkv_connections_rejected_total{listener="peer"} 7
cutkv_wal_fsyncs_total 1e+06
process_cpu_seconds_total 3.5
process_open_fds 321
other 1
`
	m, err := parseMetrics(strings.NewReader(text), floodMetrics)
	if err != nil {
		t.Fatal(err)
	}
	if m[metricOpenClient] != 100 || m[metricRejectedClient] != 12345 || m[metricFsyncs] != 1e6 || m[metricOpenFDs] != 321 {
		t.Errorf("parsed %v", m)
	}
	if _, err := parseMetrics(strings.NewReader("process_open_fds 3\n"), floodMetrics); err == nil || !strings.Contains(err.Error(), "cutkv_wal_fsyncs_total") {
		t.Errorf("missing metrics: %v", err)
	}
}

func TestQuantile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if quantile(d, 0.5) != 50*time.Millisecond || quantile(d, 0.99) != 99*time.Millisecond || quantile(nil, 0.5) != 0 {
		t.Errorf("p50 %v p99 %v", quantile(d, 0.5), quantile(d, 0.99))
	}
}

func TestPlaceSection(t *testing.T) {
	doc := "# B\n\n## Old (run 3, x)\n\ntext\n\n## Other (run 9, y)\n\nmore\n"
	out, run, err := placeSection(doc, "tables 1\n")
	if err != nil || run != 10 {
		t.Fatalf("run %d, err %v", run, err)
	}
	want := doc + "\n## " + sectionTitle + " (run 10)\n\n" + beginMarker + "\ntables 1\n" + endMarker + "\n"
	if out != want {
		t.Fatalf("appended:\n%s\nwant:\n%s", out, want)
	}
	// A rerun replaces the tables, keeps the reading written after them.
	out += "\nReading by hand.\n"
	out2, run, err := placeSection(out, "tables 2\n")
	if err != nil || run != 10 {
		t.Fatalf("rerun: run %d, err %v", run, err)
	}
	if !strings.Contains(out2, beginMarker+"\ntables 2\n"+endMarker+"\n\nReading by hand.\n") || strings.Contains(out2, "tables 1") || !strings.HasPrefix(out2, doc) {
		t.Errorf("replaced:\n%s", out2)
	}
	if _, _, err := placeSection(endMarker+"\n"+beginMarker+"\n", "x"); err == nil {
		t.Error("markers out of order: no error")
	}
}

func TestThousands(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -4321: "-4,321"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
}
