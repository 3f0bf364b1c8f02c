package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/contextfold/contextfold/internal/bench"
	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/policy/ladder"
	"github.com/contextfold/contextfold/internal/core/policy/schedule"
)

func benchCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("bench")
	windows := fs.String("windows", "200000,128000,32000", "context windows to replay at, comma-separated")
	window := fs.Int("window", 0, "a single window (overrides -windows)")
	out := fs.String("out", "", "write report.md, report.json and SVG charts to this folder")
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout")
	sweep := fs.Bool("sweep", false, "sweep the digest's room for error lines, and the cost-first schedule's headroom and minimum event size, and print every setting's cost")
	sweepLadder := fs.Bool("sweep-ladder", false, "sweep the ladder profile's fold-at, step and tail and print the best settings per window")
	sweepFidelity := fs.Bool("sweep-fidelity", false, "sweep the schedule's tail, first-fold gate and headroom and print each setting's cost and hidden references against the seed profile's")
	half := fs.String("half", "all", "replay only one half of the fixed tune/test split: tune, test or all")
	system := fs.Int("system-tokens", bench.DefaultSystemTokens, "fixed system prompt and tool list, in tokens")
	write := fs.Float64("price-write", bench.Anthropic.CacheWrite, "Anthropic-style cache-write price (input = 1)")
	read := fs.Float64("price-read", bench.Anthropic.CacheRead, "cache-read price (both models)")
	output := fs.Float64("price-output", bench.Anthropic.Output, "output price (both models)")
	ttl := fs.Duration("ttl", 5*time.Minute, "cache TTL, applied when a trajectory has timestamps")
	quiet := fs.Bool("quiet", false, "no progress bar")
	trace := fs.String("trace", "", "write every request each policy sends, per trajectory, to `dir`/<policy>-<window>/<family>/<name>.jsonl.gz")
	tracePolicies := fs.String("trace-policies", "", "with -trace, only these policies (comma-separated names as the report prints them; default is the shipped one)")
	samples := fs.Int("samples", 0, "print up to `n` hidden references per policy and window, for review")
	synthetic := fs.Int("synthetic", 0, "also replay `n` generated long Claude Code-shaped sessions (docs/DEVELOPMENT.md); alone when no trajectory is named")
	if exit, ok := parse(fs, args, stdout, stderr); !ok {
		return exit
	}
	ws, err := parseWindows(*windows, *window)
	if err != nil {
		return usageError(stderr, "bench", "%v", err)
	}
	switch *half {
	case "all", bench.HalfNames[bench.Tune], bench.HalfNames[bench.Test]:
	default:
		return usageError(stderr, "bench", "-half %q: want tune, test or all", *half)
	}
	if *tracePolicies != "" {
		if *trace == "" {
			return usageError(stderr, "bench", "-trace-policies needs -trace")
		}
		if err := checkPolicyNames(strings.Split(*tracePolicies, ",")); err != nil {
			return usageError(stderr, "bench", "%v", err)
		}
	}
	if *synthetic < 0 {
		return usageError(stderr, "bench", "-synthetic %d: want a count", *synthetic)
	}
	paths := fs.Args()
	if len(paths) == 0 && *synthetic == 0 {
		// A checkout's sample is the default; anywhere else there is no
		// default to guess: say what to name.
		if st, err := os.Stat(sampleDir); err != nil || !st.IsDir() {
			sessions, err := piSessionsDir()
			if err != nil {
				sessions = "~/.pi/agent/sessions"
			}
			return usageError(stderr, "bench", "name the sessions to replay, e.g. Pi's: contextfold bench %s (%s, the default, is only in a checkout)", sessions, sampleDir)
		}
		paths = []string{sampleDir}
	}
	var traces []*bench.Trace
	if len(paths) > 0 {
		var skipped []bench.Skip
		traces, skipped, err = bench.Gather(paths, *system)
		if len(skipped) > 0 {
			fmt.Fprintln(stderr, skipNote(len(traces), skipped))
		}
		if err != nil {
			fmt.Fprintln(stderr, "contextfold bench:", err)
			return 1
		}
	}
	traces = append(traces, bench.Synthetic(*synthetic, *system)...)
	if len(paths) == 0 {
		paths = []string{"the generated sessions"}
	}
	switch *half {
	case bench.HalfNames[bench.Tune]:
		traces = bench.Half(traces, bench.Tune)
	case bench.HalfNames[bench.Test]:
		traces = bench.Half(traces, bench.Test)
	}
	if len(traces) == 0 {
		fmt.Fprintf(stderr, "contextfold bench: no trajectories in the %s half of %s\n", *half, strings.Join(paths, ", "))
		return 1
	}
	anth := bench.Prices{Name: "anthropic", Input: 1, CacheWrite: *write, CacheRead: *read, Output: *output}
	oai := bench.Prices{Name: "openai", Input: 1, CacheWrite: 1, CacheRead: *read, Output: *output}
	anthBP := anth
	anthBP.Name, anthBP.Breakpoints = bench.AnthropicBreakpoints.Name, true
	opt := bench.Options{Windows: ws, SystemTokens: *system, TTLms: ttl.Milliseconds(), Prices: []bench.Prices{anth, oai, anthBP}, Trace: *trace, Samples: *samples}
	if *tracePolicies != "" {
		opt.TracePolicies = strings.Split(*tracePolicies, ",")
	}
	if !*quiet {
		opt.Progress = stderr
	}
	if *sweep {
		return runSweep(traces, opt, stdout)
	}
	if *sweepLadder {
		return runLadderSweep(traces, opt, stdout)
	}
	if *sweepFidelity {
		return runFidelitySweep(traces, opt, stdout)
	}
	rep, err := bench.Run(traces, opt)
	if err != nil {
		fmt.Fprintln(stderr, "contextfold bench:", err)
		return 1
	}
	if *samples > 0 {
		rep.PrintSamples(stdout, *samples)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "contextfold bench:", err)
			return 1
		}
	} else {
		rep.Markdown(stdout)
		rep.Timings(stdout)
	}
	if *out != "" {
		if err := writeReport(rep, *out); err != nil {
			fmt.Fprintln(stderr, "contextfold bench:", err)
			return 1
		}
		fmt.Fprintf(stderr, "wrote %s\n", *out)
	}
	return 0
}

