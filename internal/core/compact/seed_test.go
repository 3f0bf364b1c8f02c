package compact

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/block"
)

func TestSeedGoalRoundTrip(t *testing.T) {
	parent, codes := history(t, "pi-mono-session.jsonl")
	for _, goal := range []string{
		"Finish the refactor of gen.sh and keep the ERROR lines",
		"two lines:\n## not a heading\n\n# Parent session index " + Marker + " (quoted by a person)",
		"  indented, with a trailing newline\n",
	} {
		seed := Seed(goal, "/sessions/parent.jsonl", parent, codes)
		if got, ok := SeedGoal(seed); !ok || got != goal {
			t.Errorf("SeedGoal = %q, %v; want %q", got, ok, goal)
		}
	}
	if g, ok := SeedGoal(Seed("  ", "", parent, codes)); ok {
		t.Errorf("a seed without a goal gave %q", g)
	}
	for _, text := range []string{
		SeedHeading + "\n\nsome text a person typed that starts like a seed",
		"please read:\n" + Seed("x", "", nil, nil),
	} {
		if g, ok := SeedGoal(text); ok {
			t.Errorf("%.40q is not a seed, got goal %q", text, g)
		}
	}
}

// msg is one Pi message as JSON.
func msg(t *testing.T, v map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// work is n tool calls and results after a user message.
func work(t *testing.T, user string, from, n int) [][]byte {
	out := [][]byte{msg(t, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": user}}, "timestamp": from})}
	for i := from; i < from+n; i++ {
		id := "c" + strings.Repeat("x", i%3) + string(rune('a'+i%26))
		out = append(out,
			msg(t, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "toolCall", "id": id, "name": "bash", "arguments": map[string]any{"command": "make step"}}}, "responseId": "r" + id, "timestamp": i}),
			msg(t, map[string]any{"role": "toolResult", "toolCallId": id, "toolName": "bash", "content": []any{map[string]any{"type": "text", "text": strings.Repeat("some output line\n", 40) + "ERROR: step failed in src/app/main.go"}}, "isError": true, "timestamp": i}))
	}
	return out
}

// TestSeedGoalSurvivesEveryCompaction: a session started from a handoff
// seed keeps the seed's goal verbatim in its first compaction summary, and
// in the second and third, whose history no longer holds the seed (only the
// carried summary does), even under a small budget, and only once.
func TestSeedGoalSurvivesEveryCompaction(t *testing.T) {
	parent, codes := history(t, "pi-mono-session.jsonl")
	goal := "Finish the parser refactor:\n- keep the ERROR lines\n- then run `go test ./...`"
	seed := Seed(goal, "/sessions/parent.jsonl", parent, codes)
	want := "\n## Goal this session was handed off with (verbatim from its handoff seed, 3 lines)\n" + goal + "\n"

	first := block.Linearize(append(work(t, seed, 1, 0), work(t, "go on", 2, 20)...)).Blocks()
	summary := Render(Input{Seq: 1, Blocks: first})
	if !strings.Contains(summary, want) {
		t.Fatalf("first compaction lost the seed's goal:\n%s", summary)
	}
	for seq := 2; seq <= 3; seq++ {
		later := block.Linearize(work(t, "next", 100*seq, 20)).Blocks()
		for _, budget := range []int{0, 1_500} {
			s := Render(Input{Seq: seq, Blocks: later, Carried: summary, Budget: budget})
			if !strings.Contains(s, want) {
				t.Fatalf("compaction %d (budget %d) lost the seed's goal:\n%s", seq, budget, s)
			}
			if n := strings.Count(s, goalHeading); n != 1 {
				t.Fatalf("compaction %d: the goal appears %d times:\n%s", seq, n, s)
			}
			if budget == 0 {
				summary = s
			}
		}
	}
	// The whole branch (the session-file route) still starts with the seed.
	all := append(first, block.Linearize(work(t, "next", 200, 20)).Blocks()...)
	if s := Render(Input{Seq: 2, Blocks: all, Carried: summary}); !strings.Contains(s, want) || strings.Count(s, goalHeading) != 1 {
		t.Fatalf("the branch route:\n%s", s)
	}
	// Only the first user message can be a seed, and only one written by Seed.
	for _, bs := range [][][]byte{
		append(work(t, "hello", 1, 1), work(t, seed, 5, 1)...),
		work(t, SeedHeading+"\n\n## Goal for the next session\n\ntyped by hand", 1, 1),
	} {
		if s := Render(Input{Blocks: block.Linearize(bs).Blocks()}); strings.Contains(s, goalHeading) {
			t.Fatalf("a goal section without a seed:\n%s", s)
		}
	}
	// A carried summary a model wrote is not read for a goal.
	model := "## Goal\n" + want
	s := Render(Input{Blocks: block.Linearize(work(t, "x", 1, 1)).Blocks(), Carried: model})
	if strings.Index(s, goalHeading) < strings.Index(s, "## Carried summary") {
		t.Fatalf("read a goal from a model's summary:\n%s", s)
	}
}
