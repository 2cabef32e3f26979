package node

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutkv/cutkv/internal/clock"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/rpc"
	"github.com/cutkv/cutkv/txn"
)

// Timing of recovery.
const (
	// RecoveryTimeout: a leader asks the record partition about intents
	// its replica has held for longer than this (presumed abort).
	RecoveryTimeout = 2 * time.Second
	// RecoveryInterval is how often a leader looks for stale intents.
	RecoveryInterval = 500 * time.Millisecond
)

// HorizonInterval is how often a leader raises each partition's
// transaction horizon to rpc.FinishedRetention ago (TxnHorizonOp); a
// variable for tests.
var HorizonInterval = time.Minute

// runRecovery resolves, until ctx ends, the intents on partitions this
// node leads that are older than RecoveryTimeout: it asks the record
// partition for the decision, recording ABORT where none exists (presumed
// abort; the first decision wins), and finishes the intent accordingly.
// So no lock outlives a dead coordinator for long. It also raises each
// led partition's transaction horizon every HorizonInterval to
// rpc.FinishedRetention ago, so finished ids do not pile up.
func (n *Node) runRecovery(ctx context.Context) {
	rn := n.rn
	t := time.NewTicker(RecoveryInterval)
	defer t.Stop()
	lastHorizon := map[uint64]time.Time{}
	paces := map[uint64]*horizonPace{}
	ages := map[uint64]intentAges{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for p, part := range rn.Partitions {
			pace := paces[p]
			if pace == nil {
				pace = &horizonPace{}
				paces[p] = pace
			}
			_, horizon := part.FinishedCount()
			pace.observe(horizon, time.Now())
			// Followers keep the ages too, so a new leader knows them.
			var stale []*partition.Intent
			stale, ages[p] = ages[p].stale(part.StaleIntents(math.MaxInt64), time.Now(), RecoveryTimeout)
			if st, ok := rn.Store.Status(p); !ok || !st.IsLeader {
				continue
			}
			for _, in := range stale {
				n.resolve(ctx, p, in)
			}
			if time.Since(lastHorizon[p]) >= HorizonInterval {
				lastHorizon[p] = time.Now()
				n.raiseHorizon(ctx, p, pace.bound(clock.Now().Add(-rpc.FinishedRetention).UnixMilli(), time.Now()))
			}
		}
	}
}

// raiseHorizon proposes partition p's horizon ms (Unix ms).
func (n *Node) raiseHorizon(ctx context.Context, p uint64, ms int64) {
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, _ = n.rn.Store.Propose(hctx, p, &internalpb.Command{Op: &internalpb.Command_TxnHorizon{TxnHorizon: &internalpb.TxnHorizonOp{UnixMs: ms}}})
}

// intentAges says since when (monotonic clock) this node's replica of a
// partition has held each intent, by transaction id. An intent is stale
// once held for RecoveryTimeout. Not by its prepare time against the wall
// clock: a leader whose clock ran behind never found an intent stale and
// left the locks of a dead coordinator held for as long as it was behind,
// and one whose clock ran ahead recovered — and so aborted — transactions
// still preparing (issue 17). Replicas apply an entry about when its
// leader does, so a replica's age is the intent's age; a node that
// restarts counts from its start, a little late.
type intentAges map[string]time.Time

// stale returns the intents of held (every intent the replica holds) that
// were held at now for at least timeout, in held's order, and the ages
// to keep for the next call (those of held only).
func (a intentAges) stale(held []*partition.Intent, now time.Time, timeout time.Duration) ([]*partition.Intent, intentAges) {
	next := make(intentAges, len(held))
	var out []*partition.Intent
	for _, in := range held {
		id := string(in.Op.GetTxnId())
		since, ok := a[id]
		if !ok {
			since = now
		}
		next[id] = since
		if now.Sub(since) >= timeout {
			out = append(out, in)
		}
	}
	return out, next
}

// horizonPace keeps a leader whose wall clock runs ahead from raising a
// partition's horizon ahead of real time. The horizon never goes back
// (partition.horizonLocked), and every prepare stamped before it is
// refused, so a leader skewed forward past rpc.FinishedRetention would
// otherwise leave the partition refusing every transaction of the
// correct coordinators until the real time caught up with the skewed
// one — minutes after the clock was put right (issue 17). So the horizon
// may advance from the first one this node saw by no more than the time
// elapsed since then on the monotonic clock. A partition's first horizon
// (none seen yet) is not paced: there is nothing to pace from.
type horizonPace struct {
	base int64     // the first horizon seen (Unix ms); 0: none yet
	at   time.Time // when, on the monotonic clock
}

// observe notes the partition's horizon at now, as long as none was noted.
func (h *horizonPace) observe(horizon int64, now time.Time) {
	if h.base == 0 && horizon != 0 {
		h.base, h.at = horizon, now
	}
}

// bound is the horizon to propose at now for one wanted at want (the wall
// clock minus the retention).
func (h *horizonPace) bound(want int64, now time.Time) int64 {
	if h.base == 0 {
		return want
	}
	return min(want, h.base+now.Sub(h.at).Milliseconds())
}