// sampleDir is the sample of real sessions in a checkout, bench's default.
const sampleDir = "testdata/trajectories"

// skipNote is the one line that says which files bench skipped, how many
// for each reason, and one failure's error as an example.
func skipNote(kept int, skipped []bench.Skip) string {
	count := map[string]int{}
	var example *bench.Skip
	for i, s := range skipped {
		count[s.Why]++
		if example == nil && s.Err != nil {
			example = &skipped[i]
		}
	}
	var parts []string
	for _, why := range []string{bench.SkipOwn, bench.SkipFormat, bench.SkipMalformed, bench.SkipNoRequest} {
		if n := count[why]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, why))
		}
	}
	note := fmt.Sprintf("contextfold bench: skipped %d of %d files that are not sessions to replay: %s", len(skipped), kept+len(skipped), strings.Join(parts, ", "))
	if example != nil {
		note += " (e.g. " + example.Err.Error() + ")"
	}
	return note
}

func parseWindows(list string, one int) ([]int, error) {
	if one < 0 {
		return nil, fmt.Errorf("bad window %d", one)
	}
	if one > 0 {
		return []int{one}, nil
	}
	var ws []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad window %q", f)
		}
		ws = append(ws, n)
	}
	return ws, nil
}

func writeReport(rep *bench.Report, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	create := func(name string, fill func(io.Writer)) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		fill(f)
		return f.Close()
	}
	if err := create("report.md", rep.Markdown); err != nil {
		return err
	}
	if err := create("report.json", func(w io.Writer) {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	}); err != nil {
		return err
	}
	for _, pr := range rep.Prices {
		if err := create("cost-"+pr.Name+".svg", func(w io.Writer) { rep.CostSVG(w, pr) }); err != nil {
			return err
		}
	}
	for _, win := range rep.Windows {
		var order []string
		for _, r := range win.Overall {
			order = append(order, r.Policy)
		}
		if err := create(fmt.Sprintf("tokens-%dk.svg", win.Window/1000), func(w io.Writer) { win.SeriesSVG(w, order) }); err != nil {
			return err
		}
	}
	return nil
}

