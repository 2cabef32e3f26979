package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// A Driver connects kvbench to one kind of database, so that every target
// is driven by the same workers, workloads and measurements.
type Driver interface {
	// DefaultEndpoints returns the endpoints used when --endpoints is not
	// given; getenv reads the environment.
	DefaultEndpoints(getenv func(string) string) []string
	// Connect opens one connection (one client, with its own transport) to
	// the cluster at endpoints. It blocks until the cluster answers or
	// ctx or opts.DialTimeout ends.
	Connect(ctx context.Context, endpoints []string, opts ConnectOptions) (Conn, error)
	// Classify sorts an error returned by a Conn into the kinds kvbench
	// counts.
	Classify(err error) errKind
}

// ConnectOptions are the parts of the configuration a driver needs.
type ConnectOptions struct {
	DialTimeout time.Duration
}

// Conn is one connection to the cluster. kvbench calls its methods from
// several workers at once, so it must be safe for concurrent use. Key and
// value slices belong to the caller and are reused once a call returns: a
// Conn must not keep them.
//
// Transactions (workloads txn and bank) will add a method here when
// cutkv has them (issue 3); see workloads.
type Conn interface {
	// Put writes value under key and returns once the write is committed.
	Put(ctx context.Context, key, value []byte) error
	// Get reads key; found is false when the key does not exist, which is
	// not an error.
	Get(ctx context.Context, key []byte) (found bool, err error)
	// Close releases the connection.
	Close() error
}

// errKind is how kvbench counts a failed operation. The kinds follow the
// cutkv client's sentinel errors.
type errKind int

const (
	// errOutcomeUnknown: a write was sent and may or may not have been
	// applied (deadline, broken connection).
	errOutcomeUnknown errKind = iota
	// errUnavailable: no node gave a usable answer in time; a write was
	// not applied.
	errUnavailable
	// errOther: anything else (a refusal, a bug).
	errOther
	numErrKinds
)

// String returns the name used in the output.
func (k errKind) String() string {
	switch k {
	case errOutcomeUnknown:
		return "outcome_unknown"
	case errUnavailable:
		return "unavailable"
	}
	return "other"
}

// drivers are the --target values.
var drivers = map[string]Driver{
	"cutkv": cutkvDriver{},
	"etcd":  etcdDriver{},
}

func driverNames() string {
	var names []string
	for n := range drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// splitEndpoints splits a comma-separated list, dropping empty entries.
func splitEndpoints(s string) []string {
	var eps []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	return eps
}

// connectAll opens n connections one after the other, closing those
// already opened if one fails.
func connectAll(ctx context.Context, d Driver, endpoints []string, n int, opts ConnectOptions) ([]Conn, error) {
	conns := make([]Conn, 0, n)
	for i := range n {
		c, err := d.Connect(ctx, endpoints, opts)
		if err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("connection %d of %d to %s: %w", i+1, n, strings.Join(endpoints, ","), err)
		}
		conns = append(conns, c)
	}
	return conns, nil
}

func closeAll(conns []Conn) {
	for _, c := range conns {
		_ = c.Close()
	}
}
