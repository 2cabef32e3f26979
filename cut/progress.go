package cut

import (
	"sort"

	"github.com/cutkv/cutkv/proto/internalpb"
)

// keepFinished bounds how many finished cuts a Progress remembers for
// look-ups (Result); the driver asks about the newest one only.
const keepFinished = 64

// Finished is how a cut ended in one partition.
type Finished struct {
	Op *internalpb.CutFinishOp
	// Index is that of the CutFinish entry, or the cut's position when
	// nothing was active there (the cut closed at pos, with Op empty).
	Index uint64
}

// Progress is one partition's cut bookkeeping (rules 2, 4 and 6). It is
// state-machine state: the apply loop drives it, in log order, with
// Observe before each entry, TxnFinished when a Finish applies and
// ApplyFinish for a CutFinish entry. Not safe for concurrent use: its owner
// serializes calls (the partition's mutex).
type Progress struct {
	version  uint64 // newest cut whose position is in the log; 0: none yet
	pos      uint64
	active   map[string]struct{}
	before   []*internalpb.CutTxn
	after    []*internalpb.CutTxn
	aborted  [][]byte
	finished bool

	done      map[uint64]Finished
	doneOrder []uint64

	gen uint64 // counts changes; see Gen
}

// NewProgress returns the progress of a partition with no cut yet.
func NewProgress() *Progress { return &Progress{done: map[uint64]Finished{}} }

// Gen counts the changes made to p so far: its owner stores p's State
// again only when Gen moved (a durable partition keeps it on disk).
func (p *Progress) Gen() uint64 { return p.gen }

// Version returns the newest cut whose position is in the log.
func (p *Progress) Version() uint64 { return p.version }

// Running says whether that cut still waits for CutFinish here.
func (p *Progress) Running() bool { return p.version != 0 && !p.finished }

// Pos returns the position of the newest cut (0: none).
func (p *Progress) Pos() uint64 { return p.pos }

// Active returns the ids of the transactions the running cut waits for,
// sorted.
func (p *Progress) Active() []string {
	out := make([]string, 0, len(p.active))
	for id := range p.active {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Observe is called before the entry at index, proposed with version ev,
// is applied. When ev is above the newest cut, the entry is that cut's
// position (rule 2): the transactions prepared and unfinished at this
// point, which intents lists (called only then), become the active set.
// When that set is empty the cut is finished here and now, at pos, on
// every replica and in every replay (rule 6: as if CutFinish(v, ∅, ∅)
// stood at pos), and nothing is to be proposed. A running cut that a
// newer one overtakes was abandoned by its driver (at most one cut is in
// flight), so it is dropped. It returns true when a cut starts at this
// entry.
func (p *Progress) Observe(index, ev uint64, intents func() []string) bool {
	if ev <= p.version {
		return false
	}
	p.gen++
	p.version, p.pos, p.finished = ev, index, false
	p.active = map[string]struct{}{}
	for _, id := range intents() {
		p.active[id] = struct{}{}
	}
	p.before, p.after, p.aborted = nil, nil, nil
	if len(p.active) == 0 {
		p.finish(index, &internalpb.CutFinishOp{Version: ev, Pos: index})
	}
	return true
}

// TxnFinished classifies an active transaction when its Finish applies
// (rule 4): committed with a stamp below the cut is before it, at or above
// after it; an abort leaves nothing in either state.
func (p *Progress) TxnFinished(id string, commit, succeeded bool, stamp uint64) {
	if !p.Running() {
		return
	}
	if _, ok := p.active[id]; !ok {
		return
	}
	delete(p.active, id)
	p.gen++
	t := &internalpb.CutTxn{TxnId: []byte(id), Succeeded: succeeded, Stamp: stamp}
	switch {
	case !commit:
		p.aborted = append(p.aborted, []byte(id))
	case stamp < p.version:
		p.before = append(p.before, t)
	default:
		p.after = append(p.after, t)
	}
}

// ReadyToFinish says whether Pending has a CutFinish to propose.
func (p *Progress) ReadyToFinish() bool { return p.Running() && len(p.active) == 0 }

// Pending returns the CutFinish to propose: the cut runs and its active
// set is empty. Any replica computes the same one at the same index.
func (p *Progress) Pending() (*internalpb.CutFinishOp, bool) {
	if !p.ReadyToFinish() {
		return nil, false
	}
	return &internalpb.CutFinishOp{
		Version: p.version, Pos: p.pos,
		Before: p.before, After: p.after, Aborted: p.aborted,
	}, true
}

// Proposal is the cut agent's decision for a partition this node leads
// (DESIGN.md rules 2 and 6), given the node's known version: CutStart(known)
// when the partition's log has not reached known (so pos(known) exists even
// in an idle group), else the CutFinish that is due, else nothing (nil).
// The node proposes what it returns and asks again when its clock, the
// partition's state or leadership changes.
func (p *Progress) Proposal(known uint64) *internalpb.Command {
	if p.version < known {
		return &internalpb.Command{Op: &internalpb.Command_CutStart{CutStart: &internalpb.CutStartOp{Version: known}}}
	}
	if op, ok := p.Pending(); ok {
		return &internalpb.Command{Op: &internalpb.Command_CutFinish{CutFinish: op}}
	}
	return nil
}

// ApplyFinish applies a CutFinish entry at index. It closes the running
// cut when the entry names it and nothing is active any more; a duplicate,
// a stale version, an early entry, or one for a cut that closed at its
// position (Observe) changes nothing. It returns whether the cut closed.
func (p *Progress) ApplyFinish(index uint64, op *internalpb.CutFinishOp) bool {
	want, ok := p.Pending()
	if !ok || op.GetVersion() != want.GetVersion() {
		return false
	}
	// The state machine's own sets are authoritative; the entry carries the
	// same ones (computed from the same log) for the WAL's reader.
	p.finish(index, want)
	return true
}

// finish closes the running cut at index with op.
func (p *Progress) finish(index uint64, op *internalpb.CutFinishOp) {
	p.gen++
	p.finished = true
	p.done[op.GetVersion()] = Finished{Op: op, Index: index}
	p.doneOrder = append(p.doneOrder, op.GetVersion())
	if len(p.doneOrder) > keepFinished {
		delete(p.done, p.doneOrder[0])
		p.doneOrder = p.doneOrder[1:]
	}
}

// Result returns how cut v ended here, if it finished and is remembered.
func (p *Progress) Result(v uint64) (Finished, bool) {
	f, ok := p.done[v]
	return f, ok
}
