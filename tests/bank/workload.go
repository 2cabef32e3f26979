package bank

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/client"
	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// Timing of the workload's requests.
const (
	// attemptTimeout bounds one request. A Txn cut by it has an unknown
	// outcome, so it is generous.
	attemptTimeout = 10 * time.Second
	// patience is how long one logical transaction keeps retrying
	// attempts that were definitely not applied.
	patience = 30 * time.Second
)

// errorDomain is the ErrorInfo domain of the server's "not applied"
// reasons (rpc/errors.go).
const errorDomain = "cutkv.io"

// verdict classifies one attempt's answer by the server's contract.
type verdict int

const (
	vCommitted  verdict = iota // the transaction ran; the response says which branch
	vNotApplied                // Aborted, or Unavailable with a cutkv reason: retry
	vInvalid                   // InvalidArgument: never retry
	vUnknown                   // anything else after sending: never resend
)

// classify reads err, the answer to a Txn that was sent, as the server's
// contract defines it, and names why.
func classify(err error) (verdict, string) {
	if err == nil {
		return vCommitted, ""
	}
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.Aborted:
		return vNotApplied, "ABORTED"
	case codes.InvalidArgument:
		return vInvalid, st.Message()
	case codes.Unavailable:
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errorDomain {
				return vNotApplied, info.GetReason()
			}
		}
	}
	msg := st.Message()
	if len(msg) > 80 {
		msg = msg[:80] + "..."
	}
	return vUnknown, st.Code().String() + ": " + msg
}

// Router holds one connection per node and picks the node each request
// goes to: the preferred one when it is connected, else any connected
// one. A request is only ever sent on a ready connection, so a request
// that found no node was certainly not sent.
type Router struct {
	eps    []string
	conns  []*grpc.ClientConn
	kv     []kvrpc.KVClient
	prefer atomic.Int64 // 1 + index of the preferred node; 0: none
	avoid  atomic.Int64 // 1 + index of a node to send nothing to; 0: none
	// multi counts the multi-partition Txn attempts sent to each node:
	// those it coordinated with two-phase commit.
	multi []atomic.Int64
}

// NewRouter connects (lazily) to every endpoint.
func NewRouter(endpoints []string) (*Router, error) {
	r := &Router{eps: endpoints, multi: make([]atomic.Int64, len(endpoints))}
	for _, ep := range endpoints {
		cc, err := grpc.NewClient(ep,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 300 * time.Millisecond},
				MinConnectTimeout: 2 * time.Second,
			}))
		if err != nil {
			r.Close()
			return nil, err
		}
		r.conns = append(r.conns, cc)
		r.kv = append(r.kv, kvrpc.NewKVClient(cc))
	}
	return r, nil
}

// Close closes every connection.
func (r *Router) Close() {
	for _, cc := range r.conns {
		cc.Close()
	}
}

// Prefer makes ep the node requests go to whenever it is connected; ""
// spreads them over all nodes again.
func (r *Router) Prefer(ep string) { r.prefer.Store(r.slot(ep)) }

// Avoid makes the router send nothing to ep; "" lifts it.
func (r *Router) Avoid(ep string) { r.avoid.Store(r.slot(ep)) }

func (r *Router) slot(ep string) int64 {
	for i, e := range r.eps {
		if e == ep {
			return int64(i + 1)
		}
	}
	return 0
}

// MultiPartitionTxns returns how many multi-partition Txn attempts were
// sent to ep.
func (r *Router) MultiPartitionTxns(ep string) int64 {
	for i, e := range r.eps {
		if e == ep {
			return r.multi[i].Load()
		}
	}
	return 0
}

// TotalMultiPartitionTxns sums MultiPartitionTxns over all nodes.
func (r *Router) TotalMultiPartitionTxns() int64 {
	var n int64
	for i := range r.multi {
		n += r.multi[i].Load()
	}
	return n
}

