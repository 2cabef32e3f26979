package main

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/pki"
)

// loadCert loads f through pki, as a node does, and returns its
// certificate.
func loadCert(t *testing.T, f pki.Files) *x509.Certificate {
	t.Helper()
	leaf, err := certLeaf(f)
	if err != nil {
		t.Fatalf("pki does not load %s: %v", f.Cert, err)
	}
	return leaf
}

// TestCertCreate makes a CA, a node and a client with kvctl and checks the
// files with pki. No cluster: --endpoints is empty.
func TestCertCreate(t *testing.T) {
	dir := t.TempDir()
	caDir, certs := filepath.Join(dir, "ca"), filepath.Join(dir, "my certs")
	r := kvctl(t, nil, "", "--endpoints", "", "cert", "create-ca", "--dir", caDir, "--name", "test CA")
	if r.code != 0 {
		t.Fatalf("create-ca: exit %d, stderr %s", r.code, r.stderr)
	}
	caCrt, caKey := filepath.Join(caDir, "ca.crt"), filepath.Join(caDir, "ca.key")
	for _, p := range []string{caCrt, caKey} {
		if !strings.Contains(r.stdout, "wrote "+p) {
			t.Errorf("create-ca output lacks %s:\n%s", p, r.stdout)
		}
	}
	ca := loadCert(t, pki.Files{Cert: caCrt, Key: caKey, CA: caCrt})
	if ca.Subject.CommonName != "test CA" || !ca.IsCA {
		t.Errorf("CA %v, IsCA %v", ca.Subject, ca.IsCA)
	}
	if d := ca.NotAfter.Sub(ca.NotBefore); d < certDefaultCAExpiry {
		t.Errorf("CA valid for %v", d)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)

	r = kvctl(t, nil, "", "cert", "create-node", "n1", "--hosts", "127.0.0.1, localhost", "--dir", certs, "--ca-dir", caDir, "--expiry", "48h")
	if r.code != 0 {
		t.Fatalf("create-node: exit %d, stderr %s", r.code, r.stderr)
	}
	nodeCrt, nodeKey := filepath.Join(certs, "n1.crt"), filepath.Join(certs, "n1.key")
	q := func(s string) string { return "'" + s + "'" } // certs has a space
	for _, want := range []string{
		"wrote " + nodeKey, "wrote " + nodeCrt, "node n1, hosts 127.0.0.1,localhost",
		"--peer-cert-file " + q(nodeCrt) + " --peer-key-file " + q(nodeKey) + " --peer-trusted-ca-file " + caCrt,
		"--cert-file " + q(nodeCrt) + " --key-file " + q(nodeKey) + " --trusted-ca-file " + caCrt,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("create-node output lacks %q:\n%s", want, r.stdout)
		}
	}
	node := loadCert(t, pki.Files{Cert: nodeCrt, Key: nodeKey, CA: caCrt})
	if _, err := node.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost"}); err != nil {
		t.Errorf("node certificate: %v", err)
	}
	if err := node.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
	if id, ok := pki.NodeID(node); !ok || id != "n1" {
		t.Errorf("node id %q, %v", id, ok)
	}
	if d := node.NotAfter.Sub(node.NotBefore); d < 48*60*60e9 || d > 49*60*60e9 {
		t.Errorf("node valid for %v, want --expiry 48h (and a minute)", d)
	}

	r = kvctl(t, nil, "", "cert", "create-client", "alice", "--role", "admin", "--dir", certs, "--ca-dir", caDir)
	if r.code != 0 {
		t.Fatalf("create-client: exit %d, stderr %s", r.code, r.stderr)
	}
	cliCrt, cliKey := filepath.Join(certs, "alice.crt"), filepath.Join(certs, "alice.key")
	if want := "kvctl: --cacert " + caCrt + " --cert " + q(cliCrt) + " --key " + q(cliKey); !strings.Contains(r.stdout, want) {
		t.Errorf("create-client output lacks %q:\n%s", want, r.stdout)
	}
	cli := loadCert(t, pki.Files{Cert: cliCrt, Key: cliKey, CA: caCrt})
	if _, err := cli.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if role, ok := pki.RoleOf(cli); !ok || role != pki.RoleAdmin || cli.Subject.CommonName != "alice" {
		t.Errorf("client role %v, %v, CN %q", role, ok, cli.Subject.CommonName)
	}
	if fi, err := os.Stat(cliKey); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("client key mode %v, %v", fi.Mode(), err)
	}
}

