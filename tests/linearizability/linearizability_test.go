package linearizability

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/topology"
)

const (
	nodes      = 3
	partitions = 4
	numKeys    = 5
	numClients = 6
	// opTimeout bounds one request; past it a write's outcome is unknown.
	opTimeout = 2 * time.Second
	// A client's back-off after errors in a row.
	backoffBase = 25 * time.Millisecond
	backoffMax  = 400 * time.Millisecond
	// checkTimeout bounds porcupine; a check that runs out is a failure
	// (Unknown), reported as such.
	checkTimeout = 60 * time.Second
	// visualizeTimeout bounds the verbose re-run that feeds the
	// visualization of a check that already timed out.
	visualizeTimeout = 10 * time.Second
	// Completed work the run must reach to count as a test at all.
	minOKOps = 200
	minKills = 2
)

func TestLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster soak under a nemesis; skipped in -short mode")
	}
	soak := soakDuration(t)
	seed := testSeed(t)
	t.Logf("soak %v, seed %d (CUTKV_SEED=%d repeats the choices, not the timing)", soak, seed, seed)

	c := clustertest.Start(t, nodes, clustertest.Options{Partitions: partitions})
	conns := dialAll(t, c)
	var kvs []kvpb.KVClient
	for _, cc := range conns {
		kvs = append(kvs, kvpb.NewKVClient(cc))
	}
	keys := pickKeys(numKeys, partitions)
	t.Logf("keys %v; nodes n1..n%d at %v", keys, nodes, c.Endpoints())

	rec := newRecorder()
	var down atomic.Int32 // 1 + index of the node the nemesis holds down, 0 if none
	deadline := time.Now().Add(soak)

	var wg sync.WaitGroup
	// Should the nemesis stop the test early, the clients still end by
	// the deadline, before the cluster is torn down (cleanups run last
	// registered first).
	t.Cleanup(wg.Wait)
	stats := make([]*clientStats, numClients)
	logs := make([][]porcupine.Operation, numClients)
	for ci := 0; ci < numClients; ci++ {
		stats[ci] = newClientStats()
		wg.Add(1)
		go func(ci int) {
			defer wg.Done()
			cl := &client{
				rng:   rand.New(rand.NewPCG(seed, uint64(ci)+1)),
				kvs:   kvs,
				keys:  keys,
				rec:   rec,
				down:  &down,
				name:  fmt.Sprintf("c%d", ci),
				stats: stats[ci],
			}
			logs[ci] = cl.run(deadline)
		}(ci)
	}

	// The nemesis runs on the test goroutine: cluster helpers may call
	// t.Fatal, which is legal only here.
	nem := &nemesis{c: c, conns: conns, rng: rand.New(rand.NewPCG(seed, 0)), down: &down, rec: rec}
	nem.run(t, deadline)
	wg.Wait()

	// Every node is up again: each key, read once more, must show every
	// acknowledged write (DESIGN.md invariant 1, checked by the model).
	final := finalReads(kvs, keys, rec)

	var history []porcupine.Operation
	for _, l := range logs {
		history = append(history, l...)
	}
	history = append(history, final...)

	total := newClientStats()
	for _, s := range stats {
		total.merge(s)
	}
	t.Logf("ops: %d ok, %d writes not applied (dropped), %d writes of unknown outcome (kept open), %d failed reads (dropped); %d final reads",
		total.ok, total.notApplied, total.unknown, total.failedReads, len(final))
	t.Logf("ok by op: %v; errors by reason: %v", total.okByOp, total.reasons)
	t.Logf("nemesis: %d leader kills, %d restarts", nem.kills, nem.restarts)
	for _, label := range sortedKeys(total.samples) {
		t.Logf("  e.g. %s: %s", label, total.samples[label])
	}
	if len(total.unexpected) > 0 {
		t.Logf("errors outside the documented contract (treated as unknown outcome): %v", total.unexpected)
	}

	start := time.Now()
	res, info := checkHistory(history)
	t.Logf("porcupine: %v on %d operations (%d after dropping writes of unknown outcome nobody saw) in %v",
		resultName(res), len(history), len(Prepare(history)), time.Since(start).Round(time.Millisecond))
	if res != porcupine.Ok {
		info.AddAnnotations(nem.events)
		reportFailure(t, res, history, info)
	}

	if total.ok < minOKOps {
		t.Errorf("only %d operations completed, want at least %d", total.ok, minOKOps)
	}
	if nem.kills < minKills {
		t.Errorf("only %d leader kills, want at least %d (is CUTKV_SOAK too short?)", nem.kills, minKills)
	}
	if len(final) != len(keys) {
		t.Errorf("final reads: %d of %d keys answered after the nemesis stopped", len(final), len(keys))
	}
}

