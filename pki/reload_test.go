package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// cluster is a CA with a node and a client certificate.
type cluster struct {
	dir           string
	ca            Files
	node, client  Files
	server, dialr *Reloader // loaded from node and client
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{dir: dir, ca: mustCA(t, filepath.Join(dir, "ca"))}
	c.node = mustNode(t, filepath.Join(dir, "certs"), filepath.Join(dir, "ca"), "n1", "127.0.0.1", "localhost")
	c.client = mustClient(t, filepath.Join(dir, "certs"), filepath.Join(dir, "ca"), "alice", RoleWrite)
	c.server, _ = mustReloader(t, c.node)
	c.dialr, _ = mustReloader(t, c.client)
	return c
}

func serial(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].SerialNumber.String()
}

func TestHandshake(t *testing.T) {
	c := newCluster(t)
	for _, host := range []string{"localhost", "127.0.0.1"} {
		h := handshake(t, c.server.ServerConfig(tls.RequireAndVerifyClientCert), c.dialr.ClientConfig(), host)
		if !h.ok() {
			t.Fatalf("%s: server %v, client %v", host, h.serverErr, h.clientErr)
		}
		if h.client.Version != tls.VersionTLS13 {
			t.Errorf("%s: version %x", host, h.client.Version)
		}
		if len(h.server.VerifiedChains) == 0 {
			t.Errorf("%s: server has no verified chain", host)
		}
		if r, ok := RoleOf(h.server.PeerCertificates[0]); !ok || r != RoleWrite {
			t.Errorf("%s: server sees role %v, %v", host, r, ok)
		}
		if id, ok := NodeID(h.client.PeerCertificates[0]); !ok || id != "n1" {
			t.Errorf("%s: client sees node %q, %v", host, id, ok)
		}
	}
	// The host name is verified, IP addresses included.
	for _, host := range []string{"10.1.2.3", "::1", "n1", "example.com"} {
		h := handshake(t, c.server.ServerConfig(tls.RequireAndVerifyClientCert), c.dialr.ClientConfig(), host)
		var he x509.HostnameError
		if !errors.As(h.clientErr, &he) {
			t.Errorf("dialing %s: client %v, want a host name error", host, h.clientErr)
		}
	}
}

func TestOtherCARefused(t *testing.T) {
	c := newCluster(t)
	other := filepath.Join(t.TempDir(), "other")
	mustCA(t, other)
	mallory := mustClient(t, other, other, "mallory", RoleAdmin)
	strangerClient, _ := mustReloader(t, Files{Cert: mallory.Cert, Key: mallory.Key, CA: c.ca.CA})
	strangerNode := mustNode(t, other, other, "n1", "127.0.0.1", "localhost")
	strangerServer, _ := mustReloader(t, Files{Cert: strangerNode.Cert, Key: strangerNode.Key, CA: c.ca.CA})

	// A client certificate of another CA, at a server of ours.
	h := handshake(t, c.server.ServerConfig(tls.RequireAndVerifyClientCert), strangerClient.ClientConfig(), "localhost")
	wantVerifyFailed(t, "server", h.serverErr)
	if h.clientErr == nil {
		t.Error("client: handshake went through")
	}
	// A server certificate of another CA, dialed by a client of ours.
	h = handshake(t, strangerServer.ServerConfig(tls.RequireAndVerifyClientCert), c.dialr.ClientConfig(), "localhost")
	wantVerifyFailed(t, "client", h.clientErr)
	if h.serverErr == nil {
		t.Error("server: handshake went through")
	}
}

