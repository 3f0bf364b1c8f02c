package bench

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/trajectory"
)

var update = flag.Bool("update", false, "rewrite golden files")

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestPrefixCacheModel(t *testing.T) {
	A, B, C := Seg{1, 10}, Seg{2, 5}, Seg{3, 7}
	reqs := []Request{
		{Segs: []Seg{A}, Output: 1},
		{Segs: []Seg{A, B}, Output: 2},
		{Segs: []Seg{A, C}, Output: 3}, // breaks after A
		{Segs: []Seg{A, C, B}, Output: 0, Side: []SideCall{{Input: 100, Output: 10}}},
	}
	u := Price(reqs, 20, 0)
	if u.CacheRead != 0+10+10+17 || u.CacheWrite != 10+5+7+5 || u.Breaks != 1 || u.Peak != 22 || u.OverWindow != 1 {
		t.Fatalf("usage %+v", u)
	}
	// Anthropic: reads 37×0.1, writes 27×1.25, output 6×5, side 100×1 + 10×5.
	if got := u.Cost(Anthropic); !near(got, 3.7+33.75+30+100+50) {
		t.Fatalf("anthropic cost %v", got)
	}
	if got := u.Cost(OpenAI); !near(got, 3.7+27+30+100+50) {
		t.Fatalf("openai cost %v", got)
	}
	// A TTL shorter than the gap makes the third request read nothing.
	reqs[2].Time, reqs[1].Time = 10_000_000, 1_000
	if u := Price(reqs, 0, 300_000); u.CacheRead != 0+10+0+17 {
		t.Fatalf("ttl: read %d", u.CacheRead)
	}
}

// synthetic builds a trajectory: one user message, then n calls whose
// results have lines lines, the fourth of which is an error.
func synthetic(n, lines int) *Trace {
	ms := []trajectory.Message{{Role: "user", Text: "go"}}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("c%d", i)
		ms = append(ms, trajectory.Message{Role: "assistant", Text: "run", ToolCalls: []trajectory.Call{{ID: id, Name: "bash", Arguments: []byte(`{"command":"x"}`)}}})
		var b strings.Builder
		for k := 0; k < lines; k++ {
			if k == 3 {
				fmt.Fprintf(&b, "ERROR: case %d failed\n", i)
				continue
			}
			fmt.Fprintf(&b, "%s line %03d of output, padded to a realistic width\n", id, k)
		}
		ms = append(ms, trajectory.Message{Role: "toolResult", Text: b.String(), ToolCallID: &id, ToolName: strPtr("bash")})
	}
	ms = append(ms, trajectory.Message{Role: "assistant", Text: "done"})
	return Prepare("synthetic", "test", ms, 100)
}

func strPtr(s string) *string { return &s }

func TestRawIsAppendOnly(t *testing.T) {
	tr := synthetic(5, 10)
	r := Raw{}.Replay(tr, 0)
	if len(r.Requests) != 6 { // before each of the 5 calls and the final answer
		t.Fatalf("%d requests", len(r.Requests))
	}
	u := Price(r.Requests, 0, 0)
	if u.Breaks != 0 {
		t.Fatal("raw broke the cache")
	}
	// Hand-computed: request k sends system + messages [0, 2k+1).
	want := 0
	for k := 0; k < 6; k++ {
		want += tr.System
		for i := 0; i < 2*k+1; i++ {
			want += tr.Tokens[i]
		}
	}
	if u.Input != want {
		t.Fatalf("input %d, want %d", u.Input, want)
	}
}

func TestObservationMasking(t *testing.T) {
	tr := synthetic(14, 10)
	r := ObservationMasking{M: 10}.Replay(tr, 0)
	last := r.Requests[len(r.Requests)-1]
	masked := 0
	for _, s := range last.Segs[1:] {
		if s.Key&0xFFFFF == 1 {
			masked++
		}
	}
	// 14 results, the newest 10 kept: 4 masked; each request that sees an
	// 11th, 12th, 13th or 14th result masks one more and breaks the cache.
	if masked != 4 || r.Hidden != 4 || r.ErrTotal != 4 || r.ErrVisible != 0 {
		t.Fatalf("masked %d hidden %d errors %d/%d", masked, r.Hidden, r.ErrVisible, r.ErrTotal)
	}
	if u := Price(r.Requests, 0, 0); u.Breaks != 4 {
		t.Fatalf("breaks %d, want 4", u.Breaks)
	}
}

