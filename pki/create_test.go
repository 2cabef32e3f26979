package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCreateFiles(t *testing.T) {
	caDir, dir := filepath.Join(t.TempDir(), "ca"), filepath.Join(t.TempDir(), "certs")
	before := time.Now()
	ca := mustCA(t, caDir)
	if ca != (Files{Cert: filepath.Join(caDir, "ca.crt"), Key: filepath.Join(caDir, "ca.key"), CA: filepath.Join(caDir, "ca.crt")}) {
		t.Errorf("CreateCA files %+v", ca)
	}
	node := mustNode(t, dir, caDir, "n1", "127.0.0.1", "localhost", "::1", "LOCALHOST", "127.0.0.1", "node1.example.com")
	if node != (Files{Cert: filepath.Join(dir, "n1.crt"), Key: filepath.Join(dir, "n1.key"), CA: ca.CA}) {
		t.Errorf("CreateNode files %+v", node)
	}
	client := mustClient(t, dir, caDir, "alice", RoleWrite)
	for _, f := range []Files{ca, node, client} {
		for path, mode := range map[string]os.FileMode{f.Key: 0o600, f.Cert: 0o644} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != mode {
				t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), mode)
			}
		}
		if _, err := NewReloader(f, nil); err != nil { // key matches cert
			t.Errorf("%+v: %v", f, err)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("dir: %v %v", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp*")); len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}

	caCert, nodeCert, clientCert := readCert(t, ca.Cert), readCert(t, node.Cert), readCert(t, client.Cert)
	if !caCert.IsCA || caCert.KeyUsage&x509.KeyUsageCertSign == 0 || !caCert.MaxPathLenZero || caCert.Subject.CommonName != "test CA" {
		t.Errorf("CA cert: IsCA %v, usage %v, subject %v", caCert.IsCA, caCert.KeyUsage, caCert.Subject)
	}
	if _, ok := caCert.PublicKey.(*ecdsa.PublicKey); !ok || caCert.PublicKey.(*ecdsa.PublicKey).Curve != elliptic.P256() {
		t.Errorf("CA key %T", caCert.PublicKey)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	for _, c := range []struct {
		cert  *x509.Certificate
		usage []x509.ExtKeyUsage
	}{
		{nodeCert, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{clientCert, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	} {
		if _, err := c.cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s does not chain to the CA: %v", c.cert.Subject.CommonName, err)
		}
		if !slices.Equal(c.cert.ExtKeyUsage, c.usage) || c.cert.IsCA {
			t.Errorf("%s: ext key usage %v, IsCA %v", c.cert.Subject.CommonName, c.cert.ExtKeyUsage, c.cert.IsCA)
		}
	}
	if _, err := clientCert.Verify(x509.VerifyOptions{Roots: roots}); err == nil {
		t.Error("a client certificate verifies as a server")
	}
	wantIPs := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	if !slices.Equal(nodeCert.DNSNames, []string{"localhost", "node1.example.com"}) || len(nodeCert.IPAddresses) != 2 ||
		!nodeCert.IPAddresses[0].Equal(wantIPs[0]) || !nodeCert.IPAddresses[1].Equal(wantIPs[1]) {
		t.Errorf("node SANs: DNS %v, IP %v", nodeCert.DNSNames, nodeCert.IPAddresses)
	}
	for _, host := range []string{"localhost", "127.0.0.1", "::1", "node1.example.com"} {
		if err := nodeCert.VerifyHostname(host); err != nil {
			t.Errorf("node cert for %s: %v", host, err)
		}
	}

	serials := map[string]bool{}
	for _, c := range []*x509.Certificate{caCert, nodeCert, clientCert} {
		if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 || serials[c.SerialNumber.String()] {
			t.Errorf("%s: serial %x", c.Subject.CommonName, c.SerialNumber)
		}
		serials[c.SerialNumber.String()] = true
		if skew := before.Sub(c.NotBefore); skew < 50*time.Second || skew > 2*time.Minute {
			t.Errorf("%s: NotBefore %v is %v before the call", c.Subject.CommonName, c.NotBefore, skew)
		}
	}
	if d := nodeCert.NotAfter.Sub(before); d < year-time.Minute || d > year+time.Minute {
		t.Errorf("node valid for %v", d)
	}
}

func TestCreateRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	mustCA(t, dir)
	if _, err := CreateCA(dir, "again", opts); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), filepath.Join(dir, "ca.key")) {
		t.Errorf("CreateCA over a CA: %v", err)
	}
	node := mustNode(t, dir, dir, "n1", "localhost")
	old, err := os.ReadFile(node.Cert)
	if err != nil {
		t.Fatal(err)
	}
	// Only the certificate left: still refused, by its name, and the
	// key is not written either.
	if err := os.Remove(node.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateNode(dir, dir, "n1", []string{"localhost"}, opts); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), node.Cert) {
		t.Errorf("CreateNode over a node: %v", err)
	}
	if _, err := os.Stat(node.Key); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused create wrote the key: %v", err)
	}
	if _, err := CreateNode(dir, dir, "n1", []string{"localhost"}, Options{ValidFor: year, Force: true}); err != nil {
		t.Fatal(err)
	}
	if now, _ := os.ReadFile(node.Cert); string(now) == string(old) {
		t.Error("Force did not overwrite")
	}
	mustClient(t, dir, dir, "c", RoleRead)
	if _, err := CreateClient(dir, dir, "c", RoleRead, opts); !errors.Is(err, ErrExists) {
		t.Errorf("CreateClient over a client: %v", err)
	}
	// The CA's own files are never a leaf's, forced or not.
	if _, err := CreateClient(dir, dir, "ca", RoleRead, Options{ValidFor: year, Force: true}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("client named ca in the CA dir: %v", err)
	}
}

func TestCreateRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	mustCA(t, dir)
	tests := []struct {
		name string
		err  error
		run  func() error
	}{
		{"bad node id", ErrInvalidName, func() error { _, err := CreateNode(dir, dir, "n/1", []string{"localhost"}, opts); return err }},
		{"no hosts", ErrInvalidHost, func() error { _, err := CreateNode(dir, dir, "n1", nil, opts); return err }},
		{"host with port", ErrInvalidHost, func() error { _, err := CreateNode(dir, dir, "n1", []string{"localhost:7001"}, opts); return err }},
		{"empty host", ErrInvalidHost, func() error { _, err := CreateNode(dir, dir, "n1", []string{""}, opts); return err }},
		{"URL host", ErrInvalidHost, func() error { _, err := CreateNode(dir, dir, "n1", []string{"https://x"}, opts); return err }},
		{"bad client name", ErrInvalidName, func() error { _, err := CreateClient(dir, dir, "a b", RoleRead, opts); return err }},
		{"role none", ErrInvalidRole, func() error { _, err := CreateClient(dir, dir, "c", RoleNone, opts); return err }},
		{"role out of range", ErrInvalidRole, func() error { _, err := CreateClient(dir, dir, "c", RoleAdmin+1, opts); return err }},
		{"zero validity", ErrInvalidOptions, func() error { _, err := CreateClient(dir, dir, "c", RoleRead, Options{}); return err }},
		{"outlives the CA", ErrInvalidOptions, func() error {
			_, err := CreateClient(dir, dir, "c", RoleRead, Options{ValidFor: 11 * year})
			return err
		}},
		{"empty CA name", ErrInvalidName, func() error { _, err := CreateCA(t.TempDir(), "", opts); return err }},
		{"control char in CA name", ErrInvalidName, func() error { _, err := CreateCA(t.TempDir(), "a\nb", opts); return err }},
		{"no CA", os.ErrNotExist, func() error { _, err := CreateClient(dir, t.TempDir(), "c", RoleRead, opts); return err }},
		{"CA dir holds a leaf", ErrInvalidFile, func() error {
			leafCA := t.TempDir()
			n := mustNode(t, leafCA, dir, "x", "localhost")
			os.Rename(n.Cert, filepath.Join(leafCA, "ca.crt"))
			os.Rename(n.Key, filepath.Join(leafCA, "ca.key"))
			_, err := CreateClient(t.TempDir(), leafCA, "c", RoleRead, opts)
			return err
		}},
	}
	for _, tt := range tests {
		if err := tt.run(); !errors.Is(err, tt.err) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "c.*")); len(left) > 0 {
		t.Errorf("refused creates wrote %v", left)
	}
}

func TestCreateRefusesExpiredCA(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	if _, err := createCA(dir, "old", now.Add(-2*time.Hour), now.Add(-time.Hour), false); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateNode(dir, dir, "n1", []string{"localhost"}, opts); !errors.Is(err, ErrInvalidFile) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("signing with an expired CA: %v", err)
	}
}
