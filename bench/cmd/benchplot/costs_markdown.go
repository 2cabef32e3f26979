package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

const mib = 1 << 20

// cutGoalMs is issue 7's goal for the cut completion p99, in ms: reported
// against, never enforced.
const cutGoalMs = 20

// The cost parts' chart files, by part.
var costCharts = map[string]string{
	"ab":      "bench-compare-costs-ab.svg",
	"cuts":    "bench-compare-costs-cuts.svg",
	"upload":  "bench-compare-costs-upload.svg",
	"restart": "bench-compare-costs-restart.svg",
	"memory":  "bench-compare-costs-memory.svg",
}

// costsSVGs renders the charts of the parts that ran: chart file name →
// SVG.
func costsSVGs(c *Costs) map[string]string {
	out := map[string]string{}
	if len(c.AB) > 0 {
		out[costCharts["ab"]] = abChart(c)
	}
	if c.Idle != nil || hasBCuts(c) {
		out[costCharts["cuts"]] = cutsChart(c)
	}
	if c.Upload != nil && len(c.Upload.Steps) > 0 {
		out[costCharts["upload"]] = uploadChart(c.Upload)
	}
	if len(c.Restart) > 0 {
		out[costCharts["restart"]] = restartChart(c.Restart)
	}
	if len(c.Memory) > 0 {
		out[costCharts["memory"]] = memoryChart(c.Memory)
	}
	return out
}

// costsMarkdown renders the cost subsections; links maps a chart file
// name to its link relative to the document.
func costsMarkdown(c *Costs, links map[string]string) string {
	var b strings.Builder
	img := func(part, alt string) {
		if l, ok := links[costCharts[part]]; ok {
			fmt.Fprintf(&b, "\n![%s](%s)\n", alt, l)
		}
	}
	cmds := func(part string) {
		if s := c.Commands[part]; s != "" {
			fmt.Fprintf(&b, "\nCommands:\n\n```sh\n%s\n```\n", s)
		}
	}
	if len(c.AB) > 0 {
		writeAB(&b, c)
		img("ab", "ops/s per run: A (nothing) and B (cuts and snapshots)")
		cmds("ab")
	}
	if c.Idle != nil || hasBCuts(c) {
		writeCuts(&b, c)
		img("cuts", "cut completion p50 and p99, idle and under load")
		cmds("cuts")
	}
	if c.Upload != nil {
		writeUpload(&b, c.Upload)
		img("upload", "MiB uploaded per incremental snapshot against MiB of values written")
		cmds("upload")
	}
	if len(c.Restart) > 0 {
		writeRestart(&b, c.Restart)
		img("restart", "seconds to ready and to applied against the writes before the restart")
		cmds("restart")
	}
	if len(c.Memory) > 0 {
		writeMemory(&b, c.Memory)
		img("memory", "heap in use and RSS per node against keys held")
		cmds("memory")
	}
	return b.String()
}

// param is a knob's value as the script recorded it, or def.
func (c *Costs) param(key, def string) string {
	if v := c.Params[key]; v != "" {
		return v
	}
	return def
}

// abWorkloads lists the workloads of the A/B runs, in order.
func abWorkloads(runs []ABRun) []string {
	var ws []string
	for _, r := range runs {
		if len(ws) == 0 || ws[len(ws)-1] != r.Workload {
			ws = append(ws, r.Workload)
		}
	}
	return ws
}

// abSums are a workload's A and B ops/s summed over its passes, and the
// ratio of each pair that has both.
func abSums(runs []ABRun, w string) (a, b float64, na, nb int, pairs []float64) {
	byPass := map[int]map[string]float64{}
	var passes []int
	for _, r := range runs {
		if r.Workload != w {
			continue
		}
		if byPass[r.Pass] == nil {
			byPass[r.Pass] = map[string]float64{}
			passes = append(passes, r.Pass)
		}
		byPass[r.Pass][r.Mode] = r.OpsPerSec
		if r.Mode == "A" {
			a += r.OpsPerSec
			na++
		} else {
			b += r.OpsPerSec
			nb++
		}
	}
	sort.Ints(passes)
	for _, p := range passes {
		m := byPass[p]
		_, okA := m["A"]
		_, okB := m["B"]
		if okA && okB && m["A"] > 0 {
			pairs = append(pairs, m["B"]/m["A"])
		}
	}
	return a, b, na, nb, pairs
}

// abLabel names a workload of the A/B runs.
func abLabel(w string) string {
	if w == "txn" {
		return "txn (cross-partition)"
	}
	return w
}

