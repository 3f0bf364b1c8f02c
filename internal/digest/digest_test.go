package digest

import (
	"strings"
	"testing"
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
			"risk lines errors first, deduplicated",
			"bash", "build ok\nwarning: unused x\nERROR: boom\nERROR: boom\n  npm ERR! code 1\ndone", false, 20,
			"{#0qq769 FOLDED} bash → 6 lines, ~20 tok · build ok\nERROR: boom\nnpm ERR! code 1\nwarning: unused x",
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
	for i := 0; i < 10; i++ {
		lines = append(lines, "FAIL test_"+strings.Repeat("x", i))
	}
	r := SelectRisk(strings.Join(lines, "\n"), DefaultLimits)
	if len(r.Lines) != 6 || r.Omitted != 4 {
		t.Errorf("kept %d omitted %d, want 6 and 4", len(r.Lines), r.Omitted)
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
	if len(r.Lines) != 1 {
		t.Errorf("first risk line dropped")
	}
}

func TestThinkingDigest(t *testing.T) {
	got := Thinking("a:x:p0", "\n  Let me look at the file first.\nThen decide.")
	want := "{#" + Code("a:x:p0") + " FOLDED} thought · ~12 tok · Let me look at the file first."
	if got != want {
		t.Errorf("got %q want %q", got, want)
	}
}
