package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// The Go client has no methods for the cut, check and checkpoint calls of
// the Cluster service, and its Status leaves out the checkpoint fields, so
// kvctl sends these itself. Any node serves them (a node that
// does not lead group 0 forwards a cut call to the one that does), so
// there is no routing: kvctl tries the endpoints in turn, with the
// client's retry rules (client/doc.go), and reports failures as the
// client's errors so that describe gives them the same exit codes.

// Retry delays and the largest reply, as the client's defaults.
const (
	adminBackoffBase = client.DefaultBackoffBase
	adminBackoffMax  = client.DefaultBackoffMax
	maxRecvMsgSize   = client.DefaultMaxCallRecvMsgSize
)

// The server's "not applied" contract (client/errors.go, client/doc.go): a
// google.rpc.ErrorInfo of this domain with one of these reasons.
const notAppliedDomain = "cutkv.io"

var notAppliedReasons = map[string]bool{
	"NOT_LEADER": true, "NO_LEADER": true, "PROPOSAL_DROPPED": true,
	"NOT_SERVING": true, "SHUTTING_DOWN": true, "LOCKED": true,
}

// adminCall is one administration call.
type adminCall struct {
	// name is the operation in error messages: "cut create", "check", ...
	name string
	// attempt bounds one attempt on one node, so that a node that hangs
	// leaves time to ask another; 0 gives every attempt what is left of
	// the command's --timeout (calls that wait on the cluster), and then
	// send's context outlives send (snapshot create reads its stream on).
	attempt time.Duration
	// starts is set for a call that may start something before its answer
	// is lost (cut create). Such a call is still retried on any failure (a
	// second cut create joins or follows the first, which is harmless),
	// but when no attempt succeeds and one might have reached the cluster,
	// it fails with ErrOutcomeUnknown rather than ErrUnavailable.
	starts bool
	// send makes one attempt with request header h.
	send func(ctx context.Context, c kvrpc.ClusterClient, h *kvpb.RequestHeader) error
}

// adminConns holds one connection per endpoint for one command.
type adminConns struct {
	endpoints   []string
	dialTimeout time.Duration
	creds       credentials.TransportCredentials
	conns       map[string]*grpc.ClientConn
}

// errTLS: a connection failed for a TLS or certificate mismatch, which no
// retry fixes.
var errTLS = errors.New("TLS mismatch")

// withAdmin checks the global flags like withClient and runs fn with the
// endpoints' connections, under --timeout; when --timeout was not given,
// under def instead (0: the flag's default). Errors from fn are run
// errors.
func (g *globals) withAdmin(cmd *cobra.Command, def time.Duration, fn func(ctx context.Context, a *adminConns) error) error {
	if err := g.checkFlags(); err != nil {
		return err
	}
	eps := g.endpointList(cmd)
	if len(eps) == 0 {
		return usagef("no endpoints: set --endpoints or $%s", envEndpoints)
	}
	timeout := g.timeout
	if def > 0 && !cmd.Flags().Changed("timeout") {
		timeout = def
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	tls, err := g.tlsFiles(cmd)
	if err != nil {
		return err
	}
	creds, err := client.TransportCredentials(tls, nil)
	if err != nil {
		return &runError{err}
	}
	a := &adminConns{endpoints: eps, dialTimeout: g.dialTimeout, creds: creds, conns: map[string]*grpc.ClientConn{}}
	defer a.close()
	if err := fn(ctx, a); err != nil {
		return &runError{err}
	}
	return nil
}

func (a *adminConns) close() {
	for _, cc := range a.conns {
		cc.Close()
	}
}

// conn returns the connection to addr once it is READY. An error means
// the request was not sent.
func (a *adminConns) conn(ctx context.Context, addr string) (*grpc.ClientConn, error) {
	cc := a.conns[addr]
	if cc == nil {
		var err error
		cc, err = grpc.NewClient(addr,
			grpc.WithTransportCredentials(a.creds),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize)))
		if err != nil {
			return nil, err
		}
		a.conns[addr] = cc
	}
	if cc.GetState() == connectivity.Ready {
		return cc, nil
	}
	cc.Connect()
	wctx, cancel := context.WithTimeout(ctx, a.dialTimeout)
	defer cancel()
	for {
		s := cc.GetState()
		switch s {
		case connectivity.Ready:
			return cc, nil
		case connectivity.TransientFailure:
			msg := client.LastConnError(ctx, cc)
			if client.TLSMismatch(msg) {
				return nil, fmt.Errorf("%w: %s: not connected: %s", errTLS, addr, msg)
			}
			return nil, errors.New(addr + ": not connected (connection failed: " + msg + ")")
		}
		if !cc.WaitForStateChange(wctx, s) {
			return nil, errors.New(addr + ": not connected (still " + s.String() + ")")
		}
	}
}

