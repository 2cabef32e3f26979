package rpc

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/raftstore"
	"github.com/cutkv/cutkv/snapshot"
	"github.com/cutkv/cutkv/wal"
)

// errorInfoOf returns the cutkv ErrorInfo detail of st, nil if none.
func errorInfoOf(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

func TestToStatus(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		code   codes.Code
		reason string            // "" = no ErrorInfo
		meta   map[string]string // ErrorInfo metadata
	}{
		{"invalid argument", fmt.Errorf("%w: empty key", ErrInvalidArgument), codes.InvalidArgument, "", nil},
		{"wrong cluster", fmt.Errorf("%w: cluster 1", ErrWrongCluster), codes.FailedPrecondition, "", nil},
		{"shutting down", ErrShuttingDown, codes.Unavailable, ReasonShuttingDown, nil},
		{"not leader, leader known", &raftstore.NotLeaderError{Group: 3, Leader: 2}, codes.Unavailable, ReasonNotLeader, map[string]string{"leader": "node-b"}},
		{"not leader, wrapped", fmt.Errorf("put: %w", &raftstore.NotLeaderError{Group: 3, Leader: 2}), codes.Unavailable, ReasonNotLeader, map[string]string{"leader": "node-b"}},
		{"not leader, leader unknown", &raftstore.NotLeaderError{Group: 3}, codes.Unavailable, ReasonNoLeader, nil},
		{"bare ErrNotLeader", raftstore.ErrNotLeader, codes.Unavailable, ReasonNoLeader, nil},
		{"no leader", raftstore.ErrNoLeader, codes.Unavailable, ReasonNoLeader, nil},
		{"proposal dropped", fmt.Errorf("%w: group 1: raft proposal dropped", raftstore.ErrProposalDropped), codes.Unavailable, ReasonProposalDropped, nil},
		{"draining store", fmt.Errorf("%w: node is shutting down", raftstore.ErrProposalDropped), codes.Unavailable, ReasonProposalDropped, nil},
		{"not serving", fmt.Errorf("%w: %w", raftstore.ErrNotServing, wal.ErrWrite), codes.Unavailable, ReasonNotServing, nil},
		{"unknown group", fmt.Errorf("%w 99", raftstore.ErrUnknownGroup), codes.FailedPrecondition, "", nil},
		{"deadline", context.DeadlineExceeded, codes.DeadlineExceeded, "", nil},
		{"deadline, wrapped", fmt.Errorf("propose: %w", context.DeadlineExceeded), codes.DeadlineExceeded, "", nil},
		{"canceled", context.Canceled, codes.Canceled, "", nil},
		// Stopped means the outcome is unknown: Unavailable, but no
		// reason that tells the client it may resend.
		{"stopped", raftstore.ErrStopped, codes.Unavailable, "", nil},
		{"stopped by a fatal error", fmt.Errorf("%w: outcome unknown: %w", raftstore.ErrStopped, wal.ErrWrite), codes.Unavailable, "", nil},
		{"unauthenticated", fmt.Errorf("%w: peer calls need a member certificate", ErrUnauthenticated), codes.Unauthenticated, "", nil},
		{"not served here", fmt.Errorf("%w: /x on the client port", ErrUnimplemented), codes.Unimplemented, "", nil},
		{"permission denied", fmt.Errorf("%w: needs role admin", ErrPermissionDenied), codes.PermissionDenied, "", nil},
		// A coordinator that lost track of its decision: Unavailable
		// without a reason, so the client does not resend a write.
		{"outcome unknown", fmt.Errorf("%w: decision not confirmed", ErrOutcomeUnknown), codes.Unavailable, "", nil},
		{"internal", fmt.Errorf("%w: a reused id", ErrInternal), codes.Internal, "", nil},
		{"unavailable", fmt.Errorf("%w: raft messages not taken: stopped", ErrUnavailable), codes.Unavailable, "", nil},
		// The snapshot store's errors.
		{"snapshot not found", fmt.Errorf("%w: cut-1", snapshot.ErrNotFound), codes.NotFound, "", nil},
		{"snapshot exists", snapshot.ErrExists, codes.AlreadyExists, "", nil},
		{"snapshot store invalid", snapshot.ErrInvalid, codes.InvalidArgument, "", nil},
		{"snapshot store refused", snapshot.ErrAccess, codes.PermissionDenied, ReasonStoreAccess, nil},
		{"snapshot store missing", fmt.Errorf("%w: snapshot store file:///x", snapshot.ErrNoStore), codes.NotFound, ReasonNoStore, nil},
		{"snapshot store busy", snapshot.ErrBusy, codes.Unavailable, "", nil},
		{"snapshot lock lost", snapshot.ErrLockLost, codes.Unavailable, "", nil},
		{"snapshot corrupt", snapshot.ErrCorrupt, codes.DataLoss, "", nil},
		{"snapshot piece missing", snapshot.ErrMissing, codes.DataLoss, "", nil},
		{"snapshot incomplete", snapshot.ErrIncomplete, codes.DataLoss, "", nil},
		{"snapshot of a newer format", snapshot.ErrVersion, codes.DataLoss, "", nil},
		{"unknown", errors.New("disk on fire"), codes.Internal, "", nil},
		{"corrupt WAL", wal.ErrCorrupt, codes.Internal, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := toStatus(tc.err, "node-b")
			st, ok := status.FromError(err)
			if !ok {
				t.Fatalf("toStatus(%v) = %v, not a status", tc.err, err)
			}
			if st.Code() != tc.code {
				t.Fatalf("toStatus(%v): code %v, want %v", tc.err, st.Code(), tc.code)
			}
			if st.Code() == codes.Unknown {
				t.Fatal("clients must never see Unknown")
			}
			info := errorInfoOf(st)
			if tc.reason == "" {
				if info != nil {
					t.Fatalf("toStatus(%v): ErrorInfo %v, want none", tc.err, info)
				}
				return
			}
			if info == nil {
				t.Fatalf("toStatus(%v): no ErrorInfo, want reason %s", tc.err, tc.reason)
			}
			if info.GetReason() != tc.reason || info.GetDomain() != ErrorDomain {
				t.Fatalf("toStatus(%v): ErrorInfo %s/%s, want %s/%s", tc.err, info.GetDomain(), info.GetReason(), ErrorDomain, tc.reason)
			}
			if !maps.Equal(info.GetMetadata(), tc.meta) {
				t.Fatalf("toStatus(%v): metadata %v, want %v", tc.err, info.GetMetadata(), tc.meta)
			}
		})
	}
}

