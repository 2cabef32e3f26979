package process

import (
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutkv/cutkv/pki"
)

// TestKvnodeTLSReloadOnSIGHUP runs a kvnode with TLS everywhere from
// certificates kvctl cert made, replaces its certificate files, and sends
// SIGHUP: new connections get the new certificate without a restart, and
// kvctl with a client certificate keeps working.
func TestKvnodeTLSReloadOnSIGHUP(t *testing.T) {
	certs := t.TempDir()
	ctl := func(args ...string) {
		t.Helper()
		if r := runKvctl(t, nil, nil, args...); r.code != 0 {
			t.Fatalf("kvctl %v: %v", args, r)
		}
	}
	ctl("cert", "create-ca", "--dir", certs)
	ctl("cert", "create-node", "n1", "--hosts", "127.0.0.1", "--dir", certs, "--ca-dir", certs)
	ctl("cert", "create-client", "ops", "--role", "admin", "--dir", certs, "--ca-dir", certs)
	f := func(name string) string { return filepath.Join(certs, name) }
	s := newSingle(t)
	p := startReady(t, "n1", s.boot(
		"--peer-cert-file", f("n1.crt"), "--peer-key-file", f("n1.key"), "--peer-trusted-ca-file", f("ca.crt"),
		"--cert-file", f("n1.crt"), "--key-file", f("n1.key"), "--trusted-ca-file", f("ca.crt"))...)
	defer p.signal(syscall.SIGTERM)
	tlsArgs := []string{"--endpoints", s.grpc, "--cacert", f("ca.crt"), "--cert", f("ops.crt"), "--key", f("ops.key")}
	wantCode(t, runKvctl(t, nil, nil, append(tlsArgs, "put", "k", "v")...), 0)

	served := func() string {
		t.Helper()
		r, err := pki.NewReloader(pki.Files{Cert: f("ops.crt"), Key: f("ops.key"), CA: f("ca.crt")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.Dial("tcp", s.grpc, r.ClientConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := served()
	ctl("cert", "create-node", "n1", "--hosts", "127.0.0.1", "--dir", certs, "--ca-dir", certs, "--force")
	p.signal(syscall.SIGHUP)
	ok, last := WaitFor(10*time.Second, func() (bool, string) {
		s := served()
		return s != before, fmt.Sprintf("serial %s", s)
	})
	if !ok {
		t.Fatalf("after SIGHUP the node still serves the old certificate (%s)", last)
	}
	if !p.running() {
		t.Fatal("kvnode exited on SIGHUP")
	}
	r := runKvctl(t, nil, nil, append(tlsArgs, "get", "k")...)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "v" {
		t.Fatalf("get after the reload: %v", r)
	}
}

// TestKvnodeRefusesOpenPeerPort: a peer listener off loopback without
// peer certificates is refused before anything starts, unless
// --insecure-peer; half a set of certificate flags is refused too.
func TestKvnodeRefusesOpenPeerPort(t *testing.T) {
	s := newSingle(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{s.boot("--peer-addr", "0.0.0.0:0"), "--insecure-peer"},
		{s.boot("--peer-cert-file", "x.crt"), "--peer-trusted-ca-file"},
		{s.boot("--trusted-ca-file", "ca.crt"), "--cert-file"},
	} {
		code, out := runKvnodeToExit(t, tc.args...)
		if code != 2 || !strings.Contains(out, tc.says) {
			t.Errorf("kvnode %v: exit %d, want 2 saying %q; output:\n%s", tc.args, code, tc.says, out)
		}
	}
}
