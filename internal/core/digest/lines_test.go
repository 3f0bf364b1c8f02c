package digest

import (
	"slices"
	"testing"
)

func TestSplitLines(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"", nil},
		{"\n", []string{""}},
		{"a", []string{"a"}},
		{"a\n", []string{"a"}},
		{"a\n\n", []string{"a", ""}},
		{"a\n\nb", []string{"a", "", "b"}},
		{"a\r\nb\r\n", []string{"a\r", "b\r"}},
		{"a\rb", []string{"a\rb"}}, // a lone CR ends no line
	} {
		if got := SplitLines(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("SplitLines(%q) = %q, want %q", tc.text, got, tc.want)
		}
		if got := LineCount(tc.text); got != len(tc.want) {
			t.Errorf("LineCount(%q) = %d, want %d", tc.text, got, len(tc.want))
		}
	}
	// The digest counts blank lines too: lines=a-b addresses them.
	if got := ToolResult(Code("r:x"), "bash", "a\n\nb\n", false, 5, DefaultLimits); got != Tag(Code("r:x"))+" bash → 3 lines, ~5 tok · a" {
		t.Errorf("digest %q", got)
	}
}
