package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cutkv/cutkv/client"
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
	// TLS is cutkv's client TLS (Config.TLS); nil: plaintext. Validate
	// refuses it for the other targets.
	TLS *client.TLSFiles
}

// Conn is one connection to the cluster. kvbench calls its methods from
// several workers at once, so it must be safe for concurrent use. Key and
// value slices belong to the caller and are reused once a call returns: a
// Conn must not keep them.
type Conn interface {
	// Put writes value under key and returns once the write is committed.
	Put(ctx context.Context, key, value []byte) error
	// Get reads key; found is false when the key does not exist, which is
	// not an error.
	Get(ctx context.Context, key []byte) (found bool, err error)
	// PutPair writes two keys in one transaction with no compares (the
	// txn workload).
	PutPair(ctx context.Context, k1, v1, k2, v2 []byte) error
	// GetVersion reads key's value and a version that changes with every
	// write to it (cutkv: Version; etcd: ModRevision); version 0 means
	// the key does not exist, which is not an error.
	GetVersion(ctx context.Context, key []byte) (value []byte, version int64, err error)
	// SwapPair writes n1 under k1 and n2 under k2 in one transaction if
	// both versions are still v1 and v2; swapped is false, and nothing
	// was written, when a compare failed (the bank workload's transfer).
	SwapPair(ctx context.Context, k1 []byte, v1 int64, n1 []byte, k2 []byte, v2 int64, n2 []byte) (swapped bool, err error)
	// ReadRange reads every key k with start ≤ k < end in one
	// transaction, so that the result is one consistent state (the bank
	// audit). more is true when the range held more keys than one
	// transaction returns (cutkv: 10000).
	ReadRange(ctx context.Context, start, end []byte) (kvs []KV, more bool, err error)
	// Close releases the connection.
	Close() error
}

// KV is one key-value read by ReadRange.
type KV struct {
	Key, Value []byte
}

// partitioned is implemented by Conns of databases with partitions: the
// txn workload picks its two keys in the same partition or in different
// ones.
type partitioned interface {
	// Partitions returns the cluster's partition count.
	Partitions(ctx context.Context) (uint32, error)
	// PartitionOf returns the partition of key among n.
	PartitionOf(key []byte, n uint32) uint64
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
	// numErrKinds is the number of kinds counted as errors.
	numErrKinds
)

// errConflict: a transaction kept losing to concurrent ones and was not
// applied (cutkv's ErrConflict). It is counted as an abort, not as an
// error, and is not one of the numErrKinds.
const errConflict = numErrKinds

// String returns the name used in the output.
func (k errKind) String() string {
	switch k {
	case errOutcomeUnknown:
		return "outcome_unknown"
	case errUnavailable:
		return "unavailable"
	case errConflict:
		return "conflict"
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
