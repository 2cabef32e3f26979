package verify

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/internal/command"
	"github.com/cutkv/cutkv/meta"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// The kinds of violation (doc.go, "What is checked"). Match with errors.Is.
var (
	// ErrTorn: a committed transaction is in some of its partitions'
	// states at a cut and not in others, or a state holds a transaction
	// that was not committed (DESIGN.md, consistent cut rule 5).
	ErrTorn = errors.New("verify: transaction torn by a cut")
	// ErrStamp: a committed transaction is on the wrong side of a cut for
	// its stamp (rule 4).
	ErrStamp = errors.New("verify: transaction on the wrong side of a cut for its stamp")
	// ErrCutFinish: the log contradicts the cut's position or its
	// CutFinish entry (rules 2 and 6).
	ErrCutFinish = errors.New("verify: cut bookkeeping contradicts the log")
	// ErrReplicas: two replicas give different states at a cut.
	ErrReplicas = errors.New("verify: replicas disagree at a cut")
	// ErrInvariant: the caller's invariant fails on a cut's state.
	ErrInvariant = errors.New("verify: invariant broken at a cut")
	// ErrLog: the logs cannot give a cut's state.
	ErrLog = errors.New("verify: cannot rebuild a cut from the logs")
	// ErrNotWhole: no replica's committed log reaches the entry that
	// closed the cut in a partition yet — copies of live logs taken just
	// after the cut completed, before the replicas persisted that far.
	// Not a violation of the rules; ask again with newer copies. (A
	// replica whose committed log holds another entry there is ErrLog.)
	ErrNotWhole = errors.New("verify: the logs do not reach the cut yet")
	// errBaseAfterPos: a replica's log starts after the cut's position
	// (it was truncated behind a later materialization): that replica
	// cannot give the cut's state, the others may.
	errBaseAfterPos = fmt.Errorf("%w: the replica's log starts after the cut's position", ErrLog)
)

// Invariant checks the whole cluster's committed key-values at cut
// version (the union of every partition's state). It must not keep or
// change state.
type Invariant func(version uint64, state map[string][]byte) error

// Options shape a verification.
type Options struct {
	// Invariant, if set, runs on every completed cut's state.
	Invariant Invariant
	// Cuts, if set, are the cuts to verify (e.g. a snapshot's); otherwise
	// every cut group 0's log records, read from its most advanced replica.
	Cuts []*kvpb.CutInfo
	// MaxViolations bounds the violations kept per cut (the rest are
	// counted); 0 means 20.
	MaxViolations int
	// Parallel bounds the partitions of a cut rebuilt at once; 0 means
	// GOMAXPROCS. Replica.Start may then be called concurrently.
	Parallel int
	// Known are transaction decisions seen earlier (Report.Decisions of
	// an earlier verification of the same cluster), by txn id: a record
	// forgotten (TxnForget) and then truncated out of the log is still
	// known by them, and they win over what these logs show, since the
	// first decision recorded wins: after a TxnForget a late recovery may
	// decide a transaction anew (an abort that reaches no participant),
	// and logs truncated since the original decision show only that.
	// A STAGING record (not a decision) in Known is ignored.
	Known map[string]*internalpb.TxnDecideOp
	// OneReplica rebuilds each partition from its reference replica only
	// (the most advanced one that can give the state) and compares no
	// other replica with it: a third of the work with three replicas,
	// for a verifier that must keep up with a live cluster's cuts
	// (package chaos). Every other check is made.
	OneReplica bool
}

// Violation is one thing wrong with one cut. Kind is one of the Err*
// sentinels (errors.Is works on a Violation).
type Violation struct {
	Kind      error
	Version   uint64
	Partition uint64 // 0: the cut as a whole
	Txn       string // hex txn id; "": none
	Detail    string
}

func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: cut %d", v.Kind, v.Version)
	if v.Partition != 0 {
		fmt.Fprintf(&b, " partition %d", v.Partition)
	}
	if v.Txn != "" {
		fmt.Fprintf(&b, " txn %s", v.Txn)
	}
	b.WriteString(": ")
	b.WriteString(v.Detail)
	return b.String()
}