// TestCertDefaults: --dir and --ca-dir default to ./certs.
func TestCertDefaults(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{
		{"cert", "create-ca"},
		{"cert", "create-node", "n1", "--hosts", "localhost"},
		{"cert", "create-client", "c", "--role", "read"},
	} {
		if r := kvctl(t, nil, "", args...); r.code != 0 {
			t.Fatalf("%v: exit %d, stderr %s", args, r.code, r.stderr)
		}
	}
	for _, f := range []string{"ca.crt", "ca.key", "n1.crt", "n1.key", "c.crt", "c.key"} {
		if _, err := os.Stat(filepath.Join("certs", f)); err != nil {
			t.Error(err)
		}
	}
	if c := loadCert(t, pki.Files{Cert: "certs/ca.crt", Key: "certs/ca.key"}); c.Subject.CommonName != certDefaultCAName {
		t.Errorf("default CA name %q", c.Subject.CommonName)
	}
}

func TestCertUsageErrors(t *testing.T) {
	dir := t.TempDir()
	if r := kvctl(t, nil, "", "cert", "create-ca", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	node := func(args ...string) []string {
		return append([]string{"cert", "create-node", "--dir", dir, "--ca-dir", dir}, args...)
	}
	client := func(args ...string) []string {
		return append([]string{"cert", "create-client", "--dir", dir, "--ca-dir", dir}, args...)
	}
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"cert"}, "missing command"},
		{[]string{"cert", "create-ca", "extra"}, "unknown command"},
		{[]string{"cert", "create-ca", "--dir", t.TempDir(), "--expiry", "0s"}, "--expiry"},
		{[]string{"cert", "create-ca", "--dir", t.TempDir(), "--name", ""}, "CA name"},
		{[]string{"cert", "create-ca", "--dir", t.TempDir(), "-o", "json"}, "text only"},
		{node("n1"), "missing --hosts"},
		{node("n1", "--hosts", " , "), "missing --hosts"},
		{node("--hosts", "localhost"), "accepts 1 arg"},
		{node("n/1", "--hosts", "localhost"), "invalid node ID"},
		{node("n1", "--hosts", "localhost:7001"), "invalid host"},
		{node("n1", "--hosts", "localhost", "--expiry", "876000h"), "after its CA"},
		{client("c"), "missing --role"},
		{client("c", "--role", "root"), "invalid --role"},
		{client("c", "--role", "Admin"), "invalid --role"},
		{client("c", "--role", "none"), "invalid --role"},
		{client("a b", "--role", "read"), "invalid client NAME"},
		{client("--role", "read"), "accepts 1 arg"},
	} {
		r := kvctl(t, nil, "", tt.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 with %q", tt.args, r.code, r.stderr, tt.msg)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "[nac]*.*")); len(left) != 2 { // ca.crt, ca.key
		t.Errorf("refused commands left files: %v", left)
	}
}

func TestCertNoOverwrite(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) result {
		return kvctl(t, nil, "", append(append([]string{"cert"}, args...), "--dir", dir)...)
	}
	if r := run("create-ca"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	caCrt := filepath.Join(dir, "ca.crt")
	caBefore, _ := os.ReadFile(caCrt)
	r := run("create-ca")
	if r.code != exitNotFound || !strings.Contains(r.stderr, "exists") || !strings.Contains(r.stderr, filepath.Join(dir, "ca.key")) || !strings.Contains(r.stderr, "--force") {
		t.Errorf("second create-ca: exit %d, stderr %q", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(caCrt); string(after) != string(caBefore) {
		t.Error("second create-ca overwrote ca.crt")
	}
	if r := run("create-node", "n1", "--hosts", "localhost", "--ca-dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	nodeCrt := filepath.Join(dir, "n1.crt")
	before, _ := os.ReadFile(nodeCrt)
	if r := run("create-node", "n1", "--hosts", "localhost", "--ca-dir", dir); r.code != exitNotFound || !strings.Contains(r.stderr, "n1.key") {
		t.Errorf("second create-node: exit %d, stderr %q", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(nodeCrt); string(after) != string(before) {
		t.Error("second create-node overwrote n1.crt")
	}
	if r := run("create-node", "n1", "--hosts", "localhost", "--ca-dir", dir, "--force"); r.code != 0 {
		t.Errorf("create-node --force: exit %d, stderr %q", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(nodeCrt); string(after) == string(before) {
		t.Error("create-node --force did not overwrite")
	}
	// The CA's own files are never a client's, even with --force.
	if r := run("create-client", "ca", "--role", "admin", "--ca-dir", dir, "--force"); r.code != exitUsage {
		t.Errorf("client named ca: exit %d, stderr %q", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(caCrt); string(after) != string(caBefore) {
		t.Error("a client named ca replaced ca.crt")
	}
}

func TestCertMissingCA(t *testing.T) {
	dir := t.TempDir()
	r := kvctl(t, nil, "", "cert", "create-client", "c", "--role", "read", "--dir", dir, "--ca-dir", filepath.Join(dir, "nope"))
	if r.code != exitNotFound || !strings.Contains(r.stderr, filepath.Join(dir, "nope", "ca.crt")) {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}
