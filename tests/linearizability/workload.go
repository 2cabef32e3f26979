package linearizability

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// Defaults that Config.Validate fills in.
const (
	DefaultOpTimeout       = 2 * time.Second
	DefaultBackoffBase     = 25 * time.Millisecond
	DefaultBackoffMax      = 400 * time.Millisecond
	DefaultFinalReadWithin = 10 * time.Second
)

// finalReadPause separates two attempts at a final read of one key.
const finalReadPause = 50 * time.Millisecond

// ErrFinalReadsIncomplete is returned by Workload.FinalReads when some key
// could not be read in time; a lost write on that key would go unnoticed.
var ErrFinalReadsIncomplete = errors.New("linearizability: final reads incomplete")

// Config describes a register workload. The caller dials the nodes (it
// knows their addresses and credentials); the workload only sends
// requests.
type Config struct {
	// Nodes holds one client per node. Operations go to a node picked at
	// random; node i is named n<i+1> in the history's metadata. Required.
	Nodes []kvrpc.KVClient
	// Keys are the keys operated on, uniformly (see PickKeys). Required,
	// no duplicates.
	Keys []string
	// Seed seeds every client's choices (node, key, operation, back-off
	// jitter). The same seed repeats the choices, not the timing.
	Seed uint64
	// Clients is the number of concurrent clients, each with one request
	// in flight at a time. Required, positive.
	Clients int
	// OpTimeout bounds one request; a write that runs out has an unknown
	// outcome. Default DefaultOpTimeout.
	OpTimeout time.Duration
	// BackoffBase and BackoffMax shape a client's jittered exponential
	// back-off after errors in a row, as a client library would, rather
	// than hammering a partition that is electing a leader: every failed
	// write is one more write of unknown outcome for the checker. Defaults
	// DefaultBackoffBase and DefaultBackoffMax.
	BackoffBase, BackoffMax time.Duration
	// FinalReadWithin is how long FinalReads keeps retrying one key.
	// Default DefaultFinalReadWithin.
	FinalReadWithin time.Duration
	// Skip, if set, reports whether node i should get no requests right
	// now (a fault injector holds it down, and a request to it would only
	// add writes of unknown outcome). It is called from every client
	// goroutine, so it must be safe for concurrent use. When it skips
	// every node, requests go to any node. Nil: no node is skipped.
	Skip func(node int) bool
}

// Validate checks the config and fills in defaults.
func (c *Config) Validate() error {
	if len(c.Nodes) == 0 {
		return errors.New("linearizability: config: no nodes")
	}
	for i, n := range c.Nodes {
		if n == nil {
			return fmt.Errorf("linearizability: config: node %d is nil", i)
		}
	}
	if len(c.Keys) == 0 {
		return errors.New("linearizability: config: no keys")
	}
	seen := map[string]bool{}
	for _, k := range c.Keys {
		if seen[k] {
			return fmt.Errorf("linearizability: config: key %q given twice", k)
		}
		seen[k] = true
	}
	if c.Clients <= 0 {
		return fmt.Errorf("linearizability: config: %d clients, want at least 1", c.Clients)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"op timeout", &c.OpTimeout, DefaultOpTimeout},
		{"back-off base", &c.BackoffBase, DefaultBackoffBase},
		{"back-off max", &c.BackoffMax, DefaultBackoffMax},
		{"final read time", &c.FinalReadWithin, DefaultFinalReadWithin},
	} {
		switch {
		case *d.v < 0:
			return fmt.Errorf("linearizability: config: negative %s %v", d.name, *d.v)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	if c.BackoffMax < c.BackoffBase {
		return fmt.Errorf("linearizability: config: back-off max %v below base %v", c.BackoffMax, c.BackoffBase)
	}
	return nil
}

// Workload runs the register workload against a cluster and records its
// history on one clock. Build it with NewWorkload; Run it while faults
// happen; then, with every fault healed, take FinalReads; hand Run's and
// FinalReads' operations together to Check.
type Workload struct {
	cfg   Config
	start time.Time
	// nextID hands out porcupine client ids.
	nextID atomic.Int64

	// mu serializes Run; clients persist across runs so that written
	// values stay unique (Prepare and the model rely on it).
	mu      sync.Mutex
	clients []*client
}

// NewWorkload validates cfg (filling its defaults) and starts the
// history's clock.
func NewWorkload(cfg Config) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Workload{cfg: cfg, start: time.Now()}
	for ci := 0; ci < cfg.Clients; ci++ {
		w.clients = append(w.clients, &client{
			w:    w,
			rng:  rand.New(rand.NewPCG(cfg.Seed, uint64(ci)+1)),
			name: fmt.Sprintf("c%d", ci),
		})
	}
	return w, nil
}