// Unwrap returns Kind.
func (v *Violation) Unwrap() error { return v.Kind }

// Report is what a verification found.
type Report struct {
	// Cuts are the completed cuts examined, in version order.
	Cuts []*CutReport
	// Failed and Unfinished list the cuts recorded Failed and the ones
	// never recorded (still running when the logs end): never used.
	Failed, Unfinished []uint64
	// Decisions are every transaction decision the logs showed (decided
	// in an entry, or in a base until a TxnForget dropped it), by txn id,
	// with Options.Known: pass them as Known to a later verification of
	// logs that have been truncated since. A STAGING record is undecided
	// and never among them.
	Decisions map[string]*internalpb.TxnDecideOp
	// Skipped counts replicas passed over for a cut because their log
	// starts after its position (another replica gave the state).
	Skipped int
}

// CutReport is one completed cut.
type CutReport struct {
	Version    uint64
	Keys       int // in the whole state
	Partitions []PartitionReport
	// TxnsChecked counts the committed 2PC transactions checked for
	// atomicity; Included how many of them the cut holds.
	TxnsChecked, Included int
	// Violations found, at most Options.MaxViolations; Dropped counts the
	// ones left out.
	Violations []*Violation
	Dropped    int
	// UnknownRecords counts transactions the cut's states include whose
	// decision is unknown: every log of their record partition was
	// truncated after the record was forgotten (pass earlier
	// verifications' Report.Decisions as Options.Known to avoid it).
	// Their atomicity is not checked.
	UnknownRecords int
	skipped        int // replicas passed over (Report.Skipped)
}

// PartitionReport is one partition at one cut.
type PartitionReport struct {
	Partition, Pos, FinishIndex uint64
	Keys                        int
	Before                      int // transactions of the before set
	Included                    int // 2PC transactions in the state
	// Replicas names the replicas rebuilt, the reference one first.
	Replicas []string
}

// OK says whether the cut verified.
func (c *CutReport) OK() bool { return len(c.Violations) == 0 && c.Dropped == 0 }

// NotWhole says whether every violation of the cut is ErrNotWhole: the
// logs read do not reach the cut yet, and newer copies may verify it.
func (c *CutReport) NotWhole() bool {
	if len(c.Violations) == 0 || c.Dropped > 0 {
		return false
	}
	for _, v := range c.Violations {
		if v.Kind != ErrNotWhole {
			return false
		}
	}
	return true
}

// Verified returns the versions of the cuts that verified.
func (r *Report) Verified() []uint64 {
	var out []uint64
	for _, c := range r.Cuts {
		if c.OK() {
			out = append(out, c.Version)
		}
	}
	return out
}

// Err joins the violations of every cut (nil: every cut verified).
func (r *Report) Err() error {
	var errs []error
	for _, c := range r.Cuts {
		for _, v := range c.Violations {
			errs = append(errs, v)
		}
		if c.Dropped > 0 {
			errs = append(errs, fmt.Errorf("cut %d: %d more violations", c.Version, c.Dropped))
		}
	}
	return errors.Join(errs...)
}

// String summarizes the report, one line per cut.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d completed cuts examined, %d verified; failed %v; unfinished %v",
		len(r.Cuts), len(r.Verified()), r.Failed, r.Unfinished)
	for _, c := range r.Cuts {
		status := "ok"
		if !c.OK() {
			status = fmt.Sprintf("%d violations", len(c.Violations)+c.Dropped)
		}
		fmt.Fprintf(&b, "\ncut %d: %s; %d keys; %d committed 2PC txns checked, %d included;", c.Version, status, c.Keys, c.TxnsChecked, c.Included)
		for _, p := range c.Partitions {
			fmt.Fprintf(&b, " p%d[pos %d fin %d keys %d before %d incl %d replicas %d]",
				p.Partition, p.Pos, p.FinishIndex, p.Keys, p.Before, p.Included, len(p.Replicas))
		}
	}
	return b.String()
}

