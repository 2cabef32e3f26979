package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cutkv/cutkv/bench/internal/benchfmt"
)

// Costs is what scripts/bench-compare.sh measured of cutkv's own
// features (COSTS), read from its costs directory:
//
//	params                       KEY=VALUE lines: the knobs the parts ran with
//	PART/command.txt             the commands of a part, shown as given
//	ab/WORKLOAD-PASS-MODE.json   kvbench results, MODE A (nothing) or B (cuts and snapshots)
//	ab/WORKLOAD-PASS-B.metrics.json    benchsnap scrape after a B run
//	ab/WORKLOAD-PASS-B.snapshots.json  kvctl snapshot list -o json after a B run
//	cuts/idle.json               benchsnap cuts on an idle cluster
//	upload/load.json             kvbench get (its preload wrote the keys)
//	upload/full.json             benchsnap create -full
//	upload/step-MIB.json         benchsnap create after writing MIB MiB of values
//	upload/step-MIB.put.json     kvbench put: those writes (absent for 0)
//	restart/WRITES.put.json      kvbench put: the history
//	restart/WRITES.sizes         "wal BYTES" and "materializations BYTES" lines, before the stop
//	restart/WRITES.events        benchckpt cluster's events of the restart
//	memory/KEYS.json             benchsnap scrape -gc with KEYS keys held
//	memory/KEYS.fill.json        benchsnap fill: the keys added to get there
//
// A part whose directory is missing was not run.
type Costs struct {
	Params   map[string]string
	Commands map[string]string
	AB       []ABRun
	Idle     *CutStats
	Upload   *UploadPart
	Restart  []RestartPoint
	Memory   []MemoryPoint
}

// ABRun is one run of the throughput comparison.
type ABRun struct {
	Run
	// Mode is "A" (no cuts, no snapshots) or "B" (cuts and snapshots).
	Mode string
	// Snaps is set for B runs whose metrics were scraped.
	Snaps *SnapStats
}

// SnapStats are the automatic snapshots of a B run's cluster.
type SnapStats struct {
	// OK, Failed, MeanS and Uploaded come from the nodes' metrics,
	// summed over the nodes, since they started.
	OK, Failed int64
	MeanS      float64
	Uploaded   float64
	// Listed counts the snapshots in the store after the run (-1: not
	// listed); InRun those whose cut fell in the warm-up or the measured
	// phase.
	Listed, InRun int
}

// SnapCreated is one line of benchsnap create.
type SnapCreated struct {
	ID             string  `json:"id"`
	Cut            uint64  `json:"cut"`
	DurationMs     int64   `json:"duration_ms"`
	WallS          float64 `json:"wall_s"`
	CutS           float64 `json:"cut_s"`
	BytesUploaded  uint64  `json:"bytes_uploaded"`
	PiecesUploaded uint32  `json:"pieces_uploaded"`
	PiecesReused   uint32  `json:"pieces_reused"`
	TotalBytes     uint64  `json:"total_bytes"`
	Objects        uint32  `json:"objects"`
	Error          string  `json:"error"`
}

// UploadStep is one incremental snapshot after MiB MiB of values were
// written.
type UploadStep struct {
	MiB  float64
	Put  *Run
	Snap SnapCreated
}

// written is the bytes of values the step's puts wrote.
func (s UploadStep) written() float64 {
	if s.Put == nil {
		return 0
	}
	return float64(s.Put.Ops) * float64(s.Put.Config.ValueSize)
}

// UploadPart is the bytes-uploaded measurement.
type UploadPart struct {
	Load  *Run
	Full  *SnapCreated
	Steps []UploadStep
}

// RestartPoint is one restart after Writes puts.
type RestartPoint struct {
	Writes             int64
	Put                *Run
	WALBytes, MatBytes int64
	// Open, Ready and Applied map a node to its seconds from process
	// start to its "node started" line, its "ready" line and having
	// applied again all it had before the stop.
	Open, Ready, Applied map[string]float64
}

// MemoryPoint is the nodes' memory with Keys keys held.
type MemoryPoint struct {
	Keys int64
	// Heap and RSS are go_memstats_heap_inuse_bytes and
	// process_resident_memory_bytes, per node in scrape order.
	Heap, RSS []float64
	Fill      *benchfmt.Filled
}

// snapshotList is the part of kvctl snapshot list -o json read here.
type snapshotList struct {
	Snapshots []struct {
		ID         string `json:"id"`
		CutVersion uint64 `json:"cut_version"`
		TimeUnixMs int64  `json:"time_unix_ms"`
	} `json:"snapshots"`
}

