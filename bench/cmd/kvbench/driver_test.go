package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cutkv/cutkv/client"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	cut := cutkvDriver{}
	for err, want := range map[error]errKind{
		&client.OpError{Op: "put", Kind: client.ErrOutcomeUnknown, Err: context.DeadlineExceeded}: errOutcomeUnknown,
		&client.OpError{Op: "get", Kind: client.ErrUnavailable}:                                   errUnavailable,
		&client.OpError{Op: "put", Kind: client.ErrInvalidArgument}:                               errOther,
		&client.OpError{Op: "txn", Kind: client.ErrConflict}:                                      errConflict,
		errors.New("boom"): errOther,
	} {
		if got := cut.Classify(err); got != want {
			t.Errorf("cutkv %v: %v, want %v", err, got, want)
		}
	}
	etcd := etcdDriver{}
	w := func(err error) error { return &etcdOpError{write: true, err: err} }
	r := func(err error) error { return &etcdOpError{err: err} }
	for _, tc := range []struct {
		err  error
		want errKind
	}{
		{w(context.DeadlineExceeded), errOutcomeUnknown},
		{w(fmt.Errorf("x: %w", context.Canceled)), errOutcomeUnknown},
		{w(rpctypes.ErrTimeout), errOutcomeUnknown},
		{w(rpctypes.ErrLeaderChanged), errOutcomeUnknown},
		{w(rpctypes.ErrNoLeader), errUnavailable},
		{w(status.Error(codes.Unavailable, "connection refused")), errUnavailable},
		{w(rpctypes.ErrRequestTooLarge), errOther},
		{r(context.DeadlineExceeded), errUnavailable},
		{r(rpctypes.ErrTimeout), errUnavailable},
		{r(status.Error(codes.Unknown, "?")), errOther},
	} {
		if got := etcd.Classify(tc.err); got != tc.want {
			t.Errorf("etcd %v: %v, want %v", tc.err, got, tc.want)
		}
	}
}