// Now returns the current time on the history's clock (nanoseconds on
// the monotonic clock since NewWorkload). Use it for the Start and End of
// porcupine.Annotation values describing faults, so that they line up
// with the operations in the visualization.
func (w *Workload) Now() int64 { return int64(time.Since(w.start)) }

// clientID returns a fresh porcupine client id. A client takes a new one
// after a write of unknown outcome: that write never returns, and a
// porcupine client must not have two operations open at once.
func (w *Workload) clientID() int { return int(w.nextID.Add(1) - 1) }

// Run runs the clients until ctx is done and returns the operations they
// recorded, with the statistics of their outcomes. A request in flight
// when ctx ends is not cancelled but allowed to finish (within
// OpTimeout), so that ending the run does not turn writes into writes of
// unknown outcome. Run blocks; it does no logging.
//
// The history follows the server's error contract (see the package
// documentation): completed operations are kept; a write refused with
// Unavailable and a cutkv.io ErrorInfo of a not-applied reason is left
// out; any other failed write is kept as a write of unknown outcome that
// never returns; failed reads are left out.
//
// Calls to Run are serialized; a later call continues the same clients.
func (w *Workload) Run(ctx context.Context) ([]porcupine.Operation, Stats) {
	w.mu.Lock()
	defer w.mu.Unlock()
	logs := make([][]porcupine.Operation, len(w.clients))
	stats := make([]Stats, len(w.clients))
	var wg sync.WaitGroup
	for ci, cl := range w.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stats[ci] = newStats()
			logs[ci] = cl.run(ctx, &stats[ci])
		}()
	}
	wg.Wait()
	var ops []porcupine.Operation
	total := newStats()
	for ci := range w.clients {
		ops = append(ops, logs[ci]...)
		total.merge(&stats[ci])
	}
	return ops, total
}

// FinalReads reads every key once, through the nodes in turn (those Skip
// does not skip, unless it skips all), retrying a failed read for up to FinalReadWithin per key (or until ctx is done).
// Call it after the faults have stopped and the cluster has healed: added
// to the history, these reads make a lost acknowledged write (DESIGN.md
// invariant 1) fail the check. It returns the reads that succeeded, and
// ErrFinalReadsIncomplete naming the keys never read, if any.
func (w *Workload) FinalReads(ctx context.Context) ([]porcupine.Operation, error) {
	var ops []porcupine.Operation
	var missing []string
	for ki, k := range w.cfg.Keys {
		op, ok := w.finalRead(ctx, ki, k)
		if !ok {
			missing = append(missing, k)
			continue
		}
		ops = append(ops, op)
	}
	if len(missing) > 0 {
		return ops, fmt.Errorf("%w: %d of %d keys not read: %v", ErrFinalReadsIncomplete, len(missing), len(w.cfg.Keys), missing)
	}
	return ops, nil
}

