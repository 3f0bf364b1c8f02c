package digest

import (
	"testing"

	"github.com/contextfold/contextfold/internal/core/risk"
)

func TestToolResultSource(t *testing.T) {
	text := "import x from \"y\";\nerror: not a thing\nline 3\n"
	lines := risk.Lines(text, risk.Warning)
	code := Tag(Code("r:c1"))
	tests := []struct {
		name    string
		tool    string
		text    string
		isError bool
		src     Source
		want    string
	}{
		{"no source is the plain digest", "read", text, false, Source{},
			code + " read → 3 lines, ~12 tok · import x from \"y\";\nerror: not a thing"},
		{"a file read names the path and may have changed", "read", text, false, Source{Subject: "src/x.ts", File: true},
			code + " read src/x.ts → 3 lines, ~12 tok, may have changed since · import x from \"y\";\nerror: not a thing"},
		{"read again later", "read", text, false, Source{Subject: "src/x.ts offset=10 limit=5", File: true, Later: "read again later"},
			code + " read src/x.ts offset=10 limit=5 → 3 lines, ~12 tok, may have changed since; read again later · import x from \"y\";\nerror: not a thing"},
		{"edited later", "read", text, false, Source{Subject: "src/x.ts", File: true, Later: "edited later"},
			code + " read src/x.ts → 3 lines, ~12 tok, may have changed since; edited later · import x from \"y\";\nerror: not a thing"},
		{"a command ran again", "bash", text, true, Source{Later: "ran again later"},
			code + " bash → error, ~12 tok, ran again later · import x from \"y\";\nerror: not a thing"},
		{"an empty read", "read", "", false, Source{Subject: "a.go", File: true, Later: "written later"},
			code + " read a.go → empty, may have changed since; written later"},
	}
	for _, tt := range tests {
		got := ToolResultSource(Code("r:c1"), tt.tool, tt.text, tt.isError, 12, DefaultLimits, lines, tt.src)
		if got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
	// The risk lines are exactly the plain digest's.
	plain := ToolResultLines(Code("r:c1"), "read", text, false, 12, DefaultLimits, lines)
	withSrc := ToolResultSource(Code("r:c1"), "read", text, false, 12, DefaultLimits, lines, Source{Subject: "a", File: true, Later: "read again later"})
	if tail(plain) != tail(withSrc) {
		t.Errorf("risk lines differ:\n%q\n%q", plain, withSrc)
	}
}

// tail returns everything after a digest's header line.
func tail(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[i:]
		}
	}
	return ""
}
