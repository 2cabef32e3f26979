package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cutkv/cutkv/keyspace"
)

// memDB is an in-memory database behind the "mem" test driver, with
// faults to inject.
type memDB struct {
	mu sync.Mutex
	kv map[string]memKV // REQUIRES mu
	// swaps counts SwapPair calls; REQUIRES mu.
	swaps int
	// conflictEvery makes every n-th SwapPair fail with errMemConflict.
	conflictEvery int
	// leakAfter makes the swaps after the first leakAfter ones create one
	// unit of money each; 0 never.
	leakAfter int
}

type memKV struct {
	value   []byte
	version int64
}

var errMemConflict = errors.New("mem: conflict")

// useMemDriver registers db as --target mem for the rest of the test.
func useMemDriver(t *testing.T, db *memDB) {
	t.Helper()
	db.kv = make(map[string]memKV)
	drivers["mem"] = memDriver{db}
	t.Cleanup(func() { delete(drivers, "mem") })
}

type memDriver struct{ db *memDB }

func (memDriver) DefaultEndpoints(func(string) string) []string { return []string{"mem"} }
func (d memDriver) Connect(context.Context, []string, ConnectOptions) (Conn, error) {
	return memConn(d), nil
}
func (memDriver) Classify(err error) errKind {
	if errors.Is(err, errMemConflict) {
		return errConflict
	}
	return errOther
}

type memConn struct{ db *memDB }

func (c memConn) put(k, v []byte) {
	old := c.db.kv[string(k)]
	c.db.kv[string(k)] = memKV{value: bytes.Clone(v), version: old.version + 1}
}

func (c memConn) Put(_ context.Context, k, v []byte) error {
	c.db.mu.Lock()
	defer c.db.mu.Unlock()
	c.put(k, v)
	return nil
}

func (c memConn) Get(_ context.Context, k []byte) (bool, error) {
	c.db.mu.Lock()
	defer c.db.mu.Unlock()
	_, ok := c.db.kv[string(k)]
	return ok, nil
}

func (c memConn) PutPair(_ context.Context, k1, v1, k2, v2 []byte) error {
	c.db.mu.Lock()
	defer c.db.mu.Unlock()
	c.put(k1, v1)
	c.put(k2, v2)
	return nil
}

func (c memConn) GetVersion(_ context.Context, k []byte) ([]byte, int64, error) {
	c.db.mu.Lock()
	defer c.db.mu.Unlock()
	kv := c.db.kv[string(k)]
	return kv.value, kv.version, nil
}

func (c memConn) SwapPair(_ context.Context, k1 []byte, v1 int64, n1 []byte, k2 []byte, v2 int64, n2 []byte) (bool, error) {
	c.db.mu.Lock()
	defer c.db.mu.Unlock()
	c.db.swaps++
	if c.db.conflictEvery > 0 && c.db.swaps%c.db.conflictEvery == 0 {
		return false, errMemConflict
	}
	if c.db.kv[string(k1)].version != v1 || c.db.kv[string(k2)].version != v2 {
		return false, nil
	}
	if c.db.leakAfter > 0 && c.db.swaps > c.db.leakAfter {
		n, _ := strconv.ParseInt(string(n2), 10, 64)
		n2 = strconv.AppendInt(nil, n+1, 10)
	}
	c.put(k1, n1)
	c.put(k2, n2)
	return true, nil
}

func (c memConn) ReadRange(_ context.Context, start, end []byte) ([]KV, bool, error) {
	c.db.mu.Lock()
	defer c.db.mu.Unlock()
	var kvs []KV
	for k, kv := range c.db.kv {
		if k >= string(start) && k < string(end) {
			kvs = append(kvs, KV{Key: []byte(k), Value: bytes.Clone(kv.value)})
		}
	}
	sort.Slice(kvs, func(i, j int) bool { return bytes.Compare(kvs[i].Key, kvs[j].Key) < 0 })
	return kvs, false, nil
}

func (memConn) Close() error { return nil }

func runMemJSON(t *testing.T, args ...string) (result, Result) {
	t.Helper()
	r := kvbench(t, nil, append([]string{"--target", "mem", "--progress", "0", "-o", "json"}, args...)...)
	var res Result
	if r.stdout != "" {
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("bad JSON %s: %v", r.stdout, err)
		}
	}
	return r, res
}