func TestToStatusPassThrough(t *testing.T) {
	if err := toStatus(nil, ""); err != nil {
		t.Fatalf("toStatus(nil) = %v", err)
	}
	// A status from a forwarded call goes back unchanged, details and all.
	st, err := status.New(codes.Unavailable, "from the leader").WithDetails(&errdetails.ErrorInfo{Reason: ReasonNotLeader, Domain: ErrorDomain, Metadata: map[string]string{"leader": "node-c"}})
	if err != nil {
		t.Fatal(err)
	}
	in := st.Err()
	if out := toStatus(in, "node-b"); out != in {
		t.Fatalf("toStatus changed a status error: %v", out)
	}
	for _, in := range []error{
		status.Error(codes.NotFound, "nope"),
		status.Error(codes.ResourceExhausted, "too big"),
		fmt.Errorf("forwarded: %w", status.Error(codes.Aborted, "conflict")),
	} {
		want, _ := status.FromError(in)
		got, ok := status.FromError(toStatus(in, ""))
		if !ok || got.Code() != want.Code() {
			t.Errorf("toStatus(%v) = %v, want code %v kept", in, got, want.Code())
		}
	}
}

// TestNotAppliedReasons checks that every reason toStatus can send is one
// the package documents as "not applied".
func TestNotAppliedReasons(t *testing.T) {
	for _, r := range []string{ReasonNotLeader, ReasonNoLeader, ReasonProposalDropped, ReasonNotServing, ReasonShuttingDown} {
		err := notApplied(r, "msg", nil)
		st, _ := status.FromError(err)
		if st.Code() != codes.Unavailable {
			t.Errorf("%s: code %v, want Unavailable", r, st.Code())
		}
		if info := errorInfoOf(st); info == nil || info.GetReason() != r {
			t.Errorf("%s: ErrorInfo %v", r, info)
		}
	}
}
