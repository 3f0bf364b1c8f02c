package compact

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/recall"
	"github.com/contextfold/contextfold/internal/core/tokens"
	"github.com/contextfold/contextfold/internal/pi/ledger"
)

var update = flag.Bool("update", false, "rewrite golden files")

// history reads a real Pi session file's messages as blocks, with a code for
// every foldable block.
func history(t *testing.T, name string) ([]block.Block, map[string]string) {
	t.Helper()
	led, err := ledger.ReadFile(filepath.Join("..", "..", "pi", "ledger", "testdata", name))
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

// TestOwnAnswersAreNotSources: recall_folded and unfold results are the
// tool's own answers (copies of blocks already indexed, with the tool's
// header and note lines): none of their lines is listed as an error line,
// file or identifier; the block they copy is.
func TestOwnAnswersAreNotSources(t *testing.T) {
	failed := "ERROR: step 7 failed in src/app/main.go"
	answer := recall.RenderRecall(
		[]recall.Match{{Code: "abc123", Label: recall.LedgerLabel("bash"), Note: recall.Notes(recall.Verified, `1 match for "error" (ledger)`), Text: "41: " + failed}},
		[]recall.Failure{{Code: "ghi789", Message: recall.Unavailable(recall.WhyMismatch("ghi789"))}},
		[]string{"{#zzzzzz FOLDED}"})
	search := recall.RenderSearch("error", []recall.Hit{{Code: "abc123", Label: recall.CompactedLabel("bash"), Note: recall.Verified, Lines: []string{"41: " + failed}}}, "1 matching line across 1 of 9 folded blocks", nil)
	call := func(id, name, args string) []byte {
		return msg(t, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "toolCall", "id": id, "name": name, "arguments": json.RawMessage(args)}}, "responseId": "r" + id, "timestamp": 2})
	}
	result := func(id, name, text string) []byte {
		return msg(t, map[string]any{"role": "toolResult", "toolCallId": id, "toolName": name, "content": []any{map[string]any{"type": "text", "text": text}}, "isError": false, "timestamp": 3})
	}
	blocks := block.Linearize([][]byte{
		msg(t, map[string]any{"role": "user", "content": "go", "timestamp": 1}),
		call("c1", "bash", `{"command":"make step7"}`), result("c1", "bash", "building\n"+failed+"\ndone"),
		call("c2", "recall_folded", `{"codes":["abc123","ghi789","zzzzzz"],"grep":"error"}`), result("c2", "recall_folded", answer),
		call("c3", "recall_folded", `{"search":"error"}`), result("c3", "recall_folded", search),
		call("c4", "unfold", `{"codes":["ghi789"]}`), result("c4", "unfold", "unfold failed: ERROR_CODE_UNKNOWN ghi789"),
	}).Blocks()
	codes := map[string]string{"r:c1": "abc123", "r:c2": "def456"}
	s := Render(Input{Blocks: blocks, Codes: codes})
	_, errSec, _ := strings.Cut(s, "## "+errorsTitle+"\n")
	errSec, _, _ = strings.Cut(errSec, "\n\n## ")
	if errSec != "- [turn 1 · {#abc123 FOLDED}] "+failed {
		t.Errorf("error lines:\n%s\n\nsummary:\n%s", errSec, s)
	}
	for _, not := range []string{"sha256 verified", "recall unavailable", "ghi789", "zzzzzz", "ERROR_CODE_UNKNOWN", "matching line"} {
		if strings.Contains(s, not) {
			t.Errorf("the summary lists the tool's own words %q:\n%s", not, s)
		}
	}
	// The recall block itself still has its recovery pointer.
	if !strings.Contains(s, "{#def456 FOLDED} recall_folded · turn") {
		t.Errorf("no pointer to the recall result:\n%s", s)
	}
}

// TestIdentifiersAreSo: every identifier the summary lists appears verbatim
// in a block of the history, and none is a number or hex noise.
func TestIdentifiersAreSo(t *testing.T) {
	for _, file := range []string{"pi-mono-session.jsonl", "session-truncated-bash-and-context-edit.jsonl", "session-custom-compaction.jsonl"} {
		blocks, codes := history(t, file)
		s := Render(Input{Blocks: blocks, Codes: codes, Budget: 1 << 30})
		_, sec, ok := strings.Cut(s, "## Exact identifiers (grep keys for recall_folded)\n")
		if !ok {
			continue
		}
		sec, _, _ = strings.Cut(sec, "\n\n")
		lines := strings.Split(sec, "\n")
		for _, it := range strings.Split(lines[len(lines)-1], " · ") { // after any cut note
			id := strings.Trim(it, "`")
			if strings.Trim(id, "0123456789abcdefABCDEF") == "" {
				t.Errorf("%s: %q is a number or hex", file, id)
			}
			found := false
			for _, b := range blocks {
				if strings.Contains(b.Text, id) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: %q is in no block", file, id)
			}
		}
	}
}

