package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/core/version"
	"github.com/contextfold/contextfold/internal/pi/protocol"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s; review with go test -update and git diff", path)
	}
}

// TestDemoGolden: the demo is deterministic, needs no arguments, network or
// key, and writes its chart.
func TestDemoGolden(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "demo.svg")
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "-svg", svg}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got := strings.Replace(out.String(), svg, "<svg>", 1)
	golden(t, "demo.golden", []byte(got))
	data, err := os.ReadFile(svg)
	if err != nil || !bytes.HasPrefix(data, []byte("<svg")) || !bytes.Contains(data, []byte("context-fold")) {
		t.Fatalf("chart not written: %v", err)
	}
	for _, want := range []string{"fold event", "recoverable byte-exact", "equals the registry's: true", "cost, anthropic prices", "cost in USD at Sonnet prices",
		"A typical fold — the one holding the median folded byte", "The example — "} {
		if !strings.Contains(got, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	golden(t, "demo.svg.golden", data)
	chart := string(data)

	// The chart marks each fold event the table shows and the summary counts.
	events := regexp.MustCompile(`(\d+) fold events folded`).FindStringSubmatch(got)
	rows := strings.Count(got, "◀ fold event")
	marks := strings.Count(chart, `<path class="fold-event"`)
	if events == nil || events[1] != strconv.Itoa(rows) || marks != rows {
		t.Errorf("fold events: summary %v, %d table rows, %d chart markers", events, rows, marks)
	}
	// It draws the budget the output states, and a cost panel per series.
	budget := regexp.MustCompile(`and the ([0-9.]+k) budget marked`).FindStringSubmatch(got)
	if budget == nil || !strings.Contains(chart, `<line class="level budget"`) || !strings.Contains(chart, ">context-fold budget "+budget[1]+"</text>") {
		t.Errorf("no budget line, or not the budget the output states (%v)", budget)
	}
	if strings.Count(chart, `<polyline class="cost"`) != 2 || !strings.Contains(chart, "USD per million tokens") {
		t.Error("no cost panel with its price table")
	}

	// Each fold shown states its byte ratio: original bytes / digest bytes.
	ratios := regexp.MustCompile(`(\d+) bytes → \d+ lines?, (\d+) bytes; byte ratio ([0-9.]+)×`).FindAllStringSubmatch(got, -1)
	if len(ratios) != 2 {
		t.Errorf("%d folds with a byte ratio, want the typical one and the example", len(ratios))
	}
	for _, m := range ratios {
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[2])
		if fmt.Sprintf("%.2f", float64(a)/float64(b)) != m[3] {
			t.Errorf("byte ratio %s× for %d → %d bytes", m[3], a, b)
		}
	}

	// The recall is shown whole or says it is cut, and by how much of the
	// bytes read back.
	_, recalled, ok := strings.Cut(got, "read back from a Pi session file: ")
	if !ok {
		t.Fatal("no recall")
	}
	n, _, _ := strings.Cut(recalled, " bytes")
	note := regexp.MustCompile(`\n  \((?:shown whole: \d+ lines?, (\d+) bytes|cut: .+ not shown, \d+ of (\d+) bytes)\)\n`).FindStringSubmatch(recalled)
	if note == nil || note[1]+note[2] != n {
		t.Errorf("the recall of %s bytes is neither shown whole nor said to be cut: %v", n, note)
	}
}

func TestBenchOnTheSample(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "-quiet", "-windows", "32000", "-out", dir, "../../testdata/trajectories"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"report.md", "report.json", "cost-anthropic.svg", "cost-openai.svg", "tokens-32k.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	if !strings.Contains(out.String(), "| context-fold |") {
		t.Fatalf("report:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"bench", "-quiet", "-json", "-windows", "32000", "../../testdata/trajectories/swe-agent"}, &out, &errb); code != 0 || !strings.Contains(out.String(), `"windows"`) {
		t.Fatalf("json: %d %s", code, out.String())
	}
}

