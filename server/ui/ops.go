package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/cutkv/cutkv/proto/kvpb"
)

// requestsFamily and kvMethodPrefix pick, from the node's registry, the
// client requests of the KV service (the forwarded copies a node serves
// for its peers are named cutkv.forward.* and not counted again).
const (
	requestsFamily = "cutkv_grpc_requests_total"
	kvMethodPrefix = "/cutkv.kv.v1.KV/"
)

// requestsTotal sums this node's KV requests served, all codes.
func (g *gatherer) requestsTotal() (uint64, error) {
	if g.cfg.Metrics == nil {
		return 0, fmt.Errorf("no metrics registry")
	}
	fams, err := g.cfg.Metrics.Gather()
	if err != nil {
		return 0, fmt.Errorf("gather metrics: %w", err)
	}
	var total float64
	for _, f := range fams {
		if f.GetName() != requestsFamily {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && strings.HasPrefix(l.GetValue(), kvMethodPrefix) {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return uint64(total), nil
}

// opsSampler keeps the counters of the previous gathering and the rates
// between the last ones.
type opsSampler struct {
	have     bool
	at       time.Time
	requests uint64
	haveReq  bool
	applied  map[uint64]uint64 // partition -> applied index
	series   []OpsPoint
}

// sample records this gathering's counters and returns the rates since
// the previous one. A counter that went backwards (a node restarted, a
// row from another reporter) adds nothing rather than a negative rate.
func (o *opsSampler) sample(now time.Time, requests func() (uint64, error), stat *kvpb.StatusResponse, serr error) Ops {
	out := Ops{}
	req, rerr := requests()
	var applied map[uint64]uint64
	if serr == nil {
		applied = map[uint64]uint64{}
		for _, g := range stat.GetGroups() {
			if g.GetId() != 0 { // group 0 holds metadata, not user operations
				applied[g.GetId()] = g.GetAppliedIndex()
			}
		}
	}
	switch {
	case rerr != nil:
		out.Error = "requests/s: " + rerr.Error()
	case serr != nil:
		out.Error = errText("entries/s: status", serr)
	}
	out.RequestsTotal = req

	dt := now.Sub(o.at).Seconds()
	if o.have && dt > 0 {
		var p OpsPoint
		p.TimeUnixMs = now.UnixMilli()
		ok := false
		if rerr == nil && o.haveReq {
			r := 0.0
			if req >= o.requests {
				r = float64(req-o.requests) / dt
			}
			p.RequestsPerSec, out.RequestsPerSec = r, &r
			ok = true
		}
		if applied != nil && o.applied != nil {
			var d uint64
			for g, a := range applied {
				if prev, seen := o.applied[g]; seen && a > prev {
					d += a - prev
				}
			}
			e := float64(d) / dt
			p.EntriesPerSec, out.EntriesPerSec = e, &e
			ok = true
		}
		if ok {
			o.series = append(o.series, p)
			if len(o.series) > maxSamples {
				o.series = append(o.series[:0:0], o.series[len(o.series)-maxSamples:]...)
			}
		}
	}
	// A failed read forgets the counter: the next rate is over two
	// consecutive gatherings, never over a gap.
	o.have, o.at = true, now
	o.requests, o.haveReq = req, rerr == nil
	o.applied = applied
	out.Series = append([]OpsPoint{}, o.series...)
	return out
}
