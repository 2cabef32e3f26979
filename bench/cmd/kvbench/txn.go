package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/cutkv/cutkv/bench/internal/benchfmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// keyPairs picks the two keys of the txn workload: two different keys of
// the keyspace, in different partitions (--txn-keys cross) or in the same
// one (same) when the target has partitions.
type keyPairs struct {
	keyspace int64
	// partitions is 0 for a target without partitions (etcd): any two
	// different keys then do.
	partitions  uint32
	same        bool
	partitionOf func(key []byte, n uint32) uint64
}

// newKeyPairs prepares the txn workload's key choice. For cutkv it learns
// the partition count (from --partitions, else from the cluster) and
// checks that the keyspace holds a pair of the kind asked for.
func newKeyPairs(ctx context.Context, cfg *Config, conn Conn) (*keyPairs, error) {
	kp := &keyPairs{keyspace: cfg.Keyspace, same: cfg.TxnKeys == txnKeysSame}
	pc, ok := conn.(partitioned)
	if !ok {
		return kp, nil
	}
	kp.partitionOf = pc.PartitionOf
	if cfg.Partitions > 0 {
		kp.partitions = uint32(cfg.Partitions)
	} else {
		cctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		n, err := pc.Partitions(cctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("asking the cluster for its partition count (or give --partitions): %w", err)
		}
		kp.partitions = n
	}
	if !kp.same && kp.partitions < 2 {
		return nil, fmt.Errorf("--txn-keys cross needs at least 2 partitions; the cluster has %d", kp.partitions)
	}
	// Look for one pair of the right kind among the first keys (all of
	// them in a small keyspace), so that pick cannot search in vain.
	seen := make(map[uint64]bool)
	key := make([]byte, cfg.KeySize)
	for i := range min(cfg.Keyspace, 1<<16) {
		benchfmt.PutKey(key, i)
		p := kp.partitionOf(key, kp.partitions)
		if kp.same && seen[p] || !kp.same && len(seen) > 0 && !seen[p] {
			return kp, nil
		}
		seen[p] = true
	}
	where := "different partitions"
	if kp.same {
		where = "the same partition"
	}
	return nil, fmt.Errorf("no two keys of --keyspace %d are in %s (%d partitions)", cfg.Keyspace, where, kp.partitions)
}

// pick writes two different random keys of the right kind into k1 and k2.
func (kp *keyPairs) pick(rng *rand.Rand, k1, k2 []byte) error {
	// A key may have no partner (alone in its partition in a tiny
	// keyspace): then start over from another first key.
	for range 16 {
		i := rng.Int64N(kp.keyspace)
		benchfmt.PutKey(k1, i)
		var p1 uint64
		if kp.partitions > 0 {
			p1 = kp.partitionOf(k1, kp.partitions)
		}
		for range 64 * (int(kp.partitions) + 1) {
			j := rng.Int64N(kp.keyspace)
			if j == i {
				continue
			}
			benchfmt.PutKey(k2, j)
			if kp.partitions == 0 || (kp.partitionOf(k2, kp.partitions) == p1) == kp.same {
				return nil
			}
		}
	}
	return errors.New("found no pair of keys for the transaction (keyspace too small?)")
}

// bank is the state of the bank workload: accounts accountKey(0) to
// accountKey(accounts-1), holding balances in decimal, initialised to
// initialBalance each.
type bank struct {
	accounts int64
	// total is what the balances add up to, always.
	total int64
	// keySize is the length of every account key.
	keySize int
	// start and end bound the audit's read: every account key, and no
	// other key of that length.
	start, end []byte
	// init is the initial balance as a value.
	init []byte
}

func newBank(cfg *Config) *bank {
	b := &bank{
		accounts: cfg.Accounts,
		total:    cfg.Accounts * initialBalance,
		keySize:  cfg.KeySize,
		start:    make([]byte, cfg.KeySize),
		end:      make([]byte, cfg.KeySize, cfg.KeySize+1),
		init:     strconv.AppendInt(nil, initialBalance, 10),
	}
	accountKey(b.start, 0)
	accountKey(b.end, cfg.Accounts-1)
	b.end = append(b.end, 0) // the smallest key after the last account
	return b
}

// accountKey writes account i's key into buf: accountPrefix, then i in
// zero-padded decimal, filling all of buf.
func accountKey(buf []byte, i int64) {
	copy(buf, accountPrefix)
	benchfmt.PutKey(buf[len(accountPrefix):], i)
}