// Verify rebuilds the state at every completed cut from src's logs and
// checks it (doc.go). The error is the Report's Err, or a failure to read
// src (then the Report is nil).
func Verify(src Source, opts Options) (*Report, error) {
	if opts.MaxViolations <= 0 {
		opts.MaxViolations = 20
	}
	if opts.Parallel <= 0 {
		opts.Parallel = runtime.GOMAXPROCS(0)
	}
	reps, err := src.Replicas()
	if err != nil {
		return nil, err
	}
	logs := map[uint64][]*replicaLog{}
	var group0 []*Replica
	for _, r := range reps {
		if r.Group == 0 {
			group0 = append(group0, r)
			continue
		}
		l, err := decode(r)
		if err != nil {
			return nil, err
		}
		logs[r.Group] = append(logs[r.Group], l)
	}
	for _, ls := range logs {
		sort.SliceStable(ls, func(i, j int) bool { return ls[i].r.Commit > ls[j].r.Commit })
	}
	cuts := append([]*kvpb.CutInfo(nil), opts.Cuts...) // sorted below: the caller's stays as it is
	if opts.Cuts == nil {
		if cuts, err = recordedCuts(group0); err != nil {
			return nil, err
		}
	}
	v := &verifier{opts: opts, logs: logs, hist: map[uint64]*history{}}
	defer v.close()
	for _, ls := range logs {
		h, err := replay(ls[0])
		if err != nil {
			return nil, err
		}
		v.hist[ls[0].r.Group] = h
	}
	v.collectDecisions()

	sort.Slice(cuts, func(i, j int) bool { return cuts[i].GetVersion() < cuts[j].GetVersion() })
	rep := &Report{Decisions: map[string]*internalpb.TxnDecideOp{}}
	for _, h := range v.hist {
		for id, d := range h.first {
			rep.Decisions[id] = d
		}
	}
	for id, d := range opts.Known { // the first decision seen wins
		if command.IsDecision(d) {
			rep.Decisions[id] = d
		}
	}
	for _, c := range cuts {
		switch c.GetState() {
		case kvpb.CutState_CUT_STATE_COMPLETED:
			cr := v.verifyCut(c)
			rep.Cuts = append(rep.Cuts, cr)
			rep.Skipped += cr.skipped
		case kvpb.CutState_CUT_STATE_FAILED:
			rep.Failed = append(rep.Failed, c.GetVersion())
		default:
			rep.Unfinished = append(rep.Unfinished, c.GetVersion())
		}
	}
	// A decision the cuts found on a replica truncated less far than the
	// reference is kept too: the next call's Known may need it once that
	// replica is truncated as well.
	for _, id := range v.ordered {
		if _, ok := rep.Decisions[id]; !ok {
			rep.Decisions[id] = v.committed[id].op
		}
	}
	return rep, rep.Err()
}

// recordedCuts replays group 0's most advanced replica (its committed
// entries) through the metadata state machine and returns the cuts it
// remembers: the first record of each cut wins, as in group 0 itself.
func recordedCuts(group0 []*Replica) ([]*kvpb.CutInfo, error) {
	if len(group0) == 0 {
		return nil, fmt.Errorf("%w: no replica of group 0 to read the cuts from", ErrLog)
	}
	best := group0[0]
	for _, r := range group0[1:] {
		if r.Commit > best.Commit {
			best = r
		}
	}
	s := meta.New()
	if best.BaseIndex != 0 {
		if best.StartMeta == nil {
			return nil, fmt.Errorf("%w: group 0 replica %s has a base but no StartMeta; pass Options.Cuts", ErrLog, best.Node)
		}
		var err error
		if s, err = best.StartMeta(); err != nil {
			return nil, fmt.Errorf("%w: group 0 replica %s: base: %v", ErrLog, best.Node, err)
		}
	}
	l, err := decode(best)
	if err != nil {
		return nil, err
	}
	for _, e := range l.ents {
		if best.Commit != 0 && e.index > best.Commit {
			break
		}
		if e.cmd == nil {
			s.SetApplied(e.index)
			continue
		}
		if _, err := s.ApplyCommand(e.index, e.cmd); err != nil {
			return nil, fmt.Errorf("%w: group 0 on %s: entry %d: %v", ErrLog, best.Node, e.index, err)
		}
	}
	return s.Cuts(0), nil
}

