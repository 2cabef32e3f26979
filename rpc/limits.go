package rpc

import (
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// ConnLimits bound what one listener takes on (--max-connections,
// --idle-timeout).
type ConnLimits struct {
	// MaxConnections open at once; a connection beyond it is closed as
	// soon as it is accepted, so a flood of connections never takes the
	// descriptors the WAL and the storage need.
	MaxConnections int
	// IdleTimeout closes a connection with no call in flight for that
	// long (gRPC's MaxConnectionIdle).
	IdleTimeout time.Duration
}

// Stream and handshake bounds of every listener.
const (
	maxStreamsPerConn = 1024
	// handshakeTimeout closes a connection that has not finished its TLS
	// and HTTP/2 handshake by then (a connection opened and left silent).
	handshakeTimeout = 10 * time.Second
	// minPingInterval: a client pinging more often than this is cut off
	// (gRPC keepalive enforcement); the pool pings every 30 s.
	minPingInterval = 10 * time.Second
)

// ServerOptions returns the gRPC server options of a listener: the
// receive limit that fits the largest legal request, bounds on streams,
// handshakes and idle connections, and keepalive enforcement.
func ServerOptions(l Limits, c ConnLimits) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(l.MaxRequestSize()),
		grpc.MaxSendMsgSize(64 << 20),
		grpc.MaxConcurrentStreams(maxStreamsPerConn),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: minPingInterval, PermitWithoutStream: true}),
	}
	if c.IdleTimeout > 0 {
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: c.IdleTimeout}))
	}
	return opts
}

// LimitListener returns l accepting at most max connections at once (0:
// no limit). A connection over the limit is closed at once and reported
// to rejected (if set); the accept loop goes on, so the listener's queue
// never fills with connections nobody takes.
func LimitListener(l net.Listener, max int, rejected func()) net.Listener {
	if max <= 0 {
		return l
	}
	return &limitListener{Listener: l, max: max, rejected: rejected}
}

type limitListener struct {
	net.Listener
	max      int
	rejected func()

	mu   sync.Mutex
	open int // REQUIRES: mu held
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.open >= l.max {
			l.mu.Unlock()
			c.Close()
			if l.rejected != nil {
				l.rejected()
			}
			continue
		}
		l.open++
		l.mu.Unlock()
		return &limitConn{Conn: c, l: l}, nil
	}
}

// Open returns the connections accepted and not yet closed.
func (l *limitListener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
	})
	return err
}

// OpenConnections reports how many connections a listener made by
// LimitListener holds open (-1 for any other listener).
func OpenConnections(l net.Listener) int {
	if ll, ok := l.(*limitListener); ok {
		return ll.Open()
	}
	return -1
}
