package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// DefaultMaxTxnOps is the default of Config.MaxTxnOps: the server's limit
// on the compares, and on the ops of each branch, of one transaction.
const DefaultMaxTxnOps = 128

// CmpTarget is what a compare looks at: a key's version or its value.
// Make one with Version or Value.
type CmpTarget struct {
	key    []byte
	target kvpb.Compare_Target
}

// Version targets key's version: the number of writes to the key since it
// was created, 0 when the key does not exist. Comparing it with 0 tests
// existence.
func Version(key []byte) CmpTarget { return CmpTarget{key: key, target: kvpb.Compare_VERSION} }

// Value targets key's value, compared byte-wise (bytes.Compare). Every
// compare on the value of an absent key is false, "!=" included.
func Value(key []byte) CmpTarget { return CmpTarget{key: key, target: kvpb.Compare_VALUE} }

// Cmp is one condition of a transaction. Make it with Compare, KeyExists
// or KeyMissing; the zero Cmp is invalid.
type Cmp struct {
	key     []byte
	target  kvpb.Compare_Target
	result  kvpb.Compare_Result
	version int64
	value   []byte
	// err is a mistake in the Compare call, reported by Commit.
	err error
}

// Compare builds the condition "target op v". op is one of "=", "!=", "<"
// and ">". For a Version target v is an int, int32 or int64; for a Value
// target a []byte or a string. A bad op or type of v makes Commit fail with
// ErrInvalidArgument, without sending anything.
//
//	client.Compare(client.Version(k), "=", 3)
//	client.Compare(client.Value(k), "!=", []byte("x"))
func Compare(t CmpTarget, op string, v any) Cmp {
	c := Cmp{key: t.key, target: t.target}
	switch op {
	case "=":
		c.result = kvpb.Compare_EQUAL
	case "!=":
		c.result = kvpb.Compare_NOT_EQUAL
	case "<":
		c.result = kvpb.Compare_LESS
	case ">":
		c.result = kvpb.Compare_GREATER
	default:
		c.err = fmt.Errorf("unknown operator %q: want =, !=, < or >", op)
		return c
	}
	switch t.target {
	case kvpb.Compare_VERSION:
		switch n := v.(type) {
		case int:
			c.version = int64(n)
		case int32:
			c.version = int64(n)
		case int64:
			c.version = n
		default:
			c.err = fmt.Errorf("a version compare takes an int, int32 or int64, not %T", v)
		}
	case kvpb.Compare_VALUE:
		switch b := v.(type) {
		case []byte:
			c.value = b
		case string:
			c.value = []byte(b)
		default:
			c.err = fmt.Errorf("a value compare takes a []byte or a string, not %T", v)
		}
	default:
		c.err = errors.New("no target: use Version(key) or Value(key)")
	}
	return c
}

// KeyExists is the condition "key exists": Compare(Version(key), ">", 0).
func KeyExists(key []byte) Cmp { return Compare(Version(key), ">", 0) }

// KeyMissing is the condition "key does not exist":
// Compare(Version(key), "=", 0).
func KeyMissing(key []byte) Cmp { return Compare(Version(key), "=", 0) }

// String renders c as kvctl's txn format does: ver("k") = 3, val("k") != "x"
// (keys and values quoted and cut as QuoteKey does).
func (c Cmp) String() string {
	ops := map[kvpb.Compare_Result]string{
		kvpb.Compare_EQUAL: "=", kvpb.Compare_NOT_EQUAL: "!=", kvpb.Compare_LESS: "<", kvpb.Compare_GREATER: ">",
	}
	if c.target == kvpb.Compare_VALUE {
		return "val(" + QuoteKey(c.key) + ") " + ops[c.result] + " " + QuoteKey(c.value)
	}
	return "ver(" + QuoteKey(c.key) + ") " + ops[c.result] + " " + strconv.FormatInt(c.version, 10)
}

func (c Cmp) toPB() *kvpb.Compare {
	pc := &kvpb.Compare{Result: c.result, Target: c.target, Key: c.key}
	if c.target == kvpb.Compare_VALUE {
		pc.TargetUnion = &kvpb.Compare_Value{Value: c.value}
	} else {
		pc.TargetUnion = &kvpb.Compare_Version{Version: c.version}
	}
	return pc
}

// OpKind says what an Op does.
type OpKind int

