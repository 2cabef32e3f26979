package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/server"
)

// The metrics table of docs/operations.md is the list of every cutkv_
// family; these tests hold the nodes and the Grafana dashboard to it.
const (
	operationsDoc    = "../docs/operations.md"
	metricsHeading   = "## Metrics"
	grafanaDashboard = "../deploy/grafana/cutkv.json"
)

// docFamily is one row of the doc's metrics table.
type docFamily struct {
	name   string
	typ    string   // counter, gauge, histogram
	labels []string // sorted; empty for none
}

// docFamilies parses the metrics table under metricsHeading: rows
// "| `name` | type | `l1`, `l2` or — | meaning |".
func docFamilies(t *testing.T) map[string]docFamily {
	t.Helper()
	f, err := os.Open(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]docFamily{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == metricsHeading
			continue
		}
		if !in || !strings.HasPrefix(line, "| `cutkv_") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			t.Fatalf("%s: metrics row with %d cells: %q", operationsDoc, len(cells), line)
		}
		fam := docFamily{name: strings.Trim(strings.TrimSpace(cells[1]), "`"), typ: strings.TrimSpace(cells[2])}
		if l := strings.TrimSpace(cells[3]); l != "—" {
			for _, name := range strings.Split(l, ",") {
				fam.labels = append(fam.labels, strings.Trim(strings.TrimSpace(name), "`"))
			}
			sort.Strings(fam.labels)
		}
		if !slices.Contains([]string{"counter", "gauge", "histogram"}, fam.typ) {
			t.Fatalf("%s: %s has type %q", operationsDoc, fam.name, fam.typ)
		}
		if _, dup := out[fam.name]; dup {
			t.Fatalf("%s: %s listed twice", operationsDoc, fam.name)
		}
		out[fam.name] = fam
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 {
		t.Fatalf("%s: only %d families under %q: the table moved or changed shape", operationsDoc, len(out), metricsHeading)
	}
	return out
}

// scrapeMetrics reads one node's /metrics with client_golang's own text
// parser.
func scrapeMetrics(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %s", addr, resp.Status)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s/metrics: %v", addr, err)
	}
	return fams
}

// scraped is every node's families, merged by name.
type scraped map[string][]*dto.MetricFamily

func scrapeAll(t *testing.T, c *clustertest.Cluster) scraped {
	t.Helper()
	out := scraped{}
	for i := range c.N() {
		for name, f := range scrapeMetrics(t, c.Node(i).Addrs().HTTP) {
			out[name] = append(out[name], f)
		}
	}
	return out
}