func writeAB(b *strings.Builder, c *Costs) {
	cut, snap, keep := c.param("cut_interval", "1s"), c.param("snapshot_interval", "10s"), c.param("snapshot_keep", "100")
	fmt.Fprintf(b, "\n### Cost of a cut every %s and a snapshot every %s (cutkv)\n\n", cut, snap)
	fmt.Fprintf(b, "cutkv alone, with the kvbench flags of the runs above (txn: `--txn-keys cross`). "+
		"A: the nodes of `scripts/run-local.sh` with `--cut-interval 0`: no cut, no snapshot. "+
		"B: the same nodes with `--snapshot-interval %s --snapshot-keep %s` (automatic snapshots into the shared file:// store that run-local.sh gives every node with `--snapshot-store`; the first as soon as a node leads group 0), "+
		"and kvbench `--cut-interval %s`: kvbench itself takes a cut through the Cluster API every %s of the measured phase and reports each one's completion time (its flag combines with any workload, so the nodes' `--cut-interval` stays 0). "+
		"Runs A B A B per workload, each on a fresh cluster. B / A is the sum of the B runs' ops/s over the A runs' (below 1: the cuts and snapshots cost throughput).\n\n", snap, keep, cut, cut)
	b.WriteString("| workload | A ops/s (mean) | B ops/s (mean) | B / A | per pair | cuts completed in B (failed) | cut p50 / p99 ms, per B run | snapshots in the B runs |\n|---|--:|--:|--:|---|---|---|---|\n")
	for _, w := range abWorkloads(c.AB) {
		a, bs, na, nb, pairs := abSums(c.AB, w)
		ratio := "-"
		if a > 0 && nb > 0 && na == nb {
			ratio = fmt.Sprintf("**%.2f**", bs/a)
		}
		var pr, lat, snaps []string
		for _, p := range pairs {
			pr = append(pr, fmt.Sprintf("%.2f", p))
		}
		var done, failed int64
		for _, r := range c.AB {
			if r.Workload != w || r.Mode != "B" {
				continue
			}
			if r.Cuts != nil {
				done += r.Cuts.Completed
				failed += r.Cuts.Failed + r.Cuts.Errors
				lat = append(lat, fmt.Sprintf("%.1f / %.1f", r.Cuts.Latency.P50, r.Cuts.Latency.P99))
			}
			if r.Snaps != nil && r.Snaps.Listed >= 0 {
				snaps = append(snaps, fmt.Sprint(r.Snaps.InRun))
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %d (%d) | %s | %s |\n", abLabel(w), fmtOps(mean(a, na)), fmtOps(mean(bs, nb)), ratio,
			dashIfEmpty(strings.Join(pr, ", ")), done, failed, dashIfEmpty(strings.Join(lat, "; ")), dashIfEmpty(strings.Join(snaps, ", ")))
	}
	b.WriteString("\nEach run (cuts: completed (failed, call errors) during the measured phase; snapshots in the run: stored snapshots whose cut fell in the warm-up or the measured phase; since start: the nodes' `cutkv_snapshot_duration_seconds` and `cutkv_snapshot_uploaded_bytes_total`, summed over the nodes, from their start to the end of the run):\n\n")
	b.WriteString("| workload | pass | run | ops/s | p50 ms | p99 ms | errors | cuts | cut p50 / p99 / max ms | snapshots in the run | since start: ok (failed), mean s, MiB uploaded | load avg |\n|---|--:|---|--:|--:|--:|--:|---|---|--:|---|---|\n")
	for _, r := range c.AB {
		cuts, clat, inRun, since := "-", "-", "-", "-"
		if r.Cuts != nil {
			cuts = fmt.Sprintf("%d (%d, %d)", r.Cuts.Completed, r.Cuts.Failed, r.Cuts.Errors)
			clat = fmt.Sprintf("%.1f / %.1f / %.1f", r.Cuts.Latency.P50, r.Cuts.Latency.P99, r.Cuts.Latency.Max)
		}
		if s := r.Snaps; s != nil {
			if s.Listed >= 0 {
				inRun = fmt.Sprint(s.InRun)
			}
			since = fmt.Sprintf("%d (%d), %.2f, %.1f", s.OK, s.Failed, s.MeanS, s.Uploaded/mib)
		}
		mode := "A: nothing"
		if r.Mode == "B" {
			mode = "B: cuts + snapshots"
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %.2f | %.2f | %d | %s | %s | %s | %s | %s |\n", abLabel(r.Workload), r.Pass, mode, fmtOps(r.OpsPerSec),
			r.Latency.P50, r.Latency.P99, r.Errors.Total, cuts, clat, inRun, since, r.Machine.LoadAvg)
	}
	for _, r := range c.AB {
		if r.Cuts != nil && r.Cuts.FirstError != "" {
			fmt.Fprintf(b, "\n%s pass %d, first cut failure: `%s`\n", abLabel(r.Workload), r.Pass, strings.ReplaceAll(r.Cuts.FirstError, "`", "'"))
		}
		if r.StoppedEarly != "" {
			fmt.Fprintf(b, "\n%s pass %d %s stopped early: %s\n", abLabel(r.Workload), r.Pass, r.Mode, r.StoppedEarly)
		}
	}
}

func mean(sum float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// hasBCuts reports whether some B run measured cuts.
func hasBCuts(c *Costs) bool {
	for _, r := range c.AB {
		if r.Mode == "B" && r.Cuts != nil {
			return true
		}
	}
	return false
}

// cutRow is one row of the cut completion table.
type cutRow struct {
	// Label names the row in the table, Short under its chart bars.
	Label, Short string
	Stats        CutStats
}

// cutRows are the idle row, then every B run's cuts.
func cutRows(c *Costs) []cutRow {
	var rows []cutRow
	if c.Idle != nil {
		rows = append(rows, cutRow{Label: "idle", Short: "idle", Stats: *c.Idle})
	}
	for _, r := range c.AB {
		if r.Mode == "B" && r.Cuts != nil {
			rows = append(rows, cutRow{Label: fmt.Sprintf("%s, B pass %d", r.Workload, r.Pass), Short: fmt.Sprintf("%s B%d", r.Workload, r.Pass), Stats: *r.Cuts})
		}
	}
	return rows
}

func writeCuts(b *strings.Builder, c *Costs) {
	b.WriteString("\n### Cut completion time\n\n")
	fmt.Fprintf(b, "From the CreateCut call to its answer (group 0 allocates the version, every partition records CutStart and CutFinish, the cut is recorded), as a client sees it. "+
		"Idle: a fresh cluster with no load, %s cuts one every %s (`benchsnap cuts`, the same call kvbench makes). "+
		"Under load: kvbench's cuts in the B runs above. Issue 7's goal is a p99 under %d ms; reported here, not enforced.\n\n",
		c.param("idle_cuts", "20"), c.param("idle_every", "1s"), cutGoalMs)
	b.WriteString("| load | cuts completed (failed, errors) | p50 ms | p99 ms | max ms | p99 under 20 ms |\n|---|---|--:|--:|--:|---|\n")
	for _, r := range cutRows(c) {
		s := r.Stats
		met := "no"
		if s.Completed > 0 && s.Latency.P99 < cutGoalMs {
			met = "yes"
		}
		if s.Completed == 0 {
			met = "-"
		}
		fmt.Fprintf(b, "| %s | %d (%d, %d) | %.1f | %.1f | %.1f | %s |\n", r.Label, s.Completed, s.Failed, s.Errors, s.Latency.P50, s.Latency.P99, s.Latency.Max, met)
	}
	if c.Idle != nil && c.Idle.Server != nil {
		fmt.Fprintf(b, "\nIdle, as the cluster recorded the same cuts (start to finish, whole ms): p50 %.0f, p99 %.0f, max %.0f.\n", c.Idle.Server.P50, c.Idle.Server.P99, c.Idle.Server.Max)
	}
	if c.Idle != nil && c.Idle.FirstError != "" {
		fmt.Fprintf(b, "\nIdle, first cut failure: `%s`\n", strings.ReplaceAll(c.Idle.FirstError, "`", "'"))
	}
}

func writeUpload(b *strings.Builder, u *UploadPart) {
	b.WriteString("\n### Bytes uploaded per incremental snapshot\n\n")
	load := "keys"
	if u.Load != nil && u.Load.Preload != nil {
		load = fmt.Sprintf("%d keys of %d B (%.1f MiB of values, written once by kvbench get's preload in %.1f s, %d errors)",
			u.Load.Preload.Keys, u.Load.Config.ValueSize, float64(u.Load.Preload.Keys)*float64(u.Load.Config.ValueSize)/mib, u.Load.Preload.Seconds, u.Load.Preload.Errors)
	}
	fmt.Fprintf(b, "One fresh cluster, automatic materialization off (so that no snapshot uploads a new base), every node with `--snapshot-store` on one shared file:// directory. "+
		"Setup: %s, then a full snapshot (`--full`). Then for each size X, one after the other: X MiB of new values written to random existing keys (kvbench put, `--total` X MiB / value size), and an incremental snapshot. "+
		"Written: the values' bytes (puts × value size; each put also carries its 16 B key); uploaded: the snapshot's bytes uploaded (the log written since the previous snapshot and the cut's own entries). Took: the node's measure (cut, upload, manifest).\n\n", load)
	b.WriteString("| step | MiB of values written | puts (errors) | MiB uploaded | uploaded / written | objects uploaded / reused | took s | snapshot MiB (objects) |\n|---|--:|--:|--:|--:|--:|--:|--:|\n")
	// row renders one snapshot; written < 0: nothing was written before it.
	row := func(step string, written float64, puts string, s SnapCreated) {
		w, ratio := "-", "-"
		if written >= 0 {
			w = fmt.Sprintf("%.2f", written/mib)
		}
		if written > 0 {
			ratio = fmt.Sprintf("%.2f", float64(s.BytesUploaded)/written)
		}
		if s.Error != "" {
			fmt.Fprintf(b, "| %s | %s | %s | failed: `%s` | | | | |\n", step, w, puts, strings.ReplaceAll(s.Error, "`", "'"))
			return
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %d / %d | %.2f | %.1f (%d) |\n", step, w, puts, fmtMiB(s.BytesUploaded), ratio,
			s.PiecesUploaded, s.PiecesReused, float64(s.DurationMs)/1000, float64(s.TotalBytes)/mib, s.Objects)
	}
	if u.Full != nil {
		row("full snapshot, after the setup", -1, "-", *u.Full)
	}
	for _, s := range u.Steps {
		puts := "0"
		if s.Put != nil {
			puts = fmt.Sprintf("%d (%d)", s.Put.Ops, s.Put.Errors.Total)
		}
		row(fmt.Sprintf("incremental, X = %s MiB", trimFloat(s.MiB)), s.written(), puts, s.Snap)
	}
	var slope []float64
	for _, s := range u.Steps {
		if s.written() > 0 && s.Snap.Error == "" {
			slope = append(slope, float64(s.Snap.BytesUploaded)/s.written())
		}
	}
	if len(slope) > 0 {
		sort.Float64s(slope)
		fmt.Fprintf(b, "\nUploaded / written, over the sizes: %.2f to %.2f.\n", slope[0], slope[len(slope)-1])
	}
}

// fmtMiB renders bytes in MiB with two decimals, or in bytes when that
// would show 0.00.
func fmtMiB(bytes uint64) string {
	if bytes > 0 && bytes < mib/200 {
		return fmtOps(float64(bytes)) + " B"
	}
	return fmt.Sprintf("%.2f", float64(bytes)/mib)
}

// nodeNames are the nodes in the order the scripts list them.
var nodeNames = []string{"n1", "n2", "n3"}

// nodeTimes renders "a / b / c" seconds for n1..n3 ("-" if absent).
func nodeTimes(m map[string]float64) string {
	var parts []string
	for _, n := range nodeNames {
		if v, ok := m[n]; ok {
			parts = append(parts, fmt.Sprintf("%.2f", v))
		} else {
			parts = append(parts, "-")
		}
	}
	return strings.Join(parts, " / ")
}

// slowest is the largest value of m; ok is false when m is empty.
func slowest(m map[string]float64) (float64, bool) {
	var hi float64
	for _, v := range m {
		hi = math.Max(hi, v)
	}
	return hi, len(m) > 0
}

func writeRestart(b *strings.Builder, ps []RestartPoint) {
	b.WriteString("\n### Restart time vs history length\n\n")
	b.WriteString("For each history length N: a fresh cluster with the default materialization settings (`--materialize-interval 1m`, `--materialize-bytes` 64 MiB), " +
		"kvbench put `--total N` (64 clients, 4 connections, keyspace 100000, 256 B values), then all nodes stopped (SIGTERM) and restarted together and timed by `bench/cmd/benchckpt cluster` (as in run 6's part 1). " +
		"Seconds from process start, per node (n1 / n2 / n3): to its \"node started\" log line (WAL read, state restored), to its \"ready\" line (every group knows a leader), " +
		"and to having applied again everything it had applied before the stop. WAL and materializations: bytes on disk, sum of the 3 nodes, before the restart.\n\n")
	b.WriteString("| writes | written in | WAL MiB | materializations MiB | node started s | ready s | applied s |\n|--:|---|--:|--:|---|---|---|\n")
	for _, p := range ps {
		in := "-"
		if p.Put != nil {
			in = fmt.Sprintf("%.0f s (%s ops/s, %d errors)", p.Put.ElapsedSec, fmtOps(p.Put.OpsPerSec), p.Put.Errors.Total)
		}
		fmt.Fprintf(b, "| %d | %s | %.1f | %.1f | %s | %s | %s |\n", p.Writes, in, float64(p.WALBytes)/mib, float64(p.MatBytes)/mib,
			nodeTimes(p.Open), nodeTimes(p.Ready), nodeTimes(p.Applied))
	}
	b.WriteString("\nThe chart shows the slowest node of each restart.\n")
}

// memPerNode is the mean over the nodes of vs, in bytes.
func memPerNode(vs []float64) float64 {
	var s float64
	for _, v := range vs {
		s += v
	}
	return mean(s, len(vs))
}

// fitSlope is the least-squares slope of ys against xs; ok is false with
// fewer than two distinct xs.
func fitSlope(xs, ys []float64) (float64, bool) {
	n := float64(len(xs))
	if len(xs) < 2 || len(xs) != len(ys) {
		return 0, false
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0, false
	}
	return (n*sxy - sx*sy) / d, true
}

// mibList renders per-node bytes as "a / b / c" MiB.
func mibList(vs []float64) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, fmt.Sprintf("%.0f", v/mib))
	}
	return dashIfEmpty(strings.Join(parts, " / "))
}