// decision is a transaction's record and the partition holding it.
type decision struct {
	op        *internalpb.TxnDecideOp
	partition uint64
}

type verifier struct {
	opts Options
	logs map[uint64][]*replicaLog // by partition, highest commit first
	hist map[uint64]*history      // by partition: its most advanced replica's
	// others are the histories of the other replicas, replayed when the
	// most advanced one's log was truncated past what is looked for.
	mu     sync.Mutex
	others map[*replicaLog]*history // REQUIRES: mu held
	// committed are the commit decisions of 2PC transactions in the
	// records, by txn id, and ordered lists them in a stable order.
	committed map[string]decision
	ordered   []string
}

func (v *verifier) collectDecisions() {
	v.committed = map[string]decision{}
	parts := make([]uint64, 0, len(v.hist))
	for p := range v.hist {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		h := v.hist[p]
		for _, id := range h.decided {
			d, ok := h.record(id)
			if !ok || !d.GetCommit() {
				continue
			}
			if _, dup := v.committed[id]; !dup {
				v.committed[id] = decision{op: d, partition: p}
				v.ordered = append(v.ordered, id)
			}
		}
	}
}

// truncated says whether every replica's log of partition p starts at a
// base (what is before is only in the base's state, where a forgotten
// record is gone).
func (v *verifier) truncated(p uint64) bool {
	if len(v.logs[p]) == 0 {
		return false
	}
	for _, l := range v.logs[p] {
		if l.r.BaseIndex == 0 {
			return false
		}
	}
	return true
}

