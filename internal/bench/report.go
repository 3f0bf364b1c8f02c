package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// tk formats a token count compactly.
func tk(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}

func pct(x float64) string { return fmt.Sprintf("%.0f %%", 100*x) }

// relative is r's cost relative to raw under the prices named name, or —
// when the report was not priced by them.
func relative(r *Result, name string) string {
	if x, ok := r.Relative[name]; ok {
		return fmt.Sprintf("%.3f", x)
	}
	return "—"
}

// Markdown writes the report's tables.
func (rep *Report) Markdown(w io.Writer) {
	for _, win := range rep.Windows {
		fmt.Fprintf(w, "### Window %dk — %d sessions, %d requests\n\n", win.Window/1000, rep.Traces, rep.Requests)
		fmt.Fprint(w, "| policy | cost (Anthropic) | cost (Anthropic, breakpoints) | cost (OpenAI) | input tokens | peak request | mean request | cache breaks | fold events / clearings | compactions | error lines of hidden blocks visible whole | of folded blocks whole (shown or counted) | feasible |\n")
		fmt.Fprint(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, r := range win.Overall {
			vis := "—"
			if r.Hidden > 0 {
				vis = fmt.Sprintf("%s (%d/%d)", pct(r.ErrShare()), r.ErrVisible, r.ErrTotal)
			}
			fold := "—"
			if r.FoldErrTotal > 0 {
				fold = fmt.Sprintf("%s (%s)", pct(float64(r.FoldErrWhole)/float64(r.FoldErrTotal)), pct(float64(r.FoldErrVisible)/float64(r.FoldErrTotal)))
			}
			feas := "yes"
			if !r.Feasible {
				feas = fmt.Sprintf("**no**: %d requests over the window", r.Usage.OverWindow)
			}
			if r.Substituted > 0 {
				feas += fmt.Sprintf("; the shipped schedule on %d sessions, where no timing fits", r.Substituted)
			}
			fmt.Fprintf(w, "| %s | %.3f | %s | %.3f | %s | %s | %s | %d | %d | %d | %s | %s | %s |\n", r.Policy,
				r.Relative[Anthropic.Name], relative(r, AnthropicBreakpoints.Name), r.Relative[OpenAI.Name], tk(float64(r.Usage.Input)),
				tk(float64(r.Usage.Peak)), tk(r.Usage.Mean()), r.Usage.Breaks, r.Events, r.Compactions, vis, fold, feas)
		}
		for _, r := range win.Overall {
			if r.Folded > 0 {
				fmt.Fprintf(w, "\n%s: %d folded blocks, %s recoverable byte-exact from the session (sha256)",
					r.Policy, r.Folded, pct(float64(r.Recoverable)/float64(r.Folded)))
				if r.Bounded > 0 {
					fmt.Fprintf(w, "; %d tool results too large to send whole went out as a bounded view on first delivery", r.Bounded)
				}
				fmt.Fprint(w, ".\n")
			}
		}
		win.hiddenTable(w)
		fmt.Fprintf(w, "\nCost relative to raw per family (Anthropic / OpenAI prices):\n\n| family |")
		for _, r := range win.Overall {
			fmt.Fprintf(w, " %s |", r.Policy)
		}
		fmt.Fprint(w, "\n|---|")
		for range win.Overall {
			fmt.Fprint(w, "---:|")
		}
		fmt.Fprintln(w)
		fams := make([]string, 0, len(win.Families))
		for f := range win.Families {
			fams = append(fams, f)
		}
		sort.Strings(fams)
		for _, f := range fams {
			fmt.Fprintf(w, "| %s |", f)
			for _, r := range win.Families[f] {
				mark := ""
				if !r.Feasible {
					mark = "†"
				}
				fmt.Fprintf(w, " %.3f / %.3f%s |", r.Relative[Anthropic.Name], r.Relative[OpenAI.Name], mark)
			}
			fmt.Fprintln(w)
		}
		fmt.Fprint(w, "\n† sends requests over the window (not feasible as configured).\n\n")
		win.splitTable(w)
	}
}

// Timings writes the run's measured engine overhead (not deterministic, so
// kept out of Markdown).
func (rep *Report) Timings(w io.Writer) {
	fmt.Fprintf(w, "Engine time per request over the whole run: p50 %.0f µs, p99 %.0f µs; peak RSS %.0f MB.\n", rep.EngineP50us, rep.EngineP99us, rep.PeakRSSMB)
	for _, win := range rep.Windows {
		for _, r := range win.Overall {
			if r.Folded > 0 {
				fmt.Fprintf(w, "  %dk %s: p50 %.0f µs, p99 %.0f µs\n", win.Window/1000, r.Policy, r.StepP50, r.StepP99)
			}
		}
	}
}

var palette = []string{"#444444", "#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#1f77b4", "#2ca02c", "#17becf"}

// SeriesSVG draws request tokens per turn on the longest trace, one line
// per policy.
func (win *Window) SeriesSVG(w io.Writer, order []string) {
	const W, H, L, B, T, R = 900, 420, 70, 40, 40, 210
	maxY, maxX := 1, 1
	for _, s := range win.Series {
		for _, v := range s {
			maxY = max(maxY, v)
		}
		maxX = max(maxX, len(s))
	}
	if win.Window > 0 {
		maxY = max(maxY, win.Window)
	}
	x := func(i int) float64 { return L + float64(i)*float64(W-L-R)/float64(max(1, maxX-1)) }
	y := func(v int) float64 { return H - B - float64(v)*float64(H-B-T)/float64(maxY) }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="22" font-size="14">Request tokens per turn — %s, window %dk</text>`+"\n", L, esc(win.SeriesName), win.Window/1000)
	for _, v := range ticks(maxY) {
		fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", L, W-R, y(v), y(v), L-6, y(v)+4, tk(float64(v)))
	}
	if win.Window > 0 {
		// Labelled inside the plot, above its line: the legend owns the
		// right margin.
		fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="4 3"/><text x="%d" y="%.1f" fill="#666">window %s</text>`+"\n", L, W-R, y(win.Window), y(win.Window), L+6, y(win.Window)-5, tk(float64(win.Window)))
	}
	// Requests are numbered from 1: the first point is request 1.
	for _, n := range ticks(maxX) {
		if n == 0 {
			n = 1
		} else if n == 1 {
			continue
		}
		fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#999"/><text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(n-1), x(n-1), H-B, H-B+4, x(n-1), H-B+17, n)
	}
	fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#999"/>`+"\n", L, W-R, H-B, H-B)
	fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle">request</text>`+"\n", (L+W-R)/2, H-6)
	for k, name := range order {
		s := win.Series[name]
		if len(s) == 0 {
			continue
		}
		var pts []string
		for i, v := range s {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
		}
		c := palette[k%len(palette)]
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", c, strings.Join(pts, " "))
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="12" height="3" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", W-R+10, T+18*k+8, c, W-R+26, T+18*k+12, esc(name))
	}
	fmt.Fprintln(w, "</svg>")
}