// TestBankAudit: the bank workload keeps the total, counts failed compares
// and conflicts as aborts, and audits; a database that creates money is
// caught by an audit (exit 1).
func TestBankAudit(t *testing.T) {
	db := &memDB{conflictEvery: 7}
	useMemDriver(t, db)
	r, res := runMemJSON(t, "bank", "--clients", "8", "--accounts", "20", "--duration", "300ms", "--audit-interval", "20ms", "--seed", "3")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	b := res.Bank
	if b == nil || b.Accounts != 20 || b.Total != 20*initialBalance || b.Audits.Ops == 0 || b.FinalAudit != "ok" || b.Violation != "" {
		t.Fatalf("bank %+v", b)
	}
	tr := res.ByOp["transfer"]
	if tr.Ops == 0 || tr.Aborts == 0 || tr.Conflicts == 0 || tr.Conflicts > tr.Aborts || tr.Errors.Total != 0 || res.Aborts != tr.Aborts {
		t.Errorf("transfers %+v", tr)
	}
	if want := float64(tr.Aborts) / float64(tr.Ops+tr.Aborts); res.AbortRate != want {
		t.Errorf("abort rate %v, want %v", res.AbortRate, want)
	}
	if res.Preload == nil || res.Preload.Keys != 20 {
		t.Errorf("init %+v", res.Preload)
	}
	var sum int64
	for i := range int64(20) {
		k := make([]byte, defaultKeySize)
		accountKey(k, i)
		n, err := strconv.ParseInt(string(db.kv[string(k)].value), 10, 64)
		if err != nil || n < 0 {
			t.Fatalf("account %q: %q", k, db.kv[string(k)].value)
		}
		sum += n
	}
	if sum != 20*initialBalance {
		t.Errorf("final total %d", sum)
	}

	// Money appears after the first 50 transfers: an audit stops the run.
	db2 := &memDB{leakAfter: 50}
	useMemDriver(t, db2)
	r, res = runMemJSON(t, "bank", "--clients", "4", "--accounts", "10", "--duration", "5s", "--audit-interval", "10ms")
	if r.code != exitFailed || !strings.Contains(r.stderr, "bank audit: read 10 accounts holding") {
		t.Fatalf("leaking database: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if res.Bank == nil || !strings.Contains(res.Bank.Violation, "want 10 accounts holding 10000") || res.StoppedEarly == "" || res.ElapsedSec > 4 {
		t.Errorf("leaking database: bank %+v, stopped %q after %.1fs", res.Bank, res.StoppedEarly, res.ElapsedSec)
	}

	// Text output: the aborts columns and the audit line.
	useMemDriver(t, &memDB{})
	r = kvbench(t, nil, "bank", "--target", "mem", "--progress", "0", "--accounts", "5", "--total", "50", "--audit-interval", "1ms")
	if r.code != exitOK || !strings.Contains(r.stdout, "abort %") || !strings.Contains(r.stdout, "\naudit ") ||
		!strings.Contains(r.stdout, "final audit: ok") || !strings.Contains(r.stdout, "0 conflicts") || !strings.Contains(r.stdout, "\ntransfer ") {
		t.Errorf("text: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestTxnMem: the txn workload on a target without partitions writes two
// different keys per transaction.
func TestTxnMem(t *testing.T) {
	db := &memDB{}
	useMemDriver(t, db)
	r, res := runMemJSON(t, "txn", "--total", "100", "--keyspace", "50")
	if r.code != exitOK || res.Ops != 100 || res.ByOp["txn"].Ops != 100 || res.Txn == nil || res.Txn.Keys != "" || res.Aborts != 0 {
		t.Fatalf("exit %d, %+v\n%s", r.code, res, r.stderr)
	}
	// Two different keys each time: more than 100 writes in all.
	var writes int64
	for _, kv := range db.kv {
		writes += kv.version
	}
	if writes != 200 {
		t.Errorf("%d writes, want 200", writes)
	}
}

// TestKeyPairs: cross picks keys of different partitions, same of one.
func TestKeyPairs(t *testing.T) {
	for _, same := range []bool{false, true} {
		kp := &keyPairs{keyspace: 1000, partitions: 16, same: same, partitionOf: keyspace.PartitionOf}
		rng := rand.New(rand.NewPCG(1, 2))
		k1, k2 := make([]byte, 16), make([]byte, 16)
		for range 1000 {
			if err := kp.pick(rng, k1, k2); err != nil {
				t.Fatal(err)
			}
			p1, p2 := keyspace.PartitionOf(k1, 16), keyspace.PartitionOf(k2, 16)
			if bytes.Equal(k1, k2) || (p1 == p2) != same {
				t.Fatalf("same=%v: %q (partition %d), %q (partition %d)", same, k1, p1, k2, p2)
			}
		}
	}
	// Two keys, which hash to different partitions of 16: no same pair.
	cfg := &Config{Keyspace: 2, KeySize: 16, TxnKeys: txnKeysSame, Partitions: 16}
	if _, err := newKeyPairs(context.Background(), cfg, fakePartitioned{}); err == nil || !strings.Contains(err.Error(), "no two keys") {
		t.Errorf("keyspace 2, same: err %v", err)
	}
	cfg.TxnKeys = txnKeysCross
	if _, err := newKeyPairs(context.Background(), cfg, fakePartitioned{}); err != nil {
		t.Errorf("keyspace 2, cross: %v", err)
	}
	cfg.Partitions = 0 // ask the cluster: it has 1
	if _, err := newKeyPairs(context.Background(), cfg, fakePartitioned{}); err == nil || !strings.Contains(err.Error(), "at least 2 partitions") {
		t.Errorf("one partition, cross: err %v", err)
	}
}

type fakePartitioned struct{ memConn }

func (fakePartitioned) Partitions(context.Context) (uint32, error) { return 1, nil }
func (fakePartitioned) PartitionOf(key []byte, n uint32) uint64    { return keyspace.PartitionOf(key, n) }

func TestAccountKeys(t *testing.T) {
	b := newBank(&Config{Accounts: 1000, KeySize: 9})
	if string(b.start) != "bank/0000" || string(b.end) != "bank/0999\x00" || b.total != 1000*initialBalance {
		t.Errorf("start %q, end %q, total %d", b.start, b.end, b.total)
	}
}
