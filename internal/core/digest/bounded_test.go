package digest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/core/risk"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

var (
	headerHeadRE = regexp.MustCompile(`: showing lines 1-(\d+)\b`)
	headMarkRE   = regexp.MustCompile(`^… lines (\d+)-(\d+) not shown`)
	tailMarkRE   = regexp.MustCompile(`^… lines (\d+)-(\d+):$`)
	listedRE     = regexp.MustCompile(`^(\d+)(?: \(and (\d+) more times?\))?: `)
	omittedRE    = regexp.MustCompile(`^… (\d+) more distinct error lines? not shown \(first at line (\d+)\)`)
)

// boundedShape is what checkBounded read out of a view.
type boundedShape struct {
	whole, cut       bool
	head, tail       int // lines [0, head) and [tail, n) shown verbatim
	listed           []int
	omitted          int
	visibleErrors    int // distinct error texts shown somewhere
	totalErrorsTexts int
}

// checkBounded verifies a view against its input: the authoritative tag
// first, within its cap, and every line after the header either a verbatim
// line of the input in its place, a numbered error line whose text is the
// input's line at that number, or a mark; the omitted count is exact.
func checkBounded(t testing.TB, id, text, view string, maxTokens int) boundedShape {
	t.Helper()
	var sh boundedShape
	if !strings.HasPrefix(view, Tag(Code(id))+" ") {
		t.Fatalf("view does not start with its tag: %.80q", view)
	}
	if got, limit := tokens.Block(view), max(maxTokens, MinBoundedTokens); got > limit {
		t.Fatalf("view is %d tokens, cap %d", got, limit)
	}
	in := SplitLines(text)
	n := len(in)
	out := strings.Split(view, "\n")
	header, rest := out[0], out[1:]
	errs := map[string]int{} // distinct error text → occurrences
	var order []string
	for _, l := range risk.Lines(text, risk.Error) {
		if l.Index >= n {
			continue
		}
		if errs[l.Text] == 0 {
			order = append(order, l.Text)
		}
		errs[l.Text]++
	}
	sh.totalErrorsTexts = len(order)
	switch {
	case strings.Contains(header, ", shown whole"):
		sh.whole = true
		if strings.Join(rest, "\n") != strings.Join(in, "\n") {
			t.Fatalf("a view that claims the whole text differs from it")
		}
		sh.head, sh.tail, sh.visibleErrors = n, n, len(order)
		return sh
	case strings.Contains(header, "cut by characters"):
		sh.cut = true
		if n != 1 || len(rest) != 3 || !strings.HasPrefix(rest[1], "… chars ") {
			t.Fatalf("a cut view must be prefix, mark, suffix of one line: %d lines", len(rest))
		}
		if !strings.HasPrefix(in[0], rest[0]) || !strings.HasSuffix(in[0], rest[2]) {
			t.Fatalf("the cut view's pieces are not the line's prefix and suffix")
		}
		if utf8.ValidString(text) && (!utf8.ValidString(rest[0]) || !utf8.ValidString(rest[2])) {
			t.Fatalf("a cut split a character")
		}
		return sh
	}
	// Head: the verbatim lines the header names (the header is the one line
	// an input cannot forge), then the mark naming the next line.
	if m := headerHeadRE.FindStringSubmatch(header); m != nil {
		sh.head, _ = strconv.Atoi(m[1])
	}
	if sh.head >= len(rest) || sh.head > n {
		t.Fatalf("the header claims lines 1-%d; the view has %d lines", sh.head, len(rest))
	}
	for i := 0; i < sh.head; i++ {
		if rest[i] != in[i] {
			t.Fatalf("head line %d is not the input's line %d: %q", i+1, i+1, rest[i])
		}
	}
	i := sh.head
	m := headMarkRE.FindStringSubmatch(rest[i])
	if m == nil || m[1] != strconv.Itoa(sh.head+1) {
		t.Fatalf("no mark after the head: %q", rest[i])
	}
	sh.tail, _ = strconv.Atoi(m[2])
	i++
	shown := map[string]bool{}
	for _, l := range in[:sh.head] {
		shown[l] = true
	}
	for ; i < len(rest) && !strings.HasPrefix(rest[i], "… "); i++ {
		m := listedRE.FindStringSubmatch(rest[i])
		if m == nil {
			t.Fatalf("unexpected line in the error list: %q", rest[i])
		}
		at, _ := strconv.Atoi(m[1])
		body := rest[i][len(m[0]):]
		if at < 1 || at > n || in[at-1] != body || risk.Classify(body) != risk.Error {
			t.Fatalf("listed line %q is not the input's error line %d", rest[i], at)
		}
		more := 0
		if m[2] != "" {
			more, _ = strconv.Atoi(m[2])
		}
		if errs[body] != more+1 {
			t.Fatalf("listed line %q counts %d occurrences, the input has %d", rest[i], more+1, errs[body])
		}
		if shown[body] {
			t.Fatalf("error line %q listed twice", body)
		}
		shown[body] = true
		sh.listed = append(sh.listed, at)
	}
	if i < len(rest) {
		if m := omittedRE.FindStringSubmatch(rest[i]); m != nil {
			sh.omitted, _ = strconv.Atoi(m[1])
			i++
		}
	}
	if i < len(rest) {
		m := tailMarkRE.FindStringSubmatch(rest[i])
		if m == nil || m[1] != strconv.Itoa(sh.tail+1) || m[2] != strconv.Itoa(n) {
			t.Fatalf("expected the tail mark for lines %d-%d, got %q", sh.tail+1, n, rest[i])
		}
		i++
		if got := rest[i:]; strings.Join(got, "\n") != strings.Join(in[sh.tail:], "\n") {
			t.Fatalf("the tail is not the input's lines %d-%d", sh.tail+1, n)
		}
		for _, l := range in[sh.tail:] {
			shown[l] = true
		}
	} else if sh.tail != n {
		t.Fatalf("lines %d-%d are neither shown nor marked", sh.tail+1, n)
	}
	if sh.head > sh.tail {
		t.Fatalf("head %d overlaps tail %d", sh.head, sh.tail)
	}
	for _, e := range order {
		if shown[e] {
			sh.visibleErrors++
		}
	}
	if sh.omitted != len(order)-sh.visibleErrors {
		t.Fatalf("the view says %d error lines are not shown; %d of %d are not", sh.omitted, len(order)-sh.visibleErrors, len(order))
	}
	return sh
}