// describeLogs says which entries of partition p's replicas were read.
func (v *verifier) describeLogs(p uint64) string {
	var parts []string
	for _, l := range v.logs[p] {
		parts = append(parts, fmt.Sprintf("%s (%d..%d, commit %d)", l.r.Node, l.r.BaseIndex+1, l.last(), l.r.Commit))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// close releases the replayed histories' states.
func (v *verifier) close() {
	for _, h := range v.hist {
		h.close()
	}
	for _, h := range v.others {
		h.close()
	}
}

// histOf returns the history of replica l (replayed once).
func (v *verifier) histOf(l *replicaLog) (*history, error) {
	if v.logs[l.r.Group][0] == l {
		return v.hist[l.r.Group], nil // replayed by Verify
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if h := v.others[l]; h != nil {
		return h, nil
	}
	h, err := replay(l)
	if err != nil {
		return nil, err
	}
	if v.others == nil {
		v.others = map[*replicaLog]*history{}
	}
	v.others[l] = h
	return h, nil
}

// decisionOf finds the record of a transaction the verifier did not see
// committed in an entry (not in v.committed: its record may be inside a
// base, or forgotten).
func (v *verifier) decisionOf(id string, record uint64) (decision, bool) {
	if d, ok := v.opts.Known[id]; ok && command.IsDecision(d) {
		return decision{op: d, partition: record}, true
	}
	// The most advanced replica first; a replica truncated less far may
	// still show a record forgotten since.
	for _, l := range v.logs[record] {
		h, err := v.histOf(l)
		if err != nil {
			continue
		}
		if d, ok := h.record(id); ok {
			return decision{op: d, partition: record}, true
		}
	}
	return decision{}, false
}

// cutCheck collects one cut's violations. Safe for concurrent use.
type cutCheck struct {
	mu  sync.Mutex
	rep *CutReport // REQUIRES: mu held for Violations and Dropped
	max int
}

func (c *cutCheck) add(kind error, partition uint64, txn string, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.rep.Violations) >= c.max {
		c.rep.Dropped++
		return
	}
	c.rep.Violations = append(c.rep.Violations, &Violation{
		Kind: kind, Version: c.rep.Version, Partition: partition, Txn: txn, Detail: fmt.Sprintf(format, args...),
	})
}

// unknown counts a transaction whose decision cannot be known.
func (c *cutCheck) unknown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rep.UnknownRecords++
}

// skip counts replicas passed over (errBaseAfterPos).
func (c *cutCheck) skip(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rep.skipped += n
}

func (c *cutCheck) addErr(partition uint64, err error) {
	kind := ErrLog
	for _, k := range []error{ErrCutFinish, ErrReplicas, ErrTorn, ErrStamp, ErrInvariant} {
		if errors.Is(err, k) {
			kind = k
		}
	}
	c.add(kind, partition, "", "%v", err)
}

func (v *verifier) verifyCut(c *kvpb.CutInfo) *CutReport {
	ver := c.GetVersion()
	cc := &cutCheck{rep: &CutReport{Version: ver}, max: v.opts.MaxViolations}
	parts := c.GetPartitions()
	covered := map[uint64]bool{}
	for _, cp := range parts {
		covered[cp.GetPartition()] = true
	}
	for _, p := range sortedKeys(v.logs) {
		if !covered[p] {
			cc.add(ErrLog, p, "", "the cut does not cover partition %d, whose logs are here", p)
		}
	}
	built := make([]*PartitionState, len(parts))
	cc.rep.Partitions = make([]PartitionReport, len(parts))
	sem := make(chan struct{}, v.opts.Parallel)
	var wg sync.WaitGroup
	for i, cp := range parts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			built[i], cc.rep.Partitions[i] = v.verifyPartition(cc, ver, cp)
		}()
	}
	wg.Wait()
	// Violations in partition order, whatever order the rebuilds ended in.
	sort.SliceStable(cc.rep.Violations, func(i, j int) bool {
		return cc.rep.Violations[i].Partition < cc.rep.Violations[j].Partition
	})
	states := map[uint64]*PartitionState{}
	for i, st := range built {
		if st != nil {
			states[parts[i].GetPartition()] = st
			cc.rep.Keys += len(st.KVs)
		}
	}
	if len(states) != len(c.GetPartitions()) || len(states) == 0 {
		if len(c.GetPartitions()) == 0 {
			cc.add(ErrLog, 0, "", "the cut names no partition")
		}
		return cc.rep // a partition could not be rebuilt: said already
	}
	v.checkTxns(cc, ver, states)
	if v.opts.Invariant != nil {
		all := make(map[string][]byte, cc.rep.Keys)
		for _, st := range states {
			for k, val := range st.KVs {
				all[k] = val
			}
		}
		if err := v.opts.Invariant(ver, all); err != nil {
			cc.add(ErrInvariant, 0, "", "%v", err)
		}
	}
	return cc.rep
}

// verifyPartition rebuilds one partition at cut ver from every replica
// that holds CutFinish(ver) at the finish index, and checks the cut's
// bookkeeping against the state machine's. It returns the reference
// replica's state (nil if it could not be rebuilt).
func (v *verifier) verifyPartition(cc *cutCheck, ver uint64, cp *kvpb.CutPartition) (*PartitionState, PartitionReport) {
	p := cp.GetPartition()
	pr := PartitionReport{Partition: p, Pos: cp.GetPos(), FinishIndex: cp.GetFinishIndex()}
	var holders []*replicaLog
	for _, l := range v.logs[p] {
		if _, _, ok := l.closeAt(ver, cp.GetPos(), cp.GetFinishIndex()); ok {
			holders = append(holders, l)
		}
	}
	if len(holders) == 0 {
		kind := ErrNotWhole
		for _, l := range v.logs[p] {
			if l.reaches(cp.GetFinishIndex()) {
				kind = ErrLog // a committed entry there, and not the cut's close
			}
		}
		cc.add(kind, p, "", "no replica (of %d) holds CutFinish(%d) at index %d", len(v.logs[p]), ver, cp.GetFinishIndex())
		return nil, pr
	}
	// A replica truncated past the cut's position cannot give its state;
	// it is skipped unless no replica can.
	var ref *PartitionState
	var refLog *replicaLog
	var skipped []error
	rest := holders
	for len(rest) > 0 && ref == nil {
		l := rest[0]
		rest = rest[1:]
		st, err := l.rebuild(ver, cp)
		switch {
		case errors.Is(err, errBaseAfterPos):
			skipped = append(skipped, err)
		case err != nil:
			cc.addErr(p, err)
			return nil, pr
		default:
			ref, refLog = st, l
		}
	}
	if ref == nil {
		cc.addErr(p, errors.Join(skipped...))
		return nil, pr
	}
	cc.skip(len(skipped))
	pr.Replicas = append(pr.Replicas, ref.Node)
	pr.Keys, pr.Before, pr.Included = len(ref.KVs), len(ref.Before), len(ref.Included)
	v.checkFinish(cc, ver, cp, refLog)
	if v.opts.OneReplica {
		return ref, pr
	}
	for _, l := range rest {
		st, err := l.rebuild(ver, cp)
		if errors.Is(err, errBaseAfterPos) {
			cc.skip(1)
			continue
		}
		if err != nil {
			cc.addErr(p, err)
			continue
		}
		pr.Replicas = append(pr.Replicas, st.Node)
		if d := diffStates(ref, st); d != "" {
			cc.add(ErrReplicas, p, "", "%s (finish term %d) and %s (finish term %d): %s", ref.Node, ref.FinishTerm, st.Node, st.FinishTerm, d)
		}
	}
	return ref, pr
}

