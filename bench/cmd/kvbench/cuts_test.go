package main

import (
	"errors"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/rpc"
)

// TestNotApplied: only the server's "not applied" answer (Unavailable with
// cutkv's ErrorInfo) makes the cutter send a cut call again.
func TestNotApplied(t *testing.T) {
	with := func(code codes.Code, domain string) error {
		st, err := status.New(code, "x").WithDetails(&errdetails.ErrorInfo{Domain: domain, Reason: rpc.ReasonProposalDropped})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"proposal dropped":       {with(codes.Unavailable, rpc.ErrorDomain), true},
		"another domain":         {with(codes.Unavailable, "example.com"), false},
		"unavailable, no detail": {status.Error(codes.Unavailable, "connection reset"), false},
		"other code":             {with(codes.FailedPrecondition, rpc.ErrorDomain), false},
		"not a status":           {errors.New("boom"), false},
	} {
		if got := notApplied(tc.err); got != tc.want {
			t.Errorf("%s: notApplied = %v, want %v", name, got, tc.want)
		}
	}
}