// loadCosts reads the costs directory dir.
func loadCosts(dir string) (*Costs, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	c := &Costs{Params: map[string]string{}, Commands: map[string]string{}}
	if b, err := os.ReadFile(filepath.Join(dir, "params")); err == nil {
		c.Params = parseParams(string(b))
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, part := range []string{"ab", "cuts", "upload", "restart", "memory"} {
		b, err := os.ReadFile(filepath.Join(dir, part, "command.txt"))
		if err == nil {
			c.Commands[part] = strings.TrimRight(string(b), "\n")
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	var err error
	if c.AB, err = loadAB(filepath.Join(dir, "ab")); err != nil {
		return nil, err
	}
	idle := filepath.Join(dir, "cuts", "idle.json")
	if exists(idle) {
		c.Idle = &CutStats{}
		if err := readJSON(idle, c.Idle); err != nil {
			return nil, err
		}
	}
	if c.Upload, err = loadUpload(filepath.Join(dir, "upload")); err != nil {
		return nil, err
	}
	if c.Restart, err = loadRestart(filepath.Join(dir, "restart")); err != nil {
		return nil, err
	}
	if c.Memory, err = loadMemory(filepath.Join(dir, "memory")); err != nil {
		return nil, err
	}
	return c, nil
}

// empty reports whether no part has results.
func (c *Costs) empty() bool {
	return c == nil || (len(c.AB) == 0 && c.Idle == nil && c.Upload == nil && len(c.Restart) == 0 && len(c.Memory) == 0)
}

// runs are the kvbench results among the costs (for the machine line).
func (c *Costs) runs() []Run {
	if c == nil {
		return nil
	}
	var out []Run
	for _, r := range c.AB {
		out = append(out, r.Run)
	}
	if c.Upload != nil {
		if c.Upload.Load != nil {
			out = append(out, *c.Upload.Load)
		}
		for _, s := range c.Upload.Steps {
			if s.Put != nil {
				out = append(out, *s.Put)
			}
		}
	}
	for _, p := range c.Restart {
		if p.Put != nil {
			out = append(out, *p.Put)
		}
	}
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readRun reads a kvbench result; nil, nil when the file is missing.
func readRun(path string) (*Run, error) {
	if !exists(path) {
		return nil, nil
	}
	r := &Run{}
	return r, readJSON(path, r)
}

// parseParams reads KEY=VALUE lines; blank lines and # comments are
// skipped.
func parseParams(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

// loadAB reads the A and B runs, in workload then pass order, A first.
func loadAB(dir string) ([]ABRun, error) {
	// Other names are the metrics and snapshot lists of B runs.
	files, err := runFiles(dir, func(side string) bool { return side == "A" || side == "B" })
	if err != nil {
		return nil, err
	}
	var out []ABRun
	for _, f := range files {
		r, err := readRun(f.path)
		if err != nil {
			return nil, err
		}
		if r.Workload != f.workload {
			return nil, fmt.Errorf("%s: result is of %s, the name says %s", f.path, r.Workload, f.workload)
		}
		r.Pass = f.pass
		ab := ABRun{Run: *r, Mode: f.side}
		if ab.Mode == "B" {
			if ab.Snaps, err = loadSnapStats(strings.TrimSuffix(f.path, ".json"), r); err != nil {
				return nil, err
			}
		}
		out = append(out, ab)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ra, rb := workloadRank(a.Workload), workloadRank(b.Workload); ra != rb {
			return ra < rb
		}
		if a.Workload != b.Workload {
			return a.Workload < b.Workload
		}
		if a.Pass != b.Pass {
			return a.Pass < b.Pass
		}
		return a.Mode < b.Mode
	})
	return out, nil
}

// loadSnapStats reads BASE.metrics.json and BASE.snapshots.json of a B
// run; nil when the metrics are missing.
func loadSnapStats(base string, r *Run) (*SnapStats, error) {
	if !exists(base + ".metrics.json") {
		return nil, nil
	}
	var m benchfmt.Scrape
	if err := readJSON(base+".metrics.json", &m); err != nil {
		return nil, err
	}
	st := &SnapStats{
		OK:       int64(m.Sum(`cutkv_snapshot_duration_seconds_count{result="ok"}`)),
		Failed:   int64(m.Sum(`cutkv_snapshot_duration_seconds_count{result="error"}`)),
		Uploaded: m.SumFamily("cutkv_snapshot_uploaded_bytes_total"),
		Listed:   -1,
	}
	if st.OK > 0 {
		st.MeanS = m.Sum(`cutkv_snapshot_duration_seconds_sum{result="ok"}`) / float64(st.OK)
	}
	if exists(base + ".snapshots.json") {
		var l snapshotList
		if err := readJSON(base+".snapshots.json", &l); err != nil {
			return nil, err
		}
		st.Listed = len(l.Snapshots)
		from, to := runWindow(r)
		for _, s := range l.Snapshots {
			t := time.UnixMilli(s.TimeUnixMs)
			if !t.Before(from) && !t.After(to) {
				st.InRun++
			}
		}
	}
	return st, nil
}

// runWindow is a kvbench run from the start of its warm-up to the end of
// its measured phase.
func runWindow(r *Run) (from, to time.Time) {
	warm, _ := time.ParseDuration(r.Config.Warmup)
	return r.Start.Add(-warm), r.Start.Add(time.Duration(r.ElapsedSec * float64(time.Second)))
}

// loadUpload reads the upload part; nil when it did not run.
func loadUpload(dir string) (*UploadPart, error) {
	if !exists(dir) {
		return nil, nil
	}
	u := &UploadPart{}
	var err error
	if u.Load, err = readRun(filepath.Join(dir, "load.json")); err != nil {
		return nil, err
	}
	if full := filepath.Join(dir, "full.json"); exists(full) {
		u.Full = &SnapCreated{}
		if err := readJSON(full, u.Full); err != nil {
			return nil, err
		}
	}
	names, err := filepath.Glob(filepath.Join(dir, "step-*.json"))
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		base := strings.TrimSuffix(filepath.Base(name), ".json")
		if strings.HasSuffix(base, ".put") {
			continue
		}
		mib, err := strconv.ParseFloat(strings.TrimPrefix(base, "step-"), 64)
		if err != nil {
			continue
		}
		st := UploadStep{MiB: mib}
		if err := readJSON(name, &st.Snap); err != nil {
			return nil, err
		}
		if st.Put, err = readRun(filepath.Join(dir, base+".put.json")); err != nil {
			return nil, err
		}
		u.Steps = append(u.Steps, st)
	}
	sort.Slice(u.Steps, func(i, j int) bool { return u.Steps[i].MiB < u.Steps[j].MiB })
	if u.Full == nil && len(u.Steps) == 0 {
		return nil, nil
	}
	return u, nil
}

// loadRestart reads the restart points, fewest writes first.
func loadRestart(dir string) ([]RestartPoint, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.events"))
	if err != nil {
		return nil, err
	}
	var out []RestartPoint
	for _, name := range names {
		base := strings.TrimSuffix(name, ".events")
		n, err := strconv.ParseInt(filepath.Base(base), 10, 64)
		if err != nil {
			continue
		}
		p := RestartPoint{Writes: n}
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ev := parseEvents(string(b))
		p.Open, p.Ready, p.Applied = ev["open"], ev["ready"], ev["applied"]
		if b, err := os.ReadFile(base + ".sizes"); err == nil {
			p.WALBytes, p.MatBytes = parseSizes(string(b))
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if p.Put, err = readRun(base + ".put.json"); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Writes < out[j].Writes })
	return out, nil
}

// parseEvents reads benchckpt cluster's "KIND NODE SECONDS" lines (open,
// ready, applied) into kind → node → seconds; other lines are skipped.
func parseEvents(text string) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue
		}
		switch f[0] {
		case "open", "ready", "applied":
		default:
			continue
		}
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			continue
		}
		if out[f[0]] == nil {
			out[f[0]] = map[string]float64{}
		}
		out[f[0]][f[1]] = v
	}
	return out
}

// parseSizes reads "wal BYTES" and "materializations BYTES" lines.
func parseSizes(text string) (wal, mat int64) {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "wal":
			wal = v
		case "materializations":
			mat = v
		}
	}
	return wal, mat
}

// loadMemory reads the memory points, fewest keys first.
func loadMemory(dir string) ([]MemoryPoint, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []MemoryPoint
	for _, name := range names {
		base := strings.TrimSuffix(filepath.Base(name), ".json")
		n, err := strconv.ParseInt(base, 10, 64)
		if err != nil {
			continue // KEYS.fill.json
		}
		var s benchfmt.Scrape
		if err := readJSON(name, &s); err != nil {
			return nil, err
		}
		p := MemoryPoint{Keys: n, Heap: s.PerNode("go_memstats_heap_inuse_bytes"), RSS: s.PerNode("process_resident_memory_bytes")}
		if fill := filepath.Join(dir, base+".fill.json"); exists(fill) {
			p.Fill = &benchfmt.Filled{}
			if err := readJSON(fill, p.Fill); err != nil {
				return nil, err
			}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Keys < out[j].Keys })
	return out, nil
}
