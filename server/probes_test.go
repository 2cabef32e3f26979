package server_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/server"
)

// probe GETs path on node n's HTTP port (with hc, or plain HTTP) and
// returns the status code and body; code 0 when the request failed.
func probe(t *testing.T, hc *http.Client, scheme string, n *server.Node, path string) (int, string) {
	t.Helper()
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	resp, err := hc.Get(scheme + "://" + n.Addrs().HTTP + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReadyzAndLivez: a node whose peers are down is alive (/livez 200:
// liveness depends on no peer) but not ready (/readyz 503, saying why);
// once a quorum is back it is ready, and /healthz agrees.
func TestReadyzAndLivez(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: 2, Configure: withHTTP})
	// Ready (health SERVING) comes first; /readyz follows once the node
	// applied what it saw committed, a tick or a few later.
	clustertest.Eventually(t, 10*time.Second, func() error {
		for i := range 3 {
			if code, body := probe(t, nil, "http", c.Node(i), "/readyz"); code != 200 || body != "ok\n" {
				return fmt.Errorf("n%d /readyz after start: %d %q", i+1, code, body)
			}
		}
		return nil
	})
	put(t, c, 0, "k", "v")
	for i := range 3 {
		c.Stop(i)
	}
	c.StartNode(0) // alone: no group can elect a leader
	n := c.Node(0)
	for range 3 {
		code, body := probe(t, nil, "http", n, "/readyz")
		if code != 503 || !strings.Contains(body, "NOT_SERVING") {
			t.Fatalf("/readyz of a node without a quorum: %d %q, want 503 saying NOT_SERVING", code, body)
		}
		if code, body := probe(t, nil, "http", n, "/livez"); code != 200 || body != "ok\n" {
			t.Fatalf("/livez of a node without a quorum: %d %q, want 200", code, body)
		}
		time.Sleep(100 * time.Millisecond) // a few ticks: it stays unready
	}
	c.StartNode(1)
	clustertest.Eventually(t, 20*time.Second, func() error {
		if code, body := probe(t, nil, "http", n, "/readyz"); code != 200 {
			return fmt.Errorf("/readyz with a quorum back: %d %q", code, body)
		}
		return nil
	})
	if code, body := probe(t, nil, "http", n, "/healthz"); code != 200 {
		t.Fatalf("/healthz of a ready node: %d %q", code, body)
	}
}

// TestHTTPSWhenClientTLS: with client TLS configured the HTTP port speaks
// TLS with the client listener's certificate, and /livez, /readyz and
// /metrics answer without a client certificate (even though the client
// listener requires one); plain HTTP is told it reached an HTTPS server.
func TestHTTPSWhenClientTLS(t *testing.T) {
	p := newPKI(t)
	c := secureClusterWith(t, 1, p, withHTTP)
	n := c.Node(0)
	pem, err := os.ReadFile(p.ca())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	for path, want := range map[string]string{"/livez": "ok", "/readyz": "ok", "/metrics": "cutkv_wal_fsyncs_total", "/healthz": "SERVING"} {
		clustertest.Eventually(t, 10*time.Second, func() error {
			if code, body := probe(t, hc, "https", n, path); code != 200 || !strings.Contains(body, want) {
				return fmt.Errorf("https %s: %d %q", path, code, body)
			}
			return nil
		})
	}
	if code, body := probe(t, nil, "http", n, "/readyz"); code != 400 || !strings.Contains(body, "HTTPS") {
		t.Fatalf("plain HTTP to the TLS port: %d %q, want 400 saying it is an HTTPS server", code, body)
	}
}
