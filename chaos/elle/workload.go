package elle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutkv/cutkv/client"
)

// ErrConfig marks a Config that Validate refuses.
var ErrConfig = errors.New("elle: bad config")

// Config shapes a Workload. The zero value of every field means its
// default.
type Config struct {
	// Keys is the number of key slots transactions choose from; default
	// 16, at most 1024. Fewer keys, more conflicts.
	Keys int
	// MaxOpsPerTxn bounds the micro-ops of one transaction (each has 1 to
	// MaxOpsPerTxn, drawn uniformly); default 4, at most
	// client.DefaultMaxTxnOps.
	MaxOpsPerTxn int
	// Clients is the number of goroutines running transactions, each its
	// own process; default 4.
	Clients int
	// Seed makes the clients' choices (keys, micro-ops) reproducible:
	// client i draws from a generator seeded with Seed and i. Timing, and
	// so the history, is not reproducible.
	Seed uint64
	// KeyPrefix starts every key; default "elle". Give each run its own
	// against a cluster that keeps its data: the checker assumes every
	// key starts absent.
	KeyPrefix string
	// MaxAppendsPerKey bounds a list: a transaction whose appends would
	// take a non-empty key past it retires the key first (the slot moves
	// to its next generation, a new key) so lists, and values, stay short.
	// Default 32.
	MaxAppendsPerKey int
	// MaxAttempts bounds the commits one transaction makes while its
	// compares fail or the cluster answers Aborted or Unavailable (every
	// attempt is recorded as a fail op); default 8.
	MaxAttempts int
	// TxnTimeout bounds each Txn (the read and the commit); default 5s.
	// In-flight transactions are not cut when Run's ctx ends: Run returns
	// up to about 2×TxnTimeout later.
	TxnTimeout time.Duration
}

// Validate fills in the defaults and refuses negative or oversized values
// (errors wrap ErrConfig).
func (c *Config) Validate() error {
	fields := []struct {
		name     string
		v        *int
		def, max int
	}{
		{"Keys", &c.Keys, 16, 1024},
		{"MaxOpsPerTxn", &c.MaxOpsPerTxn, 4, client.DefaultMaxTxnOps},
		{"Clients", &c.Clients, 4, 1 << 12},
		{"MaxAppendsPerKey", &c.MaxAppendsPerKey, 32, 1 << 16},
		{"MaxAttempts", &c.MaxAttempts, 8, 1 << 10},
	}
	for _, f := range fields {
		switch {
		case *f.v < 0:
			return fmt.Errorf("%w: %s = %d is negative", ErrConfig, f.name, *f.v)
		case *f.v == 0:
			*f.v = f.def
		case *f.v > f.max:
			return fmt.Errorf("%w: %s = %d, more than %d", ErrConfig, f.name, *f.v, f.max)
		}
	}
	if c.TxnTimeout < 0 {
		return fmt.Errorf("%w: TxnTimeout = %v is negative", ErrConfig, c.TxnTimeout)
	}
	if c.TxnTimeout == 0 {
		c.TxnTimeout = 5 * time.Second
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = "elle"
	}
	if len(c.KeyPrefix) > 1024 {
		return fmt.Errorf("%w: KeyPrefix is %d bytes, more than 1024", ErrConfig, len(c.KeyPrefix))
	}
	return nil
}

// Stats counts what a Workload's clients did.
type Stats struct {
	// Committed counts ok ops (read-only ones included); ReadOnly those
	// with no append.
	Committed, ReadOnly int64
	// CompareFailed counts commits whose version compares failed (a
	// concurrent write); Conflicts commits answered ErrConflict;
	// Unavailable commits answered ErrUnavailable; Refused other definite
	// errors. Each is a fail op.
	CompareFailed, Conflicts, Unavailable, Refused int64
	// Unknown counts info ops (outcome unknown).
	Unknown int64
	// ReadErrors counts failed reads (nothing recorded).
	ReadErrors int64
	// GaveUp counts transactions abandoned after MaxAttempts.
	GaveUp int64
	// Retired counts key generations retired.
	Retired int64
	// Corrupt counts values that did not decode as lists.
	Corrupt int64
}