// closedUnread says whether a connection error is a server closing the
// connection before answering (one that speaks TLS to a plaintext client,
// or is at its connection limit), as gRPC reports it.
func closedUnread(msg string) bool {
	for _, s := range []string{"server preface", "broken pipe", "connection reset by peer"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// do runs call until an attempt succeeds, one fails definitely, or ctx
// ends. It returns nil or a *client.OpError.
func (a *adminConns) do(ctx context.Context, call adminCall) error {
	var (
		lastErr  error
		addr     string
		maybeRan bool          // an attempt may have reached the cluster
		slowest  time.Duration // the longest attempt so far
	)
	// noRoom: a call that starts something is not sent again when less
	// time is left than the slowest attempt took (and 50 ms): cut off by
	// the deadline, it would leave unknown what every earlier attempt
	// left certain (nothing started).
	noRoom := func() bool {
		dl, ok := ctx.Deadline()
		return call.starts && lastErr != nil && !maybeRan && ok && time.Until(dl) < max(slowest, 50*time.Millisecond)
	}
	for round := 0; ; round++ {
		closedAtOnce := 0 // endpoints that closed the connection unread
		for _, ep := range a.endpoints {
			if ctx.Err() != nil || noRoom() {
				break
			}
			addr = ep
			cc, err := a.conn(ctx, addr)
			if errors.Is(err, errTLS) {
				// Every endpoint of a cluster speaks the same TLS: waiting
				// out --timeout would not help.
				return &client.OpError{Op: call.name, Addr: addr, Kind: client.ErrUnavailable, Err: err}
			}
			if err != nil {
				if closedUnread(err.Error()) {
					closedAtOnce++
				}
				lastErr = err
				continue
			}
			actx, cancel := ctx, context.CancelFunc(func() {})
			if call.attempt > 0 {
				actx, cancel = context.WithTimeout(ctx, call.attempt)
			}
			began := time.Now()
			err = call.send(actx, kvrpc.NewClusterClient(cc), &kvpb.RequestHeader{})
			cancel()
			slowest = max(slowest, time.Since(began))
			if err == nil {
				return nil
			}
			lastErr = err
			retry, ambiguous, kind := classifyAdmin(err)
			maybeRan = maybeRan || ambiguous
			if !retry {
				if call.starts && ambiguous {
					kind = client.ErrOutcomeUnknown
				}
				return &client.OpError{Op: call.name, Addr: addr, Kind: kind, Err: err}
			}
		}
		if closedAtOnce == len(a.endpoints) {
			// Every node closed the connection before a word: they speak
			// TLS (or all are at their connection limit); say so now
			// rather than at --timeout.
			return &client.OpError{Op: call.name, Addr: addr, Kind: client.ErrUnavailable, Err: lastErr}
		}
		if noRoom() || !sleepBackoff(ctx, round) {
			kind := client.ErrUnavailable
			if call.starts && maybeRan {
				kind = client.ErrOutcomeUnknown
			}
			cerr := ctx.Err()
			if cerr == nil {
				cerr = context.DeadlineExceeded // the next sleep would pass the deadline
			}
			if lastErr != nil {
				cerr = fmt.Errorf("%w; %w", lastErr, cerr)
			}
			return &client.OpError{Op: call.name, Addr: addr, Kind: kind, Err: cerr}
		}
	}
}

// classifyAdmin says what a failed attempt means: whether to try again
// (on the next endpoint), whether the call may have been carried out,
// and, for a definite failure, the client sentinel it maps to.
func classifyAdmin(err error) (retry, ambiguous bool, kind error) {
	st, ok := status.FromError(err)
	if !ok {
		return true, false, nil // not connected: never sent
	}
	switch st.Code() {
	case codes.Unavailable:
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == notAppliedDomain && notAppliedReasons[info.GetReason()] {
				return true, false, nil
			}
		}
		return true, true, nil
	case codes.DeadlineExceeded, codes.Canceled:
		return true, true, nil
	case codes.Aborted:
		return true, false, nil
	case codes.InvalidArgument:
		return false, false, client.ErrInvalidArgument
	case codes.PermissionDenied, codes.Unauthenticated:
		return false, false, client.ErrPermissionDenied
	case codes.Unknown, codes.Internal, codes.DataLoss:
		return false, true, nil
	default:
		// FailedPrecondition, Unimplemented, ...: a definite refusal.
		return false, false, nil
	}
}

// sleepBackoff sleeps before round n+1: 25ms·2ⁿ up to 1s, jittered to
// between half and all of it. It returns false, without sleeping, when
// ctx would end first.
func sleepBackoff(ctx context.Context, n int) bool {
	d := adminBackoffBase << min(n, 6)
	d = min(d, adminBackoffMax)
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

func headerFromPB(h *kvpb.ResponseHeader) jsonHeader {
	return jsonHeader{ClusterID: h.GetClusterId(), MemberID: h.GetMemberId(), RaftTerm: h.GetRaftTerm(), CutVersion: h.GetCutVersion()}
}