// Leaders returns, as a connected node sees it, the id of the node that
// leads each partition (leaders[p-1] for partition p; "" if unknown).
func (r *Router) Leaders(rng *mrand.Rand) ([]string, error) {
	i, ok := r.pick(rng)
	if !ok {
		return nil, errors.New("bank: no node is connected")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := kvrpc.NewClusterClient(r.conns[i]).Routing(ctx, &kvpb.RoutingRequest{})
	if err != nil {
		return nil, err
	}
	return resp.GetLeaders(), nil
}

func (r *Router) ready(i int) bool {
	switch r.conns[i].GetState() {
	case connectivity.Ready:
		return true
	case connectivity.Idle:
		r.conns[i].Connect()
	}
	return false
}

// pick returns a node with a ready connection, false if there is none.
func (r *Router) pick(rng *mrand.Rand) (int, bool) {
	avoid := int(r.avoid.Load()) - 1
	if p := int(r.prefer.Load()) - 1; p >= 0 && p != avoid && r.ready(p) {
		return p, true
	}
	start := rng.IntN(len(r.eps))
	for k := range r.eps {
		if i := (start + k) % len(r.eps); i != avoid && r.ready(i) {
			return i, true
		}
	}
	return 0, false
}

// Stats counts what the clients did. Transactions count logical
// transactions; attempts count requests.
type Stats struct {
	Transfers     atomic.Int64 // committed, success branch
	CompareFailed atomic.Int64 // committed, failure branch: a version changed after the read
	GaveUp        atomic.Int64 // not applied: every attempt refused until the client stopped
	Unknown       atomic.Int64 // transfers with an unknown outcome
	Reads         atomic.Int64 // committed reads of every account
	ReadsUnknown  atomic.Int64 // reads of every account with no answer
	Aborted       atomic.Int64 // attempts answered Aborted (lock conflict)
	Refused       atomic.Int64 // attempts answered Unavailable with a cutkv reason
	NotSent       atomic.Int64 // attempts that found no connected node
	GetRetries    atomic.Int64 // plain Gets that failed and were retried
}

// Bank is the bank workload on one cluster: accounts spread over every
// partition, transfer clients and readers, and the history they record.
type Bank struct {
	Keys       []string // account keys; Keys[i] is in partition i%Partitions+1
	Partitions uint32
	Initial    int64 // each account's balance at the start
	Stats      Stats

	r *Router

	mu         sync.Mutex
	hist       History
	unknownWhy map[string]int // why attempts had unknown outcomes
	unexpected []error        // answers that break the contract
}

// NewBank lays out accounts accounts, each starting with initial, over
// partitions partitions.
func NewBank(r *Router, partitions uint32, accounts int, initial int64) *Bank {
	b := &Bank{Partitions: partitions, Initial: initial, r: r, unknownWhy: map[string]int{}}
	for i := 0; i < accounts; i++ {
		want := uint64(i%int(partitions)) + 1
		for k := 0; ; k++ {
			key := fmt.Sprintf("acct/%02d.%d", i, k)
			if keyspace.PartitionOf([]byte(key), partitions) == want {
				b.Keys = append(b.Keys, key)
				break
			}
		}
	}
	b.hist = History{Accounts: accounts, Total: int64(accounts) * initial}
	return b
}

// markerKey is marker i of transaction id: a key in the partition of
// account acct.
func (b *Bank) markerKey(id string, i, acct int) string {
	want := keyspace.PartitionOf([]byte(b.Keys[acct]), b.Partitions)
	for k := 0; ; k++ {
		key := fmt.Sprintf("tx/%s/%d.%d", id, i, k)
		if keyspace.PartitionOf([]byte(key), b.Partitions) == want {
			return key
		}
	}
}

func encodeValue(balance int64, writer string) []byte {
	return []byte(strconv.FormatInt(balance, 10) + "/" + writer)
}

func decodeKV(kv *kvpb.KeyValue) (Obs, error) {
	if kv == nil || kv.GetVersion() == 0 {
		return Obs{}, nil
	}
	bal, writer, ok := strings.Cut(string(kv.GetValue()), "/")
	n, err := strconv.ParseInt(bal, 10, 64)
	if !ok || err != nil {
		return Obs{}, fmt.Errorf("key %q: value %q is not balance/writer", kv.GetKey(), kv.GetValue())
	}
	return Obs{Version: kv.GetVersion(), Balance: n, Writer: writer}, nil
}

func (b *Bank) addTxn(t *Txn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hist.Txns = append(b.hist.Txns, t)
}

func (b *Bank) setOutcome(t *Txn, o Outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t.Outcome = o
}

func (b *Bank) addRead(s Snapshot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hist.Reads = append(b.hist.Reads, s)
}

func (b *Bank) unexpectedf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.unexpected) < 20 {
		b.unexpected = append(b.unexpected, fmt.Errorf(format, args...))
	}
}

func (b *Bank) noteUnknown(why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unknownWhy[why]++
}