func (w *Workload) finalRead(ctx context.Context, ki int, key string) (porcupine.Operation, bool) {
	end := time.Now().Add(w.cfg.FinalReadWithin)
	for attempt := 0; time.Now().Before(end) && ctx.Err() == nil; attempt++ {
		node := (ki + attempt) % len(w.cfg.Nodes)
		if w.skipped(node) && !w.allSkipped() {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, w.cfg.OpTimeout)
		call := w.Now()
		r, err := w.cfg.Nodes[node].Get(rctx, &kvpb.GetRequest{Key: []byte(key)})
		ret := w.Now()
		cancel()
		if err == nil {
			return porcupine.Operation{
				ClientId: w.clientID(), Input: Input{Op: OpGet, Key: key}, Output: fromKV(r.GetKv()),
				Call: call, Return: ret, Metadata: fmt.Sprintf("final read via n%d", node+1),
			}, true
		}
		sleepCtx(ctx, finalReadPause)
	}
	return porcupine.Operation{}, false
}

func (w *Workload) skipped(node int) bool { return w.cfg.Skip != nil && w.cfg.Skip(node) }

func (w *Workload) allSkipped() bool {
	for i := range w.cfg.Nodes {
		if !w.skipped(i) {
			return false
		}
	}
	return true
}

// sleepCtx sleeps d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// PickKeys returns max(n, partitions) keys, sorted, that cover every one
// of the partitions (keyspace.PartitionOf), so that every raft group is
// under test. With partitions 0 it returns n keys.
func PickKeys(n int, partitions uint32) []string {
	var keys []string
	chosen := map[string]bool{}
	covered := map[uint64]bool{}
	for i := 0; len(covered) < int(partitions); i++ {
		k := fmt.Sprintf("k%d", i)
		if p := keyspace.PartitionOf([]byte(k), partitions); !covered[p] {
			covered[p], chosen[k] = true, true
			keys = append(keys, k)
		}
	}
	for i := 0; len(keys) < n; i++ {
		if k := fmt.Sprintf("k%d", i); !chosen[k] {
			chosen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// DialOptions returns the options a caller should add, besides its
// transport credentials, when dialing the nodes for a workload: a short
// reconnect back-off, so that a restarted or healed node is reachable
// again at once rather than after gRPC's default back-off of up to two
// minutes (every request failing meanwhile is one more write of unknown
// outcome).
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 250 * time.Millisecond},
		MinConnectTimeout: time.Second,
	})}
}

// Stats counts the outcomes of a run's requests.
type Stats struct {
	// OK counts completed operations (kept in the history), OKByOp the
	// same by operation.
	OK     int
	OKByOp map[Op]int
	// NotApplied counts writes the server refused with the not-applied
	// guarantee (left out of the history).
	NotApplied int
	// Unknown counts writes of unknown outcome (kept, never returning).
	Unknown int
	// FailedReads counts failed reads (left out).
	FailedReads int
	// Errors counts failed requests by a short label: the ErrorInfo
	// reason, or the gRPC code and where the connection failed.
	Errors map[string]int
	// Unexpected counts, by the same labels, errors outside the documented
	// contract (treated as unknown outcome). A non-empty map is worth a
	// look even when the check passes.
	Unexpected map[string]int
	// Samples holds, for each label, the first such error in full.
	Samples map[string]string
}

func newStats() Stats {
	return Stats{OKByOp: map[Op]int{}, Errors: map[string]int{}, Unexpected: map[string]int{}, Samples: map[string]string{}}
}

func (s *Stats) merge(o *Stats) {
	s.OK += o.OK
	s.NotApplied += o.NotApplied
	s.Unknown += o.Unknown
	s.FailedReads += o.FailedReads
	for k, v := range o.OKByOp {
		s.OKByOp[k] += v
	}
	for k, v := range o.Errors {
		s.Errors[k] += v
	}
	for k, v := range o.Unexpected {
		s.Unexpected[k] += v
	}
	for k, v := range o.Samples {
		if _, ok := s.Samples[k]; !ok {
			s.Samples[k] = v
		}
	}
}