// soakDuration reads CUTKV_SOAK (a Go duration), default 10s.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	d, err := parseSoak(os.Getenv("CUTKV_SOAK"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func parseSoak(s string) (time.Duration, error) {
	if s == "" {
		return 10 * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("CUTKV_SOAK=%q: %w", s, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("CUTKV_SOAK=%q: must be positive", s)
	}
	return d, nil
}

// testSeed reads CUTKV_SEED, else picks one.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	s := os.Getenv("CUTKV_SEED")
	if s == "" {
		return rand.Uint64() >> 1
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("CUTKV_SEED=%q: %v", s, err)
	}
	return seed
}

// pickKeys returns n keys that cover every partition (n >= parts), so
// every raft group is under test.
func pickKeys(n int, parts uint32) []string {
	var keys []string
	chosen := map[string]bool{}
	covered := map[uint64]bool{}
	for i := 0; len(covered) < int(parts); i++ {
		k := fmt.Sprintf("k%d", i)
		if p := topology.PartitionOf([]byte(k), parts); !covered[p] {
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

// dialAll opens one connection per node, owned by the test, with a short
// reconnect back-off: a restarted node must be reachable again at once,
// not after gRPC's default back-off of up to two minutes.
func dialAll(t *testing.T, c *clustertest.Cluster) []*grpc.ClientConn {
	t.Helper()
	var conns []*grpc.ClientConn
	for i := 0; i < c.N(); i++ {
		cc, err := grpc.NewClient(c.Config(i).GRPCAddr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 250 * time.Millisecond},
				MinConnectTimeout: time.Second,
			}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		conns = append(conns, cc)
	}
	return conns
}

// waitConnected waits up to within for cc to be ready. Not getting there
// is not a failure: requests on it will fail and be counted.
func waitConnected(cc *grpc.ClientConn, within time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		st := cc.GetState()
		if st == connectivity.Ready {
			return
		}
		cc.Connect()
		if !cc.WaitForStateChange(ctx, st) {
			return
		}
	}
}

// recorder hands out timestamps (nanoseconds on the monotonic clock since
// the start) and client ids for porcupine.
type recorder struct {
	start   time.Time
	nextPID atomic.Int64
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

// pid returns a fresh porcupine client id. A client takes a new one after
// a write of unknown outcome: that write never returns, and a porcupine
// client must not have two operations open at once.
func (r *recorder) pid() int { return int(r.nextPID.Add(1) - 1) }

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
// imported from rpc, so that the test holds the server to the documented
// contract. A reason not listed counts as unknown outcome (the safe
// reading) and is logged as unexpected.
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
// allows under crashes (the others are logged).
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

type clientStats struct {
	ok, notApplied, unknown, failedReads int
	okByOp                               map[Op]int
	reasons                              map[string]int
	unexpected                           map[string]int
	samples                              map[string]string // label -> the first error with it
}

func newClientStats() *clientStats {
	return &clientStats{okByOp: map[Op]int{}, reasons: map[string]int{}, unexpected: map[string]int{}, samples: map[string]string{}}
}

func (s *clientStats) merge(o *clientStats) {
	s.ok += o.ok
	s.notApplied += o.notApplied
	s.unknown += o.unknown
	s.failedReads += o.failedReads
	for k, v := range o.okByOp {
		s.okByOp[k] += v
	}
	for k, v := range o.reasons {
		s.reasons[k] += v
	}
	for k, v := range o.unexpected {
		s.unexpected[k] += v
	}
	for k, v := range o.samples {
		if _, ok := s.samples[k]; !ok {
			s.samples[k] = v
		}
	}
}

// client issues random single-key operations, one at a time, to random
// nodes that are up, and records them.
type client struct {
	rng   *rand.Rand
	kvs   []kvpb.KVClient
	keys  []string
	rec   *recorder
	down  *atomic.Int32
	name  string
	stats *clientStats
	seq   int
	// failures counts errors in a row, for the back-off.
	failures int
}

func (cl *client) run(deadline time.Time) []porcupine.Operation {
	var ops []porcupine.Operation
	pid := cl.rec.pid()
	for time.Now().Before(deadline) {
		node := cl.pickNode()
		in := cl.nextInput()
		op, err := cl.do(node, in)
		if err == nil {
			cl.failures = 0
			cl.stats.ok++
			cl.stats.okByOp[in.Op]++
			op.ClientId = pid
			ops = append(ops, op)
			continue
		}
		o, label, expected := classify(err)
		cl.stats.reasons[label]++
		if _, ok := cl.stats.samples[label]; !ok {
			cl.stats.samples[label] = fmt.Sprintf("%s %s: %v", in.Op, op.Metadata, err)
		}
		if !expected {
			cl.stats.unexpected[label]++
		}
		switch {
		case in.Op == OpGet:
			cl.stats.failedReads++
		case o == notApplied:
			cl.stats.notApplied++
		default:
			cl.stats.unknown++
			op.ClientId = pid
			op.Return = never
			op.Output = Output{Unknown: true}
			op.Metadata = fmt.Sprintf("%v; %s", op.Metadata, label)
			ops = append(ops, op)
			pid = cl.rec.pid()
		}
		cl.backOff()
	}
	return ops
}

// backOff sleeps after an error as a client library would (exponential,
// jittered), rather than hammering a partition that is electing a leader:
// every such error is one more write of unknown outcome to check.
func (cl *client) backOff() {
	d := backoffBase << min(cl.failures, 8)
	d = min(d, backoffMax)
	cl.failures++
	time.Sleep(d/2 + time.Duration(cl.rng.Int64N(int64(d/2)+1)))
}

// pickNode picks a node the nemesis is not holding down (a request to a
// down node would only add writes of unknown outcome).
func (cl *client) pickNode() int {
	for {
		i := cl.rng.IntN(len(cl.kvs))
		if int(cl.down.Load()) != i+1 {
			return i
		}
	}
}

func (cl *client) nextInput() Input {
	key := cl.keys[cl.rng.IntN(len(cl.keys))]
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
// when err is nil.
func (cl *client) do(node int, in Input) (op porcupine.Operation, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	kv := cl.kvs[node]
	key := []byte(in.Key)
	op.Input = in
	op.Metadata = fmt.Sprintf("via n%d", node+1)
	op.Call = cl.rec.now()
	var out Output
	switch in.Op {
	case OpGet:
		var r *kvpb.GetResponse
		if r, err = kv.Get(ctx, &kvpb.GetRequest{Key: key}); err == nil {
			out = fromKV(r.GetKv())
		}
	case OpPut:
		var r *kvpb.PutResponse
		if r, err = kv.Put(ctx, &kvpb.PutRequest{Key: key, Value: []byte(in.Value), PrevKv: true}); err == nil {
			out = fromKV(r.GetPrevKv())
		}
	case OpDelete:
		var r *kvpb.DeleteResponse
		if r, err = kv.Delete(ctx, &kvpb.DeleteRequest{Key: key, PrevKv: true}); err == nil {
			out = fromKV(r.GetPrevKv())
			if (r.GetDeleted() == 1) != (r.GetPrevKv() != nil) {
				out.Version = -1 // contradicts itself; the model rejects it
				op.Metadata = fmt.Sprintf("via n%d; deleted=%d but prev_kv=%v", node+1, r.GetDeleted(), r.GetPrevKv())
			}
		}
	}
	op.Return = cl.rec.now()
	op.Output = out
	return op, err
}

func fromKV(kv *kvpb.KeyValue) Output {
	if kv == nil {
		return Output{}
	}
	return Output{Value: string(kv.GetValue()), Version: kv.GetVersion()}
}

// nemesis kills the leader of a random partition, keeps it down a moment,
// restarts it and waits for every partition to have a leader again. At
// most one node is down at a time, so a majority is always up.
type nemesis struct {
	c        *clustertest.Cluster
	conns    []*grpc.ClientConn // the clients' connections, by node
	rng      *rand.Rand
	down     *atomic.Int32
	rec      *recorder
	kills    int
	restarts int
	events   []porcupine.Annotation
}

func (n *nemesis) run(t *testing.T, deadline time.Time) {
	t.Helper()
	pause := n.jitter(200*time.Millisecond, 500*time.Millisecond)
	for sleepBefore(pause, deadline) {
		pause = n.jitter(300*time.Millisecond, 800*time.Millisecond)
		p := uint64(1 + n.rng.IntN(partitions))
		victim := n.leaderOf(p)
		if victim < 0 {
			continue
		}
		n.down.Store(int32(victim + 1))
		from := n.rec.now()
		n.c.Kill(victim)
		n.kills++
		time.Sleep(n.jitter(300*time.Millisecond, 900*time.Millisecond))
		n.c.Restart(victim)
		n.restarts++
		// The clients' connection to it may be waiting out a reconnect
		// back-off; a request sent now would fail unsent yet look like a
		// write of unknown outcome.
		waitConnected(n.conns[victim], 2*time.Second)
		n.down.Store(0)
		n.events = append(n.events, porcupine.Annotation{
			Tag:             "nemesis",
			Start:           from,
			End:             n.rec.now(),
			Description:     fmt.Sprintf("n%d down", victim+1),
			Details:         fmt.Sprintf("killed n%d, leader of partition %d; restarted", victim+1, p),
			BackgroundColor: "#f4c7c3",
		})
		n.waitLeaders(5 * time.Second)
	}
}

func (n *nemesis) jitter(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)))
}