func TestExpiredRefused(t *testing.T) {
	c := newCluster(t)
	now := time.Now()
	old, err := createClient(t.TempDir(), filepath.Dir(c.ca.Cert), "old", RoleRead, now.Add(-48*time.Hour), now.Add(-time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	r, log := mustReloader(t, old) // loaded, and logged loudly
	if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), "EXPIRED") {
		t.Errorf("expired certificate not logged as an error:\n%s", log)
	}
	h := handshake(t, c.server.ServerConfig(tls.RequireAndVerifyClientCert), r.ClientConfig(), "localhost")
	ve := wantVerifyFailed(t, "server", h.serverErr)
	var ie x509.CertificateInvalidError
	if !errors.As(ve.Err, &ie) || ie.Reason != x509.Expired {
		t.Errorf("server: %v, want expired", h.serverErr)
	}

	// An expired CA is loaded and logged as well.
	caDir := t.TempDir()
	if _, err := createCA(caDir, "old CA", now.Add(-48*time.Hour), now.Add(-time.Hour), false); err != nil {
		t.Fatal(err)
	}
	if _, log := mustReloader(t, Files{CA: filepath.Join(caDir, CACertFile)}); !strings.Contains(log.String(), "CA certificate has EXPIRED") {
		t.Errorf("expired CA not logged:\n%s", log)
	}
}

func TestClientAuthModes(t *testing.T) {
	c := newCluster(t)
	other := t.TempDir()
	mustCA(t, other)
	stranger, _ := mustReloader(t, Files{Cert: mustClient(t, other, other, "m", RoleAdmin).Cert, Key: filepath.Join(other, "m.key"), CA: c.ca.CA})
	anonymous, _ := mustReloader(t, Files{CA: c.ca.CA})
	tests := []struct {
		auth                          tls.ClientAuthType
		anonymousOK, strangerOK, ours bool
	}{
		{tls.NoClientCert, true, true, true}, // no certificate is asked for
		{tls.RequestClientCert, true, false, true},
		{tls.VerifyClientCertIfGiven, true, false, true},
		{tls.RequireAnyClientCert, false, false, true},
		{tls.RequireAndVerifyClientCert, false, false, true},
	}
	for _, tt := range tests {
		for _, cl := range []struct {
			name string
			r    *Reloader
			ok   bool
		}{{"anonymous", anonymous, tt.anonymousOK}, {"stranger", stranger, tt.strangerOK}, {"ours", c.dialr, tt.ours}} {
			h := handshake(t, c.server.ServerConfig(tt.auth), cl.r.ClientConfig(), "localhost")
			if h.ok() != cl.ok {
				t.Errorf("%v, %s client: server %v, client %v; want ok %v", tt.auth, cl.name, h.serverErr, h.clientErr, cl.ok)
			}
			if tt.auth == tls.NoClientCert && len(h.server.PeerCertificates) > 0 {
				t.Errorf("NoClientCert: server got a client certificate")
			}
		}
	}
}