func (b *Bank) multiPartition(req *kvpb.TxnRequest) bool {
	parts := map[uint64]bool{}
	add := func(k []byte) { parts[keyspace.PartitionOf(k, b.Partitions)] = true }
	for _, c := range req.GetCompare() {
		add(c.GetKey())
	}
	for _, ops := range [][]*kvpb.RequestOp{req.GetSuccess(), req.GetFailure()} {
		for _, op := range ops {
			switch r := op.GetRequest().(type) {
			case *kvpb.RequestOp_Get:
				add(r.Get.GetKey())
			case *kvpb.RequestOp_Put:
				add(r.Put.GetKey())
			}
		}
	}
	return len(parts) > 1
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// commit runs one logical transaction by the server's contract: every
// attempt is a new transaction (the server assigns its id) with the
// priority of the first (no older than the server accepts); an attempt
// that was definitely not applied is retried (with backoff) until it
// commits, until patience runs out or until stop is closed; an unknown
// outcome is never resent. A Committed result carries the response.
func (b *Bank) commit(rng *mrand.Rand, stop <-chan struct{}, giveUp time.Time, req *kvpb.TxnRequest) (*kvpb.TxnResponse, Outcome) {
	first := time.Now().UnixNano()
	multi := b.multiPartition(req)
	for attempt := 0; ; attempt++ {
		wait := time.Duration(0)
		i, ok := b.r.pick(rng)
		if ok {
			req.Priority = max(first, time.Now().Add(-client.MaxPriorityAge).UnixNano())
			if multi {
				b.r.multi[i].Add(1)
			}
			ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
			resp, err := b.r.kv[i].Txn(ctx, req)
			cancel()
			v, why := classify(err)
			switch v {
			case vCommitted:
				return resp, Committed
			case vUnknown:
				b.noteUnknown(why)
				return nil, Unknown
			case vInvalid:
				b.unexpectedf("Txn refused as invalid: %s", why)
				return nil, NotApplied
			}
			if why == "ABORTED" {
				b.Stats.Aborted.Add(1)
				wait = time.Duration(1+rng.IntN(5<<min(attempt, 4))) * time.Millisecond
			} else {
				b.Stats.Refused.Add(1)
				wait = time.Duration(20+rng.IntN(80)) * time.Millisecond
			}
		} else {
			b.Stats.NotSent.Add(1)
			wait = 10 * time.Millisecond
		}
		if stopped(stop) || time.Now().After(giveUp) {
			return nil, NotApplied
		}
		time.Sleep(wait)
	}
}

func getOp(key string) *kvpb.RequestOp {
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Get{Get: &kvpb.GetRequest{Key: []byte(key)}}}
}

func putOp(key string, value []byte) *kvpb.RequestOp {
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte(key), Value: value}}}
}

func versionIs(key string, v int64) *kvpb.Compare {
	return &kvpb.Compare{Result: kvpb.Compare_EQUAL, Target: kvpb.Compare_VERSION, Key: []byte(key), TargetUnion: &kvpb.Compare_Version{Version: v}}
}

// getsOf reads the answers of a branch made only of Gets of accounts.
func (b *Bank) getsOf(resp *kvpb.TxnResponse, accts []int, source string) (Snapshot, error) {
	s := Snapshot{Source: source, Full: len(accts) == len(b.Keys), Obs: map[int]Obs{}}
	if len(resp.GetResponses()) != len(accts) {
		return s, fmt.Errorf("%s: %d responses to %d gets", source, len(resp.GetResponses()), len(accts))
	}
	for i, a := range accts {
		g := resp.GetResponses()[i].GetGet()
		if g == nil {
			return s, fmt.Errorf("%s: response %d is not a get", source, i)
		}
		if kv := g.GetKv(); kv != nil && string(kv.GetKey()) != b.Keys[a] {
			return s, fmt.Errorf("%s: response %d is for %q, asked %q", source, i, kv.GetKey(), b.Keys[a])
		}
		o, err := decodeKV(g.GetKv())
		if err != nil {
			return s, fmt.Errorf("%s: %w", source, err)
		}
		s.Obs[a] = o
	}
	return s, nil
}

