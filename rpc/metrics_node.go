package rpc

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/snapshot"
)

// txnKind is a transaction's kind (the kind label): one raft entry on
// one partition, or a cross-partition commit coordinated by a node.
type txnKind int

const (
	txnOnePhase txnKind = iota
	txnTwoPhase
	numTxnKinds
)

var txnKindNames = [numTxnKinds]string{"1pc", "2pc"}

// abortReason is why a transaction aborted (the reason label of
// cutkv_txn_aborts_total); each belongs to one kind.
type abortReason int

const (
	// abortWaitDie: a 1PC transaction met a lock held by an older
	// transaction (or waited too long for a younger one) and was refused
	// before it was proposed.
	abortWaitDie abortReason = iota
	// abortConflict: a 1PC entry found a lock held when it applied.
	abortConflict
	// abortRefused: a 2PC participant's effective prepare refused (a
	// lock conflict there, wait-die, or a prepare prevented by a status
	// entry).
	abortRefused
	// abortRecord: the 2PC coordinator learnt the abort from the
	// transaction record (decided by a recovery) rather than from a vote.
	abortRecord
	numAbortReasons
)

var abortReasons = [numAbortReasons]struct {
	kind txnKind
	name string
}{{txnOnePhase, "wait_die"}, {txnOnePhase, "conflict"}, {txnTwoPhase, "refused"}, {txnTwoPhase, "record"}}

// Snapshot failure reasons: the phase of CreateSnapshot that failed.
const (
	snapFailStore    = "store"    // the store could not be opened
	snapFailCut      = "cut"      // no completed cut to snapshot
	snapFailPrepare  = "prepare"  // planning: the store's catalogue, a replica's pin, group 0's leadership
	snapFailUpload   = "upload"   // a replica's upload of its objects
	snapFailManifest = "manifest" // writing the manifest that makes the snapshot exist
)

// NodeMetrics are a node's protocol metrics: transactions, cuts and
// snapshots as they end, errors of the snapshot store, refused peer
// calls. Every labelled child is resolved once here, so recording is an
// atomic add (histograms: a bucket search and adds), with no allocation
// or lock. A nil *NodeMetrics records nothing.
type NodeMetrics struct {
	txnCommits  [numTxnKinds]prometheus.Counter
	txnUnknown  [numTxnKinds]prometheus.Counter
	txnLatency  [numTxnKinds]prometheus.Observer
	txnAborts   [numAbortReasons]prometheus.Counter
	txnRecovery map[bool]prometheus.Counter

	cutsCompleted prometheus.Counter
	cutFailures   map[string]prometheus.Counter
	cutDuration   prometheus.Histogram
	cutActive     prometheus.Histogram

	snapCreated     prometheus.Counter
	snapFailures    map[string]prometheus.Counter
	snapDuration    map[bool]prometheus.Observer
	snapBytes       map[string]prometheus.Counter
	snapChainPieces *prometheus.GaugeVec
	snapChainEnts   *prometheus.GaugeVec
	storeErrors     map[snapshot.Op]prometheus.Counter

	peerRejected map[string]prometheus.Counter
}

// Reasons a peer call is refused by PeerAuth (cutkv_peer_calls_rejected_total).
const (
	peerRejectNoCert    = "no_certificate"
	peerRejectNotMember = "not_a_member"
	peerRejectCluster   = "cluster_id"
	// PeerRejectTLS is a TLS handshake on the peer listener that failed
	// (counted by the server's transport credentials).
	PeerRejectTLS = "tls_handshake"
)