// runSweep replays the shipped policy over the digest's room for error
// lines (printing how many error lines of folded blocks stay visible whole)
// and over the cost-aware schedule's two parameters, urgent headroom and
// minimum event size (printing every setting's cost at every window, best
// first by the mean over the windows: one setting for all windows, no
// per-window tuning).
func runSweep(traces []*bench.Trace, opt bench.Options, stdout io.Writer) int {
	pols := []bench.Policy{bench.Raw{}}
	// The digest's room for error lines, at the default schedule: more
	// room keeps more distinct error lines whole and costs every request
	// that carries the digest.
	for _, room := range []int{800, 1600, 2400, 3200, 4800} {
		lim := digest.DefaultLimits
		lim.MaxChars = room
		pols = append(pols, bench.ContextFold{Label: fmt.Sprintf("digest room=%d", room), Knobs: policy.DefaultKnobs, Policy: schedule.Default, Limits: lim, Reserve: bench.PiReserve})
	}
	clips := len(pols) - 1
	// The cost-first schedule (bench.CostFirst: no envelope, urgent events
	// that reach into the tail), over its urgent headroom and least event.
	for _, h := range []float64{0.15, 0.3, 0.5, 0.7} {
		for _, m := range []float64{0.01, 0.02, 0.05, 0.1} {
			e := bench.CostFirst
			e.Headroom, e.MinMass = h, m
			pols = append(pols, bench.ContextFold{
				Label:   fmt.Sprintf("headroom=%.2f min-mass=%.2f", h, m),
				Knobs:   bench.CostFirstKnobs,
				Policy:  e,
				Reserve: bench.PiReserve,
			})
		}
	}
	// Its protected tail: urgent events that never reach into it, and
	// other tails.
	keep := bench.CostFirst
	keep.KeepTail = true
	pols = append(pols, bench.ContextFold{Label: "keep-tail", Knobs: bench.CostFirstKnobs, Policy: keep, Reserve: bench.PiReserve})
	for _, tail := range []int{5_000, 20_000} {
		k := bench.CostFirstKnobs
		k.Tail = tail
		pols = append(pols, bench.ContextFold{Label: fmt.Sprintf("tail=%dk", tail/1000), Knobs: k, Policy: bench.CostFirst, Reserve: bench.PiReserve})
	}
	opt.Policies = pols
	rep, err := bench.Run(traces, opt)
	if err != nil {
		fmt.Fprintln(stdout, "contextfold bench:", err)
		return 1
	}
	type row struct {
		name       string
		mean       float64
		line       strings.Builder
		infeasible bool
	}
	rows := make([]*row, len(pols)-1)
	for i := range rows {
		rows[i] = &row{name: pols[i+1].Name()}
	}
	for _, win := range rep.Windows {
		for i, r := range win.Overall[1:] {
			vis, whole := 1.0, 1.0
			if r.FoldErrTotal > 0 {
				vis = float64(r.FoldErrVisible) / float64(r.FoldErrTotal)
				whole = float64(r.FoldErrWhole) / float64(r.FoldErrTotal)
			}
			if i < clips {
				fmt.Fprintf(&rows[i].line, "  %dk whole %.1f%% (shown or counted %.1f%%) %.3f/%.3f", win.Window/1000, 100*whole, 100*vis, r.Relative["anthropic"], r.Relative["openai"])
				continue
			}
			fmt.Fprintf(&rows[i].line, "  %dk %.3f/%.3f recalls %.3f/%.3f hidden %.2f%%", win.Window/1000, r.Relative["anthropic"], r.Relative["openai"],
				r.WithRecalls["anthropic"], r.WithRecalls["openai"], 100*r.HiddenShare())
			rows[i].mean += r.WithRecalls["anthropic"] / float64(len(rep.Windows))
			rows[i].infeasible = rows[i].infeasible || !r.Feasible
		}
	}
	fmt.Fprintf(stdout, "%d sessions; distinct error lines of folded blocks visible whole, and cost relative to raw, per digest room; default room=%d\n", rep.Traces, digest.DefaultLimits.MaxChars)
	for _, r := range rows[:clips] {
		fmt.Fprintf(stdout, "%-30s%s\n", r.name, r.line.String())
	}
	rows = rows[clips:]
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].mean < rows[j].mean })
	fmt.Fprintf(stdout, "\ncost relative to raw (Anthropic/OpenAI), with one recall round trip per request that hid a reference, and the share of context references hidden; best first by the mean cost with recalls; the cost-first schedule's own setting %s\n", defaultLabel())
	for _, r := range rows {
		mark := ""
		if r.infeasible {
			mark = " (not feasible)"
		}
		fmt.Fprintf(stdout, "%-30s mean %.3f%s%s\n", r.name, r.mean, r.line.String(), mark)
	}
	return 0
}