// transfer moves a random amount, at most the whole balance, from one
// random account to another: it reads both, then writes both new balances
// in one transaction that compares both versions. A failed compare (an
// account changed in between) is an abort: nothing was written.
func (b *bank) transfer(ctx context.Context, w *worker) (outcome, error) {
	i := w.rng.Int64N(b.accounts)
	j := w.rng.Int64N(b.accounts - 1)
	if j >= i {
		j++
	}
	accountKey(w.key, i)
	accountKey(w.key2, j)
	from, fromVer, err := b.balance(ctx, w.conn, w.key)
	if err != nil {
		return outcomeOK, err
	}
	to, toVer, err := b.balance(ctx, w.conn, w.key2)
	if err != nil {
		return outcomeOK, err
	}
	amount := w.rng.Int64N(from + 1)
	w.bal1 = strconv.AppendInt(w.bal1[:0], from-amount, 10)
	w.bal2 = strconv.AppendInt(w.bal2[:0], to+amount, 10)
	swapped, err := w.conn.SwapPair(ctx, w.key, fromVer, w.bal1, w.key2, toVer, w.bal2)
	switch {
	case err != nil:
		return outcomeOK, err
	case !swapped:
		return outcomeAborted, nil
	}
	return outcomeOK, nil
}

// balance reads one account.
func (b *bank) balance(ctx context.Context, conn Conn, key []byte) (balance, version int64, err error) {
	v, ver, err := conn.GetVersion(ctx, key)
	if err != nil {
		return 0, 0, err
	}
	if ver == 0 {
		return 0, 0, fmt.Errorf("account %q does not exist", key)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 {
		return 0, 0, fmt.Errorf("account %q holds %q, not a balance", key, v)
	}
	return n, ver, nil
}

// audit reads every account in one transaction and checks the total. A
// violation (wrong total, missing account, a value that is not a balance)
// is returned as text; err is a failed read, which says nothing about the
// total.
func (b *bank) audit(ctx context.Context, conn Conn) (violation string, err error) {
	kvs, more, err := conn.ReadRange(ctx, b.start, b.end)
	if err != nil {
		return "", err
	}
	if more {
		return "", fmt.Errorf("the account range %q to %q holds more keys than one read returns", b.start, b.end)
	}
	var n, sum int64
	for _, kv := range kvs {
		// Keys of another length can sort inside the range (written by
		// a run with another --key-size); they are not accounts.
		if len(kv.Key) != b.keySize || !bytes.HasPrefix(kv.Key, []byte(accountPrefix)) {
			continue
		}
		v, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil || v < 0 {
			return fmt.Sprintf("account %q holds %q, not a balance", kv.Key, kv.Value), nil
		}
		n++
		sum += v
	}
	if n != b.accounts || sum != b.total {
		return fmt.Sprintf("read %d accounts holding %d in total, want %d accounts holding %d", n, sum, b.accounts, b.total), nil
	}
	return "", nil
}

// auditor reads all accounts every Config.AuditInterval while the
// measured phase runs, and stops the run at the first wrong total.
type auditor struct {
	r    *runner
	conn Conn
	// stats: hist holds the latencies of completed audits, errs the
	// failed reads, aborts the audits that kept conflicting.
	stats *opStats

	stop chan struct{}
	wg   sync.WaitGroup
}

func (r *runner) startAuditor(conn Conn) *auditor {
	a := &auditor{r: r, conn: conn, stats: newOpStats(), stop: make(chan struct{})}
	a.wg.Go(func() {
		t := time.NewTicker(r.cfg.AuditInterval)
		defer t.Stop()
		for {
			select {
			case <-a.stop:
				return
			case <-r.ctx.Done():
				return
			case <-t.C:
			}
			_ = a.once() // recorded in stats; a violation stops the run
		}
	})
	return a
}

// halt stops the auditor and waits for an audit in flight.
func (a *auditor) halt() {
	close(a.stop)
	a.wg.Wait()
}

// once runs one audit and records it. It returns nil when the audit
// completed and found the total intact, else why not.
func (a *auditor) once() error {
	r := a.r
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.OpTimeout)
	start := time.Now()
	violation, err := r.bank.audit(ctx, a.conn)
	took := time.Since(start)
	cancel()
	s := a.stats
	switch {
	case violation != "":
		err = fmt.Errorf("bank audit: %s", violation)
		r.fail(err)
		return err
	case err != nil && r.ctx.Err() != nil:
		return err // interrupted
	case err != nil:
		k := r.drv.Classify(err)
		if k == errConflict {
			s.aborts++
			s.conflicts++
			return err
		}
		s.errs[k]++
		if s.sample[k] == "" {
			s.sample[k] = err.Error()
		}
		return err
	}
	s.hist.record(int64(took))
	return nil
}
