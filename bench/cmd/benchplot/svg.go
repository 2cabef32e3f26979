package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Chart geometry, in SVG user units (pixels).
const (
	panelW  = 340 // one panel's width
	panelH  = 260 // one panel's height, title and axis labels included
	padL    = 58  // room for the y-axis labels
	padR    = 12
	padT    = 46 // room for the panel title
	padB    = 40 // room for the x-axis labels
	legendH = 28
)

// The targets' colours.
var colors = map[string]string{"cutkv": "#1f77b4", "etcd": "#ff7f0e"}

// chartSVG draws one workload as two panels of bars in run order (A B A
// B): ops/s on the left, p99 latency on the right.
func chartSVG(g Group) string {
	runs := interleave(g)
	w, h := 2*panelW, panelH+legendH
	var b strings.Builder
	svgOpen(&b, w, h)
	title := label(g)
	if r, ok := g.ratio(); ok {
		title += fmt.Sprintf(" — cutkv / etcd ops/s: %.2f", r)
	}
	fmt.Fprintf(&b, `<text x="%d" y="18" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`+"\n", w/2, html.EscapeString(title))
	bars := func(value func(Run) float64, format string) []bar {
		var out []bar
		for _, r := range runs {
			v := value(r)
			out = append(out, bar{
				Label: fmt.Sprintf("%s %d", r.Target, r.Pass), Value: v, Color: colors[r.Target],
				Tip: fmt.Sprintf("%s pass %d: %s", r.Target, r.Pass, fmt.Sprintf(format, v)), Text: fmt.Sprintf(format, v),
			})
		}
		return out
	}
	panel(&b, 0, panelW, "ops/s (higher is better)", bars(func(r Run) float64 { return r.OpsPerSec }, "%.0f"), nil)
	panel(&b, panelW, panelW, "p99 latency, ms (lower is better)", bars(func(r Run) float64 { return r.Latency.P99 }, "%.1f"), nil)
	// Legend.
	x := w/2 - 90
	for _, t := range []string{"cutkv", "etcd"} {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`, x, panelH+8, colors[t])
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", x+16, panelH+18, t)
		x += 100
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// svgOpen starts a w×h SVG document on a white background.
func svgOpen(b *strings.Builder, w, h int) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
}

// bar is one bar of a panel.
type bar struct {
	// Label goes under the bar, Text above it, Tip in its tooltip.
	Label, Text, Tip string
	Value            float64
	Color            string
}

// refLine is a dashed horizontal line across a panel at Value, e.g. a
// goal, labelled at its left end.
type refLine struct {
	Value float64
	Label string
}

// panel draws one panel of bars, width wide, at horizontal offset x0,
// with an optional reference line.
func panel(b *strings.Builder, x0, width int, title string, bars []bar, ref *refLine) {
	plotX, plotY := x0+padL, padT
	plotW, plotH := width-padL-padR, panelH-padT-padB
	fmt.Fprintf(b, `<text x="%d" y="36" text-anchor="middle" font-size="12">%s</text>`+"\n", plotX+plotW/2, html.EscapeString(title))
	var hi float64
	for _, br := range bars {
		hi = math.Max(hi, br.Value)
	}
	if ref != nil {
		hi = math.Max(hi, ref.Value)
	}
	top, step := niceScale(hi)
	// Grid lines and y labels.
	for v := 0.0; v <= top+step/2; v += step {
		y := float64(plotY+plotH) - v/top*float64(plotH)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`, plotX, y, plotX+plotW, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", plotX-4, y+4, trimFloat(v))
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", plotX, plotY+plotH, plotX+plotW, plotY+plotH)
	if len(bars) > 0 {
		slot := float64(plotW) / float64(len(bars))
		barW := slot * 0.7
		for i, br := range bars {
			bh := br.Value / top * float64(plotH)
			x := float64(plotX) + float64(i)*slot + (slot-barW)/2
			y := float64(plotY+plotH) - bh
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`,
				x, y, barW, bh, br.Color, html.EscapeString(br.Tip))
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x+barW/2, y-3, html.EscapeString(br.Text))
			fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x+barW/2, plotY+plotH+14, html.EscapeString(br.Label))
		}
	}
	if ref != nil {
		y := float64(plotY+plotH) - ref.Value/top*float64(plotH)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#d62728" stroke-dasharray="6 4"/>`, plotX, y, plotX+plotW, y)
		// A white halo keeps the label readable over the bars.
		fmt.Fprintf(b, `<text x="%d" y="%.1f" fill="#d62728" stroke="white" stroke-width="3" paint-order="stroke">%s</text>`+"\n", plotX+4, y-4, html.EscapeString(ref.Label))
	}
}

// niceScale picks an axis top at or above hi and a step of 1, 2 or 5
// times a power of ten giving 4 to 10 grid lines.
func niceScale(hi float64) (top, step float64) {
	if hi <= 0 || math.IsNaN(hi) || math.IsInf(hi, 0) {
		return 1, 0.25
	}
	raw := hi / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		step = m * mag
		if step >= raw {
			break
		}
	}
	top = math.Ceil(hi/step) * step
	if top < hi*1.05 { // room for the value labels above the bars
		top += step
	}
	return top, step
}

// trimFloat prints an axis label without needless decimals.
func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmtOps(v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}