// checkFinish compares the CutFinish(ver) entry at the finish index with
// how the state machine of the partition's most advanced replica closed
// the cut (rule 6: the state machine's sets are authoritative).
func (v *verifier) checkFinish(cc *cutCheck, ver uint64, cp *kvpb.CutPartition, holder *replicaLog) {
	p := cp.GetPartition()
	h := v.hist[p]
	if h == nil || h.upto < cp.GetFinishIndex() {
		cc.add(ErrLog, p, "", "no replica's committed log reaches the finish index %d", cp.GetFinishIndex())
		return
	}
	f, ok := h.closed[ver]
	if !ok && h.base >= cp.GetPos() {
		// The most advanced replica's log was truncated past the cut:
		// how the cut closed is in the log of a replica truncated less.
		for _, l := range v.logs[p] {
			hh, err := v.histOf(l)
			if err != nil || hh.upto < cp.GetFinishIndex() || hh.base >= cp.GetPos() {
				continue
			}
			if ff, found := hh.closed[ver]; found {
				h, f, ok = hh, ff, true
				break
			}
		}
	}
	if !ok {
		cc.add(ErrCutFinish, p, "", "replaying %s's log, no CutFinish(%d) closed the cut", h.node, ver)
		return
	}
	if f.Index != cp.GetFinishIndex() {
		// Logs written before cuts closed at their position (rule 6)
		// hold an explicit, empty CutFinish after it where nothing was
		// active, and group 0 recorded that entry: the same close.
		if op, _, ok := holder.closeAt(ver, cp.GetPos(), cp.GetFinishIndex()); ok && f.Index == cp.GetPos() && proto.Equal(op, f.Op) {
			return
		}
		cc.add(ErrCutFinish, p, "", "the cut closed at index %d on %s, group 0 recorded %d", f.Index, h.node, cp.GetFinishIndex())
		return
	}
	op, _, _ := holder.closeAt(ver, cp.GetPos(), cp.GetFinishIndex())
	if !proto.Equal(op, f.Op) {
		cc.add(ErrCutFinish, p, "", "the CutFinish entry carries %v, the state machine computed %v", op, f.Op)
	}
}

