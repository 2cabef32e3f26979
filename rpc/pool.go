package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/cutkv/cutkv/pki"
	"github.com/cutkv/cutkv/pki/grpctls"
)

// PoolConfig shapes the connections to peers.
type PoolConfig struct {
	// MaxMsgSize bounds a message sent or received.
	MaxMsgSize int
	// TLS, when set, makes every connection mutual TLS: it presents this
	// node's certificate and verifies the peer against the cluster CA
	// (pki.Reloader.PeerClientConfig; called for every handshake). Each
	// connection also checks that the certificate names the member it
	// dialed (pki.NodeID). nil: plaintext.
	TLS func() *tls.Config
	// ClusterID is put on every call (PeerAuth checks it); read at call
	// time, as it is agreed at bootstrap.
	ClusterID func() uint64
	// Options come after the defaults.
	Options []grpc.DialOption
}

// Pool keeps one client connection per peer (member id and address).
// Connections are made lazily and live until Close. Every unary call
// through them passes the marker merge of the node set by SetMarker.
type Pool struct {
	cfg    PoolConfig
	marker atomic.Pointer[Node] // whose clock replies are merged into

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // by id@addr; REQUIRES: mu held
}

// NewPool returns a pool of peer connections.
func NewPool(cfg PoolConfig) *Pool {
	return &Pool{cfg: cfg, conns: map[string]*grpc.ClientConn{}}
}

// SetMarker makes n's clock the one every reply of a call through the
// pool is merged into (mergeReplies), on the connections made
// before and after. Call it before the node calls a peer: until then a
// reply carrying a cut version fails the call (ErrInternal), rather than
// being acted on unmerged.
func (p *Pool) SetMarker(n *Node) { p.marker.Store(n) }

// mergeReplies is the pool's unary client interceptor, the client half
// of the marker merge: it merges the cut marker of every reply of a
// node-to-node call into the clock of the node set by SetMarker, once
// admitted, before the caller sees the reply (rule 1: a reply is merged
// before it is acted on, a vote before it is counted). The replies that
// carry one are the participant service's (Prepare, Status, Record,
// Finish, Decide) and StartCut's; a forwarded client call's reply carries
// its version in its header, which the client it is relayed to merges. A
// reply whose version is refused makes the call fail with a
// *RefusedReplyError, which callers do not retry: the peer served the
// call, and a retry would bring the same version back.
func (p *Pool) mergeReplies(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
		return err
	}
	if n := p.marker.Load(); n != nil {
		return n.mergeReply(ctx, method, reply)
	}
	if m, ok := reply.(interface{ GetCutVersion() uint64 }); ok && m.GetCutVersion() > 0 {
		return fmt.Errorf("%w: the reply to %s carries cut version %d and the pool has no node to merge it into (Pool.SetMarker)", ErrInternal, method, m.GetCutVersion())
	}
	return nil
}

// Conn returns the connection to member id at addr, creating it if
// needed. It does not block on the network.
func (p *Pool) Conn(id, addr string) (*grpc.ClientConn, error) {
	key := id + "@" + addr
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[key]; c != nil {
		return c, nil
	}
	creds := insecure.NewCredentials()
	if p.cfg.TLS != nil {
		creds = memberCreds(p.cfg.TLS, id)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(p.cfg.MaxMsgSize), grpc.MaxCallSendMsgSize(p.cfg.MaxMsgSize)),
		// Pings find a dead peer behind a silent network; the peer's
		// enforcement policy (ServerOptions) allows this rate.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		grpc.WithChainUnaryInterceptor(p.mergeReplies),
	}
	if p.cfg.ClusterID != nil {
		opts = append(opts, clusterIDInterceptors(p.cfg.ClusterID)...)
	}
	c, err := grpc.NewClient(addr, append(opts, p.cfg.Options...)...)
	if err != nil {
		return nil, fmt.Errorf("rpc: connect to %s at %s: %w", id, addr, err)
	}
	p.conns[key] = c
	return c, nil
}

// Close closes every connection.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, c := range p.conns {
		c.Close()
		delete(p.conns, a)
	}
}

// errWrongMember: the peer's certificate names another member than the
// one dialed (an address reused, or a member impersonating another).
var errWrongMember = errors.New("rpc: peer certificate names another member")

// memberCreds are TLS credentials for dialing member id: each handshake
// takes a fresh config (a reloaded certificate or CA is used by the next
// connection) and also checks that the certificate names id.
func memberCreds(base func() *tls.Config, id string) credentials.TransportCredentials {
	return grpctls.Client(func() *tls.Config { return withMember(base(), id) })
}

func withMember(cfg *tls.Config, id string) *tls.Config {
	cfg = cfg.Clone()
	prev := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if prev != nil {
			if err := prev(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%w: none presented, dialing %s", errWrongMember, id)
		}
		if got, ok := pki.NodeID(cs.PeerCertificates[0]); !ok || got != id {
			return fmt.Errorf("%w: dialed %s, the certificate names %q", errWrongMember, id, got)
		}
		return nil
	}
	return cfg
}
