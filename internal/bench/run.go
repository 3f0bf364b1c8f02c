package bench

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/policy/ladder"
	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

// Options configure a run.
type Options struct {
	Windows      []int
	SystemTokens int
	TTLms        int64
	Prices       []Prices
	Policies     []Policy
	// Progress, when set, receives a progress bar (stderr).
	Progress io.Writer
	// Trace, when set, is the directory that receives every request of the
	// policies TracePolicies names (all when empty; "default" is the
	// shipped policy), as WriteTrace describes.
	Trace         string
	TracePolicies []string
	// Samples is how many hidden references to keep per trace and policy,
	// for review (Result.Samples).
	Samples int
}

// SeedKnobs are the seed design's defaults, for its row: the shipped knobs
// with its 20k tail.
var SeedKnobs = func() policy.Knobs { k := policy.DefaultKnobs; k.Tail = 20_000; return k }()

// CostFirstKnobs and CostFirst are the default before fidelity became its
// constraint (issue 30): a 10k tail, no envelope, and urgent events that
// reach into the tail down to half the budget. Cheaper, and it hides more.
var (
	CostFirstKnobs = func() policy.Knobs { k := policy.DefaultKnobs; k.Tail = 10_000; return k }()
	CostFirst      = schedule.Economic{}
)

// DefaultPolicies are the policies the report compares, in order.
func DefaultPolicies() []Policy {
	return []Policy{
		Raw{},
		RawCompaction{},
		ObservationMasking{M: 10},
		ClearToolUses{Trigger: 100_000, Keep: 3},
		ClearToolUses{Trigger: 100_000, Keep: 3, ClearAtLeast: 20_000},
		ContextFold{Knobs: policy.DefaultKnobs, Policy: schedule.Default, Reserve: PiReserve},
		ContextFold{Label: "context-fold seed defaults (ladder 0.45/0.12/20k)", Knobs: SeedKnobs, Policy: ladder.Ladder{}, Reserve: PiReserve},
		ContextFold{Label: "context-fold, Pi compacting only on overflow", Knobs: policy.DefaultKnobs, Policy: schedule.Default},
		ContextFold{Label: "context-fold, without the frozen-end breakpoint", Knobs: policy.DefaultKnobs, Policy: schedule.Default, Reserve: PiReserve, Unanchored: true},
		ContextFold{Label: "context-fold, cost first (the default before fidelity was its constraint)", Knobs: CostFirstKnobs, Policy: CostFirst, Reserve: PiReserve},
		Optimum{Knobs: policy.DefaultKnobs, Reserve: PiReserve},
		Optimum{Knobs: policy.DefaultKnobs, Reserve: PiReserve, Lambda: 3_000},
		Optimum{Knobs: policy.DefaultKnobs, Reserve: PiReserve, Lambda: 10_000},
		Optimum{Knobs: policy.DefaultKnobs, Reserve: PiReserve, Lambda: 30_000},
	}
}

