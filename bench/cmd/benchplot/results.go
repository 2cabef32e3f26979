package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Run is the part of a kvbench JSON result (bench/cmd/kvbench/result.go) that
// benchplot shows, with the pass number taken from the file name.
type Run struct {
	Workload string `json:"workload"`
	Target   string `json:"target"`
	// Start is when the measured phase began; ElapsedSec its length.
	Start      time.Time `json:"start"`
	ElapsedSec float64   `json:"elapsed_s"`
	Ops        int64     `json:"ops"`
	OpsPerSec  float64   `json:"ops_per_sec"`
	Aborts     int64     `json:"aborts"`
	AbortRate  float64   `json:"abort_rate"`
	Errors     struct {
		Total int64 `json:"total"`
		// Samples holds the first message of each kind of error.
		Samples map[string]string `json:"samples"`
	} `json:"errors"`
	Bank *struct {
		Audits struct {
			Ops int64 `json:"ops"`
		} `json:"audits"`
		FinalAudit string `json:"final_audit"`
	} `json:"bank"`
	Latency struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"latency_ms"`
	// Cuts is what kvbench's cutter measured (--cut-interval).
	Cuts *CutStats `json:"cuts"`
	// Preload is kvbench's unmeasured write of every key (get).
	Preload *struct {
		Keys    int64   `json:"keys"`
		Seconds float64 `json:"seconds"`
		Errors  int64   `json:"errors"`
	} `json:"preload"`
	Config struct {
		Clients   int    `json:"clients"`
		Conns     int    `json:"conns"`
		Warmup    string `json:"warmup"`
		KeySize   int    `json:"key_size"`
		ValueSize int    `json:"value_size"`
		Keyspace  int64  `json:"keyspace"`
		TxnKeys   string `json:"txn_keys"`
		Accounts  int64  `json:"accounts"`
	} `json:"config"`
	Machine struct {
		GOOS      string `json:"goos"`
		GOARCH    string `json:"goarch"`
		NumCPU    int    `json:"num_cpu"`
		GoVersion string `json:"go_version"`
		CPU       string `json:"cpu"`
		LoadAvg   string `json:"load_avg"`
	} `json:"machine"`
	StoppedEarly string `json:"stopped_early"`
	// WAL holds the nodes' CPU time per operation (kvbench --metrics-url;
	// nil or 0 without it).
	WAL *struct {
		CPUUsPerOp float64 `json:"cpu_us_per_op"`
	} `json:"wal"`

	// Pass is N of WORKLOAD-N-TARGET.json: the order of the A B A B runs.
	Pass int `json:"-"`
}

// LatencyMs is a set of completion times, in ms.
type LatencyMs struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// CutStats are cut completion times: kvbench's "cuts" (--cut-interval)
// or benchsnap cuts' output, which also has Asked and Server.
type CutStats struct {
	Interval  string `json:"interval"`
	Asked     int64  `json:"asked"`
	Completed int64  `json:"completed"`
	Failed    int64  `json:"failed"`
	Errors    int64  `json:"errors"`
	// Latency is each completed cut's CreateCut call as the client saw
	// it; Server (benchsnap only) the cut's start to finish as the
	// cluster recorded it, in whole milliseconds.
	Latency    LatencyMs  `json:"latency_ms"`
	Server     *LatencyMs `json:"server_ms"`
	FirstError string     `json:"first_error"`
}

// Group is one workload's runs on both targets, each in pass order.
type Group struct {
	Workload    string
	Cutkv, Etcd []Run
}

// runFile is a result file named WORKLOAD-PASS-SIDE.json.
type runFile struct {
	path, workload, side string
	pass                 int
}

// runFiles lists dir's WORKLOAD-PASS-SIDE.json files whose side keep
// accepts; other names are skipped.
func runFiles(dir string, keep func(side string) bool) ([]runFile, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*-*-*.json"))
	if err != nil {
		return nil, err
	}
	var out []runFile
	for _, name := range names {
		parts := strings.Split(strings.TrimSuffix(filepath.Base(name), ".json"), "-")
		if len(parts) != 3 || !keep(parts[2]) {
			continue
		}
		pass, err := strconv.Atoi(parts[1])
		if err != nil {
			continue
		}
		out = append(out, runFile{path: name, workload: parts[0], side: parts[2], pass: pass})
	}
	return out, nil
}

// loadRuns reads every WORKLOAD-N-TARGET.json in dir.
func loadRuns(dir string) ([]Run, error) {
	files, err := runFiles(dir, func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	var runs []Run
	for _, f := range files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, err
		}
		var r Run
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		if r.Workload != f.workload || r.Target != f.side {
			return nil, fmt.Errorf("%s: result is %s on %s, the name says %s on %s", f.path, r.Workload, r.Target, f.workload, f.side)
		}
		r.Pass = f.pass
		runs = append(runs, r)
	}
	return runs, nil
}

// workloadOrder is the order of the section's subsections.
var workloadOrder = []string{"put", "get", "mixed", "txn", "bank"}

// workloadRank is w's place in workloadOrder (unknown ones last).
func workloadRank(w string) int {
	for i, x := range workloadOrder {
		if x == w {
			return i
		}
	}
	return len(workloadOrder)
}

// groupRuns groups runs by workload, in workloadOrder, then by target in
// pass order.
func groupRuns(runs []Run) []Group {
	by := map[string]*Group{}
	for _, r := range runs {
		g := by[r.Workload]
		if g == nil {
			g = &Group{Workload: r.Workload}
			by[r.Workload] = g
		}
		switch r.Target {
		case "cutkv":
			g.Cutkv = append(g.Cutkv, r)
		case "etcd":
			g.Etcd = append(g.Etcd, r)
		}
	}
	var out []Group
	for _, g := range by {
		byPass := func(rs []Run) func(i, j int) bool { return func(i, j int) bool { return rs[i].Pass < rs[j].Pass } }
		sort.Slice(g.Cutkv, byPass(g.Cutkv))
		sort.Slice(g.Etcd, byPass(g.Etcd))
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := workloadRank(out[i].Workload), workloadRank(out[j].Workload)
		if ri != rj {
			return ri < rj
		}
		return out[i].Workload < out[j].Workload
	})
	return out
}

// meanOps is the mean ops/s of runs; 0 when there are none.
func meanOps(runs []Run) float64 {
	if len(runs) == 0 {
		return 0
	}
	var s float64
	for _, r := range runs {
		s += r.OpsPerSec
	}
	return s / float64(len(runs))
}

// meanCPU is the mean node CPU µs per operation over the runs that
// measured it; 0 when none did.
func meanCPU(runs []Run) float64 {
	var s float64
	n := 0
	for _, r := range runs {
		if c := r.cpuUsPerOp(); c > 0 {
			s += c
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return s / float64(n)
}

// cpuUsPerOp is the run's node CPU µs per operation, 0 if not measured.
func (r Run) cpuUsPerOp() float64 {
	if r.WAL == nil {
		return 0
	}
	return r.WAL.CPUUsPerOp
}

// ratio is cutkv's mean ops/s over etcd's; ok is false when a side has no
// runs.
func (g Group) ratio() (float64, bool) {
	e := meanOps(g.Etcd)
	if len(g.Cutkv) == 0 || e == 0 {
		return 0, false
	}
	return meanOps(g.Cutkv) / e, true
}

// loadRange is the lowest and highest 1-minute load average over runs.
func loadRange(runs []Run) (lo, hi float64, ok bool) {
	for _, r := range runs {
		f := strings.Fields(r.Machine.LoadAvg)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		if !ok || v < lo {
			lo = v
		}
		if !ok || v > hi {
			hi = v
		}
		ok = true
	}
	return lo, hi, ok
}

// firstStart is the earliest start of runs' measured phases.
func firstStart(runs []Run) time.Time {
	var t time.Time
	for _, r := range runs {
		if t.IsZero() || (!r.Start.IsZero() && r.Start.Before(t)) {
			t = r.Start
		}
	}
	return t
}