// Workload runs list-append transactions against a cluster and records
// their history (doc.go, "The workload"). Its methods are safe for
// concurrent use; Run may be called once.
type Workload struct {
	c     *client.Client
	cfg   Config
	err   error // from cfg.Validate
	start time.Time

	started     atomic.Bool
	closed      atomic.Bool    // the client said ErrClosed: stop
	gens        []atomic.Int64 // slot → current generation
	nextValue   atomic.Int64   // last element handed out; elements start at 1
	nextProcess atomic.Int64   // last process id handed out

	mu  sync.Mutex
	ops []Op // REQUIRES mu

	stats struct {
		committed, readOnly, compareFailed, conflicts, unavailable, refused,
		unknown, readErrors, gaveUp, retired, corrupt atomic.Int64
	}
}

// New returns a workload over c, which must be connected; Run starts it.
// A cfg that Validate refuses makes Run return that error.
func New(c *client.Client, cfg Config) *Workload {
	w := &Workload{c: c, cfg: cfg, start: time.Now()}
	w.err = w.cfg.Validate()
	if w.err == nil {
		w.gens = make([]atomic.Int64, w.cfg.Keys)
		w.nextProcess.Store(int64(w.cfg.Clients) - 1)
	}
	if w.err == nil && c == nil {
		w.err = fmt.Errorf("%w: no client", ErrConfig)
	}
	return w
}

// Run runs Config.Clients clients until ctx ends, then reads every current
// key once more (a final read, recorded like any read-only transaction)
// and returns. A transaction in flight when ctx ends runs to its outcome
// (bounded by TxnTimeout). It returns an error only for a bad Config or a
// second call.
func (w *Workload) Run(ctx context.Context) error {
	if w.err != nil {
		return w.err
	}
	if w.started.Swap(true) {
		return errors.New("elle: Run called twice")
	}
	var wg sync.WaitGroup
	for i := range w.cfg.Clients {
		wg.Go(func() { w.runClient(ctx, i) })
	}
	wg.Wait()
	w.finalRead(context.WithoutCancel(ctx))
	return nil
}

// History returns a copy of the history so far, ops in completion order.
func (w *Workload) History() *History {
	w.mu.Lock()
	h := &History{Start: w.start, Ops: slices.Clone(w.ops)}
	w.mu.Unlock()
	return h.Clone()
}

// Stats returns the counters so far.
func (w *Workload) Stats() Stats {
	s := &w.stats
	return Stats{
		Committed: s.committed.Load(), ReadOnly: s.readOnly.Load(),
		CompareFailed: s.compareFailed.Load(), Conflicts: s.conflicts.Load(),
		Unavailable: s.unavailable.Load(), Refused: s.refused.Load(),
		Unknown: s.unknown.Load(), ReadErrors: s.readErrors.Load(),
		GaveUp: s.gaveUp.Load(), Retired: s.retired.Load(), Corrupt: s.corrupt.Load(),
	}
}

// plannedMop is a micro-op before its key and value are chosen: a slot,
// whose current generation names the key at each attempt.
type plannedMop struct {
	slot   int
	append bool
}

func (w *Workload) runClient(ctx context.Context, id int) {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(id)))
	proc := id
	for ctx.Err() == nil && !w.closed.Load() {
		plan := make([]plannedMop, 1+rng.IntN(w.cfg.MaxOpsPerTxn))
		for i := range plan {
			plan[i] = plannedMop{slot: rng.IntN(w.cfg.Keys), append: rng.IntN(2) == 0}
		}
		if w.runTxn(ctx, proc, plan) == TypeInfo {
			// The op may still be in flight: Jepsen's rule, a new
			// process, so process order never follows an info op.
			proc = int(w.nextProcess.Add(1))
		}
	}
}

func (w *Workload) key(slot int, gen int64) string {
	return w.cfg.KeyPrefix + "-" + strconv.Itoa(slot) + "-" + strconv.FormatInt(gen, 10)
}

func (w *Workload) now() int64 { return int64(time.Since(w.start)) }

// observed is what a read found at a key.
type observed struct {
	list    []int
	version int64
	corrupt bool
}