// NewNodeMetrics registers the protocol metrics with reg.
func NewNodeMetrics(reg prometheus.Registerer) *NodeMetrics {
	m := &NodeMetrics{}
	commits := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cutkv_txn_commits_total",
		Help: "Transactions committed (either branch), by kind: 1pc on the partition's leader, 2pc on the coordinator."}, []string{"kind"})
	unknown := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cutkv_txn_outcome_unknown_total",
		Help: "Transactions answered with an unknown outcome (recovery settles them), by kind."}, []string{"kind"})
	aborts := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cutkv_txn_aborts_total",
		Help: "Transactions aborted (clients see Aborted and retry), by kind and reason."}, []string{"kind", "reason"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cutkv_txn_commit_duration_seconds",
		Help: "Time from a transaction's arrival to its committed answer, by kind.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"kind"})
	recovered := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cutkv_txn_recovered_total",
		Help: "Stale transactions this node's recovery settled and finished everywhere, by outcome."}, []string{"outcome"})
	for k, name := range txnKindNames {
		m.txnCommits[k] = commits.WithLabelValues(name)
		m.txnUnknown[k] = unknown.WithLabelValues(name)
		m.txnLatency[k] = latency.WithLabelValues(name)
	}
	for r, kr := range abortReasons {
		m.txnAborts[r] = aborts.WithLabelValues(txnKindNames[kr.kind], kr.name)
	}
	m.txnRecovery = map[bool]prometheus.Counter{true: recovered.WithLabelValues("committed"), false: recovered.WithLabelValues("aborted")}

	m.cutsCompleted = prometheus.NewCounter(prometheus.CounterOpts{Name: "cutkv_cuts_completed_total",
		Help: "Cuts this node drove to completion as group 0's leader."})
	cutFailures := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cutkv_cut_failures_total",
		Help: "Cuts this node recorded as failed, by reason: timeout (a partition did not finish in --cut-timeout), overtaken (a partition ran a newer cut)."}, []string{"reason"})
	m.cutFailures = map[string]prometheus.Counter{}
	for _, r := range cut.FailReasons() {
		m.cutFailures[r] = cutFailures.WithLabelValues(r)
	}
	m.cutDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cutkv_cut_duration_seconds",
		Help: "Time from a completed cut's start in group 0 to its end in the last partition.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)})
	m.cutActive = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cutkv_cut_active_transactions",
		Help:    "Transactions active at a completed cut's position in one partition (its active set: what the CutFinish waited for), one observation per partition.",
		Buckets: []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}})

	m.snapCreated = prometheus.NewCounter(prometheus.CounterOpts{Name: "cutkv_snapshots_created_total",
		Help: "Snapshots this node created (automatic and requested)."})
	snapFailures := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cutkv_snapshot_failures_total",
		Help: "Snapshots that failed, by the phase that failed: store, cut, prepare, upload, manifest."}, []string{"reason"})
	m.snapFailures = map[string]prometheus.Counter{}
	for _, r := range []string{snapFailStore, snapFailCut, snapFailPrepare, snapFailUpload, snapFailManifest} {
		m.snapFailures[r] = snapFailures.WithLabelValues(r)
	}
	snapDuration := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cutkv_snapshot_duration_seconds",
		Help: "Time to take a snapshot (cut, upload, manifest), by result.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}, []string{"result"})
	m.snapDuration = map[bool]prometheus.Observer{true: snapDuration.WithLabelValues("ok"), false: snapDuration.WithLabelValues("error")}
	snapBytes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cutkv_snapshot_uploaded_bytes_total",
		Help: "Bytes the snapshots this node created uploaded, by kind: checkpoint_files (SSTs of checkpoint bases), changelog (log pieces), base (image bases and checkpoint manifests)."}, []string{"kind"})
	m.snapBytes = map[string]prometheus.Counter{}
	for _, k := range []string{"checkpoint_files", "changelog", "base"} {
		m.snapBytes[k] = snapBytes.WithLabelValues(k)
	}
	m.snapChainPieces = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cutkv_snapshot_chain_pieces",
		Help: "Changelog pieces in a partition's chain (base to the cut) in the newest snapshot this node created."}, []string{"partition"})
	m.snapChainEnts = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cutkv_snapshot_chain_entries",
		Help: "Raft entries from a partition's base to its CutFinish in the newest snapshot this node created: what a restore replays."}, []string{"partition"})
	storeErrors := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cutkv_snapshot_store_errors_total",
		Help: "Failed operations on snapshot stores, by operation: list, stat, read, write, delete."}, []string{"op"})
	m.storeErrors = map[snapshot.Op]prometheus.Counter{}
	for _, op := range snapshot.Ops() {
		m.storeErrors[op] = storeErrors.WithLabelValues(string(op))
	}

	peer := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cutkv_peer_calls_rejected_total",
		Help: "Calls and connections refused on the peer listener, by reason: tls_handshake, no_certificate, not_a_member, cluster_id."}, []string{"reason"})
	m.peerRejected = map[string]prometheus.Counter{}
	for _, r := range []string{PeerRejectTLS, peerRejectNoCert, peerRejectNotMember, peerRejectCluster} {
		m.peerRejected[r] = peer.WithLabelValues(r)
	}
	reg.MustRegister(commits, unknown, aborts, latency, recovered, m.cutsCompleted, cutFailures, m.cutDuration, m.cutActive,
		m.snapCreated, snapFailures, snapDuration, snapBytes, m.snapChainPieces, m.snapChainEnts, storeErrors, peer)
	return m
}

