package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// year is the validity of the test certificates.
const year = 365 * 24 * time.Hour

var opts = Options{ValidFor: year}

func mustCA(t *testing.T, dir string) Files {
	t.Helper()
	f, err := CreateCA(dir, "test CA", Options{ValidFor: 10 * year})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustNode(t *testing.T, dir, caDir, id string, hosts ...string) Files {
	t.Helper()
	f, err := CreateNode(dir, caDir, id, hosts, opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustClient(t *testing.T, dir, caDir, name string, role Role) Files {
	t.Helper()
	f, err := CreateClient(dir, caDir, name, role, opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// readCert parses the first PEM certificate of path.
func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// logBuf collects a Reloader's log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func mustReloader(t *testing.T, f Files) (*Reloader, *logBuf) {
	t.Helper()
	lb := &logBuf{}
	r, err := NewReloader(f, slog.New(slog.NewTextHandler(lb, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return r, lb
}

// handshakeResult is what both ends of one handshake saw.
type handshakeResult struct {
	server, client       tls.ConnectionState
	serverErr, clientErr error
}

func (h handshakeResult) ok() bool { return h.serverErr == nil && h.clientErr == nil }

// handshake runs one TLS handshake over loopback TCP, the client dialing
// serverName, and then sends one byte from server to client: in TLS 1.3
// the client finishes its handshake before the server has judged the
// client's certificate, and that read is where it learns the verdict.
// (net.Pipe does not do: it has no buffer, and a side that stops reading
// to send an alert can deadlock with the other still writing.)
func handshake(t *testing.T, srvCfg, cliCfg *tls.Config, serverName string) handshakeResult {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	deadline := time.Now().Add(20 * time.Second) // a hang fails, it does not block the run
	type served struct {
		state tls.ConnectionState
		err   error
	}
	done := make(chan served, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			done <- served{err: err}
			return
		}
		defer raw.Close()
		raw.SetDeadline(deadline)
		srv := tls.Server(raw, srvCfg)
		err = srv.Handshake()
		if err == nil {
			_, err = srv.Write([]byte{1})
		}
		done <- served{srv.ConnectionState(), err}
	}()
	var res handshakeResult
	raw, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetDeadline(deadline)
	cli := cliCfg.Clone()
	cli.ServerName = serverName
	cl := tls.Client(raw, cli)
	res.clientErr = cl.Handshake()
	if res.clientErr == nil {
		var b [1]byte
		_, res.clientErr = io.ReadFull(cl, b[:])
	}
	res.client = cl.ConnectionState()
	raw.Close()
	s := <-done
	res.server, res.serverErr = s.state, s.err
	return res
}

// wantVerifyFailed checks that err is a failed certificate verification.
func wantVerifyFailed(t *testing.T, side string, err error) *tls.CertificateVerificationError {
	t.Helper()
	var ve *tls.CertificateVerificationError
	if !errors.As(err, &ve) {
		t.Fatalf("%s: err = %v, want a certificate verification error", side, err)
	}
	return ve
}

// fakeClock is a Reloader clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
