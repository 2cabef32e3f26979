package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// KeyValue is a stored key-value pair.
type KeyValue struct {
	Key   []byte
	Value []byte // nil for a keys-only scan
	// Version counts writes to the key since it was created (1 after the
	// first Put).
	Version int64
	// CreateIndex is the raft index, within the key's partition, of the
	// write that created the key; ModIndex that of the last write.
	CreateIndex uint64
	ModIndex    uint64
}

func fromPB(kv *kvpb.KeyValue) KeyValue {
	return KeyValue{
		Key:         kv.GetKey(),
		Value:       kv.GetValue(),
		Version:     kv.GetVersion(),
		CreateIndex: kv.GetCreateIndex(),
		ModIndex:    kv.GetModIndex(),
	}
}

// Header describes the node that served a request; see WithHeader.
type Header struct {
	ClusterID string // 16 hex digits
	// MemberID is the node that served the request, after any forwarding.
	MemberID string
	// RaftTerm of the serving partition; 0 when several served.
	RaftTerm uint64
	// CutVersion is the serving node's known cut version.
	CutVersion uint64
}

// Option modifies one operation.
type Option func(*options)

type options struct {
	header   *Header
	keysOnly bool
}

func collect(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithHeader stores the reply's header in *h when the operation succeeds
// (for a scanner: the header of the last page).
func WithHeader(h *Header) Option { return func(o *options) { o.header = h } }

// WithKeysOnly makes Scan and Scanner return keys without values.
func WithKeysOnly() Option { return func(o *options) { o.keysOnly = true } }

func (o *options) setHeader(h *kvpb.ResponseHeader) {
	if o.header != nil {
		*o.header = headerFromPB(h)
	}
}

func headerFromPB(h *kvpb.ResponseHeader) Header {
	return Header{
		ClusterID:  h.GetClusterId(),
		MemberID:   h.GetMemberId(),
		RaftTerm:   h.GetRaftTerm(),
		CutVersion: h.GetCutVersion(),
	}
}

func checkKey(opName string, key []byte) error {
	if err := keyError(key); err != nil {
		return &OpError{Op: opName, Key: key, Kind: ErrInvalidArgument, Err: err}
	}
	return nil
}

// keyError says what is wrong with key, if anything.
func keyError(key []byte) error {
	switch {
	case len(key) == 0:
		return errors.New("empty key")
	case len(key) > MaxKeySize:
		return fmt.Errorf("key is %d bytes, more than %d", len(key), MaxKeySize)
	}
	return nil
}

// Get returns the key's value. A missing key gives an error wrapping
// ErrNotFound. Reads are linearizable and retried across leader changes.
func (c *Client) Get(ctx context.Context, key []byte, opts ...Option) (KeyValue, error) {
	if err := checkKey("get", key); err != nil {
		return KeyValue{}, err
	}
	o := collect(opts)
	var resp *kvpb.GetResponse
	err := c.do(ctx, op{name: "get", key: key}, func(ctx context.Context, cc *grpc.ClientConn, h *kvpb.RequestHeader) (*kvpb.ResponseHeader, error) {
		r, err := kvrpc.NewKVClient(cc).Get(ctx, &kvpb.GetRequest{Header: h, Key: key}, c.callOpts...)
		resp = r
		return r.GetHeader(), err
	})
	if err != nil {
		return KeyValue{}, err
	}
	o.setHeader(resp.GetHeader())
	if resp.GetKv() == nil || resp.GetKv().GetVersion() == 0 {
		return KeyValue{}, &OpError{Op: "get", Key: key, Kind: ErrNotFound}
	}
	return fromPB(resp.GetKv()), nil
}

// Put sets the key's value. When it returns nil the write is committed.
// An error wrapping ErrOutcomeUnknown means it may or may not have been
// applied; any other error means it was not.
func (c *Client) Put(ctx context.Context, key, value []byte, opts ...Option) error {
	if err := checkKey("put", key); err != nil {
		return err
	}
	if len(value) > MaxValueSize {
		return &OpError{Op: "put", Key: key, Kind: ErrInvalidArgument, Err: fmt.Errorf("value is %d bytes, more than %d", len(value), MaxValueSize)}
	}
	o := collect(opts)
	var resp *kvpb.PutResponse
	err := c.do(ctx, op{name: "put", key: key, write: true}, func(ctx context.Context, cc *grpc.ClientConn, h *kvpb.RequestHeader) (*kvpb.ResponseHeader, error) {
		r, err := kvrpc.NewKVClient(cc).Put(ctx, &kvpb.PutRequest{Header: h, Key: key, Value: value}, c.callOpts...)
		resp = r
		return r.GetHeader(), err
	})
	if err != nil {
		return err
	}
	o.setHeader(resp.GetHeader())
	return nil
}

// Delete removes the key and reports whether it existed. Errors mean what
// they mean for Put.
func (c *Client) Delete(ctx context.Context, key []byte, opts ...Option) (deleted bool, err error) {
	if err := checkKey("delete", key); err != nil {
		return false, err
	}
	o := collect(opts)
	var resp *kvpb.DeleteResponse
	err = c.do(ctx, op{name: "delete", key: key, write: true}, func(ctx context.Context, cc *grpc.ClientConn, h *kvpb.RequestHeader) (*kvpb.ResponseHeader, error) {
		r, err := kvrpc.NewKVClient(cc).Delete(ctx, &kvpb.DeleteRequest{Header: h, Key: key}, c.callOpts...)
		resp = r
		return r.GetHeader(), err
	})
	if err != nil {
		return false, err
	}
	o.setHeader(resp.GetHeader())
	return resp.GetDeleted() > 0, nil
}

// Scan returns up to limit key-values with start ≤ key < end, in key
// order, across all partitions; an empty end means no upper bound, and a
// limit of 0 means the server's maximum page (10000). more reports that the
// range holds keys after the last one returned. To read a whole range use a
// Scanner or ScanAll.
func (c *Client) Scan(ctx context.Context, start, end []byte, limit int, opts ...Option) (kvs []KeyValue, more bool, err error) {
	if limit < 0 {
		return nil, false, &OpError{Op: "scan", Key: start, Kind: ErrInvalidArgument, Err: fmt.Errorf("negative limit %d", limit)}
	}
	o := collect(opts)
	var resp *kvpb.ScanResponse
	err = c.do(ctx, op{name: "scan"}, func(ctx context.Context, cc *grpc.ClientConn, h *kvpb.RequestHeader) (*kvpb.ResponseHeader, error) {
		r, err := kvrpc.NewKVClient(cc).Scan(ctx, &kvpb.ScanRequest{Header: h, Start: start, End: end, Limit: int64(limit), KeysOnly: o.keysOnly}, c.callOpts...)
		resp = r
		return r.GetHeader(), err
	})
	if err != nil {
		return nil, false, err
	}
	o.setHeader(resp.GetHeader())
	kvs = make([]KeyValue, 0, len(resp.GetKvs()))
	for _, kv := range resp.GetKvs() {
		kvs = append(kvs, fromPB(kv))
	}
	return kvs, resp.GetMore(), nil
}

// DefaultPageSize is the page size of a Scanner created with pageSize 0.
const DefaultPageSize = 1000

// Scanner reads a key range page by page:
//
//	s := c.NewScanner(ctx, start, end, 0)
//	for s.Next() {
//		kv := s.KeyValue()
//		...
//	}
//	if err := s.Err(); err != nil { ... }
//
// Each page is read atomically, the range as a whole is not: writes made
// while scanning may or may not be seen. A Scanner is not safe for
// concurrent use.
type Scanner struct {
	c        *Client
	ctx      context.Context
	next     []byte // start of the next page
	end      []byte
	pageSize int
	opts     []Option

	page []KeyValue
	i    int
	more bool // the server has more after page
	kv   KeyValue
	err  error
	done bool
}

// NewScanner returns a Scanner over start ≤ key < end (empty end: no upper
// bound), reading pageSize key-values per request (0: DefaultPageSize).
// opts apply to every page.
func (c *Client) NewScanner(ctx context.Context, start, end []byte, pageSize int, opts ...Option) *Scanner {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	return &Scanner{c: c, ctx: ctx, next: start, end: end, pageSize: pageSize, opts: opts, more: true}
}

// Next advances to the next key-value and reports whether there is one.
// It returns false at the end of the range or on an error; see Err.
func (s *Scanner) Next() bool {
	if s.done {
		return false
	}
	for s.i >= len(s.page) {
		if !s.more {
			s.done = true
			return false
		}
		page, more, err := s.c.Scan(s.ctx, s.next, s.end, s.pageSize, s.opts...)
		if err != nil {
			s.err, s.done = err, true
			return false
		}
		if more && len(page) == 0 {
			s.err, s.done = &OpError{Op: "scan", Key: s.next, Err: errors.New("server reported more keys but returned none")}, true
			return false
		}
		s.page, s.i, s.more = page, 0, more
		if len(page) > 0 {
			last := page[len(page)-1].Key
			// The smallest key after last.
			s.next = append(append(make([]byte, 0, len(last)+1), last...), 0)
		}
	}
	s.kv = s.page[s.i]
	s.i++
	return true
}

// KeyValue returns the key-value Next moved to.
func (s *Scanner) KeyValue() KeyValue { return s.kv }

// Err returns the error that stopped the Scanner, nil at the end of the
// range.
func (s *Scanner) Err() error { return s.err }

// ScanAll returns every key-value with start ≤ key < end (empty end: no
// upper bound), in key order, paging with a Scanner.
func (c *Client) ScanAll(ctx context.Context, start, end []byte, opts ...Option) ([]KeyValue, error) {
	var kvs []KeyValue
	s := c.NewScanner(ctx, start, end, 0, opts...)
	for s.Next() {
		kvs = append(kvs, s.KeyValue())
	}
	return kvs, s.Err()
}
