package digest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/risk"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

func TestCodeVectors(t *testing.T) {
	// Vectors from issue 2; r:toolu_01é and r:call-😀 pin UTF-16 hashing
	// (over UTF-8 bytes the first would be 337h60: docs/EDGES.md #27).
	vectors := map[string]string{
		"r:c1":            "0qq769",
		"r:c2":            "yxvg2g",
		"u:1780799122422": "ocnoeo",
		"a:f2965ed9-323d-4c24-b489-d93e8c55c59e:p0": "r5b61e",
		"r:toolu_01é": "d1a303",
		"r:call-😀":    "uggbb5",
	}
	for id, want := range vectors {
		if got := Code(id); got != want {
			t.Errorf("Code(%q) = %s, want %s", id, got, want)
		}
	}
}

func TestParseAndStripTags(t *testing.T) {
	for in, want := range map[string]string{"0qq769": "0qq769", "{#0qq769 FOLDED}": "0qq769", " {#0QQ769 FOLDED} ": "0qq769",
		"#0qq769": "0qq769", "see {#0qq769  FOLDED} above": "0qq769"} {
		if got, ok := ParseCode(in); !ok || got != want {
			t.Errorf("ParseCode(%q) = %q,%v", in, got, ok)
		}
	}
	for _, bad := range []string{"", "0qq76", "{#0qq769}", "0qq7690", "##0qq769", "{#0qq769"} {
		if _, ok := ParseCode(bad); ok {
			t.Errorf("ParseCode(%q) accepted", bad)
		}
	}
	got := Authored(Code("r:c1"), "{#abcdef FOLDED} my digest {#zzzzzz FOLDED}")
	if got != "{#0qq769 FOLDED} my digest" {
		t.Errorf("Authored = %q", got)
	}
	if got := Authored(Code("r:c1"), "{#abcdef FOLDED}"); got != "{#0qq769 FOLDED}" {
		t.Errorf("Authored of a bare tag = %q", got)
	}
}