// Result is one policy's outcome over a set of traces at one window.
type Result struct {
	Policy string `json:"policy"`
	Usage  Usage  `json:"usage"`
	// Breakpoint is Usage under Anthropic's cache rules (PriceBreakpoints),
	// what the prices with Breakpoints set are applied to.
	Breakpoint Usage              `json:"usageBreakpoints"`
	Cost       map[string]float64 `json:"cost"`     // absolute, per price model
	Relative   map[string]float64 `json:"relative"` // to raw = 1.00
	ErrVisible int                `json:"errorLinesVisible"`
	// Distinct error lines of folded blocks, and how many their digests show.
	FoldErrTotal   int `json:"foldedErrorLines,omitempty"`
	FoldErrVisible int `json:"foldedErrorLinesVisible,omitempty"`
	FoldErrWhole   int `json:"foldedErrorLinesWhole,omitempty"`
	ErrTotal       int `json:"errorLinesHidden"`
	Hidden         int `json:"blocksHidden"`
	Folded         int `json:"folded,omitempty"`
	Recoverable    int `json:"recoverable,omitempty"`
	Events         int `json:"events"`
	Compactions    int `json:"compactions"`
	// Bounded counts results delivered as a bounded view on first delivery.
	Bounded  int  `json:"bounded,omitempty"`
	Feasible bool `json:"feasible"`
	// Substituted counts sessions the policy replayed as the shipped
	// schedule, having no run of its own there (Replay.Substituted).
	Substituted int     `json:"substituted,omitempty"`
	StepP50     float64 `json:"stepP50Micros,omitempty"`
	StepP99     float64 `json:"stepP99Micros,omitempty"`
	// Hidden references (see refs.go): of the references the actions used
	// that came from the context, how many the requests did not show; the
	// requests with one; the sessions with one; the cost of one recall
	// round trip per such request, per price model.
	Refs        int                `json:"contextReferences"`
	RefsHidden  int                `json:"hiddenReferences"`
	RefRequests int                `json:"requestsMeasured"`
	WithHidden  int                `json:"requestsWithHiddenReference"`
	Sessions    int                `json:"sessions"`
	Affected    int                `json:"sessionsAffected"`
	RecallCost  map[string]float64 `json:"recallCost"`
	// Breakdown is HiddenRefs.Breakdown summed.
	Breakdown   map[string]Tally   `json:"hiddenBreakdown,omitempty"`
	WithRecalls map[string]float64 `json:"relativeWithRecalls"` // (cost + recalls) / raw cost
	Samples     []Sample           `json:"-"`
	steps       []time.Duration
}

// Sample is one hidden reference kept for review: where it came from and
// where the action used it, each as a line around it.
type Sample struct {
	Trace string
	HiddenSample
	FromLine, ActionLine string
}

// HiddenShare is the share of context references hidden.
func (r *Result) HiddenShare() float64 {
	if r.Refs == 0 {
		return 0
	}
	return float64(r.RefsHidden) / float64(r.Refs)
}

// PerHundred is requests with a hidden reference per 100 requests.
func (r *Result) PerHundred() float64 {
	if r.RefRequests == 0 {
		return 0
	}
	return 100 * float64(r.WithHidden) / float64(r.RefRequests)
}

// ErrShare is the share of hidden blocks' distinct error lines still visible.
func (r *Result) ErrShare() float64 {
	if r.ErrTotal == 0 {
		return 1
	}
	return float64(r.ErrVisible) / float64(r.ErrTotal)
}

// Window is every policy's results at one window: overall, per family and
// per trace.
type Window struct {
	Window   int                  `json:"window"`
	Overall  []*Result            `json:"overall"`
	Families map[string][]*Result `json:"families"`
	Traces   map[string][]*Result `json:"-"`
	// Halves are the results on the Tune and Test halves (see Halves).
	Halves [2][]*Result `json:"halves"`
	// Series is request tokens per turn on the longest trace, per policy.
	Series     map[string][]int `json:"-"`
	SeriesName string           `json:"seriesTrace"`
}

// Report is a whole run.
type Report struct {
	Traces      int       `json:"traces"`
	Requests    int       `json:"requests"`
	Windows     []*Window `json:"windows"`
	Prices      []Prices  `json:"prices"`
	System      int       `json:"systemTokens"`
	PeakRSSMB   float64   `json:"peakRssMB"`
	EngineP50us float64   `json:"engineStepP50Micros"`
	EngineP99us float64   `json:"engineStepP99Micros"`
}