// The kinds of Op. The zero OpKind is no operation (an invalid Op).
const (
	KindGet OpKind = iota + 1
	KindPut
	KindDelete
	KindScan
)

// String returns "get", "put", "delete" or "scan".
func (k OpKind) String() string {
	switch k {
	case KindGet:
		return "get"
	case KindPut:
		return "put"
	case KindDelete:
		return "delete"
	case KindScan:
		return "scan"
	}
	return "none"
}

// Op is one operation of a transaction branch. Make it with OpGet, OpPut,
// OpDelete or OpScan; the zero Op is invalid.
type Op struct {
	kind  OpKind
	key   []byte // the key; for a scan its start
	end   []byte // scan only
	value []byte // put only
	limit int    // scan only
}

// OpGet reads key.
func OpGet(key []byte) Op { return Op{kind: KindGet, key: key} }

// OpPut sets key to value.
func OpPut(key, value []byte) Op { return Op{kind: KindPut, key: key, value: value} }

// OpDelete removes key.
func OpDelete(key []byte) Op { return Op{kind: KindDelete, key: key} }

// OpScan reads up to limit key-values with start ≤ key < end in key order,
// across partitions; an empty end means no upper bound and a limit of 0 the
// server's maximum (10000). The whole range is locked (DESIGN.md,
// Transactions), so the branch may write no key in it.
func OpScan(start, end []byte, limit int) Op {
	return Op{kind: KindScan, key: start, end: end, limit: limit}
}

// Kind says what o does.
func (o Op) Kind() OpKind { return o.kind }

// String renders o as kvctl's txn format does: put "k" "v", get "k",
// del "k", scan "a" "b" --limit 10.
func (o Op) String() string {
	switch o.kind {
	case KindGet:
		return "get " + QuoteKey(o.key)
	case KindPut:
		return "put " + QuoteKey(o.key) + " " + QuoteKey(o.value)
	case KindDelete:
		return "del " + QuoteKey(o.key)
	case KindScan:
		s := "scan " + QuoteKey(o.key)
		if len(o.end) > 0 {
			s += " " + QuoteKey(o.end)
		}
		if o.limit != 0 {
			s += " --limit " + strconv.Itoa(o.limit)
		}
		return s
	}
	return "(no op)"
}

func (o Op) writes() bool { return o.kind == KindPut || o.kind == KindDelete }

// reads reports whether o reads key.
func (o Op) reads(key []byte) bool {
	switch o.kind {
	case KindGet:
		return bytes.Equal(o.key, key)
	case KindScan:
		return bytes.Compare(key, o.key) >= 0 && (len(o.end) == 0 || bytes.Compare(key, o.end) < 0)
	}
	return false
}

func (o Op) toPB() *kvpb.RequestOp {
	switch o.kind {
	case KindGet:
		return &kvpb.RequestOp{Request: &kvpb.RequestOp_Get{Get: &kvpb.GetRequest{Key: o.key}}}
	case KindPut:
		return &kvpb.RequestOp{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: o.key, Value: o.value}}}
	case KindDelete:
		return &kvpb.RequestOp{Request: &kvpb.RequestOp_Delete{Delete: &kvpb.DeleteRequest{Key: o.key}}}
	case KindScan:
		return &kvpb.RequestOp{Request: &kvpb.RequestOp_Scan{Scan: &kvpb.ScanRequest{Start: o.key, End: o.end, Limit: int64(o.limit)}}}
	}
	return &kvpb.RequestOp{}
}

// Txn builds a transaction: if every compare holds, the Then ops run, else
// the Else ops; atomically and serializably, on keys of any partitions.
//
//	resp, err := c.Txn(ctx).
//		If(client.Compare(client.Version(from), "=", fromVer)).
//		Then(client.OpPut(from, newFrom), client.OpPut(to, newTo)).
//		Else(client.OpGet(from)).
//		Commit()
//
// If, Then and Else append, and may be called in any order and more than
// once. The builder keeps the slices it is given: do not modify them before
// Commit returns. A Txn is not safe for concurrent use.
type Txn struct {
	c       *Client
	ctx     context.Context
	cmps    []Cmp
	thenOps []Op
	elseOps []Op
}

// Txn starts a transaction that Commit runs under ctx.
func (c *Client) Txn(ctx context.Context) *Txn { return &Txn{c: c, ctx: ctx} }