// memSizes are the key and value sizes of the fills (0 when unknown).
func memSizes(ps []MemoryPoint) (key, value int) {
	for _, p := range ps {
		if p.Fill != nil {
			return p.Fill.KeySize, p.Fill.ValueSize
		}
	}
	return 0, 0
}

func writeMemory(b *strings.Builder, ps []MemoryPoint) {
	ks, vs := memSizes(ps)
	b.WriteString("\n### Memory per million keys\n\n")
	fmt.Fprintf(b, "One fresh cluster (default settings), its keys written once each in steps (`benchsnap fill`: the keys from the previous row's count to this row's, %d B keys, %d B values, 64 workers); "+
		"after each step, a forced GC on every node (GET `/debug/pprof/heap?gc=1`), then its `/metrics`: `go_memstats_heap_inuse_bytes` (heap in use) and `process_resident_memory_bytes` (RSS). "+
		"Every node holds every key (3 replicas of each partition). Per key: a node's bytes over the keys, mean of the 3 nodes; above idle: minus the row with 0 keys (the empty cluster) first.\n\n", ks, vs)
	b.WriteString("| keys | keys + values MiB | heap in use MiB (n1 / n2 / n3) | RSS MiB (n1 / n2 / n3) | heap B/key | RSS B/key | heap above idle B/key | RSS above idle B/key | written in |\n|--:|--:|---|---|--:|--:|--:|--:|---|\n")
	var idle *MemoryPoint
	if len(ps) > 0 && ps[0].Keys == 0 {
		idle = &ps[0]
	}
	var xs, heaps, rsss []float64
	for _, p := range ps {
		heap, rss := memPerNode(p.Heap), memPerNode(p.RSS)
		raw := float64(p.Keys) * float64(ks+vs) / mib
		perKey := func(v float64) string {
			if p.Keys == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f", v/float64(p.Keys))
		}
		aboveHeap, aboveRSS := "-", "-"
		if idle != nil && p.Keys > 0 {
			aboveHeap, aboveRSS = perKey(heap-memPerNode(idle.Heap)), perKey(rss-memPerNode(idle.RSS))
		}
		in := "-"
		if p.Fill != nil {
			in = fmt.Sprintf("%d keys in %.0f s (%.0f keys/s, %d retries, %d errors)", p.Fill.Keys, p.Fill.Seconds, float64(p.Fill.Keys)/math.Max(p.Fill.Seconds, 1e-9), p.Fill.Retries, p.Fill.Errors)
		}
		fmt.Fprintf(b, "| %d | %.1f | %s | %s | %s | %s | %s | %s | %s |\n", p.Keys, raw, mibList(p.Heap), mibList(p.RSS), perKey(heap), perKey(rss), aboveHeap, aboveRSS, in)
		xs, heaps, rsss = append(xs, float64(p.Keys)), append(heaps, heap), append(rsss, rss)
	}
	hs, okH := fitSlope(xs, heaps)
	rs, okR := fitSlope(xs, rsss)
	if okH && okR {
		fmt.Fprintf(b, "\nPer million keys, the slope of a least-squares line through the rows (mean of the 3 nodes): heap in use **%.0f MiB**, RSS **%.0f MiB** per node (%.0f and %.0f B per key); the keys and values themselves are %.0f MiB.\n",
			hs*1e6/mib, rs*1e6/mib, hs, rs, 1e6*float64(ks+vs)/mib)
	}
}
