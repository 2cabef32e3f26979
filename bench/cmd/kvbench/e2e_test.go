package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestTransactionsAgainstCluster runs txn (keys in different partitions,
// then in one) and bank for about a second each against a real
// in-process 3-node cluster of 4 partitions. It checks that transactions
// complete and that the bank total holds in every audit, never how fast.
func TestTransactionsAgainstCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 4})
	dir := t.TempDir()
	md := filepath.Join(dir, "bench.md")
	base := []string{
		"--endpoints", strings.Join(c.Endpoints(), ","),
		"--clients", "4", "--conns", "2", "--progress", "300ms", "--seed", "11",
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

	for _, keys := range []string{"cross", "same"} {
		res := runJSON("txn", "--txn-keys", keys, "--duration", "1s", "--keyspace", "200", "--value-size", "32")
		s := res.ByOp["txn"]
		if res.Ops == 0 || s.Ops != res.Ops || res.Errors.Total != 0 || res.Latency.P50 <= 0 {
			t.Errorf("txn %s: ops %d (txn %d), errors %+v, latency %+v", keys, res.Ops, s.Ops, res.Errors, res.Latency)
		}
		if res.Txn == nil || res.Txn.Keys != keys || res.Txn.Partitions != 4 {
			t.Errorf("txn %s: %+v", keys, res.Txn)
		}
	}

	bank := runJSON("bank", "--accounts", "50", "--duration", "1s", "--audit-interval", "200ms", "--cut-interval", "100ms")
	if cu := bank.Cuts; cu == nil || cu.Completed < 3 || cu.Failed+cu.Errors != 0 || cu.Latency.P50 <= 0 {
		t.Errorf("bank with cuts every 100ms: %+v", cu)
	}
	b := bank.Bank
	if bank.Ops == 0 || bank.ByOp["transfer"].Ops != bank.Ops || bank.Errors.Total != 0 {
		t.Errorf("bank: ops %d, errors %+v", bank.Ops, bank.Errors)
	}
	if b == nil || b.Audits.Ops == 0 || b.FinalAudit != "ok" || b.Violation != "" || b.Total != 50*initialBalance {
		t.Fatalf("bank audits: %+v", b)
	}
	if bank.AbortRate < 0 || bank.AbortRate >= 1 || bank.Preload == nil || bank.Preload.Keys != 50 {
		t.Errorf("bank: abort rate %v, init %+v", bank.AbortRate, bank.Preload)
	}

	// Read the accounts back: the total is intact after the run too.
	conn, err := cutkvDriver{}.Connect(context.Background(), c.Endpoints(), ConnectOptions{DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bk := newBank(&Config{Accounts: 50, KeySize: defaultKeySize})
	if violation, err := bk.audit(ctx, conn); err != nil || violation != "" {
		t.Errorf("after the run: %s %v", violation, err)
	}

	doc, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"| cutkv | txn cross | 4 | 2 | 32 |", "| cutkv | txn same | 4 | 2 | 32 |", "| cutkv | bank n=50 | 4 | 2 | - |"} {
		if !strings.Contains(string(doc), row) {
			t.Errorf("report lacks %q:\n%s", row, doc)
		}
	}
	if !strings.Contains(string(doc), "| errors | aborts |") {
		t.Errorf("report lacks the aborts column:\n%s", doc)
	}
}