// If adds compares; the Then branch runs when all hold (also when there
// are none).
func (t *Txn) If(cmps ...Cmp) *Txn {
	t.cmps = append(t.cmps, cmps...)
	return t
}

// Then adds ops to the branch that runs when every compare holds.
func (t *Txn) Then(ops ...Op) *Txn {
	t.thenOps = append(t.thenOps, ops...)
	return t
}

// Else adds ops to the branch that runs when some compare fails.
func (t *Txn) Else(ops ...Op) *Txn {
	t.elseOps = append(t.elseOps, ops...)
	return t
}

// TxnResponse is the result of a transaction that ran.
type TxnResponse struct {
	// Header describes the node that coordinated the transaction; its
	// RaftTerm is 0 when several partitions took part.
	Header Header
	// Succeeded is true when every compare held and the Then ops ran; false
	// when the Else ops ran.
	Succeeded bool
	// Responses holds one entry per op of the branch that ran, in order.
	Responses []OpResponse
}

// OpResponse is the result of one op of a transaction.
type OpResponse struct {
	Kind OpKind
	// KVs holds what a read found: for a get the key-value, or nothing when
	// the key is absent; for a scan the key-values in key order. Empty for
	// writes.
	KVs []KeyValue
	// More (scan): the range holds keys after the last one returned.
	More bool
	// Deleted (delete): 1 when the key existed, else 0.
	Deleted int64
}

// Commit validates the transaction, sends it and waits for the outcome,
// retrying as doc.go ("Transactions") describes. On success the
// transaction ran: resp.Succeeded says which branch. On error the
// transaction was not applied, except that an error wrapping
// ErrOutcomeUnknown means it may or may not have been; a transaction that
// writes nothing (only compares, gets and scans) is never of unknown
// outcome: an attempt whose answer is lost is sent again. Errors wrap
// ErrInvalidArgument (never sent, or refused by the server), ErrConflict
// (kept conflicting with other transactions until ctx's deadline),
// ErrUnavailable, ErrOutcomeUnknown or ErrClosed.
func (t *Txn) Commit() (*TxnResponse, error) {
	if err := validateTxn(t.cmps, t.thenOps, t.elseOps, t.c.cfg.MaxTxnOps); err != nil {
		return nil, &OpError{Op: "txn", Kind: ErrInvalidArgument, Err: err}
	}
	req := t.request()
	// Every attempt keeps the priority of the first, so that a transaction
	// that lost to older ones ages until it wins (wait-die).
	priority := time.Now().UnixNano()
	var resp *kvpb.TxnResponse
	// A transaction that writes nothing in either branch is a read: an
	// attempt whose answer was lost changed nothing, so it is sent again
	// rather than reported as of unknown outcome.
	o := op{name: "txn", key: routeKey(req), write: keyspace.Writes(req), conflicts: true}
	err := t.c.do(t.ctx, o, func(ctx context.Context, cc *grpc.ClientConn, h *kvpb.RequestHeader) (*kvpb.ResponseHeader, error) {
		// Each attempt is a new transaction for the server, with an id
		// the server makes. The server accepts a priority from the last
		// minute only: a transaction retried for longer keeps aging from
		// the oldest time it accepts.
		r := &kvpb.TxnRequest{
			Header:   h,
			Compare:  req.Compare,
			Success:  req.Success,
			Failure:  req.Failure,
			Priority: max(priority, time.Now().Add(-MaxPriorityAge).UnixNano()),
		}
		var err error
		resp, err = kvrpc.NewKVClient(cc).Txn(ctx, r, t.c.callOpts...)
		return resp.GetHeader(), err
	})
	if err != nil {
		return nil, err
	}
	return txnResponseFromPB(resp), nil
}

// request builds the transaction's request (without id and priority).
func (t *Txn) request() *kvpb.TxnRequest {
	req := &kvpb.TxnRequest{
		Compare: make([]*kvpb.Compare, 0, len(t.cmps)),
		Success: make([]*kvpb.RequestOp, 0, len(t.thenOps)),
		Failure: make([]*kvpb.RequestOp, 0, len(t.elseOps)),
	}
	for _, c := range t.cmps {
		req.Compare = append(req.Compare, c.toPB())
	}
	for _, o := range t.thenOps {
		req.Success = append(req.Success, o.toPB())
	}
	for _, o := range t.elseOps {
		req.Failure = append(req.Failure, o.toPB())
	}
	return req
}