// diffStates describes how two states of a partition differ ("": same).
func diffStates(a, b *PartitionState) string {
	var diffs []string
	for k, va := range a.KVs {
		vb, ok := b.KVs[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("key %q only on %s", k, a.Node))
		case !bytes.Equal(va, vb):
			diffs = append(diffs, fmt.Sprintf("key %q = %q on %s, %q on %s", k, va, a.Node, vb, b.Node))
		}
	}
	for k := range b.KVs {
		if _, ok := a.KVs[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("key %q only on %s", k, b.Node))
		}
	}
	// A transaction finished inside one replica's base is unknown there,
	// not missing.
	for _, s := range [][2]*PartitionState{{a, b}, {b, a}} {
		for id := range s[0].Included {
			if in, known := s[1].includes(id); !in && known {
				diffs = append(diffs, fmt.Sprintf("txn %s included only on %s", txnName(id), s[0].Node))
			}
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	sort.Strings(diffs)
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	return strings.Join(diffs, "; ")
}

// checkTxns checks atomicity and classification (rules 4 and 5) of every
// committed 2PC transaction the records hold or a state includes.
func (v *verifier) checkTxns(cc *cutCheck, ver uint64, states map[uint64]*PartitionState) {
	// A state may include a transaction whose record the entries do not
	// show (it is inside a base): look it up, and keep it for later cuts.
	for _, p := range sortedKeys(states) {
		for _, id := range sortedIDs(states[p].Included) {
			if _, ok := v.committed[id]; ok {
				continue
			}
			in := states[p].Included[id]
			d, ok := v.decisionOf(id, in.RecordPartition)
			switch {
			case !ok && v.truncated(in.RecordPartition):
				// Every replica's log of the record partition starts at
				// a base, and the record was forgotten before it: the
				// decision cannot be known here (nor was it passed in
				// Known). Counted, not judged.
				cc.unknown()
			case !ok:
				cc.add(ErrTorn, p, txnName(id), "included (finish index %d) without a decision in record partition %d (its logs here: %s; %d decisions known from before)",
					in.Index, in.RecordPartition, v.describeLogs(in.RecordPartition), len(v.opts.Known))
			case !d.op.GetCommit():
				cc.add(ErrTorn, p, txnName(id), "included (finish index %d) but decided abort in partition %d", in.Index, d.partition)
			default:
				v.committed[id] = d
				v.ordered = append(v.ordered, id)
			}
		}
	}
	for _, id := range v.ordered {
		v.checkTxn(cc, ver, states, id, v.committed[id])
	}
	// A state holding a transaction that its decision does not name.
	for _, p := range sortedKeys(states) {
		for _, id := range sortedIDs(states[p].Included) {
			d, ok := v.committed[id]
			if !ok {
				continue
			}
			named := false
			for _, q := range d.op.GetParticipants() {
				named = named || q == p
			}
			if !named {
				cc.add(ErrTorn, p, txnName(id), "included, but its decision names participants %v", d.op.GetParticipants())
			}
		}
	}
}

func (v *verifier) checkTxn(cc *cutCheck, ver uint64, states map[uint64]*PartitionState, id string, d decision) {
	// A participant whose state is unknown (not rebuilt, or the
	// transaction finished inside a base) is skipped.
	var in, out []uint64
	for _, p := range d.op.GetParticipants() {
		st := states[p]
		if st == nil {
			continue
		}
		inc, known := st.includes(id)
		switch {
		case inc:
			in = append(in, p)
			if got := st.Included[id]; got.Succeeded != d.op.GetSucceeded() {
				cc.add(ErrTorn, p, txnName(id), "included with branch succeeded=%v, decided %v", got.Succeeded, d.op.GetSucceeded())
			}
		case known:
			out = append(out, p)
		}
	}
	if len(in)+len(out) == 0 {
		return
	}
	cc.rep.TxnsChecked++
	if len(out) == 0 {
		cc.rep.Included++
	}
	stamp := d.op.GetStamp()
	if len(in) > 0 && len(out) > 0 {
		cc.add(ErrTorn, 0, txnName(id), "included in partitions %v, not in %v (stamp %d, record in partition %d, participants %v)",
			in, out, stamp, d.partition, d.op.GetParticipants())
		return
	}
	switch {
	case len(in) > 0 && stamp >= ver:
		cc.add(ErrStamp, 0, txnName(id), "stamp %d >= cut %d but included in partitions %v", stamp, ver, in)
	case len(out) > 0 && stamp < ver:
		cc.add(ErrStamp, 0, txnName(id), "stamp %d < cut %d but not included in partitions %v", stamp, ver, out)
	}
}

func sortedIDs[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
