package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clustertest"
)

// TestAgainstEtcd runs put, get, txn and bank against a one-member etcd on loopback,
// when an etcd binary is installed (Debian: etcd-server); else it skips.
func TestAgainstEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("no etcd binary on PATH")
	}
	client, peer := clustertest.FreeAddr(t), clustertest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin,
		"--name", "t", "--data-dir", t.TempDir(),
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "t=http://"+peer, "--log-level", "error")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	clustertest.Eventually(t, 20*time.Second, func() error {
		c, err := etcdDriver{}.Connect(ctx, []string{client}, ConnectOptions{DialTimeout: time.Second})
		if err != nil {
			return err
		}
		return c.Close()
	})

	for _, args := range [][]string{
		{"put", "--keyspace", "200"},
		{"get", "--keyspace", "200"},
		{"txn", "--keyspace", "200"},
		{"bank", "--accounts", "50", "--audit-interval", "200ms"},
	} {
		wl := args[0]
		r := kvbench(t, nil, append(args, "--target", "etcd", "--endpoints", client, "--clients", "4", "--conns", "2",
			"--duration", "1s", "--progress", "0", "-o", "json")...)
		if r.code != exitOK {
			t.Fatalf("%s: exit %d\n%s%s", wl, r.code, r.stdout, r.stderr)
		}
		var res Result
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatal(err)
		}
		t.Logf("etcd %s: %d ops, %.0f ops/s, p99 %.2f ms, %d aborts", wl, res.Ops, res.OpsPerSec, res.Latency.P99, res.Aborts)
		if res.Ops == 0 || res.Errors.Total != 0 || res.NotFound != 0 {
			t.Errorf("etcd %s: ops %d, errors %+v, not found %d", wl, res.Ops, res.Errors, res.NotFound)
		}
		if wl == "bank" && (res.Bank == nil || res.Bank.Audits.Ops == 0 || res.Bank.FinalAudit != "ok") {
			t.Errorf("etcd bank: %+v", res.Bank)
		}
	}
}