func TestClearToolUses(t *testing.T) {
	tr := synthetic(12, 40)
	plain := ClearToolUses{Trigger: 2_000, Keep: 3}.Replay(tr, 0)
	batched := ClearToolUses{Trigger: 2_000, Keep: 3, ClearAtLeast: 2_000}.Replay(tr, 0)
	up, ub := Price(plain.Requests, 0, 0), Price(batched.Requests, 0, 0)
	if plain.Events <= batched.Events || up.Breaks <= ub.Breaks {
		t.Fatalf("clear_at_least should batch: plain %d events/%d breaks, batched %d/%d", plain.Events, up.Breaks, batched.Events, ub.Breaks)
	}
	last := plain.Requests[len(plain.Requests)-1]
	kept := 0
	for i, s := range last.Segs[1:] {
		if tr.ToolResult[i] && s.Key&0xFFFFF == 0 {
			kept++
		}
	}
	if kept != 3 {
		t.Fatalf("%d results kept, want 3", kept)
	}
}

func TestPiCompactionFiresAtWindowMinusReserve(t *testing.T) {
	tr := synthetic(40, 60)
	window := 16_384 + 12_000
	r := RawCompaction{}.Replay(tr, window)
	if r.Compactions == 0 {
		t.Fatal("no compaction")
	}
	for k, req := range r.Requests {
		if len(req.Side) > 0 && (req.Side[0].Output != 1_500 || req.Side[0].Input <= 0) {
			t.Fatalf("request %d: side call %+v", k, req.Side[0])
		}
	}
	// Never cut at a tool result: the first kept message after the summary
	// is never a tool result.
	if r.ErrVisible != 0 || r.ErrTotal == 0 {
		t.Fatalf("summarized error lines: %d/%d", r.ErrVisible, r.ErrTotal)
	}
}

func TestContextFoldKeepsErrorsAndRecoverability(t *testing.T) {
	tr := synthetic(40, 60)
	r := ContextFold{Knobs: DefaultPolicies()[5].(ContextFold).Knobs}.Replay(tr, 20_000)
	if r.Events == 0 || r.Folded == 0 || r.Recoverable != r.Folded {
		t.Fatalf("events %d folded %d recoverable %d", r.Events, r.Folded, r.Recoverable)
	}
	if r.ErrVisible != r.ErrTotal {
		t.Fatalf("folded digests keep %d of %d error lines", r.ErrVisible, r.ErrTotal)
	}
	if u := Price(r.Requests, 20_000, 0); u.OverWindow != 0 || u.Breaks != r.Events {
		t.Fatalf("over window %d, breaks %d for %d events", u.OverWindow, u.Breaks, r.Events)
	}
}

// TestSampleReportGolden pins the whole report on the bundled sample.
func TestSampleReportGolden(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/trajectories/*/*.jsonl")
	var traces []*Trace
	for _, f := range files {
		tr, err := Load(f, DefaultSystemTokens)
		if err != nil {
			t.Fatal(err)
		}
		traces = append(traces, tr)
	}
	rep := Run(traces, Options{Windows: []int{200_000, 128_000, 32_000}, SystemTokens: DefaultSystemTokens})
	var b bytes.Buffer
	rep.Markdown(&b)
	var svg bytes.Buffer
	rep.Windows[2].SeriesSVG(&svg, []string{"raw", "context-fold"})
	rep.CostSVG(&svg, Anthropic)
	b.Write(svg.Bytes())
	path := filepath.Join("testdata", "sample-report.golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(path, b.Bytes(), 0o644)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatal("the sample report changed; review with go test -update and git diff")
	}
}
