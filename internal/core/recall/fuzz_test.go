package recall

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

// markerUnits bounds what a clip adds around the kept units: the
// "…[line clipped: N chars, chars a-b — …]" tail or the
// "[…chars=a-b, line chars a-b of n…] " head.
const markerUnits = 120

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
// window's position names exactly that run. When the line starts after off
// units of block, the text chars= reads, the marks name chars= ranges of
// block that hold what they say; off < 0 is a text chars= does not read,
// and then they name none.
func checkClip(t *testing.T, line, out string, limit int, block string, off int) {
	t.Helper()
	limit = max(limit, 0) // a negative budget is none
	n := tokens.Units(line)
	if n <= limit {
		if out != line {
			t.Fatalf("a line that fits changed: %q → %q", line, out)
		}
		return
	}
	// A window ends with "…", a head clip with "]".
	if rest, ok := strings.CutPrefix(out, "[…"); ok && strings.HasSuffix(out, "…") {
		pos, body, ok := strings.Cut(rest, "…] ")
		if !ok || !strings.HasSuffix(body, "…") {
			t.Fatalf("window %q", out)
		}
		body = strings.TrimSuffix(body, "…")
		if off >= 0 {
			var span string
			if span, pos, ok = strings.Cut(pos, ", "); !ok {
				t.Fatalf("window %q names no chars= range", out)
			}
			var x, y int
			got, ok := "", false
			if _, err := fmt.Sscanf(span, "chars=%d-%d", &x, &y); err == nil {
				got, ok = unitSlice(block, x-1, y)
			}
			if !ok || got != body {
				t.Fatalf("window %q: %s is %q", out, span, got)
			}
		}
		var a, b, m int
		if _, err := sscan(strings.TrimPrefix(pos, "line chars "), &a, &b, &m); err != nil || !strings.HasPrefix(pos, "line chars ") {
			t.Fatalf("window position %q: %v", pos, err)
		}
		got, ok := unitSlice(line, a-1, b)
		if !ok || got != body || m != n || b-a+1 > limit {
			t.Fatalf("window %q names %d-%d of %d; line %q", out, a, b, m, line)
		}
		return
	}
	marker := "…[line clipped: " + strconv.Itoa(n) + " chars — grep=<term> targets content inside it]"
	body, ok := strings.CutSuffix(out, marker)
	if off >= 0 {
		// The last mark: the line itself may hold the words.
		k := strings.LastIndex(out, "…[line clipped: ")
		found := k >= 0
		head, mark := out[:max(k, 0)], out[max(k, 0)+len("…[line clipped: "):]
		on := off + tokens.Units(head) + 1
		want := strconv.Itoa(n) + " chars, chars " + strconv.Itoa(off+1) + "-" + strconv.Itoa(off+n) +
			" — read on with chars=" + strconv.Itoa(on) + "-" + strconv.Itoa(min(off+n, on+CharsPageCap-1)) + "]"
		if !found || mark != want {
			t.Fatalf("head clip %.200q: mark %q, want %q", out, mark, want)
		}
		if rest, ok := unitSlice(block, on-1, off+n); !ok || line != head+rest {
			t.Fatalf("head clip %.200q: the chars= range to read on does not hold the rest", out)
		}
		body, ok = head, true
	}
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
		checkClip(t, line, out, limit, "", -1)
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
		offs := make([]int, len(src)) // where each line starts, in units
		for i := 1; i < len(src); i++ {
			offs[i] = offs[i-1] + tokens.Units(src[i-1]) + 1
		}

		out, note := Whole(text)
		if tokens.Estimate(text) <= WholeTokenCap {
			if out != text || note != "" {
				t.Fatal("a whole read under the cap changed")
			}
		} else {
			checkCapped(t, "Whole", out, LineCharCap, WholeTokenCap)
			for i, l := range strings.Split(out, "\n") {
				checkClip(t, src[i], l, LineCharCap, text, offs[i])
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
				checkClip(t, src[n-1], rest, LineCharCap, text, offs[n-1])
			}
		}
		if valid && (!utf8.ValidString(out) || !utf8.ValidString(note)) {
			t.Fatal("Lines: invalid UTF-8")
		}

		fd := newFinder(term)
		for _, source := range []string{SourceFullOutput, SourceLedger} {
			out, note = Grep(text, term, source)
			checkCapped(t, "Grep", out, GrepLineCharCap+12, SliceTokenCap)
			if out != "" {
				prev := 0
				for _, l := range strings.Split(out, "\n") {
					n, rest := lineNo(t, l)
					if n <= prev || n > len(src) || fd.index(src[n-1]) < 0 {
						t.Fatalf("Grep: line %d does not match", n)
					}
					prev = n
					off := offs[n-1]
					if source == SourceFullOutput {
						off = -1 // a text chars= does not read
					}
					checkClip(t, src[n-1], rest, GrepLineCharCap, text, off)
				}
			}
			if valid && (!utf8.ValidString(out) || !utf8.ValidString(note)) {
				t.Fatal("Grep: invalid UTF-8")
			}
		}

		hits, truncated, note := Search([]Block{{Code: "a", Text: text}, {Code: "b", Text: spec}, {Code: "c", Text: text}}, term, ToolArgs)
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

// unitBytes maps each UTF-16 unit boundary of s to its byte offset, decoding
// on its own rather than through the package: -1 marks the middle of a
// surrogate pair. A lone surrogate (WTF-8) and a byte that is not UTF-8 are
// one unit each.
func unitBytes(s string) []int {
	at := []int{0}
	for i := 0; i < len(s); {
		size, w := 1, 1
		if _, ok := rawjson.IsSurrogateAt(s, i); ok {
			size = 3
		} else if r, sz := utf8.DecodeRuneInString(s[i:]); !(r == utf8.RuneError && sz == 1) {
			size = sz
			if r > 0xFFFF {
				w = 2
			}
		}
		i += size
		if w == 2 {
			at = append(at, -1)
		}
		at = append(at, i)
	}
	return at
}

// charsNote reads "chars A-B of N (…)[ — next: chars=X-Y]".
func charsNote(t *testing.T, note string) (a, b, n int, next string) {
	t.Helper()
	rest, ok := strings.CutPrefix(note, "chars ")
	if !ok {
		t.Fatalf("note %q", note)
	}
	pos, _, _ := strings.Cut(rest, " — ")
	pos, _, _ = strings.Cut(pos, " (")
	if _, err := sscan(pos, &a, &b, &n); err != nil {
		t.Fatalf("note %q: %v", note, err)
	}
	_, next, _ = strings.Cut(rest, " — next: chars=")
	return a, b, n, next
}

// FuzzChars: a chars= page is exactly the units it names, whole characters,
// within CharsPageCap; and paging through a text by the ranges the notes
// suggest (each cut to at most size units) gives back the text byte for
// byte, lone surrogates and pairs at page boundaries included.
func FuzzChars(f *testing.F) {
	f.Add("abcdefghij", 3, 1, 4)
	f.Add("ab"+emoji+"cd"+emoji, 4, 4, 3)
	f.Add(rep(emoji, 4000)+"x", 2, 8001, 7200)
	f.Add("x"+rep(emoji, 4000), 1, 9000, 7200)
	f.Add(rep("a\xed\xa0\x80"+emoji+"\xed\xbf\xbf", 900), 5, 6000, 2)
	f.Add("a\xffb\xed\xa0\x80\xed\xb0\x80"+emoji+"\r\n", 1, 3, 1)
	f.Add(rep("x", 20000), 1, 20000, 7200)
	f.Fuzz(func(t *testing.T, text string, a, b, size int) {
		at := unitBytes(text)
		n := len(at) - 1
		if u := tokens.Units(text); u != n {
			t.Fatalf("Units %d, decoded %d", u, n)
		}
		// One read of any range.
		spec := strconv.Itoa(a) + "-" + strconv.Itoa(b)
		out, note := Chars(text, spec, SourceLedger)
		switch {
		case a < 0 || b < a:
			if ValidChars(spec) || out != "" || !strings.HasPrefix(note, "malformed chars=") {
				t.Fatalf("%s: %q %q", spec, out, note)
			}
		case max(a, 1) > min(b, n):
			if out != "" || !strings.HasPrefix(note, "empty range ") {
				t.Fatalf("%s: %q %q", spec, out, note)
			}
		default:
			first, last, total, _ := charsNote(t, note)
			if total != n || first < max(a, 1)-1 || first > max(a, 1) || last-first+1 > CharsPageCap || last < first ||
				at[first-1] < 0 || at[last] < 0 || out != text[at[first-1]:at[last]] {
				t.Fatalf("%s of %d units: %q names %d-%d, page %q", spec, n, note, first, last, out)
			}
		}
		// Paging from the start.
		// At most about 64 pages: each read walks the text from its start.
		size = max(1+int(uint(size)%(CharsPageCap+10)), n/64)
		var got strings.Builder
		next, pages := "1-"+strconv.Itoa(size), 0
		for next != "" {
			from, to, _ := strings.Cut(next, "-")
			x, _ := strconv.Atoi(from)
			y, _ := strconv.Atoi(to)
			out, note := Chars(text, strconv.Itoa(x)+"-"+strconv.Itoa(min(y, x+size-1)), SourceLedger)
			if n == 0 {
				if out != "" || note != "empty range 1-0 (session file has 0 chars)" {
					t.Fatalf("empty text: %q %q", out, note)
				}
				break
			}
			first, last, _, nx := charsNote(t, note)
			// A page suggested next starts on a character: it never moves back.
			if first != x || tokens.Units(out) != last-first+1 || last-first+1 > CharsPageCap || out == "" {
				t.Fatalf("page %d-%d: %q, %d units", x, min(y, x+size-1), note, tokens.Units(out))
			}
			got.WriteString(out)
			if (nx == "") != (last == n) {
				t.Fatalf("page %q: next %q at %d of %d", note, nx, last, n)
			}
			next = nx
			if pages++; pages > n+1 {
				t.Fatal("paging does not end")
			}
		}
		if got.String() != text {
			t.Fatalf("pages give %q, want %q", got.String(), text)
		}
	})
}
