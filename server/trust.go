package server

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/cutkv/cutkv/engine"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cutkv/cutkv/pki"
	"github.com/cutkv/cutkv/rpc"
)

// trust is a node's key material: the peer and client certificates (each
// reloaded on SIGHUP and when their files change) and the gossip keys.
type trust struct {
	peer       *pki.Reloader // nil: plaintext peer listener
	client     *pki.Reloader // nil: plaintext client listener
	gossipKeys [][]byte      // nil: plaintext gossip
	gossipFile string
}

func loadTrust(cfg *Config, log *slog.Logger) (*trust, error) {
	t := &trust{gossipFile: cfg.GossipKeyFile}
	var err error
	if cfg.peerTLS() {
		// Every load, the first and each reload, must name this node.
		check := func(leaf *x509.Certificate) error {
			if id, ok := pki.NodeID(leaf); !ok || id != cfg.ID {
				return fmt.Errorf("it names node %q, this node is %q (make one with: kvctl cert create-node %s --hosts ...)", id, cfg.ID, cfg.ID)
			}
			return nil
		}
		f := pki.Files{Cert: cfg.PeerCertFile, Key: cfg.PeerKeyFile, CA: cfg.PeerTrustedCAFile}
		if t.peer, err = pki.NewCheckedReloader(f, check, log.With("tls", "peer")); err != nil {
			return nil, fmt.Errorf("%w: peer TLS: %w", ErrConfig, err)
		}
	}
	if cfg.clientTLS() {
		f := pki.Files{Cert: cfg.CertFile, Key: cfg.KeyFile, CA: cfg.TrustedCAFile}
		if t.client, err = pki.NewReloader(f, log.With("tls", "client")); err != nil {
			return nil, fmt.Errorf("%w: client TLS: %w", ErrConfig, err)
		}
	}
	if cfg.GossipKeyFile != "" {
		if t.gossipKeys, err = readGossipKeys(cfg.GossipKeyFile); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// readGossipKeys reads a gossip key file: one base64 key a line (16, 24
// or 32 bytes decoded), the first one used to encrypt; blank lines and
// lines starting with # are skipped.
func readGossipKeys(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --gossip-key-file: %w", ErrConfig, err)
	}
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%w: --gossip-key-file %s line %d: not base64: %v", ErrConfig, path, line, err)
		}
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf("%w: --gossip-key-file %s line %d: a key is 16, 24 or 32 bytes, this one %d (make one with: head -c 32 /dev/urandom | base64)", ErrConfig, path, line, n)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: --gossip-key-file %s holds no key", ErrConfig, path)
	}
	return keys, nil
}

// peerClient is the pool's TLS config source, nil without peer TLS.
func (t *trust) peerClient() func() *tls.Config {
	if t.peer == nil {
		return nil
	}
	return t.peer.PeerClientConfig
}

// peerServerOption makes the peer listener mutual TLS with members only;
// failed is called for each handshake that fails.
func (t *trust) peerServerOption(failed func()) grpc.ServerOption {
	if t.peer == nil {
		return grpc.Creds(insecure.NewCredentials())
	}
	return grpc.Creds(countingCreds{credentials.NewTLS(t.peer.PeerServerConfig()), failed})
}

// countingCreds are transport credentials that count the server
// handshakes that fail (another CA, an expired or foreign certificate, a
// plaintext client, a connection closed halfway), which gRPC only logs.
type countingCreds struct {
	credentials.TransportCredentials
	failed func()
}

func (c countingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.failed()
	}
	return out, info, err
}

func (c countingCreds) Clone() credentials.TransportCredentials {
	return countingCreds{c.TransportCredentials.Clone(), c.failed}
}

// clientServerOption makes the client listener TLS when configured; with
// a CA, client certificates are verified when given (ClientAuth then
// lets only health through without one).
func (t *trust) clientServerOption() grpc.ServerOption {
	if t.client == nil {
		return grpc.Creds(insecure.NewCredentials())
	}
	return grpc.Creds(credentials.NewTLS(t.client.ServerConfig(tls.VerifyClientCertIfGiven)))
}

