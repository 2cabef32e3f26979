package rpc

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/raftstore"
	"github.com/cutkv/cutkv/snapshot"
)

// ErrorDomain is the ErrorInfo domain of cutkv's status details.
const ErrorDomain = "cutkv.io"

// Reasons carried in ErrorInfo. Every one of them means the request was
// NOT applied, so a client may resend a write.
const (
	ReasonNotLeader       = "NOT_LEADER"
	ReasonNoLeader        = "NO_LEADER"
	ReasonProposalDropped = "PROPOSAL_DROPPED"
	ReasonNotServing      = "NOT_SERVING"
	ReasonShuttingDown    = "SHUTTING_DOWN"
	ReasonLocked          = "LOCKED"
	// ReasonUnconfirmed: the request named a cut version above this
	// node's and group 0 could not be asked whether it was allocated.
	ReasonUnconfirmed = "CUT_VERSION_UNCONFIRMED"
	// ReasonNoStore (with NotFound): the snapshot store itself does not
	// exist (snapshot.ErrNoStore), as opposed to a snapshot in it.
	ReasonNoStore = "SNAPSHOT_STORE_NOT_FOUND"
	// ReasonStoreAccess (with PermissionDenied): the snapshot store
	// refused the node's credentials, or the node has none
	// (snapshot.ErrAccess), as opposed to the client's role.
	ReasonStoreAccess = "SNAPSHOT_STORE_ACCESS"
)

// Sentinel errors of this package.
var (
	ErrInvalidArgument = errors.New("rpc: invalid argument")
	ErrWrongCluster    = errors.New("rpc: message from another cluster")
	ErrShuttingDown    = errors.New("rpc: node is shutting down")
	// ErrFailedPrecondition: the request cannot be served in the
	// cluster's present state (not retried as it is).
	ErrFailedPrecondition = errors.New("rpc: failed precondition")
	// ErrPermissionDenied: the request asks for what this node's
	// configuration does not allow.
	ErrPermissionDenied = errors.New("rpc: not allowed")
	// ErrUnconfirmed: see ReasonUnconfirmed.
	ErrUnconfirmed = errors.New("rpc: cut version not confirmed")
	// ErrUnauthenticated: the call needs a certificate this node accepts
	// and came without one.
	ErrUnauthenticated = errors.New("rpc: unauthenticated")
	// ErrUnimplemented: the method is not served on this listener.
	ErrUnimplemented = errors.New("rpc: not served here")
	// ErrOutcomeUnknown: a transaction's decision may or may not have
	// been recorded (the coordinator lost track of it after proposing).
	ErrOutcomeUnknown = errors.New("rpc: outcome unknown")
	// ErrUnavailable: this node cannot take the request now; whether a
	// write it carried was applied is not said (no reason detail).
	ErrUnavailable = errors.New("rpc: unavailable")
	// ErrInternal: a state that should not occur; nothing was applied.
	ErrInternal = errors.New("rpc: internal error")
)

// notApplied builds an Unavailable status that tells the client the
// request was not applied.
func notApplied(reason, msg string, meta map[string]string) error {
	st := status.New(codes.Unavailable, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta}); err == nil {
		st = d
	}
	return st.Err()
}

// withReason builds a status of code with a cutkv ErrorInfo reason, so
// that clients tell cases of one code apart without reading the message.
func withReason(code codes.Code, reason, msg string) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}); err == nil {
		st = d
	}
	return st.Err()
}

// toStatus maps an internal error to the gRPC status clients see. It is
// the only place that picks codes (for the node's own errors, the
// snapshot store's and the listeners' authentication alike); clients
// never see a bare Unknown. leaderID names the leader for NOT_LEADER
// when known.
func toStatus(err error, leaderID string) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err // already a status (e.g. from a forwarded call)
	}
	var nl *raftstore.NotLeaderError
	switch {
	case errors.Is(err, ErrInvalidArgument), errors.Is(err, snapshot.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, snapshot.ErrAccess):
		return withReason(codes.PermissionDenied, ReasonStoreAccess, err.Error())
	case errors.Is(err, ErrPermissionDenied):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, ErrUnauthenticated):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, ErrUnimplemented):
		return status.Error(codes.Unimplemented, err.Error())
	case errors.Is(err, snapshot.ErrNoStore):
		return withReason(codes.NotFound, ReasonNoStore, err.Error())
	case errors.Is(err, snapshot.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, snapshot.ErrExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, snapshot.ErrBusy), errors.Is(err, snapshot.ErrLockLost):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, snapshot.ErrCorrupt), errors.Is(err, snapshot.ErrMissing), errors.Is(err, snapshot.ErrIncomplete), errors.Is(err, snapshot.ErrVersion):
		return status.Error(codes.DataLoss, err.Error())
	case errors.Is(err, ErrOutcomeUnknown):
		return status.Error(codes.Unavailable, "cutkv: "+err.Error()+"; a write's outcome is unknown")
	case errors.Is(err, ErrUnavailable):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, ErrInternal):
		return status.Error(codes.Internal, err.Error())
	case errors.Is(err, ErrWrongCluster), errors.Is(err, ErrFailedPrecondition):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ErrConflict):
		return status.Error(codes.Aborted, "cutkv: "+err.Error()+"; not applied, retry")
	case errors.Is(err, ErrLocked):
		return notApplied(ReasonLocked, err.Error(), nil)
	case errors.Is(err, ErrUnconfirmed):
		return notApplied(ReasonUnconfirmed, err.Error(), nil)
	case errors.Is(err, ErrShuttingDown):
		return notApplied(ReasonShuttingDown, err.Error(), nil)
	case errors.As(err, &nl) && nl.Leader != 0:
		return notApplied(ReasonNotLeader, err.Error(), map[string]string{"leader": leaderID})
	case errors.Is(err, raftstore.ErrNotLeader), errors.Is(err, raftstore.ErrNoLeader):
		return notApplied(ReasonNoLeader, err.Error(), nil)
	case errors.Is(err, raftstore.ErrProposalDropped):
		return notApplied(ReasonProposalDropped, err.Error(), nil)
	case errors.Is(err, raftstore.ErrNotServing):
		return notApplied(ReasonNotServing, err.Error(), nil)
	case errors.Is(err, raftstore.ErrUnknownGroup):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "cutkv: deadline exceeded; a write's outcome is unknown: "+err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, raftstore.ErrLeadershipLost):
		return status.Error(codes.Unavailable, "cutkv: "+err.Error())
	case errors.Is(err, raftstore.ErrStopped):
		return status.Error(codes.Unavailable, "cutkv: node stopped; a write's outcome is unknown")
	default:
		return status.Error(codes.Internal, err.Error())
	}
}