// TestCutNotesNameTheCap: a note says which cap cut how many items, exactly:
// a block's share, the section's cap, or the summary's budget, and never the
// budget when it did not cut.
func TestCutNotesNameTheCap(t *testing.T) {
	// results gives one bash result per count, each with that many distinct
	// error lines.
	results := func(counts ...int) []block.Block {
		msgs := [][]byte{msg(t, map[string]any{"role": "user", "content": "run the suite", "timestamp": 1})}
		n := 0
		for i, c := range counts {
			var out []string
			for k := 0; k < c; k++ {
				n++
				out = append(out, fmt.Sprintf("ERROR: case %d failed", n))
			}
			id := fmt.Sprintf("c%d", i)
			msgs = append(msgs,
				msg(t, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "toolCall", "id": id, "name": "bash", "arguments": map[string]any{"command": "make test"}}}, "responseId": "r" + id, "timestamp": 2}),
				msg(t, map[string]any{"role": "toolResult", "toolCallId": id, "toolName": "bash", "content": []any{map[string]any{"type": "text", "text": strings.Join(out, "\n")}}, "isError": true, "timestamp": 3}))
		}
		return block.Linearize(msgs).Blocks()
	}
	errorSection := func(s string) (notes []string, shown int) {
		_, sec, _ := strings.Cut(s, "## "+errorsTitle+"\n")
		sec, _, _ = strings.Cut(sec, "\n\n")
		for _, l := range strings.Split(sec, "\n") {
			if strings.HasPrefix(l, "- [turn 1] ERROR: case ") {
				shown++
			} else {
				notes = append(notes, l)
			}
		}
		return notes, shown
	}
	for _, tc := range []struct {
		name   string
		counts []int
		notes  []string
		shown  int
	}{
		{"a block's share", []int{100}, []string{"… 76 more error lines not shown (at most 24 a block)"}, 24},
		{"the section's cap", []int{20, 20, 20}, []string{"… 12 older error lines not shown (section cap 48)"}, 48},
		{"both", []int{100, 20, 20}, []string{"… 92 more error lines not shown (at most 24 a block, 48 in all)"}, 48},
		{"one", []int{25}, []string{"… 1 more error line not shown (at most 24 a block)"}, 24},
	} {
		full := Render(Input{Blocks: results(tc.counts...), Budget: 1 << 30})
		notes, shown := errorSection(full)
		if !slices.Equal(notes, tc.notes) || shown != tc.shown {
			t.Errorf("%s: notes %q, %d shown; want %q, %d", tc.name, notes, shown, tc.notes, tc.shown)
		}
		if strings.Contains(full, "budget") {
			t.Errorf("%s: claims a budget cut that did not happen:\n%s", tc.name, full)
		}
	}
	small := Render(Input{Blocks: results(20, 20, 20), Budget: 1_500})
	notes, shown := errorSection(small)
	want := []string{"… 12 older error lines not shown (section cap 48)", fmt.Sprintf("… %d older error lines cut to fit the summary's budget", 48-shown)}
	if shown == 0 || shown == 48 || !slices.Equal(notes, want) {
		t.Fatalf("notes %q, %d shown; want %q", notes, shown, want)
	}
}

// TestFilesAndCommandsAreWhatRan: "Files touched" lists what the calls named,
// not paths an output merely mentions (an import, a URL path); a command
// run again is listed once, at its newest run, with its count; the heading
// numbers the compaction, not a fold event.
func TestFilesAndCommandsAreWhatRan(t *testing.T) {
	call := func(id, name, args string) []byte {
		return msg(t, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "toolCall", "id": id, "name": name, "arguments": json.RawMessage(args)}}, "responseId": "r" + id, "timestamp": 2})
	}
	result := func(id, name, text string) []byte {
		return msg(t, map[string]any{"role": "toolResult", "toolCallId": id, "toolName": name, "content": []any{map[string]any{"type": "text", "text": text}}, "isError": false, "timestamp": 3})
	}
	msgs := [][]byte{
		msg(t, map[string]any{"role": "user", "content": "fix the server", "timestamp": 1}),
		call("c1", "read", `{"path":"src/server.go"}`), result("c1", "read", "package main\nimport \"net/http\"\n// GET /api/v1/item1 returns the item\n"),
	}
	for i := 2; i <= 7; i++ {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs, call(id, "bash", `{"command":"cat build.log"}`), result(id, "bash", fmt.Sprintf("build %d\nsee internal/other/file.go", i)))
	}
	blocks := block.Linearize(msgs).Blocks()
	codes := map[string]string{"r:c1": "aaa111", "r:c6": "bbb222", "r:c7": "ccc333"}
	s := Render(Input{Blocks: blocks, Codes: codes, Seq: 1})
	if !strings.HasPrefix(s, "# Compaction summary #1 ") {
		t.Errorf("heading: %.60q", s)
	}
	_, files, _ := strings.Cut(s, "## Files touched (named by the calls)\n")
	files, _, _ = strings.Cut(files, "\n")
	if files != "`src/server.go` · `build.log`" {
		t.Errorf("files touched: %q\n%s", files, s)
	}
	for _, not := range []string{"`net/http`", "/api/v1/item1`", "`internal/other/file.go`"} {
		if strings.Contains(s, not) {
			t.Errorf("a path the output only mentions is listed: %s\n%s", not, s)
		}
	}
	if n := strings.Count(s, "`cat build.log`"); n != 1 || !strings.Contains(s, "- [turn 1 · {#ccc333 FOLDED}] `cat build.log` (run 6 times; the newest run shown)") {
		t.Errorf("cat build.log listed %d times:\n%s", n, s)
	}
}