func TestPeerConfigs(t *testing.T) {
	c := newCluster(t)
	caDir := filepath.Dir(c.ca.Cert)
	n2, _ := mustReloader(t, mustNode(t, t.TempDir(), caDir, "n2", "localhost"))
	h := handshake(t, c.server.PeerServerConfig(), n2.PeerClientConfig(), "localhost")
	if !h.ok() {
		t.Fatalf("n2 -> n1: server %v, client %v", h.serverErr, h.clientErr)
	}
	if id, _ := NodeID(h.server.PeerCertificates[0]); id != "n2" {
		t.Errorf("n1 sees %q", id)
	}
	// A client certificate of the same CA does not get onto the peer port.
	h = handshake(t, c.server.PeerServerConfig(), c.dialr.ClientConfig(), "localhost")
	if !errors.Is(h.serverErr, ErrNotNode) {
		t.Errorf("client at the peer port: server %v, want ErrNotNode", h.serverErr)
	}
	// A peer dialer refuses a server of the same CA that is no node.
	web := t.TempDir()
	wf, err := createLeaf(web, caDir, "web", &x509.Certificate{
		Subject: pkix.Name{CommonName: "web"}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, time.Now().Add(-time.Minute), time.Now().Add(time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	ws, _ := mustReloader(t, wf)
	h = handshake(t, ws.ServerConfig(tls.NoClientCert), n2.PeerClientConfig(), "localhost")
	if !errors.Is(h.clientErr, ErrNotNode) {
		t.Errorf("peer dialing a non-node: client %v, want ErrNotNode", h.clientErr)
	}
	if h = handshake(t, ws.ServerConfig(tls.NoClientCert), n2.ClientConfig(), "localhost"); !h.ok() {
		t.Errorf("ClientConfig to a non-node server: %v %v", h.serverErr, h.clientErr)
	}
}

func TestNoCA(t *testing.T) {
	c := newCluster(t)
	serverNoCA, _ := mustReloader(t, Files{Cert: c.node.Cert, Key: c.node.Key})
	if h := handshake(t, serverNoCA.ServerConfig(tls.NoClientCert), c.dialr.ClientConfig(), "localhost"); !h.ok() {
		t.Errorf("no client CA, NoClientCert: %v %v", h.serverErr, h.clientErr)
	}
	h := handshake(t, serverNoCA.ServerConfig(tls.VerifyClientCertIfGiven), c.dialr.ClientConfig(), "localhost")
	wantVerifyFailed(t, "server without CA", h.serverErr)

	// A client without a CA trusts no server (not the system roots).
	clientNoCA, _ := mustReloader(t, Files{Cert: c.client.Cert, Key: c.client.Key})
	h = handshake(t, c.server.ServerConfig(tls.RequireAndVerifyClientCert), clientNoCA.ClientConfig(), "localhost")
	wantVerifyFailed(t, "client without CA", h.clientErr)

	// A server without a certificate cannot serve.
	caOnly, _ := mustReloader(t, Files{CA: c.ca.CA})
	h = handshake(t, caOnly.ServerConfig(tls.NoClientCert), c.dialr.ClientConfig(), "localhost")
	if !errors.Is(h.serverErr, ErrNoCertificate) {
		t.Errorf("server without certificate: %v", h.serverErr)
	}
	if caOnly.Leaf() != nil {
		t.Error("Leaf of a CA-only Reloader")
	}
}

func TestReloadCertificate(t *testing.T) {
	c := newCluster(t)
	clk := &fakeClock{now: time.Now()}
	c.server.now, c.dialr.now = clk.Now, clk.Now
	srv, cli := c.server.ServerConfig(tls.RequireAndVerifyClientCert), c.dialr.ClientConfig()
	h := handshake(t, srv, cli, "localhost")
	if !h.ok() {
		t.Fatal(h.serverErr, h.clientErr)
	}
	s1, c1 := serial(h.client), serial(h.server)

	// New certificates for both; the configs already handed out use
	// them once reloaded.
	caDir := filepath.Dir(c.ca.Cert)
	certs := filepath.Dir(c.node.Cert)
	force := Options{ValidFor: year, Force: true}
	if _, err := CreateNode(certs, caDir, "n1", []string{"localhost"}, force); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateClient(certs, caDir, "alice", RoleAdmin, force); err != nil {
		t.Fatal(err)
	}
	if h = handshake(t, srv, cli, "localhost"); serial(h.client) != s1 || serial(h.server) != c1 {
		t.Fatal("new files used before a reload or a check was due")
	}
	if err := c.server.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := c.dialr.Reload(); err != nil {
		t.Fatal(err)
	}
	h = handshake(t, srv, cli, "localhost")
	if !h.ok() || serial(h.client) == s1 || serial(h.server) == c1 {
		t.Fatalf("after Reload: server %v, client %v, serials %s %s (were %s %s)", h.serverErr, h.clientErr, serial(h.client), serial(h.server), s1, c1)
	}
	if r, _ := RoleOf(h.server.PeerCertificates[0]); r != RoleAdmin {
		t.Errorf("server sees role %v after the client's reload", r)
	}
	if got := c.server.Leaf().SerialNumber.String(); got != serial(h.client) {
		t.Errorf("Leaf serial %s, presented %s", got, serial(h.client))
	}
}

// writeBundle writes the certificates of files (their CA files) to path.
func writeBundle(t *testing.T, path string, cas ...Files) {
	t.Helper()
	var all []byte
	for _, f := range cas {
		b, err := os.ReadFile(f.CA)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if err := writeFileAtomic(path, all, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReloadCA(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	ca2 := mustCA(t, filepath.Join(dir, "ca2"))
	bob, _ := mustReloader(t, Files{Cert: mustClient(t, dir, filepath.Dir(ca2.Cert), "bob", RoleRead).Cert, Key: filepath.Join(dir, "bob.key"), CA: c.ca.CA})

	// The server trusts a CA file of its own, CA 1 at first.
	trusted := filepath.Join(dir, "trusted.crt")
	writeBundle(t, trusted, c.ca)
	server, _ := mustReloader(t, Files{Cert: c.node.Cert, Key: c.node.Key, CA: trusted})
	srv := server.ServerConfig(tls.RequireAndVerifyClientCert)
	wantVerifyFailed(t, "bob before", handshake(t, srv, bob.ClientConfig(), "localhost").serverErr)

	// Both CAs: bob and alice get in, through the config handed out before.
	writeBundle(t, trusted, c.ca, ca2)
	if err := server.Reload(); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*Reloader{"bob": bob, "alice": c.dialr} {
		if h := handshake(t, srv, r.ClientConfig(), "localhost"); !h.ok() {
			t.Errorf("%s with both CAs: server %v, client %v", name, h.serverErr, h.clientErr)
		}
	}
	// CA 2 only: alice is out again.
	writeBundle(t, trusted, ca2)
	if err := server.Reload(); err != nil {
		t.Fatal(err)
	}
	wantVerifyFailed(t, "alice after", handshake(t, srv, c.dialr.ClientConfig(), "localhost").serverErr)

	// A client's CA: a server with a CA 2 certificate is refused until the
	// client's CA file says CA 2, then a new ClientConfig accepts it; one
	// made before keeps the pool it was made with.
	n2 := mustNode(t, dir, filepath.Dir(ca2.Cert), "n2", "localhost")
	server2, _ := mustReloader(t, Files{Cert: n2.Cert, Key: n2.Key})
	clientCA := filepath.Join(dir, "client-ca.crt")
	writeBundle(t, clientCA, c.ca)
	client, _ := mustReloader(t, Files{CA: clientCA})
	before := client.ClientConfig()
	wantVerifyFailed(t, "client before", handshake(t, server2.ServerConfig(tls.NoClientCert), before, "localhost").clientErr)
	writeBundle(t, clientCA, ca2)
	if err := client.Reload(); err != nil {
		t.Fatal(err)
	}
	if h := handshake(t, server2.ServerConfig(tls.NoClientCert), client.ClientConfig(), "localhost"); !h.ok() {
		t.Errorf("client after: %v %v", h.serverErr, h.clientErr)
	}
	wantVerifyFailed(t, "old config", handshake(t, server2.ServerConfig(tls.NoClientCert), before, "localhost").clientErr)
}

func TestFailedReloadKeepsOld(t *testing.T) {
	c := newCluster(t)
	srv := c.server.ServerConfig(tls.RequireAndVerifyClientCert)
	s1 := serial(handshake(t, srv, c.dialr.ClientConfig(), "localhost").client)
	if s1 == "" {
		t.Fatal("no handshake")
	}
	otherKey := mustNode(t, t.TempDir(), filepath.Dir(c.ca.Cert), "x", "localhost").Key
	keyPEM, _ := os.ReadFile(otherKey)
	pkey, _ := os.ReadFile(c.node.Key)
	tests := []struct {
		name  string
		file  string
		data  []byte // nil: remove the file
		err   error
		names string // what the message must name
	}{
		{"cert not PEM", c.node.Cert, []byte("garbage"), ErrInvalidFile, c.node.Cert},
		{"cert holds a key", c.node.Cert, pkey, ErrInvalidFile, c.node.Cert},
		{"key not PEM", c.node.Key, []byte("garbage"), ErrInvalidFile, c.node.Key},
		{"key of another cert", c.node.Key, keyPEM, ErrInvalidFile, c.node.Key},
		{"cert missing", c.node.Cert, nil, fs.ErrNotExist, c.node.Cert},
		{"CA missing", c.ca.CA, nil, fs.ErrNotExist, c.ca.CA},
		{"CA holds a key", c.ca.CA, pkey, ErrInvalidFile, c.ca.CA},
	}
	for _, tt := range tests {
		saved, err := os.ReadFile(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		if tt.data == nil {
			err = os.Remove(tt.file)
		} else {
			err = os.WriteFile(tt.file, tt.data, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		err = c.server.Reload()
		if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.names) {
			t.Errorf("%s: Reload = %v, want %v naming %s", tt.name, err, tt.err, tt.names)
		}
		if h := handshake(t, srv, c.dialr.ClientConfig(), "localhost"); !h.ok() || serial(h.client) != s1 {
			t.Errorf("%s: after a failed reload: server %v, client %v, serial %s, want %s", tt.name, h.serverErr, h.clientErr, serial(h.client), s1)
		}
		if err := os.WriteFile(tt.file, saved, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.server.Reload(); err != nil {
		t.Fatalf("files restored: %v", err)
	}
}

func TestNewReloaderErrors(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf, _ := os.ReadFile(c.node.Cert)
	tests := []struct {
		name  string
		f     Files
		err   error
		names string
	}{
		{"nothing", Files{}, ErrInvalidOptions, ""},
		{"cert without key", Files{Cert: c.node.Cert, CA: c.ca.CA}, ErrInvalidOptions, c.node.Cert},
		{"key without cert", Files{Key: c.node.Key}, ErrInvalidOptions, c.node.Key},
		{"missing cert", Files{Cert: filepath.Join(dir, "nope.crt"), Key: c.node.Key}, fs.ErrNotExist, "nope.crt"},
		{"missing key", Files{Cert: c.node.Cert, Key: filepath.Join(dir, "nope.key")}, fs.ErrNotExist, "nope.key"},
		{"empty CA file", Files{CA: write("empty.crt", "")}, ErrInvalidFile, "empty.crt"},
		{"leaf as CA", Files{CA: write("leaf.crt", string(leaf))}, ErrInvalidFile, "leaf.crt"},
		{"bad block in CA", Files{CA: write("mixed.crt", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")}, ErrInvalidFile, "mixed.crt"},
	}
	for _, tt := range tests {
		_, err := NewReloader(tt.f, nil)
		if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.names) {
			t.Errorf("%s: %v, want %v naming %q", tt.name, err, tt.err, tt.names)
		}
	}
}

func TestChangeDetection(t *testing.T) {
	c := newCluster(t)
	r, log := mustReloader(t, c.node)
	clk := &fakeClock{now: time.Now()}
	r.now = clk.Now
	srv := r.ServerConfig(tls.RequireAndVerifyClientCert)
	hs := func() string {
		t.Helper()
		h := handshake(t, srv, c.dialr.ClientConfig(), "localhost")
		if !h.ok() {
			t.Fatalf("server %v, client %v", h.serverErr, h.clientErr)
		}
		return serial(h.client)
	}
	s1 := hs() // the first check: nothing changed
	renew := func() {
		t.Helper()
		if _, err := CreateNode(filepath.Dir(c.node.Cert), filepath.Dir(c.ca.Cert), "n1", []string{"localhost"}, Options{ValidFor: year, Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	renew()
	clk.Advance(checkInterval / 2)
	if hs() != s1 {
		t.Fatal("files checked again before checkInterval")
	}
	clk.Advance(checkInterval)
	s2 := hs()
	if s2 == s1 {
		t.Fatal("changed files not picked up by a handshake")
	}

	// Broken files: kept the old material, logged once, not again for
	// the same broken files.
	if err := os.WriteFile(c.node.Cert, []byte("half written"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clk.Advance(2 * checkInterval)
		if hs() != s2 {
			t.Fatal("broken files replaced the loaded ones")
		}
	}
	if n := strings.Count(log.String(), "not loaded"); n != 1 {
		t.Errorf("broken files logged %d times:\n%s", n, log)
	}
	renew()
	clk.Advance(2 * checkInterval)
	if s3 := hs(); s3 == s2 || s3 == s1 {
		t.Error("repaired files not picked up")
	}
}

func TestStamp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := statFile(p)
	if !a.same(statFile(p)) {
		t.Fatal("an unchanged file looks changed")
	}
	// Same size, same inode, only the modification time moves.
	mtime := a.fi.ModTime().Add(time.Second)
	if err := os.WriteFile(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	b := statFile(p)
	if a.same(b) {
		t.Error("a new modification time is not seen")
	}
	// Same size and modification time, a new file renamed over it.
	q := filepath.Join(dir, "g")
	if err := os.WriteFile(q, []byte("thr"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(q, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(q, p); err != nil {
		t.Fatal(err)
	}
	if b.same(statFile(p)) {
		t.Error("a file renamed over is not seen")
	}
	// Gone, and not configured.
	os.Remove(p)
	if b.same(statFile(p)) || !statFile(p).same(statFile("")) {
		t.Error("a removed file")
	}
}

// TestConcurrentReloads runs handshakes while the files are replaced and
// reloaded; run with -race. Every handshake succeeds, with the old or the
// new certificate.
func TestConcurrentReloads(t *testing.T) {
	c := newCluster(t)
	srv := c.server.ServerConfig(tls.RequireAndVerifyClientCert)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if h := handshake(t, srv, c.dialr.ClientConfig(), "localhost"); !h.ok() {
					t.Errorf("server %v, client %v", h.serverErr, h.clientErr)
					return
				}
			}
		})
	}
	for range 10 {
		if _, err := CreateNode(filepath.Dir(c.node.Cert), filepath.Dir(c.ca.Cert), "n1", []string{"localhost"}, Options{ValidFor: year, Force: true}); err != nil {
			t.Error(err)
		}
		c.server.Reload() // may meet the new key with the old certificate; the old material stays
		c.server.maybeReload()
	}
	close(stop)
	wg.Wait()
}

// TestCheckedReloader: the check runs on the first load and on every
// reload; a refused reload keeps the certificate loaded before.
func TestCheckedReloader(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, dir)
	n1 := mustNode(t, dir, dir, "n1", "localhost")
	only := func(want string) func(*x509.Certificate) error {
		return func(leaf *x509.Certificate) error {
			if id, _ := NodeID(leaf); id != want {
				return fmt.Errorf("names %q, not %q", id, want)
			}
			return nil
		}
	}
	if _, err := NewCheckedReloader(Files{Cert: n1.Cert, Key: n1.Key, CA: ca.CA}, only("n2"), nil); err == nil || !strings.Contains(err.Error(), `"n1"`) {
		t.Fatalf("first load of n1's certificate for n2: %v, want refused", err)
	}
	r, err := NewCheckedReloader(Files{Cert: n1.Cert, Key: n1.Key, CA: ca.CA}, only("n1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := r.Leaf().SerialNumber
	other := mustNode(t, t.TempDir(), dir, "n2", "localhost")
	for _, f := range [][2]string{{other.Cert, n1.Cert}, {other.Key, n1.Key}} {
		b, _ := os.ReadFile(f[0])
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Reload(); err == nil || !strings.Contains(err.Error(), `"n2"`) {
		t.Fatalf("reload of n2's certificate: %v, want refused", err)
	}
	if r.Leaf().SerialNumber.Cmp(before) != 0 {
		t.Fatal("a refused reload replaced the certificate")
	}
}
