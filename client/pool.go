package client

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// connPool holds one grpc.ClientConn per address. Connections are created
// on first use and live until the pool is closed.
type connPool struct {
	opts []grpc.DialOption

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn // REQUIRES mu
	closed bool                        // REQUIRES mu
}

func newConnPool(opts []grpc.DialOption) *connPool {
	return &connPool{opts: opts, conns: make(map[string]*grpc.ClientConn)}
}

// get returns the connection to addr, creating it (without I/O) if needed.
func (p *connPool) get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if cc, ok := p.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, p.opts...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = cc
	return cc, nil
}

func (p *connPool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for addr, cc := range p.conns {
		errs = append(errs, cc.Close())
		delete(p.conns, addr)
	}
	return errors.Join(errs...)
}

// LastConnError says why cc's last connection attempt failed (a refused
// dial, a TLS mismatch): a call on a channel in TRANSIENT_FAILURE fails at
// once, without sending anything, with that reason. The call is a Routing
// request, harmless should the channel have become ready meanwhile.
func LastConnError(ctx context.Context, cc *grpc.ClientConn) string {
	_, err := kvrpc.NewClusterClient(cc).Routing(ctx, &kvpb.RoutingRequest{})
	if err == nil {
		return "it recovered"
	}
	return status.Convert(err).Message()
}

// TLSMismatch says whether a connection failure (LastConnError) is a TLS
// or certificate problem, which retrying cannot fix. (A server that closes
// at once, "server preface", may speak TLS or be at its connection limit:
// not counted here.)
func TLSMismatch(msg string) bool {
	for _, s := range []string{"tls:", "x509:", "certificate"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// waitReady blocks until cc is READY, and returns an *errNotSent when it
// fails to connect, is in TRANSIENT_FAILURE (the address is down: skip it
// rather than wait out gRPC's reconnect backoff), or does not become ready
// within timeout or ctx. A request is sent only on a READY connection, so an
// error here proves the request never left the client.
func waitReady(ctx context.Context, addr string, cc *grpc.ClientConn, timeout time.Duration) error {
	s := cc.GetState()
	if s == connectivity.Ready {
		return nil
	}
	cc.Connect()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		s = cc.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure:
			return &errNotSent{addr: addr, cause: "connection failed: " + LastConnError(ctx, cc)}
		case connectivity.Shutdown:
			return ErrClosed
		}
		if !cc.WaitForStateChange(wctx, s) {
			return &errNotSent{addr: addr, cause: "still " + s.String() + " after " + timeoutCause(ctx, timeout)}
		}
	}
}

func timeoutCause(ctx context.Context, timeout time.Duration) string {
	if ctx.Err() != nil {
		return "the deadline"
	}
	return "the dial timeout " + timeout.String()
}
