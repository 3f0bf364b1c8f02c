package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/contextfold/contextfold/internal/bench"
	"github.com/contextfold/contextfold/internal/policy"
	"github.com/contextfold/contextfold/internal/trajectory"
)

func benchCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	windows := fs.String("windows", "200000,128000,32000", "context windows to replay at, comma-separated")
	window := fs.Int("window", 0, "a single window (overrides -windows)")
	out := fs.String("out", "", "write report.md, report.json and SVG charts to this folder")
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout")
	sweep := fs.Bool("sweep", false, "sweep fold-at, step and tail and print the best setting per window")
	system := fs.Int("system-tokens", bench.DefaultSystemTokens, "fixed system prompt and tool list, in tokens")
	write := fs.Float64("price-write", bench.Anthropic.CacheWrite, "Anthropic-style cache-write price (input = 1)")
	read := fs.Float64("price-read", bench.Anthropic.CacheRead, "cache-read price (both models)")
	output := fs.Float64("price-output", bench.Anthropic.Output, "output price (both models)")
	ttl := fs.Duration("ttl", 5*time.Minute, "cache TTL, applied when a trajectory has timestamps")
	quiet := fs.Bool("quiet", false, "no progress bar")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: contextfold bench [flags] [trajectory dir or files]...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ws, err := parseWindows(*windows, *window)
	if err != nil {
		fmt.Fprintln(stderr, "contextfold bench:", err)
		return 2
	}
	paths := fs.Args()
	if len(paths) == 0 {
		paths = []string{"testdata/trajectories"}
	}
	traces, err := loadTraces(paths, *system)
	if err != nil {
		fmt.Fprintln(stderr, "contextfold bench:", err)
		return 1
	}
	anth := bench.Prices{Name: "anthropic", Input: 1, CacheWrite: *write, CacheRead: *read, Output: *output}
	oai := bench.Prices{Name: "openai", Input: 1, CacheWrite: 1, CacheRead: *read, Output: *output}
	opt := bench.Options{Windows: ws, SystemTokens: *system, TTLms: ttl.Milliseconds(), Prices: []bench.Prices{anth, oai}}
	if !*quiet {
		opt.Progress = stderr
	}
	if *sweep {
		return runSweep(traces, opt, stdout)
	}
	rep := bench.Run(traces, opt)
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

func parseWindows(list string, one int) ([]int, error) {
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

func loadTraces(paths []string, system int) ([]*bench.Trace, error) {
	var traces []*bench.Trace
	for _, p := range paths {
		files, err := trajectory.Find(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			t, err := bench.Load(f, system)
			if err != nil {
				return nil, err
			}
			traces = append(traces, t)
		}
	}
	if len(traces) == 0 {
		return nil, fmt.Errorf("no trajectories in %s", strings.Join(paths, ", "))
	}
	return traces, nil
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

// runSweep replays the fold ladder over a grid of fold-at, step and tail and
// prints each window's settings by cost, best first.
func runSweep(traces []*bench.Trace, opt bench.Options, stdout io.Writer) int {
	pols := []bench.Policy{bench.Raw{}}
	for _, at := range []float64{0.25, 0.35, 0.45, 0.55} {
		for _, step := range []float64{0.06, 0.12, 0.2} {
			for _, tail := range []int{5_000, 10_000, 20_000} {
				k := policy.DefaultKnobs
				k.FoldAt, k.FoldStep, k.Tail = at, step, tail
				pols = append(pols, bench.ContextFold{Label: fmt.Sprintf("at=%.2f step=%.2f tail=%dk", at, step, tail/1000), Knobs: k})
			}
		}
	}
	opt.Policies = pols
	rep := bench.Run(traces, opt)
	for _, win := range rep.Windows {
		rs := append([]*bench.Result(nil), win.Overall[1:]...)
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Relative["anthropic"] < rs[j].Relative["anthropic"] })
		fmt.Fprintf(stdout, "window %dk (cost relative to raw, Anthropic / OpenAI; default %s):\n", win.Window/1000, defaultLabel())
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
			if r.Policy == defaultLabel() {
				fmt.Fprintf(stdout, "  default: %.3f / %.3f\n", r.Relative["anthropic"], r.Relative["openai"])
			}
		}
		fmt.Fprintf(stdout, "best: %s\n\n", rs[0].Policy)
	}
	return 0
}

func defaultLabel() string {
	k := policy.DefaultKnobs
	return fmt.Sprintf("at=%.2f step=%.2f tail=%dk", k.FoldAt, k.FoldStep, k.Tail/1000)
}
