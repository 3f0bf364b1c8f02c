package digest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/risk"
	"github.com/contextfold/contextfold/internal/tokens"
)

func TestCodeVectors(t *testing.T) {
	// Vectors from issue 2; r:toolu_01é and r:call-😀 pin UTF-16 hashing
	// (over UTF-8 bytes the first would be 337h60: EDGES 27).
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
	got := Authored("r:c1", "{#abcdef FOLDED} my digest {#zzzzzz FOLDED}")
	if got != "{#0qq769 FOLDED} my digest" {
		t.Errorf("Authored = %q", got)
	}
	if got := Authored("r:c1", "{#abcdef FOLDED}"); got != "{#0qq769 FOLDED}" {
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
			"isError shows error", "bash", "Traceback (most recent call last):\nKeyError: 'x'", true, 15,
			"{#0qq769 FOLDED} bash → error, ~15 tok · Traceback (most recent call last):\nTraceback (most recent call last):\nKeyError: 'x'",
		},
	}
	for _, tt := range tests {
		got := ToolResult("r:c1", tt.tool, tt.text, tt.isError, tt.tokens, DefaultLimits)
		if got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

func TestRiskCaps(t *testing.T) {
	var lines []string
	for i := 0; i < 14; i++ {
		lines = append(lines, "FAIL test_"+strings.Repeat("x", i)) // distinct shapes
	}
	r := SelectRisk(strings.Join(lines, "\n"), DefaultLimits)
	if len(r.Lines) != DefaultLimits.MaxLines || r.Omitted != 14-DefaultLimits.MaxLines {
		t.Errorf("kept %d omitted %d, want %d and %d", len(r.Lines), r.Omitted, DefaultLimits.MaxLines, 14-DefaultLimits.MaxLines)
	}
	long := "ERROR " + strings.Repeat("é", 500)
	r = SelectRisk(long+"\nFAIL second", DefaultLimits)
	if len(r.Lines) != 2 {
		t.Fatalf("kept %v", r.Lines)
	}
	if !strings.HasSuffix(r.Lines[0], "…") || len([]rune(r.Lines[0])) != 200 {
		t.Errorf("long line not clipped to 200 units: %d runes", len([]rune(r.Lines[0])))
	}
	// A single line over the char cap is still kept: the first risk line always shows.
	r = SelectRisk(strings.Repeat("ERROR long ", 100), Limits{MaxLines: 6, MaxChars: 50, MaxLineChar: 200})
	if len(r.Lines) != 1 || len([]rune(r.Lines[0])) != 200 {
		t.Errorf("first risk line dropped or clipped below the line cap: %q", r.Lines)
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
		"src/a.ts(9,2): error TS2554: Expected 1 arguments, but got 0.",
		"src/b.ts(3,1): error TS2339: Property 'x' does not exist on type 'Y'.",
		"src/c.ts(7,7): error TS2554: Expected 2 arguments, but got 1.",
		"warning: 3 deprecated packages",
		"Command exited with code 2",
	}, "\n")
	r := SelectRisk(text, DefaultLimits)
	want := []string{
		"src/a.ts(1,2): error TS2554: Expected 1 arguments, but got 0. (×3)",
		"src/b.ts(3,1): error TS2339: Property 'x' does not exist on type 'Y'.",
		"Command exited with code 2",
		"warning: 3 deprecated packages",
	}
	if strings.Join(r.Lines, "\n") != strings.Join(want, "\n") || r.Omitted != 0 {
		t.Fatalf("got %q omitted %d", r.Lines, r.Omitted)
	}
	if line, n := GroupCount(r.Lines[0]); n != 3 || line != "src/a.ts(1,2): error TS2554: Expected 1 arguments, but got 0." {
		t.Fatalf("GroupCount = %q, %d", line, n)
	}
	if line, n := GroupCount("plain (×x)"); n != 1 || line != "plain (×x)" {
		t.Fatalf("GroupCount of a non-count = %q, %d", line, n)
	}

	// Many distinct failures share the room: each is clipped, none dropped
	// while MinClip allows, and the count of the rest is owned up to.
	var many []string
	for i := 0; i < 8; i++ {
		many = append(many, fmt.Sprintf("Error: case %c %s", 'A'+i, strings.Repeat("detail ", 30)))
	}
	r = SelectRisk(strings.Join(many, "\n"), DefaultLimits)
	units := 0
	for _, l := range r.Lines {
		units += len([]rune(l)) + 1
	}
	if units-1 > DefaultLimits.MaxChars || len(r.Lines) < 5 || len(r.Lines)+r.Omitted != 8 {
		t.Fatalf("kept %d lines in %d units, omitted %d", len(r.Lines), units-1, r.Omitted)
	}
	for i, l := range r.Lines {
		if !strings.HasPrefix(l, fmt.Sprintf("Error: case %c ", 'A'+i)) || !strings.HasSuffix(l, "…") || len([]rune(l)) < DefaultLimits.MinClip {
			t.Fatalf("line %d = %q: want the first occurrences in order, clipped no shorter than MinClip", i, l)
		}
	}
}