// runTxn runs one planned transaction to an outcome and returns the type
// of the last op it recorded ("" if none).
func (w *Workload) runTxn(ctx context.Context, proc int, plan []plannedMop) OpType {
	readOnly := !slices.ContainsFunc(plan, func(m plannedMop) bool { return m.append })
	var last OpType
	for attempt := 0; attempt < w.cfg.MaxAttempts; {
		if ctx.Err() != nil {
			return last
		}
		// Name the keys from the slots' current generations.
		gens := map[int]int64{}
		var keys []string // touched, sorted
		keyOf := make([]string, len(plan))
		appended := map[string]int{} // key → appends planned
		for i, m := range plan {
			g, ok := gens[m.slot]
			if !ok {
				g = w.gens[m.slot].Load()
				gens[m.slot] = g
				keys = append(keys, w.key(m.slot, g))
			}
			keyOf[i] = w.key(m.slot, g)
			if m.append {
				appended[keyOf[i]]++
			}
		}
		slices.Sort(keys)

		invoke := w.now()
		obs, err := w.read(ctx, keys)
		complete := w.now()
		if err != nil {
			w.stats.readErrors.Add(1)
			if errors.Is(err, client.ErrClosed) {
				w.closed.Store(true)
				return last
			}
			if readOnly {
				return last
			}
			attempt++
			continue
		}
		if readOnly {
			for _, k := range keys {
				if obs[k].corrupt {
					w.stats.corrupt.Add(1)
				}
			}
			w.recordRead(proc, invoke, complete, keyOf, obs)
			return TypeOK
		}
		// A corrupt value is never written back; a list at its length
		// bound retires its slot. Either way the read is worth keeping:
		// it was a committed read-only transaction.
		corrupt, full := false, false
		for _, k := range keys {
			corrupt = corrupt || obs[k].corrupt
			full = full || w.full(len(obs[k].list), appended[k])
		}
		if corrupt || full {
			w.recordRead(proc, invoke, complete, keys, obs)
			last = TypeOK
			if corrupt {
				w.stats.corrupt.Add(1)
				return last
			}
			for i, m := range plan {
				if w.full(len(obs[keyOf[i]].list), appended[keyOf[i]]) && w.gens[m.slot].CompareAndSwap(gens[m.slot], gens[m.slot]+1) {
					w.stats.retired.Add(1)
				}
			}
			continue
		}
		attempt++
		typ, retry := w.commit(ctx, proc, plan, keyOf, keys, obs)
		last = typ
		if !retry {
			return last
		}
	}
	w.stats.gaveUp.Add(1)
	return last
}

// full says whether a key holding n elements must retire before taking
// more appends: it would pass MaxAppendsPerKey. An empty key takes any
// transaction, so a key holds at most max(MaxAppendsPerKey,
// MaxOpsPerTxn) elements.
func (w *Workload) full(n, more int) bool {
	return more > 0 && n > 0 && n+more > w.cfg.MaxAppendsPerKey
}

// read reads keys in one read-only Txn.
func (w *Workload) read(ctx context.Context, keys []string) (map[string]observed, error) {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.TxnTimeout)
	defer cancel()
	ops := make([]client.Op, len(keys))
	for i, k := range keys {
		ops[i] = client.OpGet([]byte(k))
	}
	resp, err := w.c.Txn(tctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded || len(resp.Responses) != len(keys) {
		return nil, fmt.Errorf("elle: a read of %d keys answered succeeded=%v with %d responses", len(keys), resp.Succeeded, len(resp.Responses))
	}
	out := make(map[string]observed, len(keys))
	for i, k := range keys {
		out[k] = observedOf(resp.Responses[i])
	}
	return out, nil
}

func observedOf(r client.OpResponse) observed {
	if len(r.KVs) == 0 {
		return observed{list: []int{}}
	}
	list, ok := decodeList(r.KVs[0].Value)
	return observed{list: list, version: r.KVs[0].Version, corrupt: !ok}
}

