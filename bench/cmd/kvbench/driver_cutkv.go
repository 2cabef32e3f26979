package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/keyspace"
)

const (
	defaultCutkvEndpoints = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
	envCutkvEndpoints     = "CUTKV_ENDPOINTS"
)

// cutkvDriver drives cutkv through the Go client. Each Conn is a
// client.Client, which holds one gRPC connection per node and sends each
// request straight to its partition's leader.
type cutkvDriver struct{}

func (cutkvDriver) DefaultEndpoints(getenv func(string) string) []string {
	if env := strings.TrimSpace(getenv(envCutkvEndpoints)); env != "" {
		return splitEndpoints(env)
	}
	return splitEndpoints(defaultCutkvEndpoints)
}

func (cutkvDriver) Connect(ctx context.Context, endpoints []string, opts ConnectOptions) (Conn, error) {
	c, err := client.NewWithConfig(ctx, cutkvClientConfig(endpoints, opts))
	if err != nil {
		return nil, err
	}
	return cutkvConn{c}, nil
}

// cutkvClientConfig is the client configuration of one connection.
func cutkvClientConfig(endpoints []string, opts ConnectOptions) client.Config {
	return client.Config{Endpoints: endpoints, DialTimeout: opts.DialTimeout, TLS: opts.TLS}
}

func (cutkvDriver) Classify(err error) errKind {
	switch {
	case errors.Is(err, client.ErrConflict):
		return errConflict
	case errors.Is(err, client.ErrOutcomeUnknown):
		return errOutcomeUnknown
	case errors.Is(err, client.ErrUnavailable):
		return errUnavailable
	}
	return errOther
}

type cutkvConn struct{ c *client.Client }

func (c cutkvConn) Put(ctx context.Context, key, value []byte) error {
	return c.c.Put(ctx, key, value)
}

func (c cutkvConn) Get(ctx context.Context, key []byte) (bool, error) {
	_, err := c.c.Get(ctx, key)
	if errors.Is(err, client.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// PutPair is a Txn without compares; two keys of one partition take the
// 1PC path, of two partitions 2PC.
func (c cutkvConn) PutPair(ctx context.Context, k1, v1, k2, v2 []byte) error {
	_, err := c.c.Txn(ctx).Then(client.OpPut(k1, v1), client.OpPut(k2, v2)).Commit()
	return err
}

func (c cutkvConn) GetVersion(ctx context.Context, key []byte) ([]byte, int64, error) {
	kv, err := c.c.Get(ctx, key)
	if errors.Is(err, client.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return kv.Value, kv.Version, nil
}

func (c cutkvConn) SwapPair(ctx context.Context, k1 []byte, v1 int64, n1 []byte, k2 []byte, v2 int64, n2 []byte) (bool, error) {
	resp, err := c.c.Txn(ctx).
		If(client.Compare(client.Version(k1), "=", v1), client.Compare(client.Version(k2), "=", v2)).
		Then(client.OpPut(k1, n1), client.OpPut(k2, n2)).
		Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// ReadRange is a Txn of one Scan, which locks the range in every
// partition and reads it at one point (DESIGN.md, Transactions).
func (c cutkvConn) ReadRange(ctx context.Context, start, end []byte) ([]KV, bool, error) {
	resp, err := c.c.Txn(ctx).Then(client.OpScan(start, end, 0)).Commit()
	if err != nil {
		return nil, false, err
	}
	if len(resp.Responses) != 1 {
		return nil, false, fmt.Errorf("txn of one scan: %d responses", len(resp.Responses))
	}
	r := resp.Responses[0]
	kvs := make([]KV, len(r.KVs))
	for i, kv := range r.KVs {
		kvs[i] = KV{Key: kv.Key, Value: kv.Value}
	}
	return kvs, r.More, nil
}

func (c cutkvConn) Partitions(ctx context.Context) (uint32, error) {
	st, err := c.c.Status(ctx)
	if err != nil {
		return 0, err
	}
	if st.Partitions == 0 {
		return 0, errors.New("cluster status reports 0 partitions")
	}
	return st.Partitions, nil
}

func (cutkvConn) PartitionOf(key []byte, n uint32) uint64 { return keyspace.PartitionOf(key, n) }

func (c cutkvConn) Close() error { return c.c.Close() }