func lines(n int, f func(i int) string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(f(i))
		b.WriteByte('\n')
	}
	return b.String()
}

func filler(i int) string {
	return fmt.Sprintf("line %d: the quick brown fox jumps over the lazy dog", i)
}

func TestBounded(t *testing.T) {
	withErrors := lines(3000, func(i int) string {
		switch {
		case i == 1200:
			return "ERROR: step 0 failed"
		case i == 1300:
			return "ERROR: step 1 failed" // same shape, different line: listed apart
		case i%700 == 0:
			return "FAIL: TestRepeated"
		}
		return filler(i)
	})
	manyErrors := lines(4000, func(i int) string {
		if i%2 == 0 {
			return fmt.Sprintf("error: case %d did not hold: expected %d, got %d", i, i, i+1)
		}
		return filler(i)
	})
	var mb strings.Builder
	for mb.Len() < 1<<20 {
		mb.WriteString(filler(mb.Len()) + "\n")
	}
	mega := mb.String() + "panic: runtime error: index out of range\n" + mb.String()
	invalid := lines(2000, func(i int) string {
		if i == 999 {
			return "fatal: bad object \xff\xfe"
		}
		return "bytes \xc3\x28 and \xed\xa0\x80 " + strconv.Itoa(i)
	})
	oneLine := strings.Repeat("😀 error in the middle of nowhere ", 500_000/34)

	tests := []struct {
		name  string
		text  string
		cap   int
		check func(t *testing.T, view string, sh boundedShape)
	}{
		{"small text shown whole", "ok\nall good\n", 1000, func(t *testing.T, view string, sh boundedShape) {
			if !sh.whole || !strings.Contains(view, "bash → 2 lines, ~") {
				t.Fatalf("small text:\n%s", view)
			}
		}},
		{"errors listed with their numbers", withErrors, 1000, func(t *testing.T, view string, sh boundedShape) {
			for _, want := range []string{
				"\n1200: ERROR: step 0 failed\n", "\n1300: ERROR: step 1 failed\n",
				"\n700 (and 3 more times): FAIL: TestRepeated\n",
				"bash → 3000 lines, ~", "recall_folded code=" + Code("r:t") + " lines=A-B (or grep=<term>) reads the rest",
			} {
				if !strings.Contains(view, want) {
					t.Fatalf("missing %q in\n%s", want, view)
				}
			}
			if sh.omitted != 0 || sh.head == 0 || sh.tail == 3000 {
				t.Fatalf("want head, every error and tail: %+v", sh)
			}
		}},
		{"errors beyond their share", manyErrors, 2000, func(t *testing.T, view string, sh boundedShape) {
			if sh.omitted == 0 || len(sh.listed) == 0 {
				t.Fatalf("want some errors listed and the rest counted: %+v", sh)
			}
			want := fmt.Sprintf("… %d more distinct error lines not shown (first at line ", sh.omitted)
			if !strings.Contains(view, want) || !strings.Contains(view, "grep=error matches all of them") {
				t.Fatalf("omitted note:\n%s", view[strings.Index(view, "\n… "+strconv.Itoa(sh.omitted)):])
			}
			if !strings.Contains(view, fmt.Sprintf("%d of the %d distinct error lines among lines %d-%d", len(sh.listed), len(sh.listed)+sh.omitted, sh.head+1, sh.tail)) {
				t.Fatalf("header does not count the errors:\n%.300s", view)
			}
		}},
		{"1 MB text", mega, 5000, func(t *testing.T, view string, sh boundedShape) {
			if !strings.Contains(view, ": panic: runtime error: index out of range\n") {
				t.Fatalf("the buried panic is not listed")
			}
			if tokens.Block(view) < 4000 {
				t.Fatalf("view uses %d of 5000 tokens: the head and tail should fill the room", tokens.Block(view))
			}
		}},
		{"invalid UTF-8 kept verbatim", invalid, 800, func(t *testing.T, view string, sh boundedShape) {
			if !strings.Contains(view, "\n999: fatal: bad object \xff\xfe\n") {
				t.Fatalf("invalid bytes not kept verbatim:\n%q", view)
			}
		}},
		{"one 500 KB line cut by characters", oneLine, 3000, func(t *testing.T, view string, sh boundedShape) {
			if !sh.cut || !strings.Contains(view, "1 line of "+strconv.Itoa(tokens.Units(oneLine))+" chars") ||
				!strings.Contains(view, "(the line is an error line)") {
				t.Fatalf("one line:\n%.400s", view)
			}
			if tokens.Block(view) < 2800 {
				t.Fatalf("cut view uses only %d of 3000 tokens", tokens.Block(view))
			}
		}},
		{"a cap below the floor is raised", withErrors, 1, func(t *testing.T, view string, sh boundedShape) {
			if tokens.Block(view) > MinBoundedTokens {
				t.Fatalf("view is %d tokens", tokens.Block(view))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			view := Bounded(Code("r:t"), "bash", tt.text, false, tokens.Block(tt.text), tt.cap)
			sh := checkBounded(t, "r:t", tt.text, view, tt.cap)
			tt.check(t, view, sh)
			if again := Bounded(Code("r:t"), "bash", tt.text, false, tokens.Block(tt.text), tt.cap); again != view {
				t.Fatal("Bounded is not deterministic")
			}
		})
	}
}

func TestBoundedIsErrorAndLongLines(t *testing.T) {
	// A line too long for any share is neither cut nor listed; the view
	// counts it as not shown and says where it is.
	huge := "error: " + strings.Repeat("x", 20_000)
	text := lines(100, filler) + huge + "\n" + lines(100, filler)
	view := Bounded(Code("r:e"), "", text, true, tokens.Block(text), 1000)
	sh := checkBounded(t, "r:e", text, view, 1000)
	if sh.omitted != 1 || !strings.Contains(view, "{#"+Code("r:e")+" FOLDED} result → error, 201 lines") ||
		!strings.Contains(view, "(first at line 101): recall_folded code="+Code("r:e")+" grep=error matches it") {
		t.Fatalf("long error line:\n%s", view)
	}
}

func TestBoundedGolden(t *testing.T) {
	cases := []struct {
		name, tool, text string
		isError          bool
		cap              int
	}{
		{"test-run", "bash", lines(400, func(i int) string {
			switch i {
			case 150:
				return "--- FAIL: TestParse (0.00s)"
			case 151, 260:
				return "    parse_test.go:42: got 1, want 2"
			case 300:
				return "FAIL\tgithub.com/x/y\t0.012s"
			}
			return fmt.Sprintf("=== RUN   TestCase%03d", i)
		}), false, 400},
		{"many-errors", "bash", lines(600, func(i int) string {
			if i%3 == 0 {
				return fmt.Sprintf("src/m%d.ts(%d,5): error TS2322: Type 'string' is not assignable to type 'number'.", i, i)
			}
			if i%50 == 1 {
				return fmt.Sprintf("Segmentation fault at %d", i)
			}
			return fmt.Sprintf("compiling module %d", i)
		}), true, 600},
		{"one-line", "read", strings.Repeat("{\"k\":\"v😀\"},", 3000), false, 300},
	}
	var b strings.Builder
	for _, c := range cases {
		view := Bounded(Code("r:"+c.name), c.tool, c.text, c.isError, tokens.Block(c.text), c.cap)
		checkBounded(t, "r:"+c.name, c.text, view, c.cap)
		fmt.Fprintf(&b, "=== %s (cap %d tok, view %d tok)\n%s\n", c.name, c.cap, tokens.Block(view), view)
	}
	path := filepath.Join("testdata", "bounded.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden (run with -update to create it): %v", err)
	}
	if b.String() != string(want) {
		t.Fatalf("bounded views differ from %s (run with -update if intended):\n%s", path, b.String())
	}
}