// commit sends the transaction planned on what obs shows: compares pin
// every touched key's version, puts write the appended keys' new lists,
// gets read the other keys. It records the outcome and says whether to
// try again.
func (w *Workload) commit(ctx context.Context, proc int, plan []plannedMop, keyOf, keys []string, obs map[string]observed) (OpType, bool) {
	state := make(map[string][]int, len(keys))
	for _, k := range keys {
		state[k] = slices.Clone(obs[k].list)
	}
	mops := make([]Mop, len(plan))
	written := map[string]bool{}
	for i, m := range plan {
		k := keyOf[i]
		if m.append {
			v := int(w.nextValue.Add(1))
			state[k] = append(state[k], v)
			written[k] = true
			mops[i] = Append(k, v)
		} else {
			mops[i] = Read(k, slices.Clone(state[k]))
		}
	}
	var (
		cmps  []client.Cmp
		puts  []client.Op
		gets  []client.Op
		getAt = map[string]int{} // read-only key → response index
	)
	for _, k := range keys {
		cmps = append(cmps, client.Compare(client.Version([]byte(k)), "=", obs[k].version))
		if written[k] {
			puts = append(puts, client.OpPut([]byte(k), encodeList(state[k])))
		}
	}
	for _, k := range keys {
		if !written[k] {
			getAt[k] = len(puts) + len(gets)
			gets = append(gets, client.OpGet([]byte(k)))
		}
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.TxnTimeout)
	defer cancel()
	invoke := w.now()
	resp, err := w.c.Txn(tctx).If(cmps...).Then(append(puts, gets...)...).Commit()
	complete := w.now()
	op := Op{Process: proc, Invoke: invoke, Complete: complete, Mops: mops}
	unknownReads := func() {
		for i := range op.Mops {
			if op.Mops[i].Kind == MopRead {
				op.Mops[i].Read = nil
			}
		}
	}
	switch {
	case err == nil && resp.Succeeded:
		// The compares held, so the gets saw what the read saw; record
		// what the commit itself returned.
		for i, m := range op.Mops {
			if j, ok := getAt[m.Key]; ok && m.Kind == MopRead && j < len(resp.Responses) {
				o := observedOf(resp.Responses[j])
				op.Mops[i].Read = o.list
				if o.corrupt {
					w.stats.corrupt.Add(1)
				}
			}
		}
		op.Type = TypeOK
		w.stats.committed.Add(1)
		w.record(op)
		return TypeOK, false
	case err == nil:
		op.Type, op.Error = TypeFail, "compares failed"
		unknownReads()
		w.stats.compareFailed.Add(1)
		w.record(op)
		return TypeFail, true
	}
	op.Error = err.Error()
	unknownReads()
	var oe *client.OpError
	switch {
	case errors.Is(err, client.ErrOutcomeUnknown), !errors.As(err, &oe):
		op.Type = TypeInfo
		w.stats.unknown.Add(1)
		w.record(op)
		return TypeInfo, false
	case errors.Is(err, client.ErrConflict):
		w.stats.conflicts.Add(1)
	case errors.Is(err, client.ErrUnavailable):
		w.stats.unavailable.Add(1)
	default:
		// A definite refusal (client doc.go: anything but
		// ErrOutcomeUnknown was not applied); trying again cannot help.
		if errors.Is(err, client.ErrClosed) {
			w.closed.Store(true)
		}
		op.Type = TypeFail
		w.stats.refused.Add(1)
		w.record(op)
		return TypeFail, false
	}
	op.Type = TypeFail
	w.record(op)
	return TypeFail, true
}

// finalRead reads every slot's current key, in Txns of at most 64 keys,
// after the clients stopped.
func (w *Workload) finalRead(ctx context.Context) {
	var keys []string
	for slot := range w.gens {
		keys = append(keys, w.key(slot, w.gens[slot].Load()))
	}
	slices.Sort(keys)
	proc := int(w.nextProcess.Add(1))
	for chunk := range slices.Chunk(keys, 64) {
		invoke := w.now()
		obs, err := w.read(ctx, chunk)
		complete := w.now()
		if err != nil {
			w.stats.readErrors.Add(1)
			continue
		}
		w.recordRead(proc, invoke, complete, chunk, obs)
	}
}

// recordRead records a committed read-only transaction: a read of each
// of keys (in order, repeats kept), as obs shows it.
func (w *Workload) recordRead(proc int, invoke, complete int64, keys []string, obs map[string]observed) {
	mops := make([]Mop, len(keys))
	for i, k := range keys {
		mops[i] = Read(k, obs[k].list)
	}
	w.record(Op{Process: proc, Type: TypeOK, Invoke: invoke, Complete: complete, Mops: mops})
	w.stats.committed.Add(1)
	w.stats.readOnly.Add(1)
}

// record appends op to the history, numbering it.
func (w *Workload) record(op Op) {
	w.mu.Lock()
	defer w.mu.Unlock()
	op.Index = len(w.ops)
	w.ops = append(w.ops, op)
}

// encodeList encodes a list as comma-separated decimals: "1,5,9".
func encodeList(list []int) []byte {
	var b []byte
	for i, v := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return b
}

// corruptElement stands for what does not decode: the workload never
// appends it (elements start at 1), so the checker reports a garbage read.
const corruptElement = 0

// decodeList decodes what encodeList encodes. The value of an existing key
// is never empty; an empty value, or a piece that is not a positive
// decimal, decodes to corruptElement and ok false.
func decodeList(b []byte) (list []int, ok bool) {
	if len(b) == 0 {
		return []int{corruptElement}, false
	}
	ok = true
	for s := range strings.SplitSeq(string(b), ",") {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 || strconv.Itoa(v) != s {
			v, ok = corruptElement, false
		}
		list = append(list, v)
	}
	return list, ok
}
