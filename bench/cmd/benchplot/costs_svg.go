package main

import (
	"fmt"
	"html"
	"strings"
)

// Colours of the cost charts.
const (
	colorA = "#1f77b4"
	colorB = "#2ca02c"
)

// seriesRGB colours an XY chart's series in order.
var seriesRGB = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"}

// barsChart draws panels of bars side by side under a title, with a
// legend of (name, colour) pairs.
func barsChart(title string, panels []barPanel, legend [][2]string) string {
	// At least two standard panels wide, so that the title fits.
	minW := 2 * panelW / max(1, len(panels))
	width := func(p barPanel) int { return max(p.width(), minW) }
	w := 0
	for _, p := range panels {
		w += width(p)
	}
	h := panelH + legendH
	var b strings.Builder
	svgOpen(&b, w, h)
	fmt.Fprintf(&b, `<text x="%d" y="18" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`+"\n", w/2, html.EscapeString(title))
	x := 0
	for _, p := range panels {
		panel(&b, x, width(p), p.Title, p.Bars, p.Ref)
		x += width(p)
	}
	lx := w/2 - 100*len(legend)/2
	for _, l := range legend {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`, lx, panelH+8, l[1])
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+16, panelH+18, html.EscapeString(l[0]))
		lx += 100
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// barPanel is one panel of barsChart.
type barPanel struct {
	Title string
	Bars  []bar
	Ref   *refLine
}

// width is the panel's width: panelW, or more for many bars.
func (p barPanel) width() int {
	return max(panelW, padL+padR+64*len(p.Bars))
}

// abChart draws each workload's A and B runs' ops/s in run order.
func abChart(c *Costs) string {
	var panels []barPanel
	for _, w := range abWorkloads(c.AB) {
		p := barPanel{Title: abLabel(w) + ", ops/s"}
		if a, b, na, nb, _ := abSums(c.AB, w); a > 0 && na == nb {
			p.Title += fmt.Sprintf(" (B / A %.2f)", b/a)
		}
		for _, r := range c.AB {
			if r.Workload != w {
				continue
			}
			col := colorA
			if r.Mode == "B" {
				col = colorB
			}
			v := fmt.Sprintf("%.0f", r.OpsPerSec)
			p.Bars = append(p.Bars, bar{Label: fmt.Sprintf("%s %d", r.Mode, r.Pass), Text: v, Value: r.OpsPerSec, Color: col,
				Tip: fmt.Sprintf("%s pass %d %s: %s ops/s", r.Workload, r.Pass, r.Mode, v)})
		}
		panels = append(panels, p)
	}
	title := fmt.Sprintf("cutkv: nothing (A) vs a cut every %s and a snapshot every %s (B)", c.param("cut_interval", "1s"), c.param("snapshot_interval", "10s"))
	return barsChart(title, panels, [][2]string{{"A: nothing", colorA}, {"B: cuts + snapshots", colorB}})
}

// cutsChart draws each row's cut completion p50 and p99, with the goal.
func cutsChart(c *Costs) string {
	p50 := barPanel{Title: "p50, ms"}
	p99 := barPanel{Title: "p99, ms", Ref: &refLine{Value: cutGoalMs, Label: fmt.Sprintf("goal: p99 < %d ms", cutGoalMs)}}
	for _, r := range cutRows(c) {
		for _, q := range []struct {
			p *barPanel
			v float64
		}{{&p50, r.Stats.Latency.P50}, {&p99, r.Stats.Latency.P99}} {
			col := colorA
			if r.Label != "idle" {
				col = colorB
			}
			t := fmt.Sprintf("%.1f", q.v)
			q.p.Bars = append(q.p.Bars, bar{Label: r.Short, Text: t, Value: q.v, Color: col, Tip: fmt.Sprintf("%s: %s ms", r.Label, t)})
		}
	}
	return barsChart("cutkv: cut completion time", []barPanel{p50, p99}, [][2]string{{"idle", colorA}, {"under load (B runs)", colorB}})
}

// uploadChart draws MiB uploaded against MiB written, log-log, with y = x.
func uploadChart(u *UploadPart) string {
	s := series{Name: "incremental snapshot", Color: seriesRGB[0]}
	for _, st := range u.Steps {
		if st.written() <= 0 || st.Snap.Error != "" {
			continue
		}
		x, y := st.written()/mib, float64(st.Snap.BytesUploaded)/mib
		s.Points = append(s.Points, point{X: x, Y: y, Tip: fmt.Sprintf("%.2f MiB written, %.2f MiB uploaded", x, y)})
	}
	return xyChart{
		Title: "cutkv: bytes uploaded per incremental snapshot", XLabel: "MiB of values written since the previous snapshot (log)",
		YLabel: "MiB uploaded (log)", Series: []series{s}, LogX: true, LogY: true, SameScale: true,
		Diagonal: true, DiagonalLabel: "uploaded = written",
	}.svg()
}

// restartChart draws the slowest node's times against the history length.
func restartChart(ps []RestartPoint) string {
	kinds := []struct {
		name string
		get  func(RestartPoint) map[string]float64
	}{
		{"ready", func(p RestartPoint) map[string]float64 { return p.Ready }},
		{"applied", func(p RestartPoint) map[string]float64 { return p.Applied }},
		{"node started", func(p RestartPoint) map[string]float64 { return p.Open }},
	}
	var ss []series
	for i, k := range kinds {
		s := series{Name: k.name + " (slowest node)", Color: seriesRGB[i]}
		for _, p := range ps {
			if v, ok := slowest(k.get(p)); ok {
				s.Points = append(s.Points, point{X: float64(p.Writes), Y: v, Tip: fmt.Sprintf("%d writes: %s after %.2f s", p.Writes, k.name, v)})
			}
		}
		ss = append(ss, s)
	}
	return xyChart{Title: "cutkv: restart time vs history length", XLabel: "writes before the restart", YLabel: "seconds from process start", Series: ss}.svg()
}

// memoryChart draws the mean node's heap in use and RSS against keys.
func memoryChart(ps []MemoryPoint) string {
	ks, vs := memSizes(ps)
	heap := series{Name: "heap in use", Color: seriesRGB[0]}
	rss := series{Name: "RSS", Color: seriesRGB[1]}
	raw := series{Name: "keys + values", Color: "#888", Dashed: true}
	for _, p := range ps {
		x := float64(p.Keys)
		h, r := memPerNode(p.Heap)/mib, memPerNode(p.RSS)/mib
		heap.Points = append(heap.Points, point{X: x, Y: h, Tip: fmt.Sprintf("%d keys: heap in use %.0f MiB", p.Keys, h)})
		rss.Points = append(rss.Points, point{X: x, Y: r, Tip: fmt.Sprintf("%d keys: RSS %.0f MiB", p.Keys, r)})
		raw.Points = append(raw.Points, point{X: x, Y: x * float64(ks+vs) / mib})
	}
	return xyChart{Title: "cutkv: memory per node vs keys held", XLabel: "keys", YLabel: "MiB per node (mean of 3)", Series: []series{heap, rss, raw}}.svg()
}