// defaultLabel names the cost-first schedule's own setting in -sweep's grid.
func defaultLabel() string {
	d := schedule.Default
	return fmt.Sprintf("headroom=%.2f min-mass=%.2f", d.Headroom, d.MinMass)
}

// runLadderSweep replays the ladder profile over a grid of fold-at, step
// and tail and prints each window's ten cheapest settings, best first.
func runLadderSweep(traces []*bench.Trace, opt bench.Options, stdout io.Writer) int {
	label := func(k policy.Knobs) string {
		return fmt.Sprintf("at=%.2f step=%.2f tail=%dk", k.FoldAt, k.FoldStep, k.Tail/1000)
	}
	pols := []bench.Policy{bench.Raw{}}
	for _, at := range []float64{0.25, 0.35, 0.45, 0.55} {
		for _, step := range []float64{0.06, 0.12, 0.2} {
			for _, tail := range []int{5_000, 10_000, 20_000} {
				k := policy.DefaultKnobs
				k.FoldAt, k.FoldStep, k.Tail = at, step, tail
				pols = append(pols, bench.ContextFold{Label: label(k), Knobs: k, Policy: ladder.Ladder{}, Reserve: bench.PiReserve})
			}
		}
	}
	opt.Policies = pols
	rep, err := bench.Run(traces, opt)
	if err != nil {
		fmt.Fprintln(stdout, "contextfold bench:", err)
		return 1
	}
	def := label(policy.DefaultKnobs)
	for _, win := range rep.Windows {
		rs := append([]*bench.Result(nil), win.Overall[1:]...)
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Relative["anthropic"] < rs[j].Relative["anthropic"] })
		fmt.Fprintf(stdout, "window %dk, ladder profile (cost relative to raw, Anthropic / OpenAI; seed defaults %s):\n", win.Window/1000, def)
		for i, r := range rs {
			if i == 10 {
				break
			}
			feas := ""
			if !r.Feasible {
				feas = " (not feasible)"
			}
			fmt.Fprintf(stdout, "  %-30s %.3f / %.3f%s\n", r.Policy, r.Relative["anthropic"], r.Relative["openai"], feas)
		}
		for _, r := range rs {
			if r.Policy == def {
				fmt.Fprintf(stdout, "  seed defaults: %.3f / %.3f\n", r.Relative["anthropic"], r.Relative["openai"])
			}
		}
		fmt.Fprintf(stdout, "best: %s\n\n", rs[0].Policy)
	}
	return 0
}

// fidelityGrid is the family runFidelitySweep searches: the cost-aware
// schedule with a protected tail, an envelope (no event before FoldAt of
// the window, none smaller than FoldStep of it; FoldAt 0 is none; the
// seed ladder's is 0.45 and 0.12), and urgent events that reach into the
// tail or not (Economic.KeepTail).
var fidelityGrid = struct {
	Tails    []int
	FoldAts  []float64
	Steps    []float64
	KeepTail []bool
}{
	Tails:    []int{10_000, 20_000, 30_000, 40_000, 60_000},
	FoldAts:  []float64{0, 0.25, 0.35, 0.45},
	Steps:    []float64{0.02, 0.12},
	KeepTail: []bool{false, true},
}