func FuzzBounded(f *testing.F) {
	f.Add("line one\nERROR: it broke\nline three\n", uint8(200), uint16(300))
	f.Add("no newline at all but error", uint8(255), uint16(0))
	f.Add("😀\xed\xa0\x80\xff\n\nfailed\n", uint8(90), uint16(260))
	f.Add("… lines 2-3 not shown\n1: error x\n", uint8(120), uint16(256))
	f.Fuzz(func(t *testing.T, s string, reps uint8, cap uint16) {
		// Repeat the input so that most cases are too large for the cap.
		text := strings.Repeat(s, int(reps)+1)
		view := Bounded(Code("r:f"), "bash", text, false, tokens.Block(text), int(cap))
		checkBounded(t, "r:f", text, view, int(cap))
	})
}

func TestShowLinesReadsBoundedViews(t *testing.T) {
	text := lines(3000, func(i int) string {
		switch i {
		case 2:
			return "  error: in the head, indented"
		case 1500:
			return "ERROR: step 0 failed"
		case 2999:
			return "FAIL: in the tail"
		}
		return filler(i)
	})
	view := Bounded(Code("r:s"), "bash", text, false, tokens.Block(text), 600)
	if !IsBounded(view) || IsBounded(ToolResult(Code("r:s"), "bash", text, false, 9, DefaultLimits)) {
		t.Fatal("IsBounded does not tell a bounded view from a digest")
	}
	got := ShowLines(view, []string{"error: in the head, indented", "ERROR: step 0 failed", "FAIL: in the tail", "ERROR: never there"})
	want := []Shown{Whole, Whole, Whole, Hidden}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ShowLines = %v, want %v\n%s", got, want, view)
		}
	}
}