func (m *NodeMetrics) txnCommitted(kind txnKind, since time.Time) {
	if m == nil {
		return
	}
	m.txnCommits[kind].Inc()
	m.txnLatency[kind].Observe(time.Since(since).Seconds())
}

func (m *NodeMetrics) txnAborted(reason abortReason) {
	if m == nil {
		return
	}
	m.txnAborts[reason].Inc()
}

func (m *NodeMetrics) txnOutcomeUnknown(kind txnKind) {
	if m == nil {
		return
	}
	m.txnUnknown[kind].Inc()
}

// TxnRecovered counts a stale transaction that recovery settled and
// finished on every participant.
func (m *NodeMetrics) TxnRecovered(committed bool) {
	if m == nil {
		return
	}
	m.txnRecovery[committed].Inc()
}

// CutEnded records a cut this node recorded as ended in group 0
// (cut.Driver.OnEnd): reason is empty for a completed one.
func (m *NodeMetrics) CutEnded(c *kvpb.CutInfo, reason string) {
	if m == nil {
		return
	}
	if c.GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
		if f := m.cutFailures[reason]; f != nil {
			f.Inc()
		}
		return
	}
	m.cutsCompleted.Inc()
	m.cutDuration.Observe(float64(max(0, c.GetFinishedUnixMs()-c.GetStartedUnixMs())) / 1000)
	for _, p := range c.GetPartitions() {
		m.cutActive.Observe(float64(p.GetBefore() + p.GetAfter() + p.GetAborted()))
	}
}

// StoreError counts a failed operation on a snapshot store
// (snapshot.Options.OnError).
func (m *NodeMetrics) StoreError(op snapshot.Op) {
	if m == nil {
		return
	}
	if c := m.storeErrors[op]; c != nil {
		c.Inc()
	}
}

// PeerRejected counts a refused peer call or handshake by reason.
func (m *NodeMetrics) PeerRejected(reason string) {
	if m == nil {
		return
	}
	if c := m.peerRejected[reason]; c != nil {
		c.Inc()
	}
}

// snapshotEnded records the end of a CreateSnapshot: res on success,
// else the phase that failed.
func (m *NodeMetrics) snapshotEnded(res *SnapshotResult, plans []*partPlan, failed string, took time.Duration) {
	if m == nil {
		return
	}
	m.snapDuration[res != nil].Observe(took.Seconds())
	if res == nil {
		m.snapFailures[failed].Inc()
		return
	}
	m.snapCreated.Inc()
	var changelog uint64
	for _, p := range plans {
		for _, i := range p.New {
			changelog += uint64(max(0, p.Pieces[i].Object.Size))
		}
		l := strconv.FormatUint(p.cp.GetPartition(), 10)
		m.snapChainPieces.WithLabelValues(l).Set(float64(len(p.Pieces)))
		m.snapChainEnts.WithLabelValues(l).Set(float64(p.cp.GetFinishIndex() - min(p.cp.GetFinishIndex(), p.Base)))
	}
	files := res.BaseFileBytes
	m.snapBytes["checkpoint_files"].Add(float64(files))
	m.snapBytes["changelog"].Add(float64(changelog))
	m.snapBytes["base"].Add(float64(res.BytesUploaded - min(res.BytesUploaded, files+changelog)))
}
