package main

import (
	"context"
	"errors"
	"strings"

	"github.com/cutkv/cutkv/client"
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
	c, err := client.NewWithConfig(ctx, client.Config{Endpoints: endpoints, DialTimeout: opts.DialTimeout})
	if err != nil {
		return nil, err
	}
	return cutkvConn{c}, nil
}

func (cutkvDriver) Classify(err error) errKind {
	switch {
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

func (c cutkvConn) Close() error { return c.c.Close() }
