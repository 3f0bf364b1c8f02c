package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Level is a horizontal line across DemoChart's token panel: a size the
// requests are held to or measured against.
type Level struct {
	Tokens int
	Label  string
	// Class names the line in the SVG (window, threshold, budget, fold-at).
	Class string
}

// DemoChart is contextfold demo's chart: input tokens per request and the
// running cost, per series, over one session, on a shared request axis,
// with each fold event marked and the sizes the policy works to drawn.
type DemoChart struct {
	Title  string
	Order  []string             // series names, in legend order
	Tokens map[string][]int     // input tokens of each request
	Cost   map[string][]float64 // running cost after each request, USD
	// Events are the indexes of the requests that carried a fold event.
	Events []int
	Levels []Level
	// Prices names the price table the cost is in (one line, under the
	// chart).
	Prices string
}

const (
	dcW, dcL, dcR = 900, 70, 220
	dcT1, dcB1    = 76, 310 // token panel, top and bottom
	dcT2, dcB2    = 376, 530
	dcH           = 602
	dcCharW       = 0.62 // em per character, generous for sans-serif
)

// DemoX returns the x coordinate of request index i of n in a DemoChart;
// DemoTokenY the y of a token count when the panel's scale tops out at
// maxY. Tests locate the marks with them.
func DemoX(i, n int) float64 {
	return dcL + float64(i)*float64(dcW-dcL-dcR)/float64(max(1, n-1))
}

// DemoTokenY is the y of v tokens on a token panel scaled to maxY.
func DemoTokenY(v, maxY int) float64 {
	return dcB1 - float64(v)*float64(dcB1-dcT1)/float64(max(1, maxY))
}