func TestToolResultDigest(t *testing.T) {
	tests := []struct {
		name, tool, text string
		isError          bool
		tokens           int
		want             string
	}{
		{"empty", "bash", "  \n", false, 5, "{#0qq769 FOLDED} bash → empty"},
		{"empty error", "bash", "", true, 4, "{#0qq769 FOLDED} bash → error"},
		{"one line", "read", "hello", false, 6, "{#0qq769 FOLDED} read → 1 line, ~6 tok · hello"},
		{"no name", "", "a\nb", false, 6, "{#0qq769 FOLDED} result → 2 lines, ~6 tok · a"},
		{
			"risk lines errors first, repeats counted",
			"bash", "build ok\nwarning: unused x\nERROR: boom\nERROR: boom\n  npm ERR! code 1\ndone", false, 20,
			"{#0qq769 FOLDED} bash → 6 lines, ~20 tok · build ok\nERROR: boom (×2)\nnpm ERR! code 1\nwarning: unused x",
		},
		{
			"lines of one shape are each shown",
			"bash", "ERROR: widget failed at step 0\nERROR: widget failed at step 1", false, 20,
			"{#0qq769 FOLDED} bash → 2 lines, ~20 tok · ERROR: widget failed at step 0\nERROR: widget failed at step 0\nERROR: widget failed at step 1",
		},
		{
			"a code in a line survives",
			"bash", "ERROR db: request 1057 failed: connection reset by peer (E01057)", false, 20,
			"{#0qq769 FOLDED} bash → 1 line, ~20 tok · ERROR db: request 1057 failed: connection reset by peer (E0…\nERROR db: request 1057 failed: connection reset by peer (E01057)",
		},
		{
			"isError shows error", "bash", "Traceback (most recent call last):\nKeyError: 'x'", true, 15,
			"{#0qq769 FOLDED} bash → error, ~15 tok · Traceback (most recent call last):\nTraceback (most recent call last):\nKeyError: 'x'",
		},
	}
	for _, tt := range tests {
		got := ToolResult(Code("r:c1"), tt.tool, tt.text, tt.isError, tt.tokens, DefaultLimits)
		if got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

func TestRiskRoom(t *testing.T) {
	// Whole lines until the room is used; the rest counted, none cut.
	var lines []string
	for i := 0; i < 60; i++ {
		lines = append(lines, "FAIL test_"+strings.Repeat("x", i)) // distinct shapes
	}
	lim := Limits{MaxChars: 300, MaxLineChar: 500}
	r := SelectRisk(strings.Join(lines, "\n"), lim)
	shown := 0
	for _, l := range r.Lines {
		if strings.HasPrefix(l, MarkPrefix) {
			continue
		}
		if l != lines[shown] {
			t.Fatalf("line %d = %q, want %q (whole, in order)", shown, l, lines[shown])
		}
		shown++
	}
	if shown == 0 || shown+r.Omitted != 60 || tokens.Units(strings.Join(r.Lines, "\n")) > lim.MaxChars {
		t.Fatalf("shown %d omitted %d in %d units", shown, r.Omitted, tokens.Units(strings.Join(r.Lines, "\n")))
	}
	if last := r.Lines[len(r.Lines)-1]; last != fmt.Sprintf("… %d more error or warning lines not shown", r.Omitted) {
		t.Errorf("last line %q", last)
	}
	// A line longer than MaxLineChar is skipped whole and counted; a later
	// short one still shows.
	long := "ERROR " + strings.Repeat("é", 600)
	r = SelectRisk(long+"\nFAIL second", DefaultLimits)
	if want := []string{"FAIL second", "… 1 more error or warning line not shown"}; fmt.Sprint(r.Lines) != fmt.Sprint(want) {
		t.Errorf("long line: %q, want %q", r.Lines, want)
	}
	// When no line fits whole, the first shows cut, saying so.
	r = SelectRisk(long, DefaultLimits)
	if len(r.Lines) != 1 || !strings.HasSuffix(r.Lines[0], "… [line cut at 500 of 606 chars]") || !strings.HasPrefix(r.Lines[0], "ERROR ééé") {
		t.Errorf("only line too long: %q", r.Lines)
	}
}

func TestShape(t *testing.T) {
	tests := []struct{ a, b string }{
		{"src/tui/a.ts(46,70): error TS2554: Expected 0-4 arguments, but got 5.",
			"src/tui/user-message.ts(16,49): error TS2554: Expected 1-2 arguments, but got 3."},
		{"FAILED tests/test_x.py::test_one - AssertionError: assert 1 == 2",
			"FAILED tests/test_y.py::test_two - AssertionError: assert 3 == 4"},
		{"Module '\"@m/pi-tui\"' has no exported member 'EditorTheme'.", "Module '\"@m/pi-tui\"' has no exported member 'MarkdownTheme'."},
		{"fatal: bad object 3f2a9c1d", "fatal: bad object 77e0b2aa"},
		{"  File \"/usr/lib/python3.11/x.py\", line 12, in run", "  File \"/app/y.py\", line 7, in run"},
		{"panic: index 3 out of range [5]", "panic: index 9 out of range [12]"},
	}
	for _, tt := range tests {
		if Shape(tt.a) != Shape(tt.b) {
			t.Errorf("Shape differs:\n%q → %q\n%q → %q", tt.a, Shape(tt.a), tt.b, Shape(tt.b))
		}
	}
	distinct := []struct{ a, b string }{
		{"error TS2554: Expected 1 arguments", "error TS2339: Property 'x' does not exist"},
		{"ValueError: bad input", "TypeError: bad input"},
		{"npm error code 2", "npm error path /a/b"},
		{"self.assertEqual(a, b) failed", "self.assertTrue(a) failed"},
	}
	for _, tt := range distinct {
		if Shape(tt.a) == Shape(tt.b) {
			t.Errorf("Shape merges different failures: %q and %q → %q", tt.a, tt.b, Shape(tt.a))
		}
	}
}

func TestSelectRiskGroups(t *testing.T) {
	text := strings.Join([]string{
		"src/a.ts(1,2): error TS2554: Expected 1 arguments, but got 0.",
		"compiling...",
		"src/a.ts(1,2): error TS2554: Expected 1 arguments, but got 0.",
		"src/a.ts(9,2): error TS2554: Expected 1 arguments, but got 0.",
		"src/b.ts(3,1): error TS2339: Property 'x' does not exist on type 'Y'.",
		"src/c.ts(7,7): error TS2554: Expected 2 arguments, but got 1.",
		"warning: 3 deprecated packages",
		"Command exited with code 2",
	}, "\n")
	// With room, every distinct line shows whole; a count is only ever of
	// identical lines.
	r := SelectRisk(text, DefaultLimits)
	want := []string{
		"src/a.ts(1,2): error TS2554: Expected 1 arguments, but got 0. (×2)",
		"src/a.ts(9,2): error TS2554: Expected 1 arguments, but got 0.",
		"src/b.ts(3,1): error TS2339: Property 'x' does not exist on type 'Y'.",
		"src/c.ts(7,7): error TS2554: Expected 2 arguments, but got 1.",
		"Command exited with code 2",
		"warning: 3 deprecated packages",
	}
	if strings.Join(r.Lines, "\n") != strings.Join(want, "\n") || r.Omitted != 0 {
		t.Fatalf("got %q omitted %d", r.Lines, r.Omitted)
	}
	if line, n := GroupCount(r.Lines[0]); n != 2 || line != "src/a.ts(1,2): error TS2554: Expected 1 arguments, but got 0." {
		t.Fatalf("GroupCount = %q, %d", line, n)
	}
	if line, n := GroupCount("plain (×x)"); n != 1 || line != "plain (×x)" {
		t.Fatalf("GroupCount of a non-count = %q, %d", line, n)
	}

	// The case: two lines of one shape, room for one. The other is
	// counted plainly, never folded into a count on the first.
	var steps []string
	for i := 0; i < 40; i++ {
		steps = append(steps, fmt.Sprintf("ERROR: widget failed at step %d", i))
	}
	r = SelectRiskLines("abc123", risk.Lines(strings.Join(steps, "\n"), risk.Warning), Limits{MaxChars: 200, MaxLineChar: 500})
	n := len(r.Lines) - 1
	for i, l := range r.Lines[:n] {
		if l != steps[i] {
			t.Fatalf("line %d = %q, want %q", i, l, steps[i])
		}
	}
	mark := fmt.Sprintf(`… %d more lines like this; recall_folded code=abc123 grep="ERROR: widget failed at step" shows them`, 40-n)
	if r.Lines[n] != mark {
		t.Fatalf("got %q, want the shown lines and %q", r.Lines, mark)
	}
	if r.Omitted != 0 {
		t.Fatalf("omitted %d: the mark counts them", r.Omitted)
	}
}

// FuzzSelectRisk checks the digest's risk lines on any text: within the
// room, every shown line a whole flagged line of the text (or the one
// marked cut), every count exact — " (×N)" the identical occurrences of its
// line, a "like this" mark the occurrences of same-shape lines not shown,
// the closing mark the rest — and every occurrence shown or counted once.
func FuzzSelectRisk(f *testing.F) {
	f.Add("ERROR a\nERROR b\nwarning: c\nfailed 12 times\nfailed 13 times")
	f.Add("src/x.ts(1,1): error TS1: " + strings.Repeat("é", 300) + "\n\xff\xfe error")
	f.Add(strings.Repeat("FAIL t\n", 50))
	f.Add(strings.Repeat("ERROR: widget failed at step 7 of 9\nERROR: widget failed at step 8 of 9\n", 40))
	// Lines that read like the digest's own text (found in review).
	f.Add("… error: build failed\n")
	f.Add("error: x 1\n… 3 more lines like this error\n")
	f.Add("error: at line 4…6\n… 2 error lines")
	f.Add("error: foo\nerror: foo\nerror: foo (×2)\n")
	f.Add("error: " + strings.Repeat("x", 40) + "… [line cut at 3 of 9 chars]")
	f.Fuzz(func(t *testing.T, text string) {
		checkRisk(t, text, Limits{MaxChars: 300, MaxLineChar: 120})
		checkRisk(t, text, Limits{MaxChars: 120, MaxLineChar: 10}) // the least room that holds a cut line and both marks
		checkRisk(t, text, DefaultLimits)
	})
}

// checkRisk asserts SelectRisk's contract on text (see Verify).
func checkRisk(t *testing.T, text string, lim Limits) {
	t.Helper()
	r := SelectRiskLines("abc123", risk.Lines(text, risk.Warning), lim)
	if len(r.Lines) > 1 && tokens.Units(strings.Join(r.Lines, "\n")) > lim.MaxChars {
		t.Fatalf("%d units over the room of %d", tokens.Units(strings.Join(r.Lines, "\n")), lim.MaxChars)
	}
	if err := VerifyRisk(text, r.Lines); err != nil {
		t.Fatal(err)
	}
}

func TestThinkingDigest(t *testing.T) {
	got := Thinking(Code("a:x:p0"), "\n  Let me look at the file first.\nThen decide.")
	want := "{#" + Code("a:x:p0") + " FOLDED} thought · ~12 tok · Let me look at the file first."
	if got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

func TestShowLines(t *testing.T) {
	lines := []string{
		"src/a.ts(1,2): error TS2554: Expected 1 arguments, but got 0.",
		"src/b.ts(9,9): error TS2554: Expected 2 arguments, but got 1.",
		"fatal: " + strings.Repeat("x", 300),
		"Command exited with code 2",
	}
	tests := []struct {
		name string
		dig  string
		want []Shown
	}{
		{"whole, and a stand-alone line's relatives stay hidden", "tag\n" + lines[0] + "\n" + lines[3], []Shown{Whole, Hidden, Hidden, Whole}},
		{"a count is of identical lines only", "tag\n" + lines[0] + " (×2)", []Shown{Whole, Hidden, Hidden, Hidden}},
		{"a mark counts the lines of its shape", "tag\n" + lines[0] + "\n… 1 more line like this; recall_folded grep=\"error TS2554: Expected\" shows it", []Shown{Whole, InGroup, Hidden, Hidden}},
		{"a line shown cut", "tag\n" + lines[2][:80] + "… [line cut at 80 of 307 chars]", []Shown{Hidden, Hidden, Clipped, Hidden}},
		{"an old-style clipped prefix shows nothing", "tag\n" + lines[0][:30] + "… (×2)", []Shown{Hidden, Hidden, Hidden, Hidden}},
		{"a bare ellipsis shows nothing", "tag\n…", []Shown{Hidden, Hidden, Hidden, Hidden}},
	}
	for _, tt := range tests {
		if got := ShowLines(tt.dig, lines); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
