package bench

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

type svgText struct {
	x0, x1, y0, y1 float64
	s              string
}

// svgTexts returns each <text>'s box, its width estimated at 0.62 em per
// character (generous for sans-serif digits and lower case).
func svgTexts(t *testing.T, svg string) []svgText {
	t.Helper()
	re := regexp.MustCompile(`<text x="([0-9.]+)" y="([0-9.]+)"([^>]*)>([^<]*)</text>`)
	var out []svgText
	for _, m := range re.FindAllStringSubmatch(svg, -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		y, _ := strconv.ParseFloat(m[2], 64)
		fs := 12.0
		if f := regexp.MustCompile(`font-size="([0-9.]+)"`).FindStringSubmatch(m[3]); f != nil {
			fs, _ = strconv.ParseFloat(f[1], 64)
		}
		w := 0.62 * fs * float64(utf8.RuneCountInString(m[4]))
		switch {
		case regexp.MustCompile(`text-anchor="end"`).MatchString(m[3]):
			x -= w
		case regexp.MustCompile(`text-anchor="middle"`).MatchString(m[3]):
			x -= w / 2
		}
		out = append(out, svgText{x, x + w, y - 0.8*fs, y + 0.2*fs, m[4]})
	}
	return out
}

// TestSeriesSVGLayout: no label overlaps another (the window label once sat
// on the legend), and the x axis has numbered ticks.
func TestSeriesSVGLayout(t *testing.T) {
	for _, tc := range []struct {
		window int
		raw    []int
	}{
		{128_000, []int{20_000, 60_000, 128_000, 90_000}},                           // peaks at the window: the window line at the top
		{32_000, []int{5_000, 12_000, 40_000, 31_000, 9_000, 30_000, 35_000, 2000}}, // past it
		{200_000, make([]int, 900)},
	} {
		win := &Window{Window: tc.window, SeriesName: "pi-mono/large", Series: map[string][]int{"raw": tc.raw, "context-fold": tc.raw[:len(tc.raw)/2]}}
		var b bytes.Buffer
		win.SeriesSVG(&b, []string{"raw", "context-fold"})
		texts := svgTexts(t, b.String())
		for i := range texts {
			for j := i + 1; j < len(texts); j++ {
				a, c := texts[i], texts[j]
				if a.x0 < c.x1 && c.x0 < a.x1 && a.y0 < c.y1 && c.y0 < a.y1 {
					t.Errorf("window %d: %q overlaps %q", tc.window, a.s, c.s)
				}
			}
		}
		ticks := 0
		for _, tx := range texts {
			if _, err := strconv.Atoi(tx.s); err == nil && tx.y0 > 380 {
				ticks++
			}
		}
		if ticks < 2 {
			t.Errorf("window %d: %d numbered ticks on the x axis", tc.window, ticks)
		}
	}
}

// demoChart is a DemoChart over series of n requests, with events at
// the given requests and the levels a Pi session at window would have.
func demoChart(window, n int, events []int) *DemoChart {
	raw, folded := make([]int, n), make([]int, n)
	rc, fc := make([]float64, n), make([]float64, n)
	for i := range raw {
		raw[i] = 1_000 + i*window/n
		folded[i] = raw[i] * 2 / 3
		if i > 0 {
			rc[i], fc[i] = rc[i-1]+float64(raw[i])*3e-7, fc[i-1]+float64(folded[i])*3e-7
		}
	}
	return &DemoChart{
		Title:  "Input tokens per request and cumulative cost — a session",
		Order:  []string{"raw", "context-fold"},
		Tokens: map[string][]int{"raw": raw, "context-fold": folded},
		Cost:   map[string][]float64{"raw": rc, "context-fold": fc},
		Events: events,
		Levels: []Level{
			{Tokens: window, Label: "window", Class: "window"},
			{Tokens: window - PiReserve, Label: "Pi compacts above", Class: "threshold"},
			{Tokens: min(window*3/4, window-PiReserve-2048), Label: "context-fold budget", Class: "budget"},
			{Tokens: window * 45 / 100, Label: "no fold below", Class: "fold-at"},
		},
		Prices: "Cost at some prices, USD per million tokens: input $3",
	}
}

// TestDemoChart: one marker per fold event at its request, the budget line
// at the budget's height, a cost panel with a line per series and its
// final cost, the price table named, a title naming the quantity the axis
// shows, and no label on another.
func TestDemoChart(t *testing.T) {
	for _, tc := range []struct {
		window, n int
		events    []int
	}{
		{128_000, 439, []int{108, 410}},
		{32_000, 439, []int{3, 4, 5, 50, 51, 200, 438}}, // the levels a few pixels apart
		{200_000, 40, nil},
	} {
		c := demoChart(tc.window, tc.n, tc.events)
		var b bytes.Buffer
		c.SVG(&b)
		svg := b.String()

		marks := regexp.MustCompile(`<path class="fold-event" data-request="(\d+)" d="M([0-9.]+),`).FindAllStringSubmatch(svg, -1)
		if len(marks) != len(tc.events) {
			t.Errorf("window %d: %d fold-event markers for %d events", tc.window, len(marks), len(tc.events))
		}
		for i, m := range marks {
			k := tc.events[i]
			if m[1] != strconv.Itoa(k+1) || m[2] != fmt.Sprintf("%.1f", DemoX(k, tc.n)) {
				t.Errorf("window %d: marker %d is request %s at x %s, want request %d at x %.1f", tc.window, i, m[1], m[2], k+1, DemoX(k, tc.n))
			}
		}

		maxY := tc.window
		for _, v := range c.Tokens["raw"] {
			maxY = max(maxY, v)
		}
		budget := c.Levels[2].Tokens
		want := fmt.Sprintf(`<line class="level budget" x1="70" x2="680" y1="%.1f" y2="%.1f"`, DemoTokenY(budget, maxY), DemoTokenY(budget, maxY))
		if !strings.Contains(svg, want) {
			t.Errorf("window %d: no budget line at y %.1f", tc.window, DemoTokenY(budget, maxY))
		}

		for _, name := range c.Order {
			if !strings.Contains(svg, `<polyline class="cost" data-series="`+name+`"`) {
				t.Errorf("window %d: no cost line for %s", tc.window, name)
			}
			cost := c.Cost[name]
			if !strings.Contains(svg, fmt.Sprintf(">%s $%.2f</text>", name, cost[len(cost)-1])) {
				t.Errorf("window %d: the legend lacks %s's final cost $%.2f", tc.window, name, cost[len(cost)-1])
			}
		}
		texts := svgTexts(t, svg)
		has := func(s string) bool {
			for _, tx := range texts {
				if tx.s == s {
					return true
				}
			}
			return false
		}
		for _, s := range []string{"input tokens per request", "cumulative cost, USD", "request", esc(c.Prices)} {
			if !has(s) {
				t.Errorf("window %d: no label %q", tc.window, s)
			}
		}
		if !strings.HasPrefix(strings.ToLower(texts[0].s), "input tokens per request") {
			t.Errorf("window %d: the title %q does not name the quantity the axis shows", tc.window, texts[0].s)
		}
		for i := range texts {
			if texts[i].x0 < 0 || texts[i].x1 > 900 {
				t.Errorf("window %d: %q runs off the chart", tc.window, texts[i].s)
			}
			for j := i + 1; j < len(texts); j++ {
				a, c := texts[i], texts[j]
				if a.x0 < c.x1 && c.x0 < a.x1 && a.y0 < c.y1 && c.y0 < a.y1 {
					t.Errorf("window %d: %q overlaps %q", tc.window, a.s, c.s)
				}
			}
		}
	}
}