// runFidelitySweep replays the schedule over fidelityGrid beside the seed
// profile and prints, per window, every setting's cost under Anthropic's
// cache rules (with one recall per request that hid a reference), its
// hidden references, whether it is feasible, whether it hides no more than
// the seed profile (share of references and requests with one), and
// whether it is on the cost-fidelity frontier (no setting is both cheaper
// and hides fewer). Last, the cheapest setting that meets the seed
// profile's bound at every window but the smallest.
func runFidelitySweep(traces []*bench.Trace, opt bench.Options, stdout io.Writer) int {
	const seedName = "seed profile (ladder)"
	pols := []bench.Policy{bench.Raw{}, bench.ContextFold{Label: seedName, Knobs: bench.SeedKnobs, Policy: ladder.Ladder{}, Reserve: bench.PiReserve}}
	d := schedule.Default
	for _, keep := range fidelityGrid.KeepTail {
		for _, step := range fidelityGrid.Steps {
			for _, tail := range fidelityGrid.Tails {
				for _, at := range fidelityGrid.FoldAts {
					if at == 0 && step != fidelityGrid.Steps[0] {
						continue // no envelope: the step does not apply
					}
					k := policy.DefaultKnobs
					k.Tail, k.FoldAt, k.FoldStep = tail, at, step
					e := d
					e.Envelope, e.KeepTail = at > 0, keep
					pols = append(pols, bench.ContextFold{Label: fidelityLabel(k, e), Knobs: k, Policy: e, Reserve: bench.PiReserve})
				}
			}
		}
	}
	opt.Policies = pols
	rep, err := bench.Run(traces, opt)
	if err != nil {
		fmt.Fprintln(stdout, "contextfold bench:", err)
		return 1
	}
	price := bench.AnthropicBreakpoints.Name
	meetsAll := map[string]bool{}
	cost := map[string]float64{}
	for _, p := range pols[2:] {
		meetsAll[p.Name()] = true
	}
	fmt.Fprintf(stdout, "%d sessions; cost relative to raw under Anthropic's cache rules, with recalls; hidden references (share, requests with one per 100); default %s\n", rep.Traces, fidelityLabel(policy.DefaultKnobs, d))
	for wi, win := range rep.Windows {
		seed := win.Overall[1]
		rs := append([]*bench.Result(nil), win.Overall[1:]...)
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Relative[price] < rs[j].Relative[price] })
		fmt.Fprintf(stdout, "\nwindow %dk (= meets the seed profile's bound, * on the frontier)\n", win.Window/1000)
		best := math.Inf(1) // least hidden share among cheaper settings
		for _, r := range rs {
			meets := r.HiddenShare() <= seed.HiddenShare() && r.PerHundred() <= seed.PerHundred()
			mark := " "
			if meets {
				mark = "="
			}
			front := " "
			if r.Feasible && r.HiddenShare() < best {
				front, best = "*", r.HiddenShare()
			}
			feas := ""
			if !r.Feasible {
				feas = " (not feasible)"
			}
			fmt.Fprintf(stdout, "%s%s %-34s %.3f (%.3f)  %5d %.2f%% (%.1f)%s\n", mark, front, r.Policy, r.Relative[price], r.WithRecalls[price], r.RefsHidden, 100*r.HiddenShare(), r.PerHundred(), feas)
			if r.Policy == seedName {
				continue
			}
			// The bound holds at the large windows; at the smallest the
			// setting must be feasible and hide no more.
			if !meets || !r.Feasible {
				meetsAll[r.Policy] = false
			}
			if wi < len(rep.Windows)-1 || len(rep.Windows) == 1 {
				cost[r.Policy] += r.Relative[price]
			}
		}
	}
	var pick string
	for _, p := range pols[2:] {
		if n := p.Name(); meetsAll[n] && (pick == "" || cost[n] < cost[pick]) {
			pick = n
		}
	}
	if pick == "" {
		fmt.Fprintln(stdout, "\nno setting meets the seed profile's bound at every window")
		return 0
	}
	fmt.Fprintf(stdout, "\ncheapest setting that meets the seed profile's bound at every window: %s\n", pick)
	return 0
}

func fidelityLabel(k policy.Knobs, e schedule.Economic) string {
	s := fmt.Sprintf("tail=%dk", k.Tail/1000)
	if e.Envelope {
		s += fmt.Sprintf(" fold-at=%.2f step=%.2f", k.FoldAt, k.FoldStep)
	}
	if e.KeepTail {
		s += " keep-tail"
	}
	return s
}

// checkPolicyNames refuses a -trace-policies name the report does not
// print, so that a typo does not trace nothing.
func checkPolicyNames(names []string) error {
	known := map[string]bool{"default": true}
	var list []string
	for _, p := range bench.DefaultPolicies() {
		known[p.Name()] = true
		list = append(list, p.Name())
	}
	for _, n := range names {
		if !known[n] {
			return fmt.Errorf("-trace-policies: no policy %q (have default, %s)", n, strings.Join(list, ", "))
		}
	}
	return nil
}