// Run replays every trace at every window through every policy. It fails
// only when a trace file cannot be written.
func Run(traces []*Trace, opt Options) (*Report, error) {
	if len(opt.Prices) == 0 {
		opt.Prices = []Prices{Anthropic, OpenAI, AnthropicBreakpoints}
	}
	if len(opt.Policies) == 0 {
		opt.Policies = DefaultPolicies()
	}
	rep := &Report{Traces: len(traces), Prices: opt.Prices, System: opt.SystemTokens}
	longest := 0
	for i, t := range traces {
		rep.Requests += len(t.Requests)
		if len(t.Requests) > len(traces[longest].Requests) {
			longest = i
		}
	}
	halfOf := Halves(traces)
	var allSteps []time.Duration
	total := len(opt.Windows) * len(traces)
	done := 0
	for _, w := range opt.Windows {
		win := &Window{Window: w, Families: map[string][]*Result{}, Traces: map[string][]*Result{}, Series: map[string][]int{}}
		overall := newResults(opt.Policies)
		win.Halves = [2][]*Result{newResults(opt.Policies), newResults(opt.Policies)}
		for i, t := range traces {
			fam := win.Families[t.Family]
			if fam == nil {
				fam = newResults(opt.Policies)
				win.Families[t.Family] = fam
			}
			per := newResults(opt.Policies)
			for k, p := range opt.Policies {
				meter := newRefMeter(t, opt.Samples)
				obs := meter.observe
				var tw *TraceWriter
				if opt.Trace != "" && traced(p.Name(), k == shippedIndex(opt.Policies), opt.TracePolicies) {
					var err error
					if tw, err = CreateTrace(opt.Trace, p.Name(), w, t); err != nil {
						return nil, err
					}
					obs = func(k int, msgs []Seen) {
						meter.observe(k, msgs)
						tw.Write(k, msgs)
					}
				}
				rp := p.Replay(t, w, obs)
				if tw != nil {
					if err := tw.Close(); err != nil {
						return nil, err
					}
				}
				u := Price(rp.Requests, w, opt.TTLms)
				ub := PriceBreakpoints(rp.Requests, w, opt.TTLms, PiBreakpoints)
				h := &meter.out
				for _, r := range []*Result{overall[k], fam[k], per[k], win.Halves[halfOf[t]][k]} {
					r.add(&u, &ub, &rp)
					r.addRefs(t, h, rp.Requests, opt.Prices)
				}
				allSteps = append(allSteps, rp.StepTimes...)
				if i == longest {
					win.Series[p.Name()] = u.PerRequest
					win.SeriesName = t.Name
				}
			}
			win.Traces[t.Name] = per
			done++
			progress(opt.Progress, done, total, t.Name)
		}
		win.Overall = overall
		for _, rs := range append([][]*Result{overall, win.Halves[Tune], win.Halves[Test]}, values(win.Families)...) {
			finish(rs, opt.Prices, w)
		}
		for _, rs := range win.Traces {
			finish(rs, opt.Prices, w)
		}
		rep.Windows = append(rep.Windows, win)
	}
	if opt.Progress != nil {
		fmt.Fprintln(opt.Progress)
	}
	rep.EngineP50us, rep.EngineP99us = percentile(allSteps, 50), percentile(allSteps, 99)
	rep.PeakRSSMB = peakRSS()
	return rep, nil
}

// shippedIndex is the index of the shipped default among ps: the first
// policy named "context-fold", or -1.
func shippedIndex(ps []Policy) int {
	for i, p := range ps {
		if p.Name() == ShippedName {
			return i
		}
	}
	return -1
}

// ShippedName is the report's name for the shipped default policy.
const ShippedName = "context-fold"

// traced reports whether the policy named name is among want (all when
// want is empty); "default" names the shipped policy.
func traced(name string, shipped bool, want []string) bool {
	if len(want) == 0 {
		return true
	}
	for _, w := range want {
		if w == name || w == "default" && shipped {
			return true
		}
	}
	return false
}

