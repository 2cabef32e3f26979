package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutkv/cutkv/pki"
	"github.com/cutkv/cutkv/pki/grpctls"
	"github.com/cutkv/cutkv/proto/kvpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Client talks to a cutkv cluster. It is safe for concurrent use. Close it
// when done.
type Client struct {
	cfg      Config
	log      *slog.Logger
	pool     *connPool
	callOpts []grpc.CallOption
	closed   atomic.Bool
	// cut is the highest cut version seen in any reply (DESIGN.md,
	// consistent cut rule 8); every request carries it.
	cut atomic.Uint64
	// cluster is the cluster id of the last reply: versions are a
	// cluster's own (a cluster restored from a snapshot starts anew).
	cluster atomic.Uint64

	mu          sync.Mutex
	route       *routeTable   // REQUIRES mu; nil until fetched
	pinned      string        // REQUIRES mu; address that answered last
	lastRefresh time.Time     // REQUIRES mu
	refreshing  chan struct{} // REQUIRES mu; closed when the fetch ends
}

// New connects to a cluster through the given endpoints with the default
// configuration. See NewWithConfig.
func New(ctx context.Context, endpoints ...string) (*Client, error) {
	return NewWithConfig(ctx, Config{Endpoints: endpoints})
}

// NewWithConfig validates cfg and returns a Client once some endpoint has
// answered a Routing request. It gives up, with an error wrapping
// ErrUnavailable, when none does within cfg.DialTimeout or before ctx ends.
// ctx is used only while New runs.
func NewWithConfig(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	creds, err := TransportCredentials(cfg.TLS, cfg.Logger)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  cfg.BackoffBase,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   cfg.BackoffMax,
			},
			MinConnectTimeout: cfg.DialTimeout,
		}),
	}
	opts = append(opts, cfg.DialOptions...)
	c := &Client{
		cfg:      cfg,
		log:      cfg.Logger,
		pool:     newConnPool(opts),
		callOpts: []grpc.CallOption{grpc.MaxCallRecvMsgSize(cfg.MaxCallRecvMsgSize)},
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	for n := 0; ; n++ {
		t, addr, err := c.fetchRouting(dctx)
		if t != nil {
			c.mu.Lock()
			c.route, c.pinned, c.lastRefresh = t, addr, time.Now()
			c.mu.Unlock()
			return c, nil
		}
		if !c.backoff(dctx, n) {
			c.pool.close()
			if ctx.Err() != nil {
				err = joinErrors(err, ctx.Err())
			}
			return nil, &OpError{Op: "connect", Kind: ErrUnavailable, Err: err}
		}
	}
}

// TransportCredentials are the gRPC credentials for t: TLS with t's CA
// (reloaded when the files change) and client certificate, or plaintext
// when t is nil. kvctl's own connections use them too.
func TransportCredentials(t *TLSFiles, log *slog.Logger) (credentials.TransportCredentials, error) {
	if t == nil {
		return insecure.NewCredentials(), nil
	}
	r, err := pki.NewReloader(pki.Files{Cert: t.Cert, Key: t.Key, CA: t.CACert}, log)
	if err != nil {
		return nil, fmt.Errorf("client: TLS: %w", err)
	}
	return grpctls.Client(r.ClientConfig), nil
}

// Close releases the connections. Operations in flight fail.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.pool.close()
}

// CutVersion returns the highest cut version the client has seen.
func (c *Client) CutVersion() uint64 { return c.cut.Load() }

// observe merges a reply's header: the cut version only grows, within
// one cluster. A reply from another cluster (the endpoints now serve a
// cluster restored from a snapshot) starts over from its version, so
// the versions of the old cluster are not pushed onto the new one.
func (c *Client) observe(h *kvpb.ResponseHeader) {
	v := h.GetCutVersion()
	if id, _ := strconv.ParseUint(h.GetClusterId(), 16, 64); id != 0 {
		if old := c.cluster.Load(); old != id && c.cluster.CompareAndSwap(old, id) && old != 0 {
			c.cut.Store(v)
			return
		}
	}
	for {
		cur := c.cut.Load()
		if v <= cur || c.cut.CompareAndSwap(cur, v) {
			return
		}
	}
}

func (c *Client) requestHeader() *kvpb.RequestHeader {
	return &kvpb.RequestHeader{CutVersion: c.cut.Load()}
}