// TestBenchSweepAndHalves: -half replays one half of the fixed split and
// -sweep prints the digest-clip and schedule grids with the default marked.
func TestBenchSweepAndHalves(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "-quiet", "-sweep", "-half", "tune", "-window", "32000", "../../testdata/trajectories"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"4 sessions", "digest room=3200 ", "default room=3200", "headroom=0.50 min-mass=0.02 ", "own setting headroom=0.50 min-mass=0.02"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sweep output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"bench", "-quiet", "-sweep-ladder", "-window", "32000", "../../testdata/trajectories/swe-agent"}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "seed defaults: ") || !strings.Contains(out.String(), "best: at=") {
		t.Fatalf("ladder sweep: %d\n%s", code, out.String())
	}
	// The fidelity sweep marks what keeps the seed profile's bound (the
	// seed profile itself always does) and names the cheapest such setting;
	// the shipped default is in the grid.
	out.Reset()
	if code := run([]string{"bench", "-quiet", "-sweep-fidelity", "-windows", "128000,32000", "../../testdata/trajectories/swe-agent"}, &out, &errb); code != 0 {
		t.Fatalf("fidelity sweep: exit %d: %s", code, errb.String())
	}
	def := fidelityLabel(policy.DefaultKnobs, schedule.Default)
	for _, want := range []string{"window 128k", "window 32k", "seed profile (ladder)", "default " + def, "cheapest setting that meets the seed profile's bound at every window: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("fidelity sweep output lacks %q:\n%s", want, out.String())
		}
	}
	for _, name := range []string{"seed profile (ladder)", def} {
		if n := len(regexp.MustCompile(`(?m)^=[ *] `+regexp.QuoteMeta(name)+` `).FindAllString(out.String(), -1)); n != 2 {
			t.Errorf("%s keeps the bound at %d windows, want both:\n%s", name, n, out.String())
		}
	}
	// One trajectory per family: every one of them is in the tune half.
	errb.Reset()
	if code := run([]string{"bench", "-quiet", "-half", "test", "../../testdata/trajectories"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "no trajectories in the test half") {
		t.Fatalf("empty half: %d %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"bench", "-half", "middle", "../../testdata/trajectories"}, &out, &errb); code != 2 {
		t.Fatalf("bad half: %d %q", code, errb.String())
	}
}

func TestCLIErrors(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"nope"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown command") {
		t.Fatalf("unknown command: %d %q", code, errb.String())
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte("{not json\n"), 0o644)
	errb.Reset()
	if code := run([]string{"bench", "-quiet", bad}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "line 1") {
		t.Fatalf("bad trajectory: %d %q", code, errb.String())
	}
	if code := run([]string{"bench", "-windows", "abc"}, &out, &errb); code != 2 {
		t.Fatalf("bad window: %d", code)
	}
}

// TestVersion: `version`, `--version` and `version -json` report the one
// version; the install check and the adapter read the JSON form.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || out.String() != version.String()+"\n" {
			t.Fatalf("%v: %d %q %q", args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"version", "-json"}, &out, &errb); code != 0 {
		t.Fatalf("version -json: %d %q", code, errb.String())
	}
	var v struct {
		Version, Build, Platform string
		Protocol                 int
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Version != version.Number || v.Build != version.Build() || v.Platform != version.Platform() || v.Protocol != protocol.Version {
		t.Fatalf("version -json = %s (%v)", out.String(), err)
	}
	if code := run([]string{"version", "extra"}, &out, &errb); code != 2 {
		t.Fatalf("version extra: %d", code)
	}
}

// TestBenchSynthetic: -synthetic n replays n generated Claude Code-shaped
// sessions, alone or beside named trajectories; a negative count is a
// usage error.
func TestBenchSynthetic(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "-quiet", "-synthetic", "2", "-window", "200000"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "2 sessions") || !strings.Contains(out.String(), "| synthetic-claude-code |") {
		t.Fatalf("report:\n%.2000s", out.String())
	}
	out.Reset()
	if code := run([]string{"bench", "-quiet", "-synthetic", "1", "-window", "200000", "../../testdata/trajectories/swe-agent"}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "| synthetic-claude-code |") || !strings.Contains(out.String(), "| swe-agent |") {
		t.Fatalf("beside a trajectory: %d\n%.2000s", code, out.String())
	}
	errb.Reset()
	if code := run([]string{"bench", "-synthetic", "-1"}, &out, &errb); code != 2 || strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("negative count: %d %q", code, errb.String())
	}
}