// CostSVG draws each policy's overall cost relative to raw, per window.
func (rep *Report) CostSVG(w io.Writer, prices Prices) {
	if len(rep.Windows) == 0 {
		return
	}
	names := make([]string, 0)
	for _, r := range rep.Windows[0].Overall {
		names = append(names, r.Policy)
	}
	const W, L, T, barH, gap = 900, 230, 40, 14, 10
	H := T + len(names)*(barH*len(rep.Windows)+gap) + 40
	maxV := 1.0
	for _, win := range rep.Windows {
		for _, r := range win.Overall {
			maxV = math.Max(maxV, r.Relative[prices.Name])
		}
	}
	sx := func(v float64) float64 { return float64(W-L-80) * v / maxV }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="22" font-size="14">Cost relative to raw (%s prices); hatched: not feasible</text>`+"\n", prices.Name)
	fmt.Fprintf(w, `<defs><pattern id="h" width="6" height="6" patternUnits="userSpaceOnUse"><path d="M0,6 L6,0" stroke="white" stroke-width="2"/></pattern></defs>`+"\n")
	fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#999" stroke-dasharray="4 3"/>`+"\n", L+sx(1), L+sx(1), T-6, H-30)
	yy := T
	for k, name := range names {
		fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", L-8, yy+barH*len(rep.Windows)/2+4, esc(name))
		for j, win := range rep.Windows {
			r := win.Overall[k]
			v := r.Relative[prices.Name]
			c := palette[j%len(palette)+5]
			fmt.Fprintf(w, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`, L, yy, sx(v), barH-2, c)
			if !r.Feasible {
				fmt.Fprintf(w, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="url(#h)"/>`, L, yy, sx(v), barH-2)
			}
			fmt.Fprintf(w, `<text x="%.1f" y="%d">%.3f (%dk)</text>`+"\n", float64(L)+sx(v)+4, yy+barH-4, v, win.Window/1000)
			yy += barH
		}
		yy += gap
	}
	fmt.Fprintln(w, "</svg>")
}