// backoff sleeps before retry n (0-based): BackoffBase·2ⁿ capped at
// BackoffMax, jittered to between half and all of it. It returns false,
// without sleeping, when ctx would end before the sleep does: the caller
// must then stop retrying.
func (c *Client) backoff(ctx context.Context, n int) bool {
	d := backoffDelay(c.cfg.BackoffBase, c.cfg.BackoffMax, n)
	d = d/2 + rand.N(d/2+1)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// backoffDelay is base·2ⁿ capped at max.
func backoffDelay(base, max time.Duration, n int) time.Duration {
	d := base
	for range n {
		if d >= max/2 {
			return max
		}
		d *= 2
	}
	return min(d, max)
}

// ctxErr is ctx.Err(), but already context.DeadlineExceeded once the
// deadline has passed: gRPC may fail an attempt at the deadline a moment
// before ctx's own timer fires, and the caller should still be able to
// tell that its deadline ended the operation.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// op describes an operation for the retry loop.
type op struct {
	name string
	// key routes the operation to its partition's leader; nil lets any
	// node serve it.
	key []byte
	// write: the operation changes state, so an ambiguous failure must not
	// be retried.
	write bool
	// conflicts: an operation that was still answered Aborted when it had
	// to stop fails with ErrConflict rather than ErrUnavailable.
	conflicts bool
}

// attempt sends one request on cc with header h and returns the reply's
// header.
type attempt func(ctx context.Context, cc *grpc.ClientConn, h *kvpb.RequestHeader) (*kvpb.ResponseHeader, error)

// do runs o, retrying as the package documentation describes, until it
// succeeds, fails definitely, or ctx ends.
func (c *Client) do(ctx context.Context, o op, send attempt) error {
	if c.closed.Load() {
		return &OpError{Op: o.name, Key: o.key, Kind: ErrClosed}
	}
	if _, ok := ctx.Deadline(); !ok && c.cfg.OperationTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.OperationTimeout)
		defer cancel()
	}
	if c.table() == nil && o.key != nil {
		c.refreshRouting(ctx)
	}
	var (
		avoid   = make(map[string]bool) // addresses that failed this operation
		hint    string                  // address to try next (NOT_LEADER)
		hints   int                     // hints followed without backoff
		waits   int                     // backoffs so far
		lastErr error
		addr    string
	)
	// noteErr keeps an attempt's error for the final one — unless the
	// attempt only ran out of time and an earlier one was answered
	// (NO_LEADER, a refused dial): "deadline exceeded" alone hides why
	// the cluster did not serve. (The server's deadline error can arrive
	// before ctx's own timer fires, so the error is looked at, not ctx.)
	noteErr := func(err error) {
		if lastErr == nil || !isTimeout(err) || isTimeout(lastErr) {
			lastErr = err
		}
	}
	giveUp := func() error {
		if c.closed.Load() {
			return &OpError{Op: o.name, Key: o.key, Addr: addr, Kind: ErrClosed}
		}
		kind, cerr := ErrUnavailable, ctx.Err()
		if o.conflicts && status.Code(lastErr) == codes.Aborted {
			kind = ErrConflict
		}
		switch {
		case errors.Is(cerr, context.Canceled):
			kind = nil // the caller gave up; the cluster may be fine
		case cerr == nil:
			// Stopped because the deadline would pass before the next
			// attempt (or its timer has not fired yet).
			cerr = context.DeadlineExceeded
		}
		return &OpError{Op: o.name, Key: o.key, Addr: addr, Kind: kind, Err: joinErrors(lastErr, cerr)}
	}
	for {
		if ctx.Err() != nil {
			return giveUp()
		}
		next := hint
		hint = ""
		if next == "" {
			next = c.pick(o.key, avoid)
		}
		if next == "" {
			// Every address failed: start over after a pause.
			clear(avoid)
			if !c.backoff(ctx, waits) {
				return giveUp()
			}
			waits++
			continue
		}
		addr = next
		cc, err := c.pool.get(addr)
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return &OpError{Op: o.name, Key: o.key, Kind: ErrClosed}
			}
			noteErr(err)
			avoid[addr] = true
			continue
		}
		if err := waitReady(ctx, addr, cc, c.cfg.DialTimeout); err != nil {
			if errors.Is(err, ErrClosed) {
				return &OpError{Op: o.name, Key: o.key, Kind: ErrClosed}
			}
			c.log.Debug("cutkv client: skipping address", "op", o.name, "addr", addr, "err", err)
			noteErr(err)
			avoid[addr] = true
			c.refreshRouting(ctx)
			continue
		}
		actx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		h, err := send(actx, cc, c.requestHeader())
		cancel()
		if err == nil {
			c.observe(h)
			if o.key == nil {
				c.pin(addr)
			}
			return nil
		}
		noteErr(err)
		f := classify(err, o.write)
		switch f.verdict {
		case fail:
			return &OpError{Op: o.name, Key: o.key, Addr: addr, Kind: f.kind, Err: err}
		case unknown:
			return &OpError{Op: o.name, Key: o.key, Addr: addr, Kind: ErrOutcomeUnknown, Err: joinErrors(err, ctxErr(ctx))}
		}
		c.log.Debug("cutkv client: retrying", "op", o.name, "addr", addr, "reason", f.reason, "err", err)
		if f.leader != "" {
			la := c.addrOf(f.leader)
			if la == "" {
				c.refreshRouting(ctx)
				la = c.addrOf(f.leader)
			}
			if la != "" && la != addr {
				if o.key != nil {
					c.learnLeader(o.key, la)
				}
				hint = la
				if hints < 2 {
					// Follow a fresh hint at once; a leader that keeps
					// moving gets the backoff below.
					hints++
					continue
				}
			}
			f.wait = true
		}
		if f.elsewhere {
			avoid[addr] = true
		}
		if f.elsewhere || f.reason == reasonNotLeader || f.reason == reasonNoLeader {
			c.refreshRouting(ctx)
		}
		if f.wait {
			if !c.backoff(ctx, waits) {
				return giveUp()
			}
			waits++
		}
	}
}

// isTimeout says whether err is an attempt running out of time or being
// cancelled, rather than an answer.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}