// leaderOf returns the index of the node that leads partition p, -1 if no
// node claims it right now.
func (n *nemesis) leaderOf(p uint64) int {
	for i := 0; i < n.c.N(); i++ {
		if node := n.c.Node(i); node != nil {
			if st, ok := node.Store().Status(p); ok && st.IsLeader {
				return i
			}
		}
	}
	return -1
}

// waitLeaders polls until every partition has a leader, or within passes.
// Not finding one is not a failure here: the clients' errors and the
// operation counts will tell.
func (n *nemesis) waitLeaders(within time.Duration) {
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		all := true
		for p := uint64(1); p <= partitions; p++ {
			if n.leaderOf(p) < 0 {
				all = false
				break
			}
		}
		if all {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sleepBefore sleeps d and reports true, or returns false at once if the
// deadline would pass first.
func sleepBefore(d time.Duration, deadline time.Time) bool {
	if time.Until(deadline) <= d {
		return false
	}
	time.Sleep(d)
	return true
}

// finalReads reads every key once through any node, retrying failures for
// a while; it returns the successful reads as operations.
func finalReads(kvs []kvpb.KVClient, keys []string, rec *recorder) []porcupine.Operation {
	var ops []porcupine.Operation
	for ki, k := range keys {
		end := time.Now().Add(10 * time.Second)
		for attempt := 0; time.Now().Before(end); attempt++ {
			node := (ki + attempt) % len(kvs)
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			call := rec.now()
			r, err := kvs[node].Get(ctx, &kvpb.GetRequest{Key: []byte(k)})
			ret := rec.now()
			cancel()
			if err == nil {
				ops = append(ops, porcupine.Operation{
					ClientId: rec.pid(), Input: Input{Op: OpGet, Key: k}, Output: fromKV(r.GetKv()),
					Call: call, Return: ret, Metadata: fmt.Sprintf("final read via n%d", node+1),
				})
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return ops
}

// checkHistory is the one check both TestLinearizable and the checker's
// self-tests use: Prepare, then porcupine. Only a history that does not
// pass is checked again verbosely, for the visualization (tracking
// partial linearizations slows porcupine down several times).
func checkHistory(history []porcupine.Operation) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	prepared := Prepare(history)
	res := porcupine.CheckOperationsTimeout(Model, prepared, checkTimeout)
	if res == porcupine.Ok {
		return res, porcupine.LinearizationInfo{}
	}
	again := checkTimeout
	if res == porcupine.Unknown {
		again = visualizeTimeout
	}
	_, info := porcupine.CheckOperationsVerbose(Model, prepared, again)
	return res, info
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func resultName(r porcupine.CheckResult) string {
	switch r {
	case porcupine.Ok:
		return "linearizable"
	case porcupine.Illegal:
		return "NOT linearizable"
	default:
		return "unknown (check timed out)"
	}
}

// reportFailure fails the test, names the keys whose history is not
// linearizable, logs their operations and writes the visualization.
func reportFailure(t *testing.T, res porcupine.CheckResult, history []porcupine.Operation, info porcupine.LinearizationInfo) {
	t.Helper()
	if res == porcupine.Illegal {
		t.Errorf("history of %d operations is NOT linearizable", len(history))
	} else {
		t.Errorf("porcupine could not decide within %v (result Unknown): the history is too hard to check, not known to be wrong; shorten CUTKV_SOAK or raise the timeout", checkTimeout)
	}
	if res == porcupine.Illegal {
		// Find the guilty keys: each key is checked alone, all at once.
		subs := partitionByKey(Prepare(history))
		results := make([]porcupine.CheckResult, len(subs))
		var wg sync.WaitGroup
		for i, sub := range subs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = porcupine.CheckOperationsTimeout(Model, sub, checkTimeout)
			}()
		}
		wg.Wait()
		for i, sub := range subs {
			if results[i] == porcupine.Illegal {
				t.Logf("key %s is NOT linearizable (%d operations)\n%s", sub[0].Input.(Input).Key, len(sub), explainKey(sub))
			}
		}
	}
	path, err := writeVisualization(info)
	if err != nil {
		t.Logf("porcupine visualization not written: %v", err)
		return
	}
	t.Logf("porcupine visualization: %s", path)
}

// explainKey describes where the history of one key stops being
// linearizable: the end of the longest linearization porcupine found,
// with the model's state after each step, the first operation it could
// not place, and the operations concurrent with that one.
func explainKey(sub []porcupine.Operation) string {
	_, info := porcupine.CheckOperationsVerbose(Model, sub, checkTimeout)
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	type opID struct {
		client int
		call   int64
	}
	placed := map[opID]bool{}
	for _, op := range longest {
		placed[opID{op.ClientId, op.Call}] = true
	}
	var stuck *porcupine.Operation
	for i := range sub {
		if op := &sub[i]; !placed[opID{op.ClientId, op.Call}] && (stuck == nil || op.Return < stuck.Return) {
			stuck = op
		}
	}
	var b strings.Builder
	const tail = 15
	fmt.Fprintf(&b, "  longest linearization: %d operations; its last steps (state after each):\n", len(longest))
	state := Model.Init()
	for i, op := range longest {
		_, state = Model.Step(state, op.Input, op.Output)
		if i >= len(longest)-tail {
			fmt.Fprintf(&b, "    %s => %s\n", opLine(op), Model.DescribeState(state))
		}
	}
	if stuck == nil {
		return b.String()
	}
	fmt.Fprintf(&b, "  first operation that cannot be placed after it:\n    %s\n  operations concurrent with that one:\n", opLine(*stuck))
	var around []porcupine.Operation
	for _, op := range sub {
		if op.Call <= stuck.Return && op.Return >= stuck.Call {
			around = append(around, op)
		}
	}
	b.WriteString(dumpOps(around, 60))
	return b.String()
}

func opLine(op porcupine.Operation) string {
	ret := "never"
	if op.Return != never {
		ret = time.Duration(op.Return).String()
	}
	return fmt.Sprintf("client %-3d [%v, %s] %s (%v)", op.ClientId, time.Duration(op.Call), ret,
		describe(op.Input.(Input), op.Output.(Output)), op.Metadata)
}

// dumpOps renders operations one per line in call order, at most limit.
func dumpOps(ops []porcupine.Operation, limit int) string {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	var b strings.Builder
	for i, op := range sorted {
		if i == limit {
			fmt.Fprintf(&b, "    ... %d more\n", len(sorted)-limit)
			break
		}
		fmt.Fprintf(&b, "    %s\n", opLine(op))
	}
	return b.String()
}

// writeVisualization writes porcupine's HTML to CUTKV_PORCUPINE_OUT (a
// file, or an existing directory) or else a new file in os.TempDir().
func writeVisualization(info porcupine.LinearizationInfo) (string, error) {
	path := os.Getenv("CUTKV_PORCUPINE_OUT")
	dir := os.TempDir()
	if path != "" {
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			dir, path = path, ""
		}
	}
	if path == "" {
		f, err := os.CreateTemp(dir, "cutkv-linearizability-*.html")
		if err != nil {
			return "", err
		}
		path = f.Name()
		f.Close()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return abs, porcupine.VisualizePath(Model, info, abs)
}
