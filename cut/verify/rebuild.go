package verify

import (
	"encoding/hex"
	"fmt"
	"math"
	"slices"

	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/internal/command"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// PartitionState is one partition's state at a cut, rebuilt from one
// replica (DESIGN.md, consistent cut rule 5).
type PartitionState struct {
	Partition uint64
	Version   uint64 // the cut
	Node      string // the replica it was rebuilt from
	// Pos and FinishIndex are where the cut fell in the log; FinishTerm is
	// the term of the CutFinish entry.
	Pos, FinishIndex, FinishTerm uint64
	// KVs are the committed key-values at the cut. The values are owned by
	// the state.
	KVs map[string][]byte
	// Included are the 2PC transactions in the state, by raw txn id.
	Included map[string]Inclusion
	// Before is the before set the CutFinish entry carries.
	Before []*internalpb.CutTxn
	// known says, with a base (BaseIndex > 0), which transactions the
	// replica's entries or base intents show, so that "not included" is
	// certain for them; nil: all are known (no base).
	known map[string]bool
}

// Inclusion is how a 2PC transaction entered a partition's state at a cut.
type Inclusion struct {
	// Index of the entry that applied its writes before pos (a
	// TxnFinish(commit), a TxnFinishes batch committing it, or its
	// TxnDecide(commit) with finish on its record partition); 0 when the
	// transaction is in the cut's before set.
	Index     uint64
	Stamp     uint64
	Succeeded bool
	// RecordPartition holds the transaction's record (from its prepare).
	RecordPartition uint64
}

// includes says whether t is in the state: yes, no, or unknown (with a
// base, a transaction finished inside it leaves no trace in the entries).
func (s *PartitionState) includes(t string) (in, known bool) {
	if _, ok := s.Included[t]; ok {
		return true, true
	}
	return false, s.known == nil || s.known[t]
}

// entry is a decoded log entry; cmd is nil for an entry without a command
// (raft's empty entries, configuration changes).
type entry struct {
	index, term uint64
	cmd         *internalpb.Command
}

// replicaLog is a replica with its entries decoded once. Read-only after
// decode: rebuilds share it.
type replicaLog struct {
	r    *Replica
	ents []entry // ents[i].index == r.BaseIndex+1+i
	// txns holds the ids of transactions with a prepare entry after the
	// base, with the first one's prepare time; only computed when there
	// is a base.
	txns map[string]int64
}

func decode(r *Replica) (*replicaLog, error) {
	l := &replicaLog{r: r, ents: make([]entry, 0, len(r.Entries))}
	if r.BaseIndex > 0 {
		l.txns = map[string]int64{}
	}
	for i, e := range r.Entries {
		if want := r.BaseIndex + 1 + uint64(i); e.GetIndex() != want {
			return nil, fmt.Errorf("%w: %s group %d: entry %d where %d belongs (the log must follow its base without gaps)",
				ErrLog, r.Node, r.Group, e.GetIndex(), want)
		}
		cmd, ok, err := command.Decode(e)
		if err != nil {
			return nil, fmt.Errorf("%w: %s group %d: %v", ErrLog, r.Node, r.Group, err)
		}
		if !ok {
			cmd = nil
		}
		// Only a prepare after the base makes a transaction known: a
		// Finish there may repeat one inside the base (a coordinator's
		// and a recovery's both apply), and says nothing of whether the
		// state includes it. An intent the base holds is known through
		// the base itself (resolve), and a prepare the base already
		// refuses is no sign either (see rebuild).
		if op := cmd.GetTxnPrepare(); l.txns != nil && op != nil {
			if _, seen := l.txns[string(op.GetTxnId())]; !seen {
				l.txns[string(op.GetTxnId())] = op.GetPreparedUnixMs()
			}
		}
		l.ents = append(l.ents, entry{index: e.GetIndex(), term: e.GetTerm(), cmd: cmd})
	}
	return l, nil
}

// at returns the entry at index i, if the log holds it.
func (l *replicaLog) at(i uint64) (entry, bool) {
	if i <= l.r.BaseIndex || i > l.r.BaseIndex+uint64(len(l.ents)) {
		return entry{}, false
	}
	return l.ents[i-l.r.BaseIndex-1], true
}

// last returns the index of the last entry (the base's when none).
func (l *replicaLog) last() uint64 { return l.r.BaseIndex + uint64(len(l.ents)) }

// closeAt returns how cut v, positioned at pos, closed at index fi in
// this log, with the term of the entry at fi: the CutFinish(v) entry
// there, or, when fi is pos itself (nothing was active at pos, so the
// cut finished there without an entry: rule 6), the empty CutFinish the
// state machine stands in for it, provided the log holds the entry at
// pos.
// reaches says whether the replica's committed log holds entry i.
func (l *replicaLog) reaches(i uint64) bool {
	if c := l.r.Commit; c != 0 && i > c {
		return false
	}
	_, ok := l.at(i)
	return ok
}

func (l *replicaLog) closeAt(v, pos, fi uint64) (*internalpb.CutFinishOp, uint64, bool) {
	// Only a committed entry says how the cut closed: a replica cut off
	// from its group can hold an uncommitted tail another leader's
	// entries replaced, and an entry there at pos proves nothing.
	if c := l.r.Commit; c != 0 && fi > c {
		return nil, 0, false
	}
	e, ok := l.at(fi)
	if !ok {
		return nil, 0, false
	}
	if fi == pos {
		return &internalpb.CutFinishOp{Version: v, Pos: pos}, e.term, true
	}
	op := e.cmd.GetCutFinish()
	if op == nil || op.GetVersion() != v {
		return nil, 0, false
	}
	return op, e.term, true
}

// Rebuild rebuilds partition cp.Partition's state at cut v from replica r,
// whose entry at cp.FinishIndex must be CutFinish(v). Errors wrap ErrLog
// when the replica cannot give the state, ErrCutFinish when the log
// contradicts the cut's bookkeeping (rule 2's position).
func Rebuild(r *Replica, v uint64, cp *kvpb.CutPartition) (*PartitionState, error) {
	l, err := decode(r)
	if err != nil {
		return nil, err
	}
	return l.rebuild(v, cp)
}

// RebuildPartition rebuilds partition cp.Partition at cut v from replica
// r exactly as Rebuild does (the package doc's steps 1-3), but returns the
// resolved partition itself rather than a map of its key-values: restore
// writes it out as a materialization, and a partition may hold millions
// of keys.
//
// The partition is at applied index cp.Pos-1, the last entry before the
// cut, and holds the committed key-values at v and nothing else: no
// intent, lock, transaction record or finished id. Its cut progress is a
// new partition's (partition.ResolveAtCut resets it): no cut version,
// none running, none remembered. Whatever the base or the entries before
// pos left there, such as an older cut that failed and never finished,
// is gone, so a cluster restored from it starts its cuts as a new one
// does: the first CutStart of a later version (group 0 allocates from
// v+1 on) starts a cut, whose CutFinish closes it. The caller owns the
// partition and closes it (a base opened from files lives in a scratch
// Pebble); it has no SetCutReady function. Errors are Rebuild's.
func RebuildPartition(r *Replica, v uint64, cp *kvpb.CutPartition) (*partition.Partition, error) {
	l, err := decode(r)
	if err != nil {
		return nil, err
	}
	return l.resolve(v, cp, nil)
}

// rebuild is Rebuild on a decoded log.
func (l *replicaLog) rebuild(v uint64, cp *kvpb.CutPartition) (*PartitionState, error) {
	st := &PartitionState{}
	p, err := l.resolve(v, cp, st)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	st.KVs = make(map[string][]byte, p.Len())
	if err := p.Each(func(kv *partition.KV) bool {
		st.KVs[string(kv.Key)] = kv.Value
		return true
	}); err != nil {
		return nil, err
	}
	return st, p.Close()
}

// resolve checks the cut's bookkeeping in l, replays the entries before
// pos on the base and resolves the before set: the package doc's steps
// 1-3. With st not nil it also fills in everything of st but KVs: where
// the cut fell, the before set and which transactions the state includes.
// The caller closes the partition; on an error it is closed here.
func (l *replicaLog) resolve(v uint64, cp *kvpb.CutPartition, st *PartitionState) (_ *partition.Partition, err error) {
	r := l.r
	pid, pos, fi := cp.GetPartition(), cp.GetPos(), cp.GetFinishIndex()
	op, term, ok := l.closeAt(v, pos, fi)
	if !ok {
		return nil, fmt.Errorf("%w: cut %d partition %d: %s has no CutFinish(%d) at index %d (log %d..%d)",
			ErrLog, v, pid, r.Node, v, fi, r.BaseIndex+1, l.last())
	}
	if op.GetPos() != pos {
		return nil, fmt.Errorf("%w: cut %d partition %d: %s's CutFinish at %d says pos %d, group 0 recorded %d",
			ErrCutFinish, v, pid, r.Node, fi, op.GetPos(), pos)
	}
	if pos <= r.BaseIndex {
		return nil, fmt.Errorf("%w: cut %d partition %d: %s: pos %d at or before its base %d", errBaseAfterPos, v, pid, r.Node, pos, r.BaseIndex)
	}
	if pos > fi {
		return nil, fmt.Errorf("%w: cut %d partition %d: %s: pos %d outside (base %d, finish index %d)",
			ErrLog, v, pid, r.Node, pos, r.BaseIndex, fi)
	}
	// Rule 2: pos is the first entry whose version is at least v.
	if e, _ := l.at(pos); e.cmd == nil || e.cmd.GetCutVersion() < v {
		return nil, fmt.Errorf("%w: cut %d partition %d: %s: the entry at pos %d has version %d, want >= %d",
			ErrCutFinish, v, pid, r.Node, pos, e.cmd.GetCutVersion(), v)
	}
	p, err := r.first()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if st != nil {
		*st = PartitionState{
			Partition: pid, Version: v, Node: r.Node,
			Pos: pos, FinishIndex: fi, FinishTerm: term,
			Included: map[string]Inclusion{}, Before: op.GetBefore(),
		}
		if r.BaseIndex > 0 {
			st.known = map[string]bool{}
			for id, at := range l.txns {
				// A late copy of a prepare (re-proposed by a leader
				// change, or a coordinator's resend) may apply after the
				// Finish; when that Finish lies inside the base, the base
				// refuses the copy and its entry says nothing of
				// whether the state includes the transaction.
				if !p.FinishedBefore(id, at) {
					st.known[id] = true
				}
			}
			for _, in := range p.StaleIntents(math.MaxInt64) {
				st.known[string(in.Op.GetTxnId())] = true
			}
		}
	}
	for _, e := range l.ents[:pos-r.BaseIndex-1] {
		if e.cmd == nil {
			p.SetApplied(e.index)
			continue
		}
		if ev := e.cmd.GetCutVersion(); ev >= v {
			return nil, fmt.Errorf("%w: cut %d partition %d: %s: entry %d has version %d >= %d before pos %d",
				ErrCutFinish, v, pid, r.Node, e.index, ev, v, pos)
		}
		if st != nil {
			includeFinished(st, p, e)
		}
		if _, err := p.ApplyCommand(e.index, e.cmd); err != nil {
			return nil, fmt.Errorf("%w: cut %d partition %d: %s: apply entry %d: %v", ErrLog, v, pid, r.Node, e.index, err)
		}
	}
	for _, t := range op.GetBefore() {
		in, ok := p.IntentOf(string(t.GetTxnId()))
		if !ok || st == nil {
			continue // ResolveAtCut refuses a missing intent below
		}
		st.Included[string(t.GetTxnId())] = Inclusion{
			Stamp: t.GetStamp(), Succeeded: t.GetSucceeded(), RecordPartition: in.Op.GetRecordPartition(),
		}
	}
	if err := p.ResolveAtCut(op.GetBefore()); err != nil {
		return nil, fmt.Errorf("%w: cut %d partition %d: %s: %v", ErrLog, v, pid, r.Node, err)
	}
	return p, nil
}

// includeFinished adds to st.Included the transactions entry e commits
// in p, judged on p before e applies: every finish e applies (a
// TxnFinish, each of a TxnFinishes batch, a TxnDecide with finish under
// the recorded decision) takes effect where p holds the transaction's
// intent prepared at the finish's prepare time, if it names one, and only
// the first finish of an id in the entry can: it ends the intent.
func includeFinished(st *PartitionState, p *partition.Partition, e entry) {
	fs := command.Finishes(e.cmd, p.Record)
	var done []string // ids the entry finished already: a batch is short
	for _, f := range fs {
		id := string(f.GetTxnId())
		if slices.Contains(done, id) {
			continue
		}
		in, ok := p.IntentOf(id)
		if !ok {
			continue
		}
		if at := f.GetPreparedUnixMs(); at != 0 && at != in.Op.GetPreparedUnixMs() {
			continue // another transaction's finish under this id: applies nothing
		}
		if len(fs) > 1 {
			done = append(done, id)
		}
		if f.GetCommit() {
			st.Included[id] = Inclusion{
				Index: e.index, Stamp: f.GetStamp(), Succeeded: f.GetSucceeded(),
				RecordPartition: in.Op.GetRecordPartition(),
			}
		}
	}
}

// history is what one replica's whole committed log says about a
// partition, replayed once: how the state machine closed each cut, and
// the transaction records.
type history struct {
	node   string
	base   uint64                  // the replica's base index: what is before is not replayed
	upto   uint64                  // last entry replayed
	closed map[uint64]cut.Finished // by cut version, as the state machine closed it
	final  *partition.Partition    // the state after upto; holds the records
	// decided lists the transactions decided in an entry, in log order:
	// by a TxnDecide, or by a finish of the record partition's intent,
	// which decides a STAGING record (parallel commits).
	decided []string
	// first holds each decision as first recorded — from the entry that
	// decided it, or, for one in the base, from the state just before a
	// TxnForget dropped it: a record forgotten (and even decided anew by
	// a late recovery) is still known by the decision participants used.
	// A STAGING record is no decision and is never here.
	first map[string]*internalpb.TxnDecideOp
}

// close releases the final state (a scratch Pebble's files).
func (h *history) close() error { return h.final.Close() }

// record returns transaction id's decision as first recorded here. A
// record still STAGING at the end of the replayed log (in the base or
// written after it) is undecided: not found.
func (h *history) record(id string) (*internalpb.TxnDecideOp, bool) {
	if d, ok := h.first[id]; ok {
		return d, true
	}
	if d, ok := h.final.Record(id); ok && command.IsDecision(d) {
		return d, true
	}
	return nil, false
}

// decisionIDs returns the transactions whose record cmd may decide: a
// TxnDecide's, and those it finishes (on the record partition a finish
// of the intent decides a STAGING record).
func decisionIDs(cmd *internalpb.Command) []string {
	var ids []string
	if d := cmd.GetTxnDecide(); d != nil {
		ids = append(ids, string(d.GetTxnId()))
	}
	for _, f := range command.Finishes(cmd, nil) {
		if id := string(f.GetTxnId()); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// replay applies l's entries up to its commit index (every entry when
// the commit index is unknown). The history's final partition is the
// caller's to close (history.close).
func replay(l *replicaLog) (_ *history, err error) {
	r := l.r
	p, err := r.first()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	upto := l.last()
	if r.Commit != 0 {
		upto = min(upto, r.Commit)
	}
	h := &history{node: r.Node, base: r.BaseIndex, upto: upto, closed: map[uint64]cut.Finished{}, final: p, first: map[string]*internalpb.TxnDecideOp{}}
	seen := map[string]bool{}
	for _, e := range l.ents {
		if e.index > upto {
			break
		}
		if e.cmd == nil {
			p.SetApplied(e.index)
			continue
		}
		if f, ok := e.cmd.GetOp().(*internalpb.Command_TxnForget); ok {
			for _, id := range f.TxnForget.GetTxnIds() {
				if d, ok := p.Record(string(id)); ok && command.IsDecision(d) && h.first[string(id)] == nil {
					h.first[string(id)] = d
				}
			}
		}
		if _, err := p.ApplyCommand(e.index, e.cmd); err != nil {
			return nil, fmt.Errorf("%w: partition %d: %s: apply entry %d: %v", ErrLog, r.Group, r.Node, e.index, err)
		}
		// A cut closed at this entry: by its CutFinish, or at its position
		// when nothing was active there.
		if v := p.CutVersion(); v != 0 {
			if f, ok := p.CutResult(v); ok && f.Index == e.index {
				h.closed[v] = f
			}
		}
		// The decisions the entry recorded: a TxnDecide's (the recorded
		// one, its result), and a STAGING record a finish decided. A
		// finish of a transaction recorded elsewhere finds no record here.
		for _, id := range decisionIDs(e.cmd) {
			d, ok := p.Record(id)
			if !ok || !command.IsDecision(d) {
				continue
			}
			if !seen[id] {
				seen[id] = true
				h.decided = append(h.decided, id)
			}
			if h.first[id] == nil {
				h.first[id] = d
			}
		}
	}
	return h, nil
}

func txnName(id string) string { return hex.EncodeToString([]byte(id)) }
