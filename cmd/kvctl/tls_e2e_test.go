package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/server"
)

// TestTLSAgainstRealCluster runs kvctl against in-process nodes with TLS
// everywhere, with certificates kvctl cert made: each role does what
// docs/cli.md says, through the client library (put, get) and kvctl's own
// admin connections (cut, snapshot, status) alike; without --cacert kvctl
// gives up at once saying TLS.
func TestTLSAgainstRealCluster(t *testing.T) {
	dir := t.TempDir()
	mk := func(args ...string) {
		t.Helper()
		args = append(append([]string{"cert"}, args...), "--dir", dir)
		if args[1] != "create-ca" {
			args = append(args, "--ca-dir", dir)
		}
		if r := kvctl(t, nil, "", args...); r.code != 0 {
			t.Fatalf("kvctl cert %v: %+v", args, r)
		}
	}
	mk("create-ca")
	for i := 1; i <= 3; i++ {
		mk("create-node", fmt.Sprintf("n%d", i), "--hosts", "127.0.0.1")
	}
	for _, role := range []string{"admin", "write", "read"} {
		mk("create-client", role, "--role", role)
	}
	file := func(name string) string { return filepath.Join(dir, name) }
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 2, Configure: func(i int, cfg *server.Config) {
		n := fmt.Sprintf("n%d", i+1)
		cfg.PeerCertFile, cfg.PeerKeyFile, cfg.PeerTrustedCAFile = file(n+".crt"), file(n+".key"), file("ca.crt")
		cfg.CertFile, cfg.KeyFile, cfg.TrustedCAFile = file(n+".crt"), file(n+".key"), file("ca.crt")
	}})
	eps := "--endpoints=" + strings.Join(c.Endpoints(), ",")
	as := func(role string, args ...string) result {
		t.Helper()
		return kvctl(t, nil, "", append([]string{eps, "--timeout=30s", "--cacert", file("ca.crt"), "--cert", file(role + ".crt"), "--key", file(role + ".key")}, args...)...)
	}
	clustertest.Eventually(t, 10*time.Second, func() error {
		if r := as("write", "put", "k", "v"); r.code != 0 {
			return fmt.Errorf("%+v", r)
		}
		return nil
	})
	if r := as("read", "get", "k"); r.code != 0 || strings.TrimSpace(r.stdout) != "v" {
		t.Fatalf("read role get: %+v", r)
	}
	for _, tc := range []struct {
		role string
		args []string
		code int
	}{
		{"read", []string{"put", "k", "w"}, exitDenied},
		{"read", []string{"status"}, 0},
		{"read", []string{"cut", "list"}, 0},
		{"write", []string{"cut", "create"}, exitDenied},
		{"write", []string{"snapshot", "create"}, exitDenied},
		{"admin", []string{"cut", "create"}, 0},
		{"admin", []string{"snapshot", "create"}, 0},
		{"read", []string{"snapshot", "list"}, 0},
		{"admin", []string{"check"}, 0},
	} {
		r := as(tc.role, tc.args...)
		if r.code != tc.code {
			t.Errorf("%s %v: exit %d, want %d; %+v", tc.role, tc.args, r.code, tc.code, r)
		}
		if tc.code == exitDenied && !strings.Contains(r.stderr, "needs role") {
			t.Errorf("%s %v: stderr %q does not say which role is needed", tc.role, tc.args, r.stderr)
		}
	}
	// The environment gives the same files.
	env := map[string]string{envCACert: file("ca.crt"), envCert: file("admin.crt"), envKey: file("admin.key")}
	r := kvctl(t, env, "", eps, "cut", "create")
	if r.code != 0 {
		t.Fatalf("cut create with CUTKV_CACERT/CERT/KEY: %+v", r)
	}
	// Plaintext against TLS: a clear error, long before --timeout.
	for _, args := range [][]string{{"get", "k"}, {"snapshot", "create"}} {
		start := time.Now()
		r := kvctl(t, nil, "", append([]string{eps, "--timeout=1m"}, args...)...)
		if r.code != exitUnavailable || !strings.Contains(r.stderr, "TLS") || time.Since(start) > 15*time.Second {
			t.Errorf("plaintext %v against TLS: exit %d after %v; %+v", args, r.code, time.Since(start), r)
		}
	}
}