// smallestKey is routeKey of the transaction as built so far.
func (t *Txn) smallestKey() []byte { return routeKey(t.request()) }

// routeKey is the key a transaction is routed by: the smallest key it
// names, whose partition holds the transaction record (keyspace.SmallestKey, as
// the server splits it). Non-nil even when that key is empty (an empty scan
// start); nil when it names none (any node).
func routeKey(req *kvpb.TxnRequest) []byte {
	k, ok := keyspace.SmallestKey(req)
	if !ok {
		return nil
	}
	return append([]byte{}, k...)
}

// MaxPriorityAge is how old a priority the client sends at most: the
// servers refuse one older than a minute.
const MaxPriorityAge = 50 * time.Second

func txnResponseFromPB(r *kvpb.TxnResponse) *TxnResponse {
	out := &TxnResponse{
		Header:    headerFromPB(r.GetHeader()),
		Succeeded: r.GetSucceeded(),
		Responses: make([]OpResponse, 0, len(r.GetResponses())),
	}
	for _, ro := range r.GetResponses() {
		var or OpResponse
		switch x := ro.GetResponse().(type) {
		case *kvpb.ResponseOp_Get:
			or.Kind = KindGet
			if kv := x.Get.GetKv(); kv != nil && kv.GetVersion() != 0 {
				or.KVs = []KeyValue{fromPB(kv)}
			}
		case *kvpb.ResponseOp_Put:
			or.Kind = KindPut
		case *kvpb.ResponseOp_Delete:
			or.Kind = KindDelete
			or.Deleted = x.Delete.GetDeleted()
		case *kvpb.ResponseOp_Scan:
			or.Kind = KindScan
			or.More = x.Scan.GetMore()
			for _, kv := range x.Scan.GetKvs() {
				or.KVs = append(or.KVs, fromPB(kv))
			}
		}
		out.Responses = append(out.Responses, or)
	}
	return out
}

// validateTxn checks what the server would refuse with InvalidArgument and
// is cheap to check here: the number of compares and of ops per branch, key
// and value sizes, a branch writing a key twice or reading (by get or scan)
// a key it writes.
func validateTxn(cmps []Cmp, thenOps, elseOps []Op, maxOps int) error {
	if len(cmps) > maxOps {
		return fmt.Errorf("%d compares, more than %d", len(cmps), maxOps)
	}
	for i, c := range cmps {
		if c.err != nil {
			return fmt.Errorf("compare %d: %w", i+1, c.err)
		}
		if err := keyError(c.key); err != nil {
			return fmt.Errorf("compare %d (%v): %w", i+1, c, err)
		}
	}
	if err := validateBranch("then", thenOps, maxOps); err != nil {
		return err
	}
	return validateBranch("else", elseOps, maxOps)
}

func validateBranch(name string, ops []Op, maxOps int) error {
	if len(ops) > maxOps {
		return fmt.Errorf("%s: %d ops, more than %d", name, len(ops), maxOps)
	}
	for i, o := range ops {
		var err error
		switch o.kind {
		case KindGet, KindDelete:
			err = keyError(o.key)
		case KindPut:
			err = keyError(o.key)
			if err == nil && len(o.value) > MaxValueSize {
				err = fmt.Errorf("value is %d bytes, more than %d", len(o.value), MaxValueSize)
			}
		case KindScan:
			if o.limit < 0 {
				err = fmt.Errorf("negative limit %d", o.limit)
			}
		default:
			err = errors.New("no operation: use OpGet, OpPut, OpDelete or OpScan")
		}
		if err != nil {
			return fmt.Errorf("%s op %d (%v): %w", name, i+1, o, err)
		}
	}
	for i, w := range ops {
		if !w.writes() {
			continue
		}
		for j, o := range ops {
			switch {
			case j == i:
			case o.writes() && j < i && bytes.Equal(o.key, w.key):
				return fmt.Errorf("%s ops %d and %d both write %s", name, j+1, i+1, QuoteKey(w.key))
			case o.reads(w.key):
				return fmt.Errorf("%s op %d (%v) reads %s, which op %d writes", name, j+1, o, QuoteKey(w.key), i+1)
			}
		}
	}
	return nil
}
