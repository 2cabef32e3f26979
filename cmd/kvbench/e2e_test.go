package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/server"
)

// TestAgainstCluster runs the workloads for about a second each against a
// real in-process 3-node cluster. It checks that operations complete
// without errors, never how fast.
func TestAgainstCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	httpAddrs := make([]string, 3)
	c := clustertest.Start(t, 3, clustertest.Options{
		Partitions: 4,
		Configure: func(i int, cfg *server.Config) {
			httpAddrs[i] = clustertest.FreeAddr(t)
			cfg.HTTPAddr = httpAddrs[i]
		},
	})
	dir := t.TempDir()
	md := filepath.Join(dir, "bench.md")
	base := []string{
		"--endpoints", strings.Join(c.Endpoints(), ","),
		"--clients", "4", "--conns", "2", "--keyspace", "300", "--value-size", "64",
		"--progress", "200ms", "--seed", "7",
		"--report-md", md, "--report-section", "test",
	}
	runJSON := func(args ...string) Result {
		t.Helper()
		out := filepath.Join(dir, "out.json")
		r := kvbench(t, nil, append(append(append([]string{}, base...), "--out", out), args...)...)
		if r.code != exitOK {
			t.Fatalf("kvbench %q: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
		}
		var res Result
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("bad JSON %s: %v", b, err)
		}
		t.Logf("kvbench %q:\n%s%s", args, r.stdout, r.stderr)
		return res
	}
	check := func(res Result, ops ...string) {
		t.Helper()
		if res.Ops == 0 || res.Errors.Total != 0 || res.OpsPerSec <= 0 || res.Latency.P50 <= 0 || res.Latency.Max < res.Latency.P99 {
			t.Errorf("%s: ops %d, errors %+v, ops/s %v, latency %+v", res.Workload, res.Ops, res.Errors, res.OpsPerSec, res.Latency)
		}
		for _, op := range ops {
			if s := res.ByOp[op]; s.Ops == 0 || s.Errors.Total != 0 {
				t.Errorf("%s: %s ops %d, errors %d", res.Workload, op, s.Ops, s.Errors.Total)
			}
		}
		if res.NotFound != 0 {
			t.Errorf("%s: %d gets found no value", res.Workload, res.NotFound)
		}
	}

	put := runJSON("put", "--duration", "1s", "--metrics-url", httpAddrs[0]+","+httpAddrs[1])
	check(put, "put")
	if put.WAL == nil || len(put.WAL.Nodes) != 2 || put.WAL.Fsyncs <= 0 || put.WAL.RecordsPerFsync < 1 {
		t.Errorf("WAL stats %+v", put.WAL)
	}
	if put.Machine.NumCPU <= 0 || put.Machine.GoVersion == "" || put.Config.Clients != 4 || put.Config.Seed != 7 {
		t.Errorf("machine %+v, config %+v", put.Machine, put.Config)
	}

	get := runJSON("get", "--duration", "1s", "--warmup", "200ms")
	check(get, "get")
	if get.Preload == nil || get.Preload.Keys != 300 || get.Preload.Errors != 0 {
		t.Errorf("preload %+v", get.Preload)
	}

	mixed := runJSON("mixed", "--total", "200", "--read-ratio", "0.7", "--rate", "1000")
	check(mixed, "put", "get")
	if n := mixed.Ops + mixed.Errors.Total; n != 200 {
		t.Errorf("mixed --total 200 ran %d operations", n)
	}

	// The text output is a table with one row per operation kind.
	r := kvbench(t, nil, append(base, "put", "--total", "20", "--progress", "0")...)
	if r.code != exitOK || !strings.Contains(r.stdout, "p99.9") || !strings.Contains(r.stdout, "\nop ") || !strings.Contains(r.stdout, "\nput ") {
		t.Errorf("text output: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	// put --duration and put --total share a row: same key.
	if n := strings.Count(string(b), "| cutkv |"); n != 3 {
		t.Errorf("report has %d rows, want 3:\n%s", n, b)
	}
}
