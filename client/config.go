package client

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
)

// Defaults filled in by Config.Validate.
const (
	DefaultDialTimeout            = 2 * time.Second
	DefaultRequestTimeout         = 5 * time.Second
	DefaultOperationTimeout       = 30 * time.Second
	DefaultBackoffBase            = 25 * time.Millisecond
	DefaultBackoffMax             = time.Second
	DefaultRoutingRefreshInterval = 500 * time.Millisecond
	DefaultMaxCallRecvMsgSize     = 64 << 20
)

// Limits the server enforces (and the client checks before sending).
const (
	// MaxKeySize is the largest key, in bytes. Keys must not be empty.
	MaxKeySize = 4 << 10
	// MaxValueSize is the largest value, in bytes.
	MaxValueSize = 1 << 20
)

// Config configures a Client. The zero value of every field but Endpoints
// means "use the default"; Validate fills the defaults in.
type Config struct {
	// Endpoints are the gRPC addresses (host:port) of some cluster nodes.
	// Any node serves any request, so one reachable endpoint is enough; the
	// client learns the other members from the Routing RPC. Required.
	Endpoints []string

	// DialTimeout bounds how long New waits for a first node to answer, and
	// how long one attempt waits for its connection to become ready before
	// it gives up on that address (nothing is sent then, so even a write may
	// try the next address). Default 2 s.
	DialTimeout time.Duration

	// RequestTimeout bounds one attempt (one RPC to one node). An operation
	// may make several attempts; the caller's ctx bounds the whole
	// operation. Default 5 s.
	RequestTimeout time.Duration

	// OperationTimeout bounds a whole operation, retries included, when the
	// caller's ctx carries no deadline, so that an unreachable cluster does
	// not block a caller for ever. Negative means no bound. Default 30 s.
	OperationTimeout time.Duration

	// BackoffBase is the first retry delay; each further retry doubles it,
	// up to BackoffMax. Each delay is jittered to between half and all of
	// its value. Defaults 25 ms and 1 s.
	BackoffBase time.Duration
	// BackoffMax caps the retry delay, and the gRPC reconnect delay.
	BackoffMax time.Duration

	// RoutingRefreshInterval is the least time between two fetches of the
	// routing table; errors that suggest a stale table (NOT_LEADER, a dead
	// node) ask for a refresh, and this rate-limits them. Default 500 ms.
	RoutingRefreshInterval time.Duration

	// MaxCallRecvMsgSize is the largest reply the client accepts, in bytes.
	// A Scan page may hold many values. Default 64 MiB.
	MaxCallRecvMsgSize int

	// MaxTxnOps is the most compares, and the most ops per branch, that a
	// transaction may hold; Commit refuses a larger one without sending it.
	// Set it to the servers' limit when that differs from the default.
	// Default 128 (DefaultMaxTxnOps).
	MaxTxnOps int

	// TLS, when set, makes every connection TLS: the servers are verified
	// against TLS.CACert, and TLS.Cert/TLS.Key (if set) are presented as
	// the client's certificate, whose role the cluster checks. Files are
	// re-read when they change. nil: plaintext.
	TLS *TLSFiles

	// DialOptions are appended to the client's own gRPC dial options.
	DialOptions []grpc.DialOption

	// Logger receives debug records about retries and routing changes. nil
	// discards them.
	Logger *slog.Logger
}

// TLSFiles name the PEM files of a TLS client (etcdctl's --cacert,
// --cert, --key).
type TLSFiles struct {
	// CACert is the CA the servers' certificates chain to. Required.
	CACert string
	// Cert and Key are the client's certificate and key; both or neither.
	Cert, Key string
}

// Validate checks c and fills in defaults for zero fields.
func (c *Config) Validate() error {
	var eps []string
	for _, e := range c.Endpoints {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		eps = append(eps, e)
	}
	if len(eps) == 0 {
		return errors.New("client: config: no endpoints")
	}
	c.Endpoints = eps
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"DialTimeout", &c.DialTimeout, DefaultDialTimeout},
		{"RequestTimeout", &c.RequestTimeout, DefaultRequestTimeout},
		{"BackoffBase", &c.BackoffBase, DefaultBackoffBase},
		{"BackoffMax", &c.BackoffMax, DefaultBackoffMax},
		{"RoutingRefreshInterval", &c.RoutingRefreshInterval, DefaultRoutingRefreshInterval},
	}
	for _, d := range durations {
		switch {
		case *d.v < 0:
			return fmt.Errorf("client: config: %s is negative (%v)", d.name, *d.v)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	if c.OperationTimeout == 0 {
		c.OperationTimeout = DefaultOperationTimeout
	}
	if c.BackoffMax < c.BackoffBase {
		return fmt.Errorf("client: config: BackoffMax (%v) is below BackoffBase (%v)", c.BackoffMax, c.BackoffBase)
	}
	switch {
	case c.MaxCallRecvMsgSize < 0:
		return fmt.Errorf("client: config: MaxCallRecvMsgSize is negative (%d)", c.MaxCallRecvMsgSize)
	case c.MaxCallRecvMsgSize == 0:
		c.MaxCallRecvMsgSize = DefaultMaxCallRecvMsgSize
	}
	switch {
	case c.MaxTxnOps < 0:
		return fmt.Errorf("client: config: MaxTxnOps is negative (%d)", c.MaxTxnOps)
	case c.MaxTxnOps == 0:
		c.MaxTxnOps = DefaultMaxTxnOps
	}
	if t := c.TLS; t != nil {
		if t.CACert == "" {
			return errors.New("client: config: TLS needs the CA certificate (--cacert) that the servers' certificates chain to")
		}
		if (t.Cert == "") != (t.Key == "") {
			return errors.New("client: config: TLS needs both a certificate (--cert) and its key (--key), or neither")
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
