package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// The ports of a local 3-member etcd cluster as etcd's own Procfile
	// starts it.
	defaultEtcdEndpoints = "127.0.0.1:2379,127.0.0.1:22379,127.0.0.1:32379"
	envEtcdEndpoints     = "ETCDCTL_ENDPOINTS"
)

// etcdDriver drives etcd v3 through its Go client. Each Conn is a
// clientv3.Client: one gRPC connection balanced over the endpoints, as
// etcd's own benchmark tool uses them.
type etcdDriver struct{}

func (etcdDriver) DefaultEndpoints(getenv func(string) string) []string {
	if env := strings.TrimSpace(getenv(envEtcdEndpoints)); env != "" {
		return splitEndpoints(env)
	}
	return splitEndpoints(defaultEtcdEndpoints)
}

func (etcdDriver) Connect(ctx context.Context, endpoints []string, opts ConnectOptions) (Conn, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: opts.DialTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	// The client connects lazily: one linearizable read proves that a
	// quorum answers before the run starts.
	cctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	if _, err := c.Get(cctx, "\x00kvbench-connect-check"); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("etcd did not answer: %w", err)
	}
	return etcdConn{c}, nil
}

// Classify maps etcd's errors onto cutkv's kinds. etcd says Unavailable
// both when it refused a request (no leader, not capable) and when it gave
// up waiting for one it had proposed ("request timed out", "leader
// changed"): for a write, the second and any RPC that ended without an
// answer (deadline, cancellation, broken stream) have an unknown outcome.
// A read that timed out counts as unavailable: it changed nothing.
func (etcdDriver) Classify(err error) errKind {
	var op *etcdOpError
	write := errors.As(err, &op) && op.write
	if write {
		for _, ambiguous := range []error{rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrLeaderChanged} {
			if errors.Is(err, ambiguous) {
				return errOutcomeUnknown
			}
		}
	}
	code := grpcCode(err)
	switch code {
	case codes.Unavailable:
		return errUnavailable
	case codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Internal:
		if write {
			return errOutcomeUnknown
		}
		if code == codes.DeadlineExceeded {
			return errUnavailable
		}
	}
	return errOther
}

// grpcCode finds the gRPC code of an etcd client error: etcd's own errors
// (rpctypes.EtcdError) carry it in a Code method; context errors map to
// DeadlineExceeded and Canceled.
func grpcCode(err error) codes.Code {
	var coded interface{ Code() codes.Code }
	if errors.As(err, &coded) {
		return coded.Code()
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Unknown
}

// etcdOpError remembers whether the failed operation was a write.
type etcdOpError struct {
	write bool
	err   error
}

func (e *etcdOpError) Error() string { return e.err.Error() }
func (e *etcdOpError) Unwrap() error { return e.err }

type etcdConn struct{ c *clientv3.Client }

func (c etcdConn) Put(ctx context.Context, key, value []byte) error {
	if _, err := c.c.Put(ctx, string(key), string(value)); err != nil {
		return &etcdOpError{write: true, err: err}
	}
	return nil
}

func (c etcdConn) Get(ctx context.Context, key []byte) (bool, error) {
	r, err := c.c.Get(ctx, string(key))
	if err != nil {
		return false, &etcdOpError{err: err}
	}
	return r.Count > 0, nil
}

// PutPair is a Txn of two Puts (etcd has no partitions).
func (c etcdConn) PutPair(ctx context.Context, k1, v1, k2, v2 []byte) error {
	_, err := c.c.Txn(ctx).Then(clientv3.OpPut(string(k1), string(v1)), clientv3.OpPut(string(k2), string(v2))).Commit()
	if err != nil {
		return &etcdOpError{write: true, err: err}
	}
	return nil
}

// GetVersion returns the key's ModRevision as its version.
func (c etcdConn) GetVersion(ctx context.Context, key []byte) ([]byte, int64, error) {
	r, err := c.c.Get(ctx, string(key))
	if err != nil {
		return nil, 0, &etcdOpError{err: err}
	}
	if len(r.Kvs) == 0 {
		return nil, 0, nil
	}
	return r.Kvs[0].Value, r.Kvs[0].ModRevision, nil
}

func (c etcdConn) SwapPair(ctx context.Context, k1 []byte, v1 int64, n1 []byte, k2 []byte, v2 int64, n2 []byte) (bool, error) {
	s1, s2 := string(k1), string(k2)
	r, err := c.c.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(s1), "=", v1), clientv3.Compare(clientv3.ModRevision(s2), "=", v2)).
		Then(clientv3.OpPut(s1, string(n1)), clientv3.OpPut(s2, string(n2))).
		Commit()
	if err != nil {
		return false, &etcdOpError{write: true, err: err}
	}
	return r.Succeeded, nil
}

// ReadRange is a Txn of one ranged Get.
func (c etcdConn) ReadRange(ctx context.Context, start, end []byte) ([]KV, bool, error) {
	r, err := c.c.Txn(ctx).Then(clientv3.OpGet(string(start), clientv3.WithRange(string(end)))).Commit()
	if err != nil {
		return nil, false, &etcdOpError{err: err}
	}
	if len(r.Responses) != 1 || r.Responses[0].GetResponseRange() == nil {
		return nil, false, fmt.Errorf("txn of one range read: unexpected responses %v", r.Responses)
	}
	rr := r.Responses[0].GetResponseRange()
	kvs := make([]KV, len(rr.Kvs))
	for i, kv := range rr.Kvs {
		kvs[i] = KV{Key: kv.Key, Value: kv.Value}
	}
	return kvs, rr.More, nil
}

func (c etcdConn) Close() error { return c.c.Close() }