// sum adds the values of name's samples on every node (a histogram's
// observation counts) whose labels include match.
func (s scraped) sum(name string, match map[string]string) float64 {
	var total float64
	for _, f := range s[name] {
		for _, m := range f.GetMetric() {
			if !hasLabels(m, match) {
				continue
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				total += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				total += m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				total += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return total
}

func hasLabels(m *dto.Metric, match map[string]string) bool {
	for k, v := range match {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestMetricsFamiliesMatchTheDoc runs a put, a transaction that aborts, a
// cut, a checkpoint and a snapshot on a 3-node cluster, then scrapes every
// node: each family of the doc's table has samples of the documented
// type and labels, every exported cutkv_ family is in the table, and the
// families of what was done counted it.
func TestMetricsFamiliesMatchTheDoc(t *testing.T) {
	doc := docFamilies(t)
	c := clustertest.Start(t, 3, clustertest.Options{Configure: func(i int, cfg *server.Config) {
		cfg.HTTPAddr = clustertest.FreeAddr(t)
	}})
	cl := kvrpc.NewClusterClient(c.Conn(0))

	clustertest.Eventually(t, 10*time.Second, func() error {
		_, err := c.KV(0).Put(ctxT(t, 5*time.Second), &kvpb.PutRequest{Key: []byte("metrics-put"), Value: []byte("v")})
		return err
	})

	// Transactions over the same two partitions from every node at once:
	// a 2PC transaction's locks outlive its answer by a raft round, so
	// the ones that meet them are refused and answered Aborted.
	a, b, _ := keysIn("metrics", 4)
	var aborted, committed int
	var mu sync.Mutex
	for deadline := time.Now().Add(30 * time.Second); aborted == 0 || committed == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("no conflict in 30 s: %d committed, %d aborted", committed, aborted)
		}
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() {
				_, err := c.KV(i%3).Txn(ctxT(t, 5*time.Second), &kvpb.TxnRequest{
					Success: []*kvpb.RequestOp{opPut(a, fmt.Sprint(i)), opPut(b, fmt.Sprint(i))},
				})
				mu.Lock()
				defer mu.Unlock()
				switch status.Code(err) {
				case codes.OK:
					committed++
				case codes.Aborted:
					aborted++
				}
			})
		}
		wg.Wait()
	}

	var cut *kvpb.CutInfo
	clustertest.Eventually(t, 20*time.Second, func() error {
		resp, err := cl.CreateCut(ctxT(t, 15*time.Second), &kvpb.CreateCutRequest{})
		if err == nil && resp.GetCut().GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
			err = fmt.Errorf("cut %d: %s %s", resp.GetCut().GetVersion(), resp.GetCut().GetState(), resp.GetCut().GetError())
		}
		cut = resp.GetCut()
		return err
	})
	clustertest.Eventually(t, 20*time.Second, func() error {
		_, err := cl.Checkpoint(ctxT(t, 15*time.Second), &kvpb.CheckpointRequest{})
		return err
	})
	// The cluster's store is a file:// directory in the test's TempDir.
	snap := mustSnapshot(t, c, 0, &kvpb.CreateSnapshotRequest{})
	t.Logf("cut %d, snapshot %s: %d bytes uploaded; %d txns committed, %d aborted", cut.GetVersion(),
		snap.GetSnapshot().GetId(), snap.GetBytesUploaded(), committed, aborted)

	// What was done is counted (the ends of cuts and snapshots are
	// recorded just after the client hears them).
	var s scraped
	counted := []struct {
		name  string
		match map[string]string
	}{
		{"cutkv_grpc_requests_total", map[string]string{"method": "/cutkv.kv.v1.KV/Put"}},
		{"cutkv_raft_proposals_total", nil},
		{"cutkv_raft_leader_changes_total", nil},
		{"cutkv_raft_is_leader", nil},
		{"cutkv_wal_fsyncs_total", nil},
		{"cutkv_txn_commits_total", map[string]string{"kind": "2pc"}},
		{"cutkv_txn_commit_duration_seconds", map[string]string{"kind": "2pc"}},
		{"cutkv_txn_aborts_total", map[string]string{"kind": "2pc"}},
		{"cutkv_cuts_completed_total", nil},
		{"cutkv_cut_duration_seconds", nil},
		{"cutkv_cut_active_transactions", nil},
		{"cutkv_materializations_total", nil},
		{"cutkv_materialization_duration_seconds", nil},
		{"cutkv_snapshots_created_total", nil},
		{"cutkv_snapshot_duration_seconds", map[string]string{"result": "ok"}},
		{"cutkv_snapshot_uploaded_bytes_total", map[string]string{"kind": "changelog"}},
		{"cutkv_snapshot_chain_entries", nil},
	}
	clustertest.Eventually(t, 10*time.Second, func() error {
		s = scrapeAll(t, c)
		for _, w := range counted {
			if s.sum(w.name, w.match) == 0 {
				return fmt.Errorf("%s%v counted nothing", w.name, w.match)
			}
		}
		return nil
	})

	t.Logf("aborts: 2pc refused %v, 2pc record %v, 1pc wait_die %v, 1pc conflict %v",
		s.sum("cutkv_txn_aborts_total", map[string]string{"kind": "2pc", "reason": "refused"}),
		s.sum("cutkv_txn_aborts_total", map[string]string{"kind": "2pc", "reason": "record"}),
		s.sum("cutkv_txn_aborts_total", map[string]string{"kind": "1pc", "reason": "wait_die"}),
		s.sum("cutkv_txn_aborts_total", map[string]string{"kind": "1pc", "reason": "conflict"}))
	for name, fam := range doc {
		fs := s[name]
		if len(fs) == 0 {
			t.Errorf("%s (in %s) is not exported by any node", name, operationsDoc)
			continue
		}
		samples := 0
		for _, f := range fs {
			if got := strings.ToLower(f.GetType().String()); got != fam.typ {
				t.Errorf("%s is a %s, the doc says %s", name, got, fam.typ)
			}
			for _, m := range f.GetMetric() {
				samples++
				var labels []string
				for _, lp := range m.GetLabel() {
					labels = append(labels, lp.GetName())
				}
				sort.Strings(labels)
				if !slices.Equal(labels, fam.labels) {
					t.Errorf("%s has labels %v, the doc says %v", name, labels, fam.labels)
					break
				}
			}
		}
		if samples == 0 {
			t.Errorf("%s has no sample on any node", name)
		}
	}
	for name := range s {
		if _, ok := doc[name]; strings.HasPrefix(name, "cutkv_") && !ok {
			t.Errorf("%s is exported but missing from the table in %s", name, operationsDoc)
		}
	}
}

// promName matches the cutkv_ metric names in a PromQL expression.
var promName = regexp.MustCompile(`\bcutkv_[a-zA-Z0-9_]+`)

// TestGrafanaDashboardUsesExportedFamilies checks every query of the
// dashboard against the doc's table (which the test above checks against
// the nodes): each metric it names is a family, or a histogram's
// _bucket, _sum or _count series.
func TestGrafanaDashboardUsesExportedFamilies(t *testing.T) {
	doc := docFamilies(t)
	b, err := os.ReadFile(grafanaDashboard)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", grafanaDashboard, err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "expr" {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash["panels"])
	if len(exprs) < 10 {
		t.Fatalf("%s: only %d queries in its panels", grafanaDashboard, len(exprs))
	}
	used := map[string]bool{}
	for _, e := range exprs {
		names := promName.FindAllString(e, -1)
		if len(names) == 0 {
			t.Errorf("query %q names no cutkv_ metric", e)
		}
		for _, n := range names {
			used[n] = true
			if _, ok := doc[n]; ok {
				continue
			}
			base, found := "", false
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if cut, ok := strings.CutSuffix(n, suffix); ok {
					base, found = cut, true
				}
			}
			if f, ok := doc[base]; !found || !ok || f.typ != "histogram" {
				t.Errorf("query %q: %s is not an exported family (nor a histogram's series)", e, n)
			}
		}
	}
	t.Logf("%d queries over %d metric names", len(exprs), len(used))
}
