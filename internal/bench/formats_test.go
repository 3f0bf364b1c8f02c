package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLoadAllReadsEveryFormat runs LoadAll over a directory holding one
// session of each format Load reads (the trajectory package's fixtures),
// each in its own family directory, and checks every one becomes a trace
// with requests to replay.
func TestLoadAllReadsEveryFormat(t *testing.T) {
	dir := t.TempDir()
	for family, file := range map[string]string{
		"bench":       "bench.jsonl",
		"claude-code": "claude-code.jsonl",
		"codex":       "codex.jsonl",
		"pi":          "pi-branch.jsonl",
	} {
		data, err := os.ReadFile(filepath.Join("trajectory", "testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, family), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, family, file), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	traces, err := LoadAll([]string{dir}, DefaultSystemTokens)
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != 4 {
		t.Fatalf("%d traces, want 4", len(traces))
	}
	for _, tr := range traces {
		if len(tr.Requests) == 0 || len(tr.Msgs) < 3 {
			t.Errorf("%s: %d messages, %d requests", tr, len(tr.Msgs), len(tr.Requests))
		}
		results := 0
		for _, r := range tr.ToolResult {
			if r {
				results++
			}
		}
		if results == 0 {
			t.Errorf("%s: no tool results", tr)
		}
	}
	// The whole replay runs on them.
	opts := Options{Windows: []int{8_000}, SystemTokens: DefaultSystemTokens, Prices: []Prices{Anthropic}, Policies: DefaultPolicies()}
	rep, err := Run(traces, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Windows) != 1 || len(rep.Windows[0].Families) != 4 {
		t.Fatalf("report: %d windows, families %v", len(rep.Windows), rep.Windows[0].Families)
	}
}
