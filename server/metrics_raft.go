package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cutkv/cutkv/raftstore"
)

// raftCollector exports each raft group's state and event counts at
// scrape time from what the raft loop publishes (Store.Status, a copy
// under a read lock, and Store.Counters, atomic loads): the loop itself
// does no metric work. The group label is bounded by --partitions.
type raftCollector struct {
	store *raftstore.Store
}

var (
	raftTerm          = prometheus.NewDesc("cutkv_raft_term", "Current raft term of a group, as this replica sees it.", []string{"group"}, nil)
	raftIsLeader      = prometheus.NewDesc("cutkv_raft_is_leader", "1 when this replica leads the group, else 0.", []string{"group"}, nil)
	raftHasLeader     = prometheus.NewDesc("cutkv_raft_has_leader", "1 when this replica knows a leader of the group, else 0.", []string{"group"}, nil)
	raftCommit        = prometheus.NewDesc("cutkv_raft_commit_index", "Highest raft index this replica knows committed.", []string{"group"}, nil)
	raftApplied       = prometheus.NewDesc("cutkv_raft_applied_index", "Highest raft index this replica applied.", []string{"group"}, nil)
	raftApplyLag      = prometheus.NewDesc("cutkv_raft_apply_lag_entries", "Entries committed but not yet applied by this replica (commit index minus applied index).", []string{"group"}, nil)
	raftLeaderChanges = prometheus.NewDesc("cutkv_raft_leader_changes_total", "Times this replica saw a new leader of the group.", []string{"group"}, nil)
	raftProposals     = prometheus.NewDesc("cutkv_raft_proposals_total", "Commands this replica proposed as the group's leader.", []string{"group"}, nil)
	raftSnapsSent     = prometheus.NewDesc("cutkv_raft_snapshots_sent_total", "Raft snapshots this replica sent as the group's leader (a follower behind the compacted log is told to fetch a materialization).", []string{"group"}, nil)
	raftSnapsIn       = prometheus.NewDesc("cutkv_raft_snapshots_installed_total", "Leader materializations this replica installed to catch up (fetched, verified, swapped in).", []string{"group"}, nil)
	raftFailed        = prometheus.NewDesc("cutkv_raft_proposals_failed_total", "Proposals not applied, by reason: not_leader, dropped (raft refused it), overwritten (a later term's entry took its place), leadership_lost (outcome unknown).", []string{"group", "reason"}, nil)
)

func (c raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{raftTerm, raftIsLeader, raftHasLeader, raftCommit, raftApplied, raftApplyLag,
		raftLeaderChanges, raftProposals, raftSnapsSent, raftSnapsIn, raftFailed} {
		ch <- d
	}
}

func (c raftCollector) Collect(ch chan<- prometheus.Metric) {
	reasons := raftstore.FailReasons()
	for _, g := range c.store.Groups() {
		st, ok := c.store.Status(g)
		cn, ok2 := c.store.Counters(g)
		if !ok || !ok2 {
			continue
		}
		l := strconv.FormatUint(g, 10)
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l)
		}
		counter := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l)
		}
		gauge(raftTerm, float64(st.Term))
		gauge(raftIsLeader, b2f(st.IsLeader))
		gauge(raftHasLeader, b2f(st.Leader != 0))
		gauge(raftCommit, float64(st.Commit))
		gauge(raftApplied, float64(st.Applied))
		gauge(raftApplyLag, float64(st.Commit-min(st.Commit, st.Applied)))
		counter(raftLeaderChanges, cn.LeaderChanges)
		counter(raftProposals, cn.Proposals)
		counter(raftSnapsSent, cn.SnapshotsSent)
		counter(raftSnapsIn, cn.SnapshotsInstalled)
		for i, r := range reasons {
			ch <- prometheus.MustNewConstMetric(raftFailed, prometheus.CounterValue, float64(cn.Failed[i]), l, r)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// materializeMetrics observe the materializations the raft store writes
// (raftstore.Config.OnMaterialize).
type materializeMetrics struct {
	done, failed prometheus.Counter
	bytes        prometheus.Counter
	duration     prometheus.Histogram
}

func newMaterializeMetrics(reg prometheus.Registerer) *materializeMetrics {
	m := &materializeMetrics{
		done: prometheus.NewCounter(prometheus.CounterOpts{Name: "cutkv_materializations_total",
			Help: "Materializations written by this node (checkpoints or image files), all partitions."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "cutkv_materialization_failures_total",
			Help: "Materializations that failed (the WAL keeps the partition's log until one succeeds)."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "cutkv_materialization_bytes_total",
			Help: "Bytes of the materializations written: a checkpoint's files (hard links, mostly not copied) or an image file."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cutkv_materialization_duration_seconds",
			Help: "Time to write one materialization (flush and checkpoint, or image), successful or not.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
	}
	reg.MustRegister(m.done, m.failed, m.bytes, m.duration)
	return m
}

func (m *materializeMetrics) observe(ev raftstore.Materialized) {
	m.duration.Observe(ev.Took.Seconds())
	if ev.Err != nil {
		m.failed.Inc()
		return
	}
	m.done.Inc()
	m.bytes.Add(float64(ev.Bytes))
}