// String renders the statistics for a log, over several lines.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ops: %d ok, %d writes not applied (dropped), %d writes of unknown outcome (kept open), %d failed reads (dropped)\n",
		s.OK, s.NotApplied, s.Unknown, s.FailedReads)
	fmt.Fprintf(&b, "ok by op: %v; errors by reason: %v", s.OKByOp, s.Errors)
	for _, label := range sortedKeys(s.Samples) {
		fmt.Fprintf(&b, "\n  e.g. %s: %s", label, s.Samples[label])
	}
	if len(s.Unexpected) > 0 {
		fmt.Fprintf(&b, "\nerrors outside the documented contract (treated as unknown outcome): %v", s.Unexpected)
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// never is the return time of a write whose outcome is unknown: after
// every other event, so it may take effect at any point after its call.
const never = math.MaxInt64

// outcome sorts a failed request by what it tells about the write.
type outcome int

const (
	// notApplied: Unavailable with a cutkv.io ErrorInfo; the server
	// guarantees nothing was applied.
	notApplied outcome = iota + 1
	// unknown: anything else; the write may or may not have happened.
	unknown
)

// The "not applied" contract of proto/kvpb, spelled out here rather than
// imported from rpc, so that the workload holds the server to the
// documented contract. A reason not listed counts as unknown outcome (the
// safe reading) and as unexpected.
const errorDomain = "cutkv.io"

var notAppliedReasons = map[string]bool{
	"NOT_LEADER":       true,
	"NO_LEADER":        true,
	"PROPOSAL_DROPPED": true,
	"NOT_SERVING":      true,
	"SHUTTING_DOWN":    true,
}

// classify returns the outcome of a failed request and a short label for
// the statistics; expected says whether the error is one the contract
// allows under faults (the others are counted as unexpected).
func classify(err error) (o outcome, label string, expected bool) {
	st, ok := status.FromError(err)
	if !ok {
		if errors.Is(err, context.DeadlineExceeded) {
			return unknown, "DeadlineExceeded", true
		}
		return unknown, "non-status: " + err.Error(), false
	}
	if st.Code() == codes.Unavailable {
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errorDomain {
				if notAppliedReasons[info.GetReason()] {
					return notApplied, info.GetReason(), true
				}
				return unknown, "Unavailable/" + info.GetReason(), false
			}
		}
		// Say where the connection failed, for the statistics only.
		switch msg := st.Message(); {
		case strings.Contains(msg, "while dialing"):
			return unknown, "Unavailable (dial failed)", true
		case strings.Contains(msg, "error reading from server"):
			return unknown, "Unavailable (connection lost)", true
		}
		return unknown, "Unavailable", true
	}
	switch st.Code() {
	case codes.DeadlineExceeded, codes.Canceled:
		return unknown, st.Code().String(), true
	}
	return unknown, st.Code().String() + ": " + st.Message(), false
}

// client issues random single-key operations, one at a time, to random
// nodes not skipped, and records them. Only one goroutine runs a client
// at a time (Workload.mu).
type client struct {
	w    *Workload
	rng  *rand.Rand
	name string
	// seq numbers the client's writes; with name it makes values unique.
	seq int
	// failures counts errors in a row, for the back-off.
	failures int
}

func (cl *client) run(ctx context.Context, stats *Stats) []porcupine.Operation {
	var ops []porcupine.Operation
	pid := cl.w.clientID()
	for ctx.Err() == nil {
		node := cl.pickNode()
		in := cl.nextInput()
		op, err := cl.do(ctx, node, in)
		if err == nil {
			cl.failures = 0
			stats.OK++
			stats.OKByOp[in.Op]++
			op.ClientId = pid
			ops = append(ops, op)
			continue
		}
		o, label, expected := classify(err)
		stats.Errors[label]++
		if _, ok := stats.Samples[label]; !ok {
			stats.Samples[label] = fmt.Sprintf("%s %s: %v", in.Op, op.Metadata, err)
		}
		if !expected {
			stats.Unexpected[label]++
		}
		switch {
		case in.Op == OpGet:
			stats.FailedReads++
		case o == notApplied:
			stats.NotApplied++
		default:
			stats.Unknown++
			op.ClientId = pid
			op.Return = never
			op.Output = Output{Unknown: true}
			op.Metadata = fmt.Sprintf("%v; %s", op.Metadata, label)
			ops = append(ops, op)
			pid = cl.w.clientID()
		}
		cl.backOff(ctx)
	}
	return ops
}

