package linearizability

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// fakeStore is one linearizable register per key, shared by the fake
// nodes in front of it.
type fakeStore struct {
	mu sync.Mutex
	kv map[string]*kvpb.KeyValue
	// calls counts requests; at stopAfter it calls stop, which ends the
	// run after a fixed amount of work rather than of time.
	calls     atomic.Int64
	stopAfter int64
	stop      func()
}

func (s *fakeStore) count() {
	if s.calls.Add(1) == s.stopAfter && s.stop != nil {
		s.stop()
	}
}

func (s *fakeStore) get(key []byte) *kvpb.KeyValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kv[string(key)]
}

func (s *fakeStore) put(key, value []byte) (prev *kvpb.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev = s.kv[string(key)]
	next := &kvpb.KeyValue{Key: key, Value: value, Version: 1}
	if prev != nil {
		next.Version = prev.Version + 1
	}
	s.kv[string(key)] = next
	return prev
}

func (s *fakeStore) del(key []byte) (prev *kvpb.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev = s.kv[string(key)]
	delete(s.kv, string(key))
	return prev
}

// fault is how a fake node misbehaves.
type fault int

const (
	healthy fault = iota
	// refuseWrites: writes are refused before they apply, with the
	// not-applied guarantee; reads are served.
	refuseWrites
	// applyThenTimeOut: writes apply but the answer is lost; reads fail.
	applyThenTimeOut
	// loseWrites: writes are acknowledged and never applied (a bug the
	// check must catch).
	loseWrites
	// mustNotBeCalled: the node is skipped; a request to it is counted.
	mustNotBeCalled
)

// fakeNode serves the KV API over a fakeStore with a fault. Scan and Txn
// are not used by the workload (the embedded nil interface panics).
type fakeNode struct {
	kvrpc.KVClient
	s      *fakeStore
	fault  fault
	misses atomic.Int64
}

