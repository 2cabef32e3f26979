package node

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/rpc"
)

// SnapshotSchedule is the automatic snapshot policy of a node (kvnode
// --snapshot-interval, --snapshot-store, --snapshot-keep).
type SnapshotSchedule struct {
	// Interval between the starts of two snapshots; 0: none. A snapshot
	// that takes longer delays the next one (they never overlap).
	Interval time.Duration
	// Store is the store URL ("" for the node's default).
	Store string
	// Keep prunes beyond the newest Keep snapshots; 0 keeps all.
	Keep int
	// Metrics, if set, records each snapshot.
	Metrics *SnapshotMetrics
}

// SnapshotMetrics are the automatic snapshots' own Prometheus series;
// every snapshot, automatic or requested, is also recorded by
// rpc.NodeMetrics (count, bytes, duration, failures, chains).
type SnapshotMetrics struct {
	interval prometheus.Histogram
}

// NewSnapshotMetrics registers the automatic snapshot series with reg.
func NewSnapshotMetrics(reg prometheus.Registerer) *SnapshotMetrics {
	m := &SnapshotMetrics{
		interval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "cutkv_snapshot_interval_seconds", Help: "Time between the cuts of two successive automatic snapshots (the recovery point objective achieved).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}),
	}
	reg.MustRegister(m.interval)
	return m
}

// runSnapshots takes a snapshot every Config.Snapshots.Interval while
// this node leads group 0, until ctx ends, and prunes beyond its Keep (a
// prune after a snapshot that made more).
func (n *Node) runSnapshots(ctx context.Context) {
	rn, s := n.rn, n.cfg.Snapshots
	if s.Interval <= 0 || rn.Meta == nil {
		return
	}
	log := rn.Snapshots.Log
	var next, lastCut time.Time
	var failures int
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Leadership is looked at every 100 ms; the next snapshot starts
		// on time, not at the next look.
		wait := 100 * time.Millisecond
		if !next.IsZero() {
			wait = max(0, min(wait, time.Until(next)))
		}
		t.Reset(wait)
		if st, ok := rn.Store.Status(0); !ok || !st.IsLeader {
			next, lastCut = time.Time{}, time.Time{}
			continue
		}
		now := time.Now()
		if now.Before(next) {
			continue
		}
		next = now.Add(s.Interval)
		res, err := rpc.CreateSnapshot(ctx, rn, &kvpb.CreateSnapshotRequest{Store: s.Store}, nil)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			// One line per failure streak's start and then every tenth.
			if failures == 1 || failures%10 == 0 {
				log.Warn("automatic snapshot failed; retrying at the next interval", "failures", failures, "err", err)
			}
			continue
		}
		failures = 0
		cutAt := res.Manifest.Time
		if s.Metrics != nil && !lastCut.IsZero() {
			s.Metrics.interval.Observe(cutAt.Sub(lastCut).Seconds())
		}
		lastCut = cutAt
		if s.Keep > 0 {
			st, err := rn.Snapshots.Store(ctx, s.Store, rn.Layout.ClusterID)
			var ids []string
			if err == nil {
				ids, err = st.IDs(ctx)
			}
			if err == nil && len(ids) > s.Keep {
				_, err = rpc.PruneSnapshots(ctx, rn, st, s.Keep, 0)
			}
			if err != nil && ctx.Err() == nil {
				log.Warn("pruning automatic snapshots failed", "err", err)
			}
		}
	}
}
