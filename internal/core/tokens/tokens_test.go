package tokens

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestUnitsAndEstimate(t *testing.T) {
	tests := []struct {
		in          string
		units, toks int
	}{
		{"", 0, 0},
		{"abcd", 4, 1},
		{"abcde", 5, 2},
		{"é😀", 3, 1},           // docs/EDGES.md #27: 3 UTF-16 units, 6 bytes
		{"\xed\xa0\x80", 1, 1}, // WTF-8 lone surrogate
		{"a\xffb", 3, 1},       // invalid byte reads as U+FFFD
		{strings.Repeat("😀", 4), 8, 2},
	}
	for _, tt := range tests {
		if got := Units(tt.in); got != tt.units {
			t.Errorf("Units(%q) = %d, want %d", tt.in, got, tt.units)
		}
		if got := Estimate(tt.in); got != tt.toks {
			t.Errorf("Estimate(%q) = %d, want %d", tt.in, got, tt.toks)
		}
		if got := Block(tt.in); got != tt.toks+BlockOverhead {
			t.Errorf("Block(%q) = %d", tt.in, got)
		}
	}
}

func TestClipAndFirstLine(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		clip     string
	}{
		{"short", "  hello \n world ", 20, "hello world"},
		{"cut", "abcdefghij", 5, "abcd…"},
		{"nbsp collapses like JS \\s", "a\u00a0\u00a0b\u2028c", 10, "a b c"},
		{"no lone surrogate at a cut pair", "ab😀cd", 4, "ab…"},
		{"pair over the limit", "abc😀", 4, "abc…"},
		{"pair at the limit", "ab😀", 4, "ab😀"},
		{"pair kept whole", "a😀bcdef", 4, "a😀…"},
		{"trailing space before ellipsis trimmed", "abc defgh", 5, "abc…"},
		{"n below one", "abc", 0, "…"},
	}
	for _, tt := range tests {
		got := Clip(tt.in, tt.n)
		if got != tt.clip {
			t.Errorf("%s: Clip(%q,%d) = %q, want %q", tt.name, tt.in, tt.n, got, tt.clip)
		}
		if !utf8.ValidString(got) {
			t.Errorf("%s: Clip produced invalid UTF-8 %q", tt.name, got)
		}
	}
	if got := FirstLine("\n  \n\t first line here\nsecond", 100); got != "first line here" {
		t.Errorf("FirstLine = %q", got)
	}
	if got := FirstLine(" \n\u00a0\n", 10); got != "" {
		t.Errorf("FirstLine of blanks = %q", got)
	}
	if got := CountLines("a\n\n b\n  \nc"); got != 3 {
		t.Errorf("CountLines = %d", got)
	}
}

func FuzzClip(f *testing.F) {
	f.Add("héllo 😀 wörld\n", 5)
	f.Add("\xed\xa0\x80abc", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n % 300
		c := Clip(s, n)
		if Units(c) > max(1, n) {
			t.Fatalf("Clip(%q,%d) = %q is %d units", s, n, c, Units(c))
		}
		if utf8.ValidString(s) && !utf8.ValidString(c) {
			t.Fatalf("Clip split a character: %q", c)
		}
		p := SafeSlice(s, n)
		if !strings.HasPrefix(s, p) || Units(p) > max(0, n) {
			t.Fatalf("SafeSlice(%q,%d) = %q", s, n, p)
		}
		if utf8.ValidString(s) && !utf8.ValidString(p) {
			t.Fatalf("SafeSlice split a character: %q", p)
		}
		q := SafeSuffix(s, n)
		if !strings.HasSuffix(s, q) || Units(q) > max(0, n) {
			t.Fatalf("SafeSuffix(%q,%d) = %q", s, n, q)
		}
		if utf8.ValidString(s) && !utf8.ValidString(q) {
			t.Fatalf("SafeSuffix split a character: %q", q)
		}
		if n >= 0 && Units(s) > n && Units(q) < n-1 {
			t.Fatalf("SafeSuffix(%q,%d) = %q is shorter than it needs to be", s, n, q)
		}
	})
}

func TestSafeSuffix(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"abcdef", 3, "def"},
		{"abc", 5, "abc"},
		{"abc", 0, ""},
		{"ab😀cd", 3, "cd"}, // the pair would be cut: dropped whole
		{"ab😀cd", 4, "😀cd"},
		{"a\xed\xa0\x80b", 2, "\xed\xa0\x80b"}, // a WTF-8 lone surrogate is one unit
		{"x\xffy", 2, "\xffy"},
	}
	for _, tt := range tests {
		if got := SafeSuffix(tt.in, tt.n); got != tt.want {
			t.Errorf("SafeSuffix(%q,%d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

// TestUnitsWordAtATime: the eight-byte ASCII path counts as the byte loop
// does, at every offset and length around non-ASCII and WTF-8 bytes.
func TestUnitsWordAtATime(t *testing.T) {
	slow := func(s string) int {
		n := 0
		for _, r := range s {
			if r >= 0x10000 {
				n++
			}
			n++
		}
		return n
	}
	for _, base := range []string{"é", "😀", "\xff", "日本"} {
		for pre := 0; pre < 20; pre++ {
			for post := 0; post < 12; post++ {
				s := strings.Repeat("a", pre) + base + strings.Repeat("b", post)
				if got, want := Units(s), slow(s); got != want {
					t.Fatalf("Units(%q) = %d, want %d", s, got, want)
				}
			}
		}
	}
	if got := Units("abcdefgh\xed\xa0\x80ijklmnop"); got != 17 {
		t.Errorf("lone surrogate after a word: %d units, want 17", got)
	}
}
