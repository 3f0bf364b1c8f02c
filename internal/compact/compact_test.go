package compact

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/block"
	"github.com/contextfold/contextfold/internal/digest"
	"github.com/contextfold/contextfold/internal/ledger"
	"github.com/contextfold/contextfold/internal/tokens"
)

var update = flag.Bool("update", false, "rewrite golden files")

// history reads a real Pi session file's messages as blocks, with a code for
// every foldable block.
func history(t *testing.T, name string) ([]block.Block, map[string]string) {
	t.Helper()
	led, err := ledger.ReadFile(filepath.Join("..", "ledger", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var msgs [][]byte
	for _, e := range led.Messages() {
		msgs = append(msgs, e.Message)
	}
	tr := block.Linearize(msgs)
	codes := map[string]string{}
	for _, b := range tr.Blocks() {
		if b.Foldable() && block.Durable(b.ID) {
			codes[b.ID] = digest.Code(b.ID)
		}
	}
	return tr.Blocks(), codes
}

func TestRenderGoldenDeterministicBounded(t *testing.T) {
	cases := []struct {
		name, file string
		budget     int
	}{
		{"pi-mono-session", "pi-mono-session.jsonl", 0},
		{"pi-mono-session-small-budget", "pi-mono-session.jsonl", 3_000},
		{"e2e-truncated-bash", "session-truncated-bash-and-context-edit.jsonl", 0},
		{"e2e-custom-compaction", "session-custom-compaction.jsonl", 0},
	}
	for _, c := range cases {
		blocks, codes := history(t, c.file)
		in := Input{Title: "Compaction summary", Blocks: blocks, Codes: codes, SessionFile: "/sessions/" + c.file, Budget: c.budget, Carried: "## Goal\nan earlier LLM summary"}
		a, b := Render(in), Render(in)
		if a != b {
			t.Fatalf("%s: same input, different bytes", c.name)
		}
		budget := c.budget
		if budget == 0 {
			budget = DefaultBudget
		}
		// Section headings and cut notes may add a little beyond the items.
		if n := tokens.Units(a); n > budget+600 {
			t.Fatalf("%s: %d units for a %d budget", c.name, n, budget)
		}
		if !strings.Contains(a, Marker) {
			t.Fatalf("%s: no marker", c.name)
		}
		path := filepath.Join("testdata", c.name+".md")
		if *update {
			os.MkdirAll("testdata", 0o755)
			os.WriteFile(path, []byte(a), 0o644)
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -update)", err)
		}
		if !bytes.Equal([]byte(a), want) {
			t.Errorf("%s differs from %s", c.name, path)
		}
	}
}

func TestCutOrder(t *testing.T) {
	blocks, codes := history(t, "pi-mono-session.jsonl")
	full := Render(Input{Blocks: blocks, Codes: codes, Budget: 1 << 30})
	small := Render(Input{Blocks: blocks, Codes: codes, Budget: 2_500})
	// Identifiers go first, user intents last.
	if !strings.Contains(full, "## Exact identifiers") || strings.Contains(small, "`TUI`") && !strings.Contains(small, "cut to fit") {
		t.Fatal("identifiers were not cut first")
	}
	if !strings.Contains(small, "## User intents") {
		t.Fatalf("user intents cut before identifiers:\n%s", small)
	}
	// Every error line kept is verbatim from some block.
	for _, line := range strings.Split(full, "\n") {
		if i := strings.Index(line, "] "); strings.HasPrefix(line, "- [turn ") && strings.Contains(line, "FOLDED}] ") && i > 0 {
			text := line[i+2:]
			found := false
			for _, b := range blocks {
				if strings.Contains(b.Text, text) {
					found = true
					break
				}
			}
			if !found && !strings.HasPrefix(text, "`") {
				t.Fatalf("rendered line is not verbatim: %q", text)
			}
		}
	}
}
