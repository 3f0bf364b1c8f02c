package recall

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/tokens"
)

// markerUnits bounds what a clip adds around the kept units: the
// "…[line clipped: N chars — …]" tail or the "[…chars a-b of n…] " head.
const markerUnits = 90

// unitSlice returns units [a, b) of s, or false when a cut would split a
// character.
func unitSlice(s string, a, b int) (string, bool) {
	start, u := unitOffset(s, a)
	if u != a {
		return "", false
	}
	end, u := unitOffset(s, b)
	if u != b {
		return "", false
	}
	return s[start:end], true
}

// checkClip checks one clipped line against the line it came from: what is
// kept is a run of the line's own characters, at most limit units, and a
// window's position names exactly that run.
func checkClip(t *testing.T, line, out string, limit int) {
	t.Helper()
	limit = max(limit, 0) // a negative budget is none
	if tokens.Units(line) <= limit {
		if out != line {
			t.Fatalf("a line that fits changed: %q → %q", line, out)
		}
		return
	}
	// A window ends with "…", a head clip with "]".
	if rest, ok := strings.CutPrefix(out, "[…chars "); ok && strings.HasSuffix(out, "…") {
		pos, body, ok := strings.Cut(rest, "…] ")
		if !ok || !strings.HasSuffix(body, "…") {
			t.Fatalf("window %q", out)
		}
		body = strings.TrimSuffix(body, "…")
		var a, b, n int
		if _, err := sscan(pos, &a, &b, &n); err != nil {
			t.Fatalf("window position %q: %v", pos, err)
		}
		got, ok := unitSlice(line, a-1, b)
		if !ok || got != body || n != tokens.Units(line) || b-a+1 > limit {
			t.Fatalf("window %q names %d-%d of %d; line %q", out, a, b, n, line)
		}
		return
	}
	marker := "…[line clipped: " + strconv.Itoa(tokens.Units(line)) + " chars — grep=<term> targets content inside it]"
	body, ok := strings.CutSuffix(out, marker)
	if !ok || !strings.HasPrefix(line, body) || tokens.Units(body) > limit {
		t.Fatalf("head clip %q of %q", out, line)
	}
}

// sscan reads "a-b of n".
func sscan(s string, a, b, n *int) (int, error) {
	ab, ns, ok := strings.Cut(s, " of ")
	if !ok {
		return 0, strconv.ErrSyntax
	}
	as, bs, ok := strings.Cut(ab, "-")
	if !ok {
		return 0, strconv.ErrSyntax
	}
	var err error
	for _, p := range []struct {
		s string
		v *int
	}{{as, a}, {bs, b}, {ns, n}} {
		if *p.v, err = strconv.Atoi(p.s); err != nil {
			return 0, err
		}
	}
	return 3, nil
}

func FuzzClipLine(f *testing.F) {
	f.Add("abcdefghijklmnopqrst", 10, 12)
	f.Add("x"+emoji+"y", 2, 2)
	f.Add(strings.Repeat(emoji, 50)+"key", 9, 100)
	f.Add("a\xed\xa0\x80b\xffc", 3, 4)
	f.Fuzz(func(t *testing.T, line string, limit, around int) {
		limit %= 1000
		out := ClipLine(line, limit, around)
		checkClip(t, line, out, limit)
		if utf8.ValidString(line) && !utf8.ValidString(out) {
			t.Fatalf("a cut made invalid UTF-8: %q", out)
		}
	})
}

// checkCapped checks a capped read: each line at most perLine units of
// content plus a marker, and the +1-per-line token total within the cap
// unless only one line is kept.
func checkCapped(t *testing.T, what, out string, perLine, cap int) {
	t.Helper()
	if out == "" {
		return
	}
	lines := strings.Split(out, "\n")
	sum := 0
	for _, l := range lines {
		if tokens.Units(l) > perLine+markerUnits {
			t.Fatalf("%s: a line of %d units", what, tokens.Units(l))
		}
		sum += tokens.Estimate(l) + 1
	}
	if len(lines) > 1 && sum > cap {
		t.Fatalf("%s: %d tokens over %d lines", what, sum, len(lines))
	}
}

// lineNo splits "<n>: <rest>".
func lineNo(t *testing.T, s string) (int, string) {
	t.Helper()
	ns, rest, ok := strings.Cut(s, ": ")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 1 {
		t.Fatalf("not a numbered line: %q", s)
	}
	return n, rest
}

func FuzzSlice(f *testing.F) {
	f.Add("alpha\nBeta error\ngamma", "1-2", "ERROR")
	f.Add(strings.Repeat("x", 9000)+"\n"+strings.Repeat(emoji, 5000), "2-2", emoji)
	f.Add(strings.Repeat("line error\n", 400), " 3 - 300 ", "error")
	f.Add("a\xed\xa0\x80b\n\xff", "0-9", "\xed\xa0\x80")
	f.Fuzz(func(t *testing.T, text, spec, term string) {
		valid := utf8.ValidString(text) && utf8.ValidString(spec) && utf8.ValidString(term)
		src := strings.Split(text, "\n")

		out, note := Whole(text)
		if tokens.Estimate(text) <= WholeTokenCap {
			if out != text || note != "" {
				t.Fatal("a whole read under the cap changed")
			}
		} else {
			checkCapped(t, "Whole", out, LineCharCap, WholeTokenCap)
			for i, l := range strings.Split(out, "\n") {
				checkClip(t, src[i], l, LineCharCap)
			}
		}
		if valid && (!utf8.ValidString(out) || !utf8.ValidString(note)) {
			t.Fatal("Whole: invalid UTF-8")
		}

		out, note = Lines(text, spec, SourceLedger)
		checkCapped(t, "Lines", out, LineCharCap+12, WholeTokenCap)
		if out != "" {
			prev := 0
			for _, l := range strings.Split(out, "\n") {
				n, rest := lineNo(t, l)
				if prev != 0 && n != prev+1 || n > len(src) {
					t.Fatalf("Lines: line %d after %d", n, prev)
				}
				prev = n
				checkClip(t, src[n-1], rest, LineCharCap)
			}
		}
		if valid && (!utf8.ValidString(out) || !utf8.ValidString(note)) {
			t.Fatal("Lines: invalid UTF-8")
		}

		out, note = Grep(text, term, SourceFullOutput)
		checkCapped(t, "Grep", out, GrepLineCharCap+12, SliceTokenCap)
		fd := newFinder(term)
		if out != "" {
			prev := 0
			for _, l := range strings.Split(out, "\n") {
				n, rest := lineNo(t, l)
				if n <= prev || n > len(src) || fd.index(src[n-1]) < 0 {
					t.Fatalf("Grep: line %d does not match", n)
				}
				prev = n
				checkClip(t, src[n-1], rest, GrepLineCharCap)
			}
		}
		if valid && (!utf8.ValidString(out) || !utf8.ValidString(note)) {
			t.Fatal("Grep: invalid UTF-8")
		}

		hits, truncated, note := Search([]Block{{Code: "a", Text: text}, {Code: "b", Text: spec}, {Code: "c", Text: text}}, term)
		sum, kept := 0, 0
		for _, h := range hits {
			for _, l := range h.Lines {
				sum += tokens.Estimate(l) + 1
				kept++
			}
		}
		if kept > 1 && sum > SearchTokenCap || truncated != strings.HasPrefix(note, "capped") {
			t.Fatalf("Search: %d tokens in %d lines, truncated %v", sum, kept, truncated)
		}
		if got := RenderSearch(term, hits, note, nil); valid && !utf8.ValidString(got) {
			t.Fatal("Search: invalid UTF-8")
		}
	})
}