// addRefs adds one trace's hidden-reference figures.
func (r *Result) addRefs(t *Trace, h *HiddenRefs, reqs []Request, prices []Prices) {
	r.Refs += h.Context
	r.RefsHidden += h.Hidden
	if len(h.Breakdown) > 0 && r.Breakdown == nil {
		r.Breakdown = map[string]Tally{}
	}
	for k, t := range h.Breakdown {
		s := r.Breakdown[k]
		s.Context += t.Context
		s.Hidden += t.Hidden
		r.Breakdown[k] = s
	}
	r.RefRequests += h.Requests
	r.WithHidden += h.WithHidden
	r.Sessions++
	if h.WithHidden > 0 {
		r.Affected++
	}
	if r.RecallCost == nil {
		r.RecallCost = map[string]float64{}
	}
	for _, p := range prices {
		r.RecallCost[p.Name] += RecallCost(h, reqs, p)
	}
	for _, s := range h.Samples {
		ref := s.Ref
		r.Samples = append(r.Samples, Sample{Trace: t.String(), HiddenSample: s,
			FromLine: lineAround(t.Text[s.From], ref), ActionLine: lineAround(t.Text[s.Before], ref)})
	}
}

func values(m map[string][]*Result) [][]*Result {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out [][]*Result
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

func newResults(ps []Policy) []*Result {
	out := make([]*Result, len(ps))
	for i, p := range ps {
		out[i] = &Result{Policy: p.Name(), Feasible: true}
	}
	return out
}

func (r *Result) add(u, ub *Usage, rp *Replay) {
	r.Usage.Add(u)
	r.Breakpoint.Add(ub)
	r.ErrVisible += rp.ErrVisible
	r.FoldErrTotal += rp.FoldErrTotal
	r.FoldErrVisible += rp.FoldErrVisible
	r.FoldErrWhole += rp.FoldErrWhole
	r.ErrTotal += rp.ErrTotal
	r.Hidden += rp.Hidden
	r.Folded += rp.Folded
	r.Recoverable += rp.Recoverable
	r.Events += rp.Events
	r.Compactions += rp.Compactions
	r.Bounded += rp.Bounded
	r.steps = append(r.steps, rp.StepTimes...)
	if rp.Substituted {
		r.Substituted++
	}
}

// finish prices the results and normalizes them to the first (raw).
func finish(rs []*Result, prices []Prices, window int) {
	for _, r := range rs {
		r.Cost = map[string]float64{}
		r.Relative = map[string]float64{}
		for _, p := range prices {
			if p.Breakpoints {
				r.Cost[p.Name] = r.Breakpoint.Cost(p)
			} else {
				r.Cost[p.Name] = r.Usage.Cost(p)
			}
		}
		r.Feasible = r.Usage.OverWindow == 0
		if len(r.steps) > 0 {
			r.StepP50, r.StepP99 = percentile(r.steps, 50), percentile(r.steps, 99)
		}
	}
	for _, r := range rs {
		r.WithRecalls = map[string]float64{}
		for _, p := range prices {
			if base := rs[0].Cost[p.Name]; base > 0 {
				r.Relative[p.Name] = r.Cost[p.Name] / base
				r.WithRecalls[p.Name] = (r.Cost[p.Name] + r.RecallCost[p.Name]) / base
			}
		}
	}
}

func percentile(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[min(len(s)-1, len(s)*p/100)].Nanoseconds()) / 1000
}

func progress(w io.Writer, done, total int, name string) {
	if w == nil {
		return
	}
	const width = 30
	n := done * width / max(1, total)
	if len(name) > 40 {
		name = name[:40]
	}
	fmt.Fprintf(w, "\r[%s%s] %d/%d %-40s", strings.Repeat("#", n), strings.Repeat(".", width-n), done, total, name)
}

// lineAround returns the line of text that holds ref, cut to 160 bytes
// around it.
func lineAround(text, ref string) string {
	at := strings.Index(text, ref)
	if at < 0 {
		return ""
	}
	start := strings.LastIndexByte(text[:at], '\n') + 1
	end := strings.IndexByte(text[at:], '\n')
	if end < 0 {
		end = len(text)
	} else {
		end += at
	}
	line := text[start:end]
	if len(line) > 160 {
		lo := max(0, at-start-60)
		line = tokens.SafeSlice(line[lo:], 160)
	}
	return line
}