func notLeader() error {
	st, err := status.New(codes.Unavailable, "not leader").WithDetails(&errdetails.ErrorInfo{Domain: errorDomain, Reason: "NOT_LEADER"})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func (n *fakeNode) Get(_ context.Context, in *kvpb.GetRequest, _ ...grpc.CallOption) (*kvpb.GetResponse, error) {
	n.s.count()
	switch n.fault {
	case applyThenTimeOut:
		return nil, status.Error(codes.Unavailable, "error reading from server: EOF")
	case mustNotBeCalled:
		n.misses.Add(1)
	}
	return &kvpb.GetResponse{Kv: n.s.get(in.Key)}, nil
}

func (n *fakeNode) Put(_ context.Context, in *kvpb.PutRequest, _ ...grpc.CallOption) (*kvpb.PutResponse, error) {
	n.s.count()
	switch n.fault {
	case refuseWrites:
		return nil, notLeader()
	case applyThenTimeOut:
		n.s.put(in.Key, in.Value)
		return nil, status.Error(codes.DeadlineExceeded, "late")
	case loseWrites:
		return &kvpb.PutResponse{PrevKv: n.s.get(in.Key)}, nil
	case mustNotBeCalled:
		n.misses.Add(1)
	}
	return &kvpb.PutResponse{PrevKv: n.s.put(in.Key, in.Value)}, nil
}

func (n *fakeNode) Delete(_ context.Context, in *kvpb.DeleteRequest, _ ...grpc.CallOption) (*kvpb.DeleteResponse, error) {
	n.s.count()
	switch n.fault {
	case refuseWrites:
		return nil, notLeader()
	case applyThenTimeOut:
		n.s.del(in.Key)
		return nil, status.Error(codes.DeadlineExceeded, "late")
	case mustNotBeCalled:
		n.misses.Add(1)
	}
	prev := n.s.del(in.Key)
	r := &kvpb.DeleteResponse{PrevKv: prev}
	if prev != nil {
		r.Deleted = 1
	}
	return r, nil
}

// runFake runs a workload of 4 clients over fake nodes with the given
// faults until they have served about calls requests, then takes the
// final reads.
func runFake(t *testing.T, calls int64, faults ...fault) (history []porcupine.Operation, stats Stats, nodes []*fakeNode) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &fakeStore{kv: map[string]*kvpb.KeyValue{}, stopAfter: calls, stop: cancel}
	var kvs []kvrpc.KVClient
	for _, f := range faults {
		n := &fakeNode{s: s, fault: f}
		nodes = append(nodes, n)
		kvs = append(kvs, n)
	}
	w, err := NewWorkload(Config{
		Nodes:       kvs,
		Keys:        PickKeys(3, 2),
		Seed:        1,
		Clients:     4,
		BackoffBase: time.Microsecond,
		BackoffMax:  10 * time.Microsecond,
		Skip:        func(i int) bool { return nodes[i].fault == mustNotBeCalled },
	})
	if err != nil {
		t.Fatal(err)
	}
	ops, stats := w.Run(ctx)
	// Only the healthy nodes answer reads for sure; FinalReads tries the
	// nodes in turn.
	final, err := w.FinalReads(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(final) != 3 {
		t.Fatalf("%d final reads, want one per key", len(final))
	}
	for _, op := range final {
		if op.Input.(Input).Op != OpGet || !strings.HasPrefix(op.Metadata.(string), "final read") {
			t.Fatalf("final read %+v", op)
		}
	}
	return append(ops, final...), stats, nodes
}

// TestWorkloadFollowsErrorContract runs the workload against fake nodes
// that fail in each documented way and checks the history it records:
// refused writes left out, writes of unknown outcome kept open, failed
// reads left out, skipped nodes left alone, and the result linearizable.
func TestWorkloadFollowsErrorContract(t *testing.T) {
	history, stats, nodes := runFake(t, 2000, healthy, refuseWrites, applyThenTimeOut, mustNotBeCalled)
	t.Logf("%v", stats)

	if stats.OK == 0 || stats.NotApplied == 0 || stats.Unknown == 0 || stats.FailedReads == 0 {
		t.Fatalf("a run that does not exercise every outcome: %+v", stats)
	}
	if stats.Errors["NOT_LEADER"] != stats.NotApplied {
		t.Errorf("%d NOT_LEADER errors, %d writes not applied", stats.Errors["NOT_LEADER"], stats.NotApplied)
	}
	if stats.Errors["DeadlineExceeded"] != stats.Unknown {
		t.Errorf("%d DeadlineExceeded errors, %d writes of unknown outcome", stats.Errors["DeadlineExceeded"], stats.Unknown)
	}
	if stats.Errors["Unavailable (connection lost)"] != stats.FailedReads {
		t.Errorf("%d lost connections, %d failed reads", stats.Errors["Unavailable (connection lost)"], stats.FailedReads)
	}
	if len(stats.Unexpected) != 0 {
		t.Errorf("documented errors counted as unexpected: %v", stats.Unexpected)
	}
	if n := nodes[3].misses.Load(); n != 0 {
		t.Errorf("%d requests to the skipped node", n)
	}

	var open int
	byClient := map[int][]porcupine.Operation{}
	for _, op := range history {
		in, out := op.Input.(Input), op.Output.(Output)
		via := op.Metadata.(string)
		switch {
		case strings.HasPrefix(via, "via n2") && in.Op != OpGet:
			t.Errorf("refused write in the history: %s", opLine(op))
		case strings.HasPrefix(via, "via n3") && in.Op == OpGet:
			t.Errorf("failed read in the history: %s", opLine(op))
		case strings.HasPrefix(via, "via n3"):
			if op.Return != never || !out.Unknown {
				t.Errorf("write of unknown outcome not kept open: %s", opLine(op))
			}
			open++
		case op.Return == never || out.Unknown:
			t.Errorf("completed operation kept open: %s", opLine(op))
		}
		byClient[op.ClientId] = append(byClient[op.ClientId], op)
	}
	if open != stats.Unknown {
		t.Errorf("%d open writes in the history, %d counted", open, stats.Unknown)
	}
	if len(history) != stats.OK+stats.Unknown+3 {
		t.Errorf("history of %d operations, want %d ok + %d unknown + 3 final reads", len(history), stats.OK, stats.Unknown)
	}
	// A porcupine client has one operation open at a time.
	for id, ops := range byClient {
		for i := 1; i < len(ops); i++ {
			if ops[i].Call < ops[i-1].Return {
				t.Fatalf("client id %d overlaps itself:\n%s", id, dumpOps(ops[i-1:i+1], 2))
			}
		}
	}

	res, err := Check(history, checkTimeout, t.TempDir())
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Partitions != 3 {
		t.Errorf("%d partitions checked, want one per key (3)", res.Partitions)
	}
}

// TestWorkloadCatchesLostWrites closes the loop: a node that acknowledges
// writes it never applies must make the check fail.
func TestWorkloadCatchesLostWrites(t *testing.T) {
	history, _, _ := runFake(t, 300, healthy, loseWrites)
	res, err := Check(history, checkTimeout, t.TempDir())
	if !errors.Is(err, ErrNotLinearizable) {
		t.Fatalf("check of a history with lost writes: %v, %v", res, err)
	}
	if len(res.Failures) == 0 || res.Visualization == "" {
		t.Fatalf("failure without a guilty key or a visualization: %+v", res)
	}
}

func TestConfigValidate(t *testing.T) {
	node := &fakeNode{}
	good := func() Config { return Config{Nodes: []kvrpc.KVClient{node}, Keys: []string{"a"}, Clients: 1} }
	c := good()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.OpTimeout != DefaultOpTimeout || c.BackoffBase != DefaultBackoffBase || c.BackoffMax != DefaultBackoffMax || c.FinalReadWithin != DefaultFinalReadWithin {
		t.Errorf("defaults not filled: %+v", c)
	}
	for name, mutate := range map[string]func(*Config){
		"no nodes":       func(c *Config) { c.Nodes = nil },
		"nil node":       func(c *Config) { c.Nodes = append(c.Nodes, nil) },
		"no keys":        func(c *Config) { c.Keys = nil },
		"duplicate key":  func(c *Config) { c.Keys = []string{"a", "a"} },
		"no clients":     func(c *Config) { c.Clients = 0 },
		"negative":       func(c *Config) { c.OpTimeout = -time.Second },
		"max below base": func(c *Config) { c.BackoffBase, c.BackoffMax = time.Second, time.Millisecond },
	} {
		c := good()
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := NewWorkload(c); err == nil {
			t.Errorf("%s: NewWorkload accepted", name)
		}
	}
}

func TestFinalReadsIncomplete(t *testing.T) {
	s := &fakeStore{kv: map[string]*kvpb.KeyValue{}}
	w, err := NewWorkload(Config{
		Nodes:           []kvrpc.KVClient{&fakeNode{s: s, fault: applyThenTimeOut}},
		Keys:            []string{"a", "b"},
		Clients:         1,
		FinalReadWithin: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := w.FinalReads(context.Background())
	if !errors.Is(err, ErrFinalReadsIncomplete) || len(ops) != 0 || !strings.Contains(err.Error(), "[a b]") {
		t.Fatalf("final reads through a node that fails every read: %v, %v", ops, err)
	}
}