func ticks(maxY int) []int {
	step := 1
	for maxY/step > 8 {
		for _, m := range []int{2, 5, 10} {
			if maxY/(step*m) <= 8 {
				step *= m
				break
			}
			if m == 10 {
				step *= 10
			}
		}
	}
	var out []int
	for v := 0; v <= maxY; v += step {
		out = append(out, v)
	}
	return out
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// splitTable prints cost relative to raw on the tune half, the test half and
// the whole set (see Halves), both price models.
func (win *Window) splitTable(w io.Writer) {
	if len(win.Halves[Tune]) == 0 {
		return
	}
	fmt.Fprint(w, "Tune / test split (cost relative to raw, Anthropic / OpenAI; within each family, sessions sorted by name alternate between the halves):\n\n")
	fmt.Fprint(w, "| policy | tune half | test half | whole |\n|---|---:|---:|---:|\n")
	for k, r := range win.Overall {
		fmt.Fprintf(w, "| %s |", r.Policy)
		for _, x := range []*Result{win.Halves[Tune][k], win.Halves[Test][k], r} {
			if x.Usage.Requests == 0 {
				fmt.Fprint(w, " — |")
				continue
			}
			mark := ""
			if !x.Feasible {
				mark = "†"
			}
			fmt.Fprintf(w, " %.3f / %.3f%s |", x.Relative[Anthropic.Name], x.Relative[OpenAI.Name], mark)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// hiddenTable writes the hidden-reference figures (BENCHMARKS.md defines
// them): what each policy takes away from the agent's next action, and the
// cost once each request that lost one pays a recall round trip.
func (win *Window) hiddenTable(w io.Writer) {
	fmt.Fprint(w, "\nHidden references: of the references the next action used that came from the context, the share no message of the request showed; requests with one per 100; sessions with one; cost relative to raw with one recall round trip per such request.\n\n")
	fmt.Fprint(w, "| policy | context references | hidden | requests with one per 100 | sessions affected | cost with recalls (Anthropic) | (OpenAI) |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range win.Overall {
		fmt.Fprintf(w, "| %s | %d | %.1f %% (%d) | %.1f | %d / %d | %.3f | %.3f |\n", r.Policy, r.Refs, 100*r.HiddenShare(), r.RefsHidden,
			r.PerHundred(), r.Affected, r.Sessions, r.WithRecalls[Anthropic.Name], r.WithRecalls[OpenAI.Name])
	}
	win.breakdownTable(w)
}

// breakdownTable writes the shipped policy's and the seed profile's hidden
// references by kind, by where they sat and by age.
func (win *Window) breakdownTable(w io.Writer) {
	var rs []*Result
	for _, r := range win.Overall {
		if (r.Policy == ShippedName || strings.HasPrefix(r.Policy, "context-fold seed")) && r.RefsHidden > 0 {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return
	}
	fmt.Fprint(w, "\nHidden references by kind, by where their newest occurrence before the action sat, and by how many messages back: hidden / from the context (share).\n\n| |")
	for _, r := range rs {
		fmt.Fprintf(w, " %s |", r.Policy)
	}
	fmt.Fprint(w, "\n|---|")
	for range rs {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	keys := append([]string{"kind/path", "kind/name", "kind/number", "kind/line", "in/tool result", "in/other message"}, AgeBuckets...)
	for _, k := range keys {
		fmt.Fprintf(w, "| %s |", k)
		for _, r := range rs {
			t := r.Breakdown[k]
			share := 0.0
			if t.Context > 0 {
				share = 100 * float64(t.Hidden) / float64(t.Context)
			}
			fmt.Fprintf(w, " %d / %d (%.1f %%) |", t.Hidden, t.Context, share)
		}
		fmt.Fprintln(w)
	}
}

// PrintSamples writes up to n hidden references per policy and window,
// each with the line it came from and the line of the action that used it.
func (rep *Report) PrintSamples(w io.Writer, n int) {
	for _, win := range rep.Windows {
		for _, r := range win.Overall {
			if len(r.Samples) == 0 {
				continue
			}
			fmt.Fprintf(w, "## hidden references, %s at %dk\n", r.Policy, win.Window/1000)
			// An even spread over the traces, not the first n.
			step := max(1, len(r.Samples)/n)
			for i := 0; i < len(r.Samples) && i/step < n; i += step {
				s := r.Samples[i]
				fmt.Fprintf(w, "%s request %d (before message %d): %s %q\n  from message %d: %s\n  used:  %s\n",
					s.Trace, s.Request, s.Before, RefClass(s.Ref), s.Ref, s.From, s.FromLine, s.ActionLine)
			}
		}
	}
}
