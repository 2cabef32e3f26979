package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/pki"
	"github.com/cutkv/cutkv/server"
)

func TestTLSUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"put", "--cert", "c.crt", "--key", "c.key"}, "--cert and --key need --cacert"},
		{[]string{"put", "--cacert", "ca.crt", "--cert", "c.crt"}, "--cert and --key go together"},
		{[]string{"put", "--cacert", "ca.crt", "--key", "c.key"}, "--cert and --key go together"},
		{[]string{"put", "--target", "etcd", "--cacert", "ca.crt"}, "apply only to --target cutkv, not etcd"},
	} {
		r := kvbench(t, nil, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.msg) || r.stdout != "" {
			t.Errorf("kvbench %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, r.code, r.stdout, r.stderr, tc.msg)
		}
	}
}

// TestTLSConfig: the TLS files of the Config are what each connection's
// client.Config gets; without them the client is plaintext.
func TestTLSConfig(t *testing.T) {
	files := &client.TLSFiles{CACert: "ca.crt", Cert: "w.crt", Key: "w.key"}
	c := Config{Workload: "put", Endpoints: []string{"127.0.0.1:1"}, TLS: files, DialTimeout: 3 * time.Second}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	cc := cutkvClientConfig(c.Endpoints, c.connectOptions())
	if cc.TLS == nil || *cc.TLS != *files || cc.DialTimeout != 3*time.Second || len(cc.Endpoints) != 1 {
		t.Errorf("client config %+v, TLS %+v; want TLS %+v", cc, cc.TLS, files)
	}
	if err := cc.Validate(); err != nil {
		t.Errorf("the client refuses the config: %v", err)
	}
	if rc := runConfig(&c); rc.TLS == nil || rc.TLS.CACert != "ca.crt" || rc.TLS.Cert != "w.crt" || rc.TLS.Key != "w.key" {
		t.Errorf("JSON config TLS %+v", rc.TLS)
	}
	// A CA alone (servers verified, no client certificate) is valid.
	c = Config{Workload: "put", Endpoints: []string{"a:1"}, TLS: &client.TLSFiles{CACert: "ca.crt"}}
	if err := c.Validate(); err != nil {
		t.Errorf("--cacert alone: %v", err)
	}
	c = Config{Workload: "put", Endpoints: []string{"a:1"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if cc := cutkvClientConfig(c.Endpoints, c.connectOptions()); cc.TLS != nil {
		t.Errorf("plaintext run: client TLS %+v", cc.TLS)
	}
	if runConfig(&c).TLS != nil {
		t.Error("plaintext run: JSON config has TLS")
	}
}

// TestTLSFlagsReachClient: each of --cacert, --cert and --key reaches the
// client, which loads the file it names (and says so when it is missing)
// before it dials anything.
func TestTLSFlagsReachClient(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.CreateCA(dir, "kvbench test CA", pki.Options{ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	missing := func(name string) string { return filepath.Join(dir, name) }
	for _, tc := range []struct {
		args []string
		want string // the file the error names
	}{
		{[]string{"--cacert", missing("no-ca.crt")}, missing("no-ca.crt")},
		{[]string{"--cacert", ca.Cert, "--cert", missing("no-client.crt"), "--key", missing("no-client.key")}, missing("no-client.crt")},
		{[]string{"--cacert", ca.Cert, "--cert", ca.Cert, "--key", missing("no-client.key")}, missing("no-client.key")},
	} {
		r := kvbench(t, nil, append([]string{"put", "--endpoints", "127.0.0.1:1", "--dial-timeout", "300ms", "--duration", "1s"}, tc.args...)...)
		if r.code != exitFailed || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "TLS") {
			t.Errorf("kvbench put %q: exit %d, stderr %q; want exit 1 naming %s", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// TestTLSAgainstCluster runs kvbench against a 1-node cluster with TLS
// everywhere (peer mutual TLS, client certificates required, encrypted
// gossip): with a write certificate put works, with an admin one cuts do
// too (the cutter's own connection is TLS), a read certificate is
// refused the writes, and without --cacert kvbench cannot connect.
func TestTLSAgainstCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	dir := t.TempDir()
	opts := pki.Options{ValidFor: time.Hour}
	ca, err := pki.CreateCA(dir, "kvbench test CA", pki.Options{ValidFor: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	node, err := pki.CreateNode(dir, dir, "n1", []string{"127.0.0.1", "localhost"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	certs := map[pki.Role]pki.Files{}
	for _, role := range []pki.Role{pki.RoleRead, pki.RoleWrite, pki.RoleAdmin} {
		if certs[role], err = pki.CreateClient(dir, dir, "bench-"+role.String(), role, opts); err != nil {
			t.Fatal(err)
		}
	}
	gossipKey := filepath.Join(dir, "gossip.key")
	if err := os.WriteFile(gossipKey, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: 2, Configure: func(_ int, cfg *server.Config) {
		cfg.PeerCertFile, cfg.PeerKeyFile, cfg.PeerTrustedCAFile = node.Cert, node.Key, ca.Cert
		cfg.CertFile, cfg.KeyFile, cfg.TrustedCAFile = node.Cert, node.Key, ca.Cert
		cfg.GossipKeyFile = gossipKey
	}})
	base := []string{"put", "--endpoints", strings.Join(c.Endpoints(), ","), "--clients", "2", "--conns", "2",
		"--keyspace", "100", "--value-size", "32", "--progress", "0", "--dial-timeout", "2s"}
	with := func(role pki.Role) []string {
		return []string{"--cacert", ca.Cert, "--cert", certs[role].Cert, "--key", certs[role].Key}
	}
	run := func(args ...string) (result, Result) {
		t.Helper()
		out := filepath.Join(dir, "out.json")
		_ = os.Remove(out)
		r := kvbench(t, nil, append(append(append([]string{}, base...), "--out", out), args...)...)
		var res Result
		if b, err := os.ReadFile(out); err == nil {
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatalf("bad JSON %s: %v", b, err)
			}
		}
		return r, res
	}

	r, res := run(append(with(pki.RoleWrite), "--total", "50")...)
	if r.code != exitOK || res.Ops != 50 || res.Errors.Total != 0 {
		t.Fatalf("put over TLS with a write certificate: exit %d, ops %d, errors %+v\n%s%s", r.code, res.Ops, res.Errors, r.stdout, r.stderr)
	}
	if tl := res.Config.TLS; tl == nil || tl.CACert != ca.Cert || tl.Cert != certs[pki.RoleWrite].Cert {
		t.Errorf("JSON config TLS %+v", tl)
	}
	if !strings.Contains(r.stdout, "over TLS, client certificate "+certs[pki.RoleWrite].Cert) {
		t.Errorf("text output does not say TLS:\n%s", r.stdout)
	}

	r, res = run(append(with(pki.RoleAdmin), "--duration", "1s", "--cut-interval", "200ms")...)
	if r.code != exitOK || res.Errors.Total != 0 || res.Cuts == nil || res.Cuts.Completed == 0 || res.Cuts.Errors+res.Cuts.Failed != 0 {
		t.Errorf("put with cuts over TLS (admin): exit %d, errors %+v, cuts %+v\n%s", r.code, res.Errors, res.Cuts, r.stderr)
	}

	r, res = run(append(with(pki.RoleRead), "--total", "5", "--max-errors", "1")...)
	if r.code != exitFailed || res.Ops != 0 {
		t.Errorf("put with a read certificate: exit %d, ops %d; want exit 1 and no put\n%s", r.code, res.Ops, r.stderr)
	}

	r, _ = run("--total", "5")
	if r.code != exitFailed {
		t.Errorf("plaintext kvbench against a TLS cluster: exit %d, want 1\n%s", r.code, r.stderr)
	}
}

// TestTLSReportRow: a TLS run gets a row of its own ("cutkv tls") beside
// the plaintext run of the same shape.
func TestTLSReportRow(t *testing.T) {
	plain := &Config{Workload: "put", Target: "cutkv", Clients: 64, Conns: 4, ValueSize: 256}
	secure := *plain
	secure.TLS = &client.TLSFiles{CACert: "ca.crt"}
	doc, err := upsertRow("", "t", reportRow(newResult(plain)))
	if err != nil {
		t.Fatal(err)
	}
	if doc, err = upsertRow(doc, "t", reportRow(newResult(&secure))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc, "\n| cutkv | put | 64 | 4 | 256 |") || !strings.Contains(doc, "\n| cutkv tls | put | 64 | 4 | 256 |") {
		t.Errorf("want a plaintext and a TLS row:\n%s", doc)
	}
}