// Reload re-reads the certificates and the gossip keys (on SIGHUP; the
// certificates are also picked up when their files change). A failed
// reload keeps what was loaded and says what failed.
func (n *Node) Reload() error {
	t := n.trust
	var errs []error
	for _, r := range []*pki.Reloader{t.peer, t.client} {
		if r != nil {
			if err := r.Reload(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if t.gossipFile != "" {
		keys, err := readGossipKeys(t.gossipFile)
		if err == nil {
			err = n.disc.SetKeys(keys)
		}
		if err != nil {
			errs = append(errs, err)
		} else {
			t.gossipKeys = keys
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		n.log.Error("reload of certificates and gossip keys failed; keeping the ones loaded before", "err", err)
	} else {
		n.log.Info("reloaded certificates and gossip keys")
	}
	return err
}

// fdReserve is what a node keeps of its file descriptors besides its
// listeners' connections: WAL segments and directory, materialization
// and snapshot files, peer connections, gossip, and the runtime's own.
const fdReserve = 256

// defaultMaxConnections is --max-connections when not given, lowered to
// what the descriptor limit allows.
const defaultMaxConnections = 1024

// tableFiles is how many SSTs the partitions' shared file cache keeps
// open (engine.EnvConfig.MaxOpenFiles), part of the descriptor budget: a
// quarter of the limit, between 64 and engine.DefaultMaxOpenFiles.
func tableFiles(limit uint64) int {
	return int(min(max(limit/4, 64), engine.DefaultMaxOpenFiles))
}

// fileLimitConns checks --max-connections against the process's file
// descriptor limit (Go raises the soft limit to the hard one at start),
// keeping room for the WAL and storage: two listeners, each up to that
// many connections, plus fdReserve, a few per group and, when the state is
// on Pebble, the SSTs its file cache keeps open (tableFiles, returned). A
// value given that does not fit is refused; the default (0) is 1024,
// lowered to fit.
func fileLimitConns(maxConns, groups int, pebble bool, log *slog.Logger) (conns, tables int, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		if maxConns == 0 {
			maxConns = defaultMaxConnections
		}
		return maxConns, engine.DefaultMaxOpenFiles, nil // not knowable here: nothing to check against
	}
	kept := fdReserve + 4*groups
	if pebble {
		tables = tableFiles(rl.Cur)
		kept += tables
	}
	fits := (int(min(rl.Cur, 1<<30)) - kept) / 2
	if maxConns == 0 {
		maxConns = defaultMaxConnections
		if fits < maxConns {
			if fits < 16 {
				return 0, 0, fmt.Errorf("%w: the file descriptor limit %d leaves no room for connections beside the WAL and storage (%d kept); raise it (ulimit -n, LimitNOFILE=)",
					ErrConfig, rl.Cur, kept)
			}
			log.Warn("the file descriptor limit is low: each listener takes fewer connections than the default", "max_connections", fits, "rlimit_nofile", rl.Cur)
			maxConns = fits
		}
		return maxConns, tables, nil
	}
	if maxConns > fits {
		return 0, 0, fmt.Errorf("%w: --max-connections %d needs %d file descriptors (two listeners, %d kept for the WAL and storage), the limit is %d: "+
			"lower --max-connections to %d or raise the limit (ulimit -n, LimitNOFILE=)",
			ErrConfig, maxConns, 2*maxConns+kept, kept, rl.Cur, max(0, fits))
	}
	return maxConns, tables, nil
}

// connMetrics count the connections each listener holds and refuses.
type connMetrics struct {
	refused *prometheus.CounterVec
}

func newConnMetrics(reg prometheus.Registerer) *connMetrics {
	m := &connMetrics{refused: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cutkv_connections_rejected_total",
		Help: "Connections closed at once because the listener held --max-connections already, by listener.",
	}, []string{"listener"})}
	reg.MustRegister(m.refused)
	return m
}

func (m *connMetrics) rejected(listener string) func() {
	c := m.refused.WithLabelValues(listener)
	return c.Inc
}

// watch exports the open connections of each listener.
func (m *connMetrics) watch(reg prometheus.Registerer, ls map[string]net.Listener) {
	for name, l := range ls {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "cutkv_connections_open",
			Help:        "Connections a listener holds open.",
			ConstLabels: prometheus.Labels{"listener": name},
		}, func() float64 { return float64(rpc.OpenConnections(l)) }))
	}
}