// readTxn reads accts in one transaction (Gets in the success branch, no
// compares) and records the read. ok is false when the client stopped or
// gave up before a read committed.
func (b *Bank) readTxn(rng *mrand.Rand, stop <-chan struct{}, giveUp time.Time, accts []int, source string) (Snapshot, bool) {
	for {
		req := &kvpb.TxnRequest{}
		for _, a := range accts {
			req.Success = append(req.Success, getOp(b.Keys[a]))
		}
		resp, out := b.commit(rng, stop, giveUp, req)
		switch out {
		case Committed:
			if !resp.GetSucceeded() {
				b.unexpectedf("%s: a Txn without compares ran its failure branch", source)
				return Snapshot{}, false
			}
			s, err := b.getsOf(resp, accts, source)
			if err != nil {
				b.unexpectedf("%v", err)
				return Snapshot{}, false
			}
			b.addRead(s)
			return s, true
		case Unknown:
			// A read changes nothing: its lost answer only costs a retry.
			if len(accts) == len(b.Keys) {
				b.Stats.ReadsUnknown.Add(1)
			}
			if stopped(stop) || time.Now().After(giveUp) {
				return Snapshot{}, false
			}
		default:
			return Snapshot{}, false
		}
	}
}

// get reads one account with a plain Get, retried on any error (a read
// is safe to resend), and records the read.
func (b *Bank) get(rng *mrand.Rand, stop <-chan struct{}, giveUp time.Time, a int, source string) (Obs, bool) {
	for {
		if i, ok := b.r.pick(rng); ok {
			ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
			resp, err := b.r.kv[i].Get(ctx, &kvpb.GetRequest{Key: []byte(b.Keys[a])})
			cancel()
			if err == nil {
				o, derr := decodeKV(resp.GetKv())
				if derr != nil {
					b.unexpectedf("%s: %v", source, derr)
					return Obs{}, false
				}
				b.addRead(Snapshot{Source: source, Obs: map[int]Obs{a: o}})
				return o, true
			}
			if status.Code(err) == codes.InvalidArgument {
				b.unexpectedf("%s: Get refused as invalid: %v", source, err)
				return Obs{}, false
			}
			b.Stats.GetRetries.Add(1)
		}
		if stopped(stop) || time.Now().After(giveUp) {
			return Obs{}, false
		}
		time.Sleep(time.Duration(10+rng.IntN(40)) * time.Millisecond)
	}
}

// Init writes every account's initial balance in one transaction that
// requires every account to be absent. An unknown outcome is settled by
// running it again: its compares make a second application impossible.
func (b *Bank) Init(seed uint64) error {
	rng := mrand.New(mrand.NewPCG(seed, 1))
	giveUp := time.Now().Add(patience)
	for try := 0; try < 5; try++ {
		t := &Txn{ID: fmt.Sprintf("init%d", try)}
		req := &kvpb.TxnRequest{}
		for a, k := range b.Keys {
			t.Writes = append(t.Writes, Write{Account: a, Balance: b.Initial})
			req.Compare = append(req.Compare, versionIs(k, 0))
			req.Success = append(req.Success, putOp(k, encodeValue(b.Initial, t.ID)))
		}
		b.addTxn(t)
		resp, out := b.commit(rng, nil, giveUp, req)
		if out == Committed && !resp.GetSucceeded() {
			out = CommittedElse // an earlier unknown try was applied
		}
		b.setOutcome(t, out)
		switch out {
		case Committed, CommittedElse:
			return nil
		case NotApplied:
			return fmt.Errorf("bank: the initial transaction was not applied within %v", patience)
		}
	}
	return errors.New("bank: the initial transaction's outcome stayed unknown")
}