// backOff sleeps, jittered and exponentially longer with each error in a
// row, or until ctx is done.
func (cl *client) backOff(ctx context.Context) {
	cfg := &cl.w.cfg
	d := cfg.BackoffBase << min(cl.failures, 8)
	d = min(d, cfg.BackoffMax)
	cl.failures++
	sleepCtx(ctx, d/2+time.Duration(cl.rng.Int64N(int64(d/2)+1)))
}

// pickNode picks a random node among those Skip does not skip, or among
// all if it skips every one.
func (cl *client) pickNode() int {
	n := len(cl.w.cfg.Nodes)
	skip := cl.w.cfg.Skip
	if skip == nil {
		return cl.rng.IntN(n)
	}
	var up [64]int
	eligible := up[:0]
	for i := 0; i < n; i++ {
		if !skip(i) {
			eligible = append(eligible, i)
		}
	}
	if len(eligible) == 0 {
		return cl.rng.IntN(n)
	}
	return eligible[cl.rng.IntN(len(eligible))]
}

func (cl *client) nextInput() Input {
	keys := cl.w.cfg.Keys
	key := keys[cl.rng.IntN(len(keys))]
	switch r := cl.rng.IntN(100); {
	case r < 45:
		return Input{Op: OpGet, Key: key}
	case r < 90:
		cl.seq++
		return Input{Op: OpPut, Key: key, Value: fmt.Sprintf("%s-%d", cl.name, cl.seq)}
	default:
		return Input{Op: OpDelete, Key: key}
	}
}

// do sends one request to node and returns it as an operation, complete
// when err is nil. The request is not cancelled with ctx (only its values
// pass): a run that ends must not turn the write in flight into one of
// unknown outcome.
func (cl *client) do(ctx context.Context, node int, in Input) (op porcupine.Operation, err error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cl.w.cfg.OpTimeout)
	defer cancel()
	kv := cl.w.cfg.Nodes[node]
	key := []byte(in.Key)
	op.Input = in
	op.Metadata = fmt.Sprintf("via n%d", node+1)
	op.Call = cl.w.Now()
	var out Output
	switch in.Op {
	case OpGet:
		var r *kvpb.GetResponse
		if r, err = kv.Get(rctx, &kvpb.GetRequest{Key: key}); err == nil {
			out = fromKV(r.GetKv())
		}
	case OpPut:
		var r *kvpb.PutResponse
		if r, err = kv.Put(rctx, &kvpb.PutRequest{Key: key, Value: []byte(in.Value), PrevKv: true}); err == nil {
			out = fromKV(r.GetPrevKv())
		}
	case OpDelete:
		var r *kvpb.DeleteResponse
		if r, err = kv.Delete(rctx, &kvpb.DeleteRequest{Key: key, PrevKv: true}); err == nil {
			out = fromKV(r.GetPrevKv())
			if (r.GetDeleted() == 1) != (r.GetPrevKv() != nil) {
				out.Version = -1 // contradicts itself; the model rejects it
				op.Metadata = fmt.Sprintf("via n%d; deleted=%d but prev_kv=%v", node+1, r.GetDeleted(), r.GetPrevKv())
			}
		}
	}
	op.Return = cl.w.Now()
	op.Output = out
	return op, err
}

func fromKV(kv *kvpb.KeyValue) Output {
	if kv == nil {
		return Output{}
	}
	return Output{Value: string(kv.GetValue()), Version: kv.GetVersion()}
}
