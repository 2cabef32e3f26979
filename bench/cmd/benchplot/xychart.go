package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// XY chart geometry, in SVG user units (pixels).
const (
	xyW     = 620
	xyH     = 380
	xyPadL  = 70
	xyPadR  = 44 // room for the last x label
	xyPadT  = 40
	xyPadB  = 56
	xyLegH  = 22 // one legend row
	xyTickL = 4
)

// point is one measurement of a series.
type point struct {
	X, Y float64
	// Tip is the marker's tooltip; empty: "x, y".
	Tip string
}

// series is one line of an XY chart.
type series struct {
	Name  string
	Color string
	// Dashed draws the line dashed and without markers (a reference).
	Dashed bool
	Points []point
}

// xyChart is a line chart with markers: measured values against a
// parameter (bytes written, history length, keys held).
type xyChart struct {
	Title, XLabel, YLabel string
	Series                []series
	// LogX and LogY use logarithmic axes (points at or below 0 are left
	// out); otherwise an axis starts at 0.
	LogX, LogY bool
	// SameScale gives both axes the same range, so that Diagonal is the
	// 45° line.
	SameScale bool
	// Diagonal draws y = x, dashed, labelled DiagonalLabel.
	Diagonal      bool
	DiagonalLabel string
}

// axis maps data values to pixels along one direction.
type axis struct {
	log    bool
	lo, hi float64 // data range shown (log: the values, not their logs)
	ticks  []float64
}

// newAxis picks the range and ticks for values vs.
func newAxis(vs []float64, log bool) axis {
	if log {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range vs {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		if math.IsInf(lo, 1) {
			lo, hi = 1, 10
		}
		a := axis{log: true, lo: math.Pow(10, math.Floor(math.Log10(lo)+1e-9)), hi: math.Pow(10, math.Ceil(math.Log10(hi)-1e-9))}
		if a.hi <= a.lo { // one value, a power of ten
			a.hi = a.lo * 10
		}
		a.ticks = logTicks(a.lo, a.hi)
		return a
	}
	var hi float64
	for _, v := range vs {
		hi = math.Max(hi, v)
	}
	top, step := niceScale(hi)
	var ticks []float64
	for v := 0.0; v <= top+step/2; v += step {
		ticks = append(ticks, v)
	}
	return axis{lo: 0, hi: top, ticks: ticks}
}

// logTicks returns 1, 2 and 5 times the powers of ten from the decade
// below lo to the one above hi, keeping only 1s when that gives more
// than 12 ticks.
func logTicks(lo, hi float64) []float64 {
	d0, d1 := int(math.Floor(math.Log10(lo)+1e-9)), int(math.Ceil(math.Log10(hi)-1e-9))
	var ticks []float64
	mults := []float64{1, 2, 5}
	if 3*(d1-d0) > 12 {
		mults = []float64{1}
	}
	for d := d0; d <= d1; d++ {
		for _, m := range mults {
			v := m * math.Pow(10, float64(d))
			if v <= math.Pow(10, float64(d1))*1.0001 {
				ticks = append(ticks, v)
			}
		}
	}
	return ticks
}

// frac is v's position along the axis, 0 at lo and 1 at hi.
func (a axis) frac(v float64) float64 {
	if a.log {
		return (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	}
	return (v - a.lo) / (a.hi - a.lo)
}

// shows reports whether v can be drawn on the axis.
func (a axis) shows(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!a.log || v > 0)
}

// svg renders the chart.
func (c xyChart) svg() string {
	var xs, ys []float64
	for _, s := range c.Series {
		for _, p := range s.Points {
			xs, ys = append(xs, p.X), append(ys, p.Y)
		}
	}
	if c.SameScale {
		all := append(append([]float64(nil), xs...), ys...)
		xs, ys = all, all
	}
	ax, ay := newAxis(xs, c.LogX), newAxis(ys, c.LogY)
	legend := len(c.Series)
	if c.Diagonal {
		legend++
	}
	legendRows := (legend + 2) / 3
	w, h := xyW, xyH+legendRows*xyLegH
	plotX, plotY := xyPadL, xyPadT
	plotW, plotH := xyW-xyPadL-xyPadR, xyH-xyPadT-xyPadB
	px := func(v float64) float64 { return float64(plotX) + ax.frac(v)*float64(plotW) }
	py := func(v float64) float64 { return float64(plotY+plotH) - ay.frac(v)*float64(plotH) }

	var b strings.Builder
	svgOpen(&b, w, h)
	fmt.Fprintf(&b, `<text x="%d" y="20" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`+"\n", w/2, html.EscapeString(c.Title))
	// Grid, ticks and labels.
	for _, v := range ay.ticks {
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`, plotX, y, plotX+plotW, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", plotX-xyTickL-2, y+4, trimFloat(v))
	}
	for _, v := range ax.ticks {
		x := px(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`, x, plotY, x, plotY+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, plotY+plotH+16, trimFloat(v))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>`+"\n", plotX, plotY, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-size="12">%s</text>`+"\n", plotX+plotW/2, plotY+plotH+36, html.EscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text x="16" y="%d" text-anchor="middle" font-size="12" transform="rotate(-90 16 %d)">%s</text>`+"\n", plotY+plotH/2, plotY+plotH/2, html.EscapeString(c.YLabel))

	if c.Diagonal {
		// Stepped, so that y = x also comes out right (a curve) when
		// only one axis is logarithmic.
		lo, hi := math.Max(ax.lo, ay.lo), math.Min(ax.hi, ay.hi)
		var pts []string
		const steps = 64
		for i := 0; i <= steps && lo < hi; i++ {
			f := float64(i) / steps
			v := lo + (hi-lo)*f
			if c.LogX && c.LogY {
				v = lo * math.Pow(hi/lo, f)
			}
			if ax.shows(v) && ay.shows(v) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(v), py(v)))
			}
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#888" stroke-dasharray="6 4"/>`+"\n", strings.Join(pts, " "))
		}
	}
	for _, s := range c.Series {
		var pts []string
		for _, p := range s.Points {
			if ax.shows(p.X) && ay.shows(p.Y) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.X), py(p.Y)))
			}
		}
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.Color, dash)
		}
		if s.Dashed {
			continue
		}
		for _, p := range s.Points {
			if !ax.shows(p.X) || !ay.shows(p.Y) {
				continue
			}
			tip := p.Tip
			if tip == "" {
				tip = fmt.Sprintf("%s: %s, %s", s.Name, trimFloat(p.X), trimFloat(p.Y))
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s</title></circle>`+"\n", px(p.X), py(p.Y), s.Color, html.EscapeString(tip))
		}
	}
	// Legend, three entries a row.
	entries := make([]series, 0, legend)
	entries = append(entries, c.Series...)
	if c.Diagonal {
		entries = append(entries, series{Name: c.DiagonalLabel, Color: "#888", Dashed: true})
	}
	for i, s := range entries {
		x := plotX + (i%3)*(plotW/3)
		y := xyH + (i/3)*xyLegH
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`, x, y-4, x+24, y-4, s.Color, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", x+30, y, html.EscapeString(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