// Run starts transfer clients and readers that work until stop is
// closed; the returned function waits until every one has returned.
// Requests in flight when stop closes run to their end.
func (b *Bank) Run(stop <-chan struct{}, transfers, readers int, seed uint64) (wait func()) {
	var wg sync.WaitGroup
	for c := 0; c < transfers; c++ {
		rng := mrand.New(mrand.NewPCG(seed, uint64(100+c)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.transferLoop(c, rng, stop)
		}()
	}
	for c := 0; c < readers; c++ {
		rng := mrand.New(mrand.NewPCG(seed, uint64(200+c)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			all := make([]int, len(b.Keys))
			for i := range all {
				all[i] = i
			}
			for k := 0; !stopped(stop); k++ {
				if _, ok := b.readTxn(rng, stop, time.Now().Add(patience), all, fmt.Sprintf("reader %d read %d", c, k)); ok {
					b.Stats.Reads.Add(1)
				}
			}
		}()
	}
	return wg.Wait
}

// transferLoop moves money: read two accounts, then a Txn that compares
// both versions and writes both balances and two markers.
func (b *Bank) transferLoop(c int, rng *mrand.Rand, stop <-chan struct{}) {
	n := len(b.Keys)
	for seq := 0; !stopped(stop); seq++ {
		x := rng.IntN(n)
		y := rng.IntN(n - 1)
		if y >= x {
			y++
		}
		id := fmt.Sprintf("t%d.%d", c, seq)
		giveUp := time.Now().Add(patience)
		var ox, oy Obs
		if rng.IntN(2) == 0 {
			s, ok := b.readTxn(rng, stop, giveUp, []int{x, y}, id+" read")
			if !ok {
				continue
			}
			ox, oy = s.Obs[x], s.Obs[y]
		} else {
			var ok bool
			if ox, ok = b.get(rng, stop, giveUp, x, id+" get"); !ok {
				continue
			}
			if oy, ok = b.get(rng, stop, giveUp, y, id+" get"); !ok {
				continue
			}
		}
		if ox.Balance == 0 {
			x, y, ox, oy = y, x, oy, ox
		}
		if ox.Balance == 0 || ox.Version == 0 || oy.Version == 0 {
			continue
		}
		amount := 1 + rng.Int64N(ox.Balance)
		t := &Txn{
			ID: id,
			Writes: []Write{
				{Account: x, ReadVersion: ox.Version, ReadBalance: ox.Balance, Balance: ox.Balance - amount},
				{Account: y, ReadVersion: oy.Version, ReadBalance: oy.Balance, Balance: oy.Balance + amount},
			},
			Markers: []string{b.markerKey(id, 0, x), b.markerKey(id, 1, y)},
		}
		req := &kvpb.TxnRequest{
			Compare: []*kvpb.Compare{versionIs(b.Keys[x], ox.Version), versionIs(b.Keys[y], oy.Version)},
			Failure: []*kvpb.RequestOp{getOp(b.Keys[x]), getOp(b.Keys[y])},
		}
		for _, w := range t.Writes {
			req.Success = append(req.Success, putOp(b.Keys[w.Account], encodeValue(w.Balance, id)))
		}
		for _, m := range t.Markers {
			req.Success = append(req.Success, putOp(m, []byte(id)))
		}
		b.addTxn(t)
		resp, out := b.commit(rng, stop, giveUp, req)
		switch {
		case out == Committed && resp.GetSucceeded():
			b.Stats.Transfers.Add(1)
			if len(resp.GetResponses()) != len(req.GetSuccess()) {
				b.unexpectedf("%s: %d responses to %d success ops", id, len(resp.GetResponses()), len(req.GetSuccess()))
			}
		case out == Committed:
			out = CommittedElse
			b.Stats.CompareFailed.Add(1)
			if s, err := b.getsOf(resp, []int{x, y}, id+" else"); err != nil {
				b.unexpectedf("%v", err)
			} else {
				b.addRead(s)
			}
		case out == Unknown:
			b.Stats.Unknown.Add(1)
		case out == NotApplied:
			b.Stats.GaveUp.Add(1)
		}
		b.setOutcome(t, out)
	}
}

// Settle checks, after traffic stopped, that no lock is left: before
// deadline a Txn that compares and rewrites every account (with its
// current balance) commits, and a plain Get of every account through
// every node succeeds. It records the final state and the markers for
// Check. took is how long it needed.
func (b *Bank) Settle(deadline time.Time, seed uint64) (took time.Duration, err error) {
	began := time.Now()
	rng := mrand.New(mrand.NewPCG(seed, 2))
	all := make([]int, len(b.Keys))
	for i := range all {
		all[i] = i
	}
	for try := 0; ; try++ {
		s, ok := b.readTxn(rng, nil, deadline, all, fmt.Sprintf("settle read %d", try))
		if !ok {
			return time.Since(began), fmt.Errorf("bank: no read of every account committed within %v", time.Until(deadline)+time.Since(began))
		}
		t := &Txn{ID: fmt.Sprintf("final%d", try)}
		req := &kvpb.TxnRequest{}
		for _, a := range all {
			o := s.Obs[a]
			t.Writes = append(t.Writes, Write{Account: a, ReadVersion: o.Version, ReadBalance: o.Balance, Balance: o.Balance})
			req.Compare = append(req.Compare, versionIs(b.Keys[a], o.Version))
			req.Success = append(req.Success, putOp(b.Keys[a], encodeValue(o.Balance, t.ID)))
		}
		b.addTxn(t)
		resp, out := b.commit(rng, nil, deadline, req)
		if out == Committed && !resp.GetSucceeded() {
			out = CommittedElse
		}
		b.setOutcome(t, out)
		switch out {
		case Committed:
		case CommittedElse:
			continue // something wrote meanwhile (nothing should): again
		case Unknown:
			return time.Since(began), errors.New("bank: the transaction over every account has an unknown outcome")
		default:
			return time.Since(began), fmt.Errorf("bank: the transaction over every account did not commit by the deadline (last try %d)", try)
		}
		break
	}
	final := Snapshot{Source: "final state", Full: true, Obs: map[int]Obs{}}
	for i := range b.r.eps {
		for a := range b.Keys {
			o, err := b.getFrom(i, a, deadline)
			if err != nil {
				return time.Since(began), err
			}
			if i == 0 {
				final.Obs[a] = o
			} else if f := final.Obs[a]; o != f {
				return time.Since(began), fmt.Errorf("bank: %s read %+v through %s, %+v through %s", b.Keys[a], f, b.r.eps[0], o, b.r.eps[i])
			}
		}
	}
	took = time.Since(began)
	markers, err := b.scanMarkers(deadline.Add(30 * time.Second))
	if err != nil {
		return took, err
	}
	b.mu.Lock()
	b.hist.Final = final
	b.hist.Markers = markers
	b.mu.Unlock()
	return took, nil
}

// getFrom reads account a through node i, retrying until deadline.
func (b *Bank) getFrom(i, a int, deadline time.Time) (Obs, error) {
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		resp, err := b.r.kv[i].Get(ctx, &kvpb.GetRequest{Key: []byte(b.Keys[a])})
		cancel()
		if err == nil {
			return decodeKV(resp.GetKv())
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return Obs{}, fmt.Errorf("bank: get %s through %s did not succeed by the deadline: %v", b.Keys[a], b.r.eps[i], last)
}

// scanMarkers returns every marker key and its value.
func (b *Bank) scanMarkers(deadline time.Time) (map[string]string, error) {
	out := map[string]string{}
	start := []byte("tx/")
	for {
		var resp *kvpb.ScanResponse
		var err error
		for i := 0; time.Now().Before(deadline); i = (i + 1) % len(b.r.kv) {
			ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
			resp, err = b.r.kv[i].Scan(ctx, &kvpb.ScanRequest{Start: start, End: []byte("tx0"), Limit: 5000})
			cancel()
			if err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil || resp == nil {
			return nil, fmt.Errorf("bank: scan of the markers: %v", err)
		}
		for _, kv := range resp.GetKvs() {
			out[string(kv.GetKey())] = string(kv.GetValue())
		}
		if !resp.GetMore() || len(resp.GetKvs()) == 0 {
			return out, nil
		}
		start = append([]byte(string(resp.GetKvs()[len(resp.GetKvs())-1].GetKey())), 0)
	}
}

// Check returns the contract breaches the clients saw and the history's
// violations (History.Check). Call it after Settle.
func (b *Bank) Check() []error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append(append([]error(nil), b.unexpected...), b.hist.Check()...)
}

// Outcomes counts the unknown-outcome transfers that turned out applied
// and not applied (by their markers). Call it after Settle.
func (b *Bank) Outcomes() (unknownApplied, unknownNot int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.hist.Txns {
		if t.Outcome != Unknown || len(t.Markers) == 0 {
			continue
		}
		if _, ok := b.hist.Markers[t.Markers[0]]; ok {
			unknownApplied++
		} else {
			unknownNot++
		}
	}
	return unknownApplied, unknownNot
}

// Summary describes what the clients did.
func (b *Bank) Summary() string {
	s := &b.Stats
	b.mu.Lock()
	var whys []string
	for w, n := range b.unknownWhy {
		whys = append(whys, fmt.Sprintf("%d× %s", n, w))
	}
	nReads := len(b.hist.Reads)
	b.mu.Unlock()
	sort.Strings(whys)
	out := fmt.Sprintf("transfers: %d committed, %d compare failed, %d unknown, %d gave up; full reads: %d committed, %d unknown; attempts: %d aborted (conflict), %d refused (unavailable, not applied), %d not sent; %d plain gets retried; %d reads recorded",
		s.Transfers.Load(), s.CompareFailed.Load(), s.Unknown.Load(), s.GaveUp.Load(),
		s.Reads.Load(), s.ReadsUnknown.Load(),
		s.Aborted.Load(), s.Refused.Load(), s.NotSent.Load(), s.GetRetries.Load(), nReads)
	if len(whys) > 0 {
		out += "; unknown outcomes: " + strings.Join(whys, ", ")
	}
	return out
}
