package client

import (
	"errors"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors. Every error an operation returns is an *OpError that
// wraps at most one of these and the underlying cause (often a gRPC status
// error); match them with errors.Is.
var (
	// ErrNotFound: Get found no such key.
	ErrNotFound = errors.New("client: key not found")
	// ErrOutcomeUnknown: a write was sent but no definite answer came back
	// (deadline, cancellation, broken connection, or an unexpected server
	// error); it may or may not have been applied. The client never resends
	// such a write; read the key to find out.
	ErrOutcomeUnknown = errors.New("client: write outcome unknown")
	// ErrUnavailable: no node gave a usable answer before the deadline. A
	// write that fails with ErrUnavailable was not applied.
	ErrUnavailable = errors.New("client: cluster unavailable")
	// ErrInvalidArgument: the request is malformed (empty or oversized key,
	// oversized value, negative limit); retrying cannot help.
	ErrInvalidArgument = errors.New("client: invalid argument")
	// ErrPermissionDenied: the cluster refused the call for this client's
	// certificate (none, or a role below the one the call needs); nothing
	// was applied.
	ErrPermissionDenied = errors.New("client: permission denied")
	// ErrConflict: a transaction kept conflicting with other transactions
	// (the server answered Aborted to every attempt, the last one included)
	// until its ctx's deadline. It was not applied; run it again later, or
	// with a longer deadline.
	ErrConflict = errors.New("client: transaction conflict")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("client: closed")
)

// OpError describes a failed operation.
type OpError struct {
	// Op names the operation: "get", "put", "delete", "scan", "txn",
	// "members", "status", "connect".
	Op string
	// Key is the operation's key, or the scan's start, or the smallest key
	// of a transaction (the one it was routed by); nil for others.
	Key []byte
	// Addr is the address of the last node tried, if any.
	Addr string
	// Kind is one of the sentinel errors, or nil.
	Kind error
	// Err is the cause: a gRPC status error, a context error, or several
	// joined; nil when Kind says it all.
	Err error
}

func (e *OpError) Error() string {
	var b strings.Builder
	if e.Kind != nil {
		b.WriteString(e.Kind.Error())
	} else {
		b.WriteString("client")
	}
	b.WriteString(": ")
	b.WriteString(e.Op)
	if e.Key != nil {
		b.WriteString(" ")
		b.WriteString(QuoteKey(e.Key))
	}
	if e.Addr != "" {
		b.WriteString(" (last tried ")
		b.WriteString(e.Addr)
		b.WriteString(")")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
		b.WriteString(transportHint(e.Err.Error()))
	}
	return b.String()
}

// transportHint explains the connection errors a TLS mismatch gives,
// which gRPC reports in terms of HTTP/2 and TLS records.
func transportHint(msg string) string {
	switch {
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return " (the server speaks plaintext: connect without --cacert/--cert/--key, or give the server --cert-file and --key-file)"
	case strings.Contains(msg, "server preface"):
		return " (the server closed the connection at once: it may speak TLS — pass --cacert, and --cert/--key for a client certificate — or be at its --max-connections limit)"
	case strings.Contains(msg, "broken pipe"), strings.Contains(msg, "connection reset by peer"):
		return " (the server closed the connection: it may be at its --max-connections limit, or speak TLS — pass --cacert)"
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return " (the server's certificate does not chain to --cacert: use the CA the cluster's certificates come from)"
	case strings.Contains(msg, "certificate required"):
		return " (the server requires a client certificate: pass --cert and --key)"
	}
	return ""
}

// Unwrap returns the sentinel and the cause, so that errors.Is matches
// either (for example ErrUnavailable and context.DeadlineExceeded).
func (e *OpError) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// QuoteKey renders a key for messages: Go-quoted, cut after 64 bytes.
func QuoteKey(k []byte) string {
	const max = 64
	if len(k) > max {
		return strconv.Quote(string(k[:max])) + "..."
	}
	return strconv.Quote(string(k))
}

// errorDomain and the reasons are the server's contract for "this write was
// not applied" (see doc.go).
const (
	errorDomain           = "cutkv.io"
	reasonNotLeader       = "NOT_LEADER"
	reasonNoLeader        = "NO_LEADER"
	reasonProposalDropped = "PROPOSAL_DROPPED"
	reasonNotServing      = "NOT_SERVING"
	reasonShuttingDown    = "SHUTTING_DOWN"
	// reasonLocked: a read met a prepared transaction's write that did not
	// finish in time; nothing was read. Retry after a pause.
	reasonLocked = "LOCKED"
	// reasonUnconfirmed: the request's cut version is above the node's and
	// group 0 could not confirm it; nothing was applied.
	reasonUnconfirmed = "CUT_VERSION_UNCONFIRMED"
)

// verdict says what a failed attempt means for the operation.
type verdict int

const (
	// retry: the request was not applied (or is a read); try again.
	retry verdict = iota
	// fail: a definite answer; return it.
	fail
	// unknown: a write may have been applied; return ErrOutcomeUnknown.
	unknown
)

// failure is a classified attempt error.
type failure struct {
	verdict verdict
	kind    error // sentinel for fail
	reason  string
	// leader is the NOT_LEADER hint: node id of the leader, if known.
	leader string
	// elsewhere: another node may do better (the node is not serving or
	// could not be reached); the next attempt avoids it.
	elsewhere bool
	// wait: back off before the next attempt (the cluster is busy electing,
	// or dropped the proposal).
	wait bool
}

// errNotSent marks an attempt that failed before the request left the
// client (the connection was not ready): safe to retry, even a write.
type errNotSent struct {
	addr  string
	cause string
}

func (e *errNotSent) Error() string {
	return e.addr + ": not connected (" + e.cause + ")"
}

// classify decides what err, returned by one attempt, means.
func classify(err error, write bool) failure {
	var ns *errNotSent
	if errors.As(err, &ns) {
		return failure{verdict: retry, elsewhere: true}
	}
	st, ok := status.FromError(err)
	if !ok {
		// Not from gRPC: treat as a broken connection.
		if write {
			return failure{verdict: unknown}
		}
		return failure{verdict: retry, elsewhere: true}
	}
	switch st.Code() {
	case codes.InvalidArgument:
		return failure{verdict: fail, kind: ErrInvalidArgument}
	case codes.PermissionDenied, codes.Unauthenticated:
		return failure{verdict: fail, kind: ErrPermissionDenied}
	case codes.Unavailable:
		if info := errorInfo(st); info != nil {
			switch info.GetReason() {
			case reasonNotLeader:
				return failure{verdict: retry, reason: info.GetReason(), leader: info.GetMetadata()["leader"], wait: info.GetMetadata()["leader"] == ""}
			case reasonNoLeader, reasonProposalDropped, reasonLocked, reasonUnconfirmed:
				return failure{verdict: retry, reason: info.GetReason(), wait: true}
			case reasonNotServing, reasonShuttingDown:
				return failure{verdict: retry, reason: info.GetReason(), elsewhere: true}
			}
		}
		if write {
			return failure{verdict: unknown}
		}
		return failure{verdict: retry, elsewhere: true}
	case codes.DeadlineExceeded, codes.Canceled:
		if write {
			return failure{verdict: unknown}
		}
		return failure{verdict: retry, elsewhere: true}
	case codes.Aborted:
		// A conflict the server resolved by not applying the request.
		return failure{verdict: retry, wait: true}
	case codes.Unknown, codes.Internal, codes.DataLoss:
		if write {
			return failure{verdict: unknown}
		}
		return failure{verdict: fail}
	default:
		// FailedPrecondition, ResourceExhausted, Unimplemented, ...: the
		// server refused the request.
		return failure{verdict: fail}
	}
}

// errorInfo returns the cutkv ErrorInfo detail of st, or nil.
func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errorDomain {
			return info
		}
	}
	return nil
}

// joinErrors is errors.Join on one line: the non-nil errors, separated by
// "; ". It returns nil if all are nil.
func joinErrors(errs ...error) error {
	var j joined
	for _, e := range errs {
		if e != nil {
			j = append(j, e)
		}
	}
	switch len(j) {
	case 0:
		return nil
	case 1:
		return j[0]
	}
	return j
}

type joined []error

func (j joined) Error() string {
	s := make([]string, len(j))
	for i, e := range j {
		s[i] = e.Error()
	}
	return strings.Join(s, "; ")
}

func (j joined) Unwrap() []error { return j }
