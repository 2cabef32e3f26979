package rpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/cutkv/cutkv/proto/kvpb"
)

// The marker merge (DESIGN.md, consistent cut rule 1) is one pair of
// interceptors: MarkerInterceptor on both listeners for what arrives in
// requests, the peer pool's interceptor (Pool.SetMarker) for what
// arrives in replies. Both admit a version through admitVersion (it
// was allocated, then the clock is raised), so no handler and no caller
// merges a marker by hand.

// MarkerInterceptor merges the cut marker of every request into the
// node's clock before the request is served, once admitted: the version
// of a client request's header (DESIGN.md, consistent cut rule 8) and the
// cut_version of a peer's (rule 1: Prepare, Status, Record, Decide,
// Finish, Forget, StartCut and the snapshot calls). A version group 0
// never allocated is refused (InvalidArgument) and the request not
// served. It runs after the request's role or member was checked; the
// handlers' doors check the rest, and admit the other versions a request
// names (a Finish's or decision's stamp, a StartCut's version). Calls a
// node makes to itself in process carry its own clock and skip it.
func MarkerInterceptor(n *Node) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		switch r := req.(type) {
		case interface{ GetHeader() *kvpb.RequestHeader }:
			if err := n.admitVersion(ctx, "header.cut_version", r.GetHeader().GetCutVersion()); err != nil {
				return nil, toStatus(err, "")
			}
		case interface{ GetCutVersion() uint64 }:
			if err := n.admitVersion(ctx, "cut_version", r.GetCutVersion()); err != nil {
				return nil, toStatus(err, "")
			}
		}
		return handler(ctx, req)
	}
}

// mergeReply admits the marker reply carries, if it has one, as the
// reply to method.
func (n *Node) mergeReply(ctx context.Context, method string, reply any) error {
	m, ok := reply.(interface{ GetCutVersion() uint64 })
	if !ok || m.GetCutVersion() <= n.Clock.Load() {
		// Most replies carry a version this node knows: taken at once,
		// without formatting the field's name (an allocation per reply).
		return nil
	}
	if err := n.admitVersion(ctx, "cut_version of the reply to "+method, m.GetCutVersion()); err != nil {
		return &RefusedReplyError{Method: method, Err: err}
	}
	return nil
}

// RefusedReplyError: a peer served a call, but its reply named a cut
// version this node did not admit (Err says why: never allocated, or
// group 0 could not confirm it); the reply was not acted on.
type RefusedReplyError struct {
	Method string
	Err    error
}

func (e *RefusedReplyError) Error() string {
	return fmt.Sprintf("rpc: reply to %s refused: %v", e.Method, e.Err)
}

func (e *RefusedReplyError) Unwrap() error { return e.Err }

// isRefusedReply says whether err is a reply the marker merge refused.
func isRefusedReply(err error) bool {
	var r *RefusedReplyError
	return errors.As(err, &r)
}
