package bench

import (
	"bytes"
	"regexp"
	"strconv"
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