// FuzzSelectRisk checks the digest's risk lines on any text: within the
// caps, each a verbatim (possibly clipped) flagged line in order of first
// occurrence, and every distinct flagged line either in a kept group or
// counted as omitted.
func FuzzSelectRisk(f *testing.F) {
	f.Add("ERROR a\nERROR b\nwarning: c\nfailed 12 times\nfailed 13 times")
	f.Add("src/x.ts(1,1): error TS1: " + strings.Repeat("é", 300) + "\n\xff\xfe error")
	f.Add(strings.Repeat("FAIL t\n", 50))
	f.Fuzz(func(t *testing.T, text string) {
		lim := DefaultLimits
		r := SelectRisk(text, lim)
		flagged := risk.Lines(text, risk.Warning)
		distinct := map[string]bool{}
		var trimmed []string
		for _, l := range flagged {
			if tl := tokens.Trim(l.Text); tl != "" {
				if !distinct[tl] {
					trimmed = append(trimmed, tl)
				}
				distinct[tl] = true
			}
		}
		if len(r.Lines) > lim.MaxLines {
			t.Fatalf("%d lines over the cap", len(r.Lines))
		}
		if len(r.Lines) > 1 && tokens.Units(strings.Join(r.Lines, "\n")) > lim.MaxChars {
			t.Fatalf("%d units over the cap", tokens.Units(strings.Join(r.Lines, "\n")))
		}
		for _, l := range r.Lines {
			line, _ := GroupCount(l)
			prefix := strings.TrimSuffix(line, tokens.Ellipsis)
			found := false
			for _, tl := range trimmed {
				if tl == line || prefix != line && strings.HasPrefix(tl, prefix) {
					found = true
					break
				}
			}
			if !found {
				t.Fatalf("kept line %q is not a flagged line of the text", l)
			}
		}
		if len(trimmed) > 0 && len(r.Lines) == 0 {
			t.Fatal("flagged text with no risk line kept")
		}
		// Each kept line stands for at least one distinct line.
		if r.Omitted > len(trimmed)-len(r.Lines) {
			t.Fatalf("omitted %d of %d distinct lines with %d kept", r.Omitted, len(trimmed), len(r.Lines))
		}
	})
}

func TestThinkingDigest(t *testing.T) {
	got := Thinking("a:x:p0", "\n  Let me look at the file first.\nThen decide.")
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
		{"a counted group shows its members", "tag\n" + lines[0] + " (×2)", []Shown{Whole, InGroup, Hidden, Hidden}},
		{"a clipped prefix, and a clipped group line", "tag\n" + lines[0][:30] + "… (×2)\n" + lines[2][:80] + "…", []Shown{Clipped, InGroup, Clipped, Hidden}},
		{"a bare ellipsis shows nothing", "tag\n…", []Shown{Hidden, Hidden, Hidden, Hidden}},
	}
	for _, tt := range tests {
		if got := ShowLines(tt.dig, lines); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