// SVG writes the chart.
func (c *DemoChart) SVG(w io.Writer) {
	n, maxY := 1, 1
	maxC := 1 // cents
	for _, name := range c.Order {
		n = max(n, len(c.Tokens[name]))
		for _, v := range c.Tokens[name] {
			maxY = max(maxY, v)
		}
		for _, v := range c.Cost[name] {
			maxC = max(maxC, int(math.Ceil(100*v)))
		}
	}
	for _, l := range c.Levels {
		maxY = max(maxY, l.Tokens)
	}
	x := func(i int) float64 { return DemoX(i, n) }
	y := func(v int) float64 { return DemoTokenY(v, maxY) }
	yc := func(usd float64) float64 { return dcB2 - 100*usd*float64(dcB2-dcT2)/float64(maxC) }

	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", dcW, dcH)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="22" font-size="14">%s</text>`+"\n", dcL, esc(c.Title))

	// The token panel: its quantity heads it; the y ticks are in tokens.
	fmt.Fprintf(w, `<text x="%d" y="%d" fill="#444">input tokens per request</text>`+"\n", dcL, dcT1-24)
	for _, v := range ticks(maxY) {
		fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", dcL, dcW-dcR, y(v), y(v), dcL-6, y(v)+4, tk(float64(v)))
	}
	labels := c.levels(w, y)
	c.requestAxis(w, n, dcB1)

	// The cost panel.
	fmt.Fprintf(w, `<text x="%d" y="%d" fill="#444">cumulative cost, USD</text>`+"\n", dcL, dcT2-24)
	for _, v := range ticks(maxC) {
		fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", dcL, dcW-dcR, yc(float64(v)/100), yc(float64(v)/100), dcL-6, yc(float64(v)/100)+4, cents(v))
	}
	c.requestAxis(w, n, dcB2)
	fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle">request</text>`+"\n", (dcL+dcW-dcR)/2, dcB2+34)

	// Fold events: a marker on the token panel's request axis, one per
	// event, and, while they are few enough to tell apart, a line through
	// both panels.
	for _, k := range c.Events {
		if len(c.Events) <= 20 {
			fmt.Fprintf(w, `<line class="fold-event-line" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#d62728" stroke-opacity="0.35" stroke-dasharray="2 3"/>`+"\n", x(k), x(k), dcT1, dcB2)
		}
		fmt.Fprintf(w, `<path class="fold-event" data-request="%d" d="M%.1f,%d l-5,-9 h10 z" fill="#d62728"/>`+"\n", k+1, x(k), dcB1)
	}

	costRow := dcT2
	for k, name := range c.Order {
		col := palette[k%len(palette)]
		if s := c.Tokens[name]; len(s) > 0 {
			pts := make([]string, len(s))
			for i, v := range s {
				pts[i] = fmt.Sprintf("%.1f,%.1f", x(i), y(v))
			}
			fmt.Fprintf(w, `<polyline class="tokens" data-series="%s" fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", esc(name), col, strings.Join(pts, " "))
			fmt.Fprintf(w, `<rect x="%d" y="%d" width="12" height="3" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", dcW-dcR+10, dcT1+18*k+4, col, dcW-dcR+26, dcT1+18*k+8, esc(name))
		}
		if s := c.Cost[name]; len(s) > 0 {
			pts := make([]string, len(s))
			for i, v := range s {
				pts[i] = fmt.Sprintf("%.1f,%.1f", x(i), yc(v))
			}
			fmt.Fprintf(w, `<polyline class="cost" data-series="%s" fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", esc(name), col, strings.Join(pts, " "))
			last := s[len(s)-1]
			fmt.Fprintf(w, `<rect x="%d" y="%d" width="12" height="3" fill="%s"/><text x="%d" y="%d">%s $%.2f</text>`+"\n", dcW-dcR+10, costRow+4, col, dcW-dcR+26, costRow+8, esc(name), last)
			costRow += 18
			// Against the first series (the baseline), on a line of its own.
			if base := c.Cost[c.Order[0]]; k > 0 && len(base) > 0 && base[len(base)-1] > 0 {
				fmt.Fprintf(w, `<text x="%d" y="%d" fill="#444">%+.1f %% vs %s</text>`+"\n", dcW-dcR+26, costRow+4, 100*(last/base[len(base)-1]-1), esc(c.Order[0]))
				costRow += 18
			}
		}
	}
	io.WriteString(w, labels) // over the series, which they would otherwise hide
	ly := dcT1 + 18*len(c.Order)
	fmt.Fprintf(w, `<path d="M%d,%d l-5,-9 h10 z" fill="#d62728"/><text x="%d" y="%d">fold event (%d)</text>`+"\n", dcW-dcR+16, ly+8, dcW-dcR+26, ly+8, len(c.Events))
	fmt.Fprintf(w, `<text x="%d" y="%d" font-size="11" fill="#444">%s</text>`+"\n", 10, dcH-12, esc(c.Prices))
	fmt.Fprintln(w, "</svg>")
}

// requestAxis draws a request axis at y: requests are numbered from 1, so
// the first point is request 1.
func (c *DemoChart) requestAxis(w io.Writer, n, y int) {
	for _, r := range ticks(n) {
		if r == 0 {
			r = 1
		} else if r == 1 {
			continue
		}
		fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#999"/><text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", DemoX(r-1, n), DemoX(r-1, n), y, y+4, DemoX(r-1, n), y+17, r)
	}
	fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#999"/>`+"\n", dcL, dcW-dcR, y, y)
}

// levels draws the horizontal lines and returns their labels, to be drawn
// last: each inside the plot, above its line at the left, else below it,
// else at the right, whichever first clears the labels already placed (two
// sizes can be a few pixels apart).
func (c *DemoChart) levels(w io.Writer, y func(int) float64) string {
	var labels strings.Builder
	type box struct{ x0, x1, y0, y1 float64 }
	var placed []box
	ls := append([]Level(nil), c.Levels...)
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].Tokens > ls[j].Tokens })
	for _, l := range ls {
		ly := y(l.Tokens)
		stroke, dash := "#999", "4 3"
		if l.Class == "budget" {
			stroke, dash = "#d62728", "6 3"
		}
		fmt.Fprintf(w, `<line class="level %s" x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="%s"/>`+"\n", esc(l.Class), dcL, dcW-dcR, ly, ly, stroke, dash)
		width := dcCharW * 12 * float64(len([]rune(l.Label)))
		type spot struct {
			x, base float64
			anchor  string
		}
		spots := []spot{{dcL + 6, ly - 5, "start"}, {dcL + 6, ly + 14, "start"}, {dcW - dcR - 6, ly - 5, "end"}, {dcW - dcR - 6, ly + 14, "end"}}
		pick := spots[0]
		for _, s := range spots {
			b := box{s.x, s.x + width, s.base - 10, s.base + 3}
			if s.anchor == "end" {
				b.x0, b.x1 = s.x-width, s.x
			}
			clear := true
			for _, p := range placed {
				if b.x0 < p.x1 && p.x0 < b.x1 && b.y0 < p.y1 && p.y0 < b.y1 {
					clear = false
					break
				}
			}
			if clear {
				pick = s
				placed = append(placed, b)
				break
			}
		}
		fill := "#666"
		if l.Class == "budget" {
			fill = "#d62728"
		}
		// A white halo keeps the label legible where a series crosses it.
		fmt.Fprintf(&labels, `<text x="%.1f" y="%.1f" text-anchor="%s" fill="%s" stroke="white" stroke-width="3" paint-order="stroke">%s</text>`+"\n", pick.x, pick.base, pick.anchor, fill, esc(l.Label))
	}
	return labels.String()
}

// cents formats a tick in cents as dollars: whole dollars when it has no
// cents.
func cents(c int) string {
	if c%100 == 0 {
		return fmt.Sprintf("$%d", c/100)
	}
	return fmt.Sprintf("$%.2f", float64(c)/100)
}