// resolve settles the stale intent in of partition p, led by this node
// (DESIGN.md, "Transactions", recovery; the decisions are txn.Recover's):
// read the record at the record partition (ABORTED is recorded when there
// is none); for a STAGING one ask every listed participant through its
// log, which prevents a prepare still on its way; record the outcome on
// the record partition (the first decision wins, and the entry finishes
// the record partition's intent) and finish the other participants with
// it. A round that cannot finish is retried at the next interval.
func (n *Node) resolve(ctx context.Context, p uint64, in *partition.Intent) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	id, r, at := in.Op.GetTxnId(), in.Op.GetRecordPartition(), in.Op.GetPreparedUnixMs()
	rec, err := n.rn.ReadRecord(r, id)
	if err != nil {
		return
	}
	statuses := map[uint64]txn.Vote{}
	if rec.Staging {
		statuses[r] = rec.Vote
	}
	reread := false
	for range 3 {
		step := txn.Recover(rec, statuses, reread)
		switch {
		case step.Decided:
			n.finishDecided(rctx, id, p, r, at, rec, step.Decision)
			return
		case step.Reread:
			if rec, err = n.rn.ReadRecord(r, id); err != nil {
				return
			}
			reread = true
		default:
			votes, err := n.askStatuses(rctx, id, at, step.Ask)
			if err != nil {
				return
			}
			for q, v := range votes {
				n.rn.Clock.Raise(v.Version)
				statuses[q] = v
			}
		}
	}
}

// askStatuses asks each partition in parts, at once, to settle
// transaction id's prepare through its log (TxnStatus). Asked one after
// another, under faults the round's deadline ran out before the last
// answer and the transaction stayed unresolved for many cuts.
func (n *Node) askStatuses(ctx context.Context, id []byte, at int64, parts []uint64) (map[uint64]txn.Vote, error) {
	rn := n.rn
	votes := make([]txn.Vote, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, q := range parts {
		wg.Go(func() {
			st, err := rpc.CallParticipant(ctx, rn, q, func(c internalrpc.ParticipantClient, cctx context.Context) (*internalpb.StatusResponse, error) {
				return c.Status(cctx, &internalpb.StatusRequest{Partition: q, CutVersion: rn.Clock.Load(),
					Op: &internalpb.TxnStatusOp{TxnId: id, PreparedUnixMs: at}})
			})
			if err == nil {
				votes[i], err = rpc.StatusVote(q, st)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	out := make(map[uint64]txn.Vote, len(parts))
	for i, q := range parts {
		if errs[i] != nil {
			return nil, errs[i]
		}
		out[q] = votes[i]
	}
	return out, nil
}

// finishDecided records decision d of transaction id on record partition
// r (unless rec, as read, is decided already) and finishes every
// participant, p (the recovering one) always among them, with the
// decision recorded there; then it has the record dropped.
func (n *Node) finishDecided(ctx context.Context, id []byte, p, r uint64, at int64, rec txn.Record, d txn.Decision) {
	rn := n.rn
	parts := rec.Participants
	if rec.Staging || len(parts) == 0 {
		resp, err := rpc.CallParticipant(ctx, rn, r, func(c internalrpc.ParticipantClient, cctx context.Context) (*internalpb.DecideResponse, error) {
			return c.Decide(cctx, &internalpb.DecideRequest{Partition: r, CutVersion: max(rn.Clock.Load(), d.Stamp), Op: &internalpb.TxnDecideOp{
				TxnId: id, Commit: d.Commit, Succeeded: d.Succeeded, Stamp: d.Stamp, Participants: parts, Finish: true, PreparedUnixMs: at,
			}})
		})
		if err != nil {
			return
		}
		got := txn.RecordOf(resp.GetRecorded())
		d = got.Decision
		if len(parts) == 0 {
			parts = got.Participants
		}
	}
	// The record may go once every participant finished, as after a
	// coordinator's Finishes — but only with the whole list known: an
	// abort recorded without one (presumed abort, or a transaction
	// prepared before parallel commits) stays, and the others'
	// recoveries finish their own intents.
	whole := slices.Contains(parts, p)
	if !whole {
		parts = append(slices.Clone(parts), p)
	}
	var wg sync.WaitGroup
	var failed atomic.Bool
	for _, q := range parts {
		wg.Go(func() {
			_, err := rpc.CallParticipant(ctx, rn, q, func(c internalrpc.ParticipantClient, cctx context.Context) (*internalpb.FinishResponse, error) {
				return c.Finish(cctx, &internalpb.FinishRequest{Partition: q, CutVersion: max(rn.Clock.Load(), d.Stamp),
					Op: &internalpb.TxnFinishOp{TxnId: id, Commit: d.Commit, Succeeded: d.Succeeded, Stamp: d.Stamp, PreparedUnixMs: at}})
			})
			if err != nil {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	if !failed.Load() {
		rn.Metrics.TxnRecovered(d.Commit)
	}
	if whole && !failed.Load() {
		rn.Forget(r, id)
	}
}
