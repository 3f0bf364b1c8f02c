// Package recall renders bounded reads of folded blocks and the texts of the
// recall_folded and unfold tools.
//
// Recall exists so a fold is reversible, but one recall must never hand back
// the flood that folding removed. Every read therefore goes through a cap,
// whichever route serves it (the ledger, a tool's full-output file, the live
// history; EDGES 14):
//
//	Whole   a whole block: unchanged up to WholeTokenCap, else its first lines
//	Lines   a 1-based inclusive line range, capped at WholeTokenCap
//	Chars   a 1-based inclusive range of UTF-16 units, verbatim, a CharsPageCap page at a time
//	Grep    lines containing a term, match-centred windows, capped at SliceTokenCap
//	Search  one sweep of a term over many blocks, capped at SearchTokenCap overall
//
// and every kept line is clipped (ClipLine), so a single enormous line cannot
// ride through a line-based cap. Chars is the one read that never clips:
// paging through it returns every byte of a block, a line of any length
// included. Lengths are UTF-16 code units and token
// figures come from tokens.Estimate, as in the TypeScript design; no cut ever
// splits a surrogate pair.
//
// The package is pure: no I/O, no clock. The caller (the engine service)
// decides what is folded, which route serves a code, and whether its text
// verified; this package renders the answer, including the label that says
// what was served (EDGES 24): a verified ledger block, an unverified legacy
// record, a live block served because the ledger check failed, a truncated
// view. Strings match the TypeScript implementation unless a comment says
// otherwise.
package recall

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/digest"
	"github.com/contextfold/contextfold/internal/rawjson"
	"github.com/contextfold/contextfold/internal/tokens"
)

// The caps.
const (
	// WholeTokenCap bounds a whole read and a line range.
	WholeTokenCap = 2000
	// LineCharCap bounds one line of a whole read or a line range, leaving
	// headroom under WholeTokenCap for the rest of the answer.
	LineCharCap = (WholeTokenCap - 200) * tokens.CharsPerToken
	// SliceTokenCap bounds a grep.
	SliceTokenCap = 500
	// GrepLineCharCap bounds one grep or search hit: a window, not a read.
	GrepLineCharCap = 320
	// SearchTokenCap bounds a whole search sweep, across every block.
	SearchTokenCap = 1000
	// CharsPageCap bounds one chars= read, in UTF-16 units: a page's
	// estimate leaves the headroom under WholeTokenCap a clipped line of a
	// whole read leaves.
	CharsPageCap = (WholeTokenCap - 200) * tokens.CharsPerToken
)

// Sources name the text a line range or grep searched; they appear in the
// notes.
const (
	SourceLedger     = "session file"
	SourceFullOutput = "full output"
	SourceLive       = "live block"
	SourceParent     = "parent session"
	// SourceStore is the proxy's own record of folded blocks (foldstore).
	SourceStore = "context-fold record"
)

// Options are a recall's slicing parameters. Chars wins over Lines, Lines
// over Grep; none is a whole read. Empty means absent, as in the tool's
// JavaScript.
type Options struct {
	Chars string
	Lines string
	Grep  string
	// Spelling is how notes name the options they suggest.
	Spelling Spelling
}

// Partial reports whether o searches by line (lines or grep, and no chars)
// rather than reads the block: only such a read may search a tool's
// full-output file. A chars read is not partial: it pages the block's own
// text, the bytes the fold-time sha256 verified, so the positions it takes
// are the ones whole reads and line ranges of that text name.
func (o Options) Partial() bool { return o.Chars == "" && (o.Lines != "" || o.Grep != "") }

// Slice reads text as o asks: Chars, else Lines, else Grep, else Whole.
// source names text in the notes of Chars, Lines and Grep.
func Slice(text string, o Options, source string) (out, note string) {
	switch {
	case o.Chars != "":
		return chars(text, o.Chars, source, o.Spelling)
	case o.Lines != "":
		return Lines(text, o.Lines, source)
	case o.Grep != "":
		return Grep(text, o.Grep, source)
	}
	return Whole(text)
}

// Spelling is how a note names the options it suggests: as the tool's
// arguments (chars=1-7200) or as the contextfold recall command's flags
// (-chars 1-7200). A hint names what its reader can type.
type Spelling uint8

const (
	// ToolArgs spells recall_folded's arguments.
	ToolArgs Spelling = iota
	// CLIFlags spells the flags of contextfold recall.
	CLIFlags
)

// arg spells option name with value.
func (sp Spelling) arg(name, value string) string {
	if sp == CLIFlags {
		return "-" + name + " " + value
	}
	return name + "=" + value
}

// Whole returns text unchanged when it fits WholeTokenCap. Otherwise it
// keeps whole lines from the top, each clipped to LineCharCap, while the
// running total of Estimate(line)+1 stays within the cap (the first line is
// always kept), and the note says how much is shown and how to reach the
// rest. The literal "{code}" in the long-line note is the TypeScript text.
func Whole(text string) (out, note string) {
	total := tokens.Estimate(text)
	if total <= WholeTokenCap {
		return text, ""
	}
	var kept []string
	sum, n := 0, 0
	clipped, stopped := false, false
	for _, line := range digest.SplitLines(text) {
		n++
		if stopped {
			continue // counting the lines
		}
		body, c := clip(line, LineCharCap, -1)
		// Like the TypeScript, the line that overflows the cap still marks
		// the read clipped: grep is the one way into it either way.
		clipped = clipped || c
		sum += tokens.Estimate(body) + 1
		if len(kept) > 0 && sum > WholeTokenCap {
			stopped = true
			continue
		}
		kept = append(kept, body)
	}
	note = "result is ~" + strconv.Itoa(total) + " tok; showing lines 1-" + strconv.Itoa(len(kept)) +
		" of " + strconv.Itoa(n) + " (~" + strconv.Itoa(WholeTokenCap) + " tok cap)"
	if clipped {
		note += " · LONG LINE CLIPPED: unseen content inside it is reachable only via recall_folded {code} grep=<term> — grep for the exact token you need"
	} else {
		note += " — use lines=<a-b> or grep=<term> for the rest"
	}
	return strings.Join(kept, "\n"), note
}

// LinesForm says what a lines= range must look like.
const LinesForm = `"start-end", two line numbers with start ≤ end, e.g. lines=40-80`

// ValidLines reports whether spec is a well-formed line range: two numbers
// (as the TypeScript read them, surrounding whitespace allowed) with the
// start not after the end. A range past the end of a block is well formed;
// it reads nothing, and says so.
func ValidLines(spec string) bool {
	a, b, ok := parseRange(spec)
	return ok && a <= b
}

// MalformedLines is the answer to a malformed lines= range: recall_folded
// returns it as an error, before reading anything.
func MalformedLines(spec string) string {
	return `malformed lines="` + spec + `": want ` + LinesForm + ` — nothing returned`
}

// Lines returns lines a-b of text (spec "a-b", 1-based, inclusive), each as
// "<n>: <line>" clipped to LineCharCap, within WholeTokenCap (at least one
// line). a is raised to 1 and b lowered to the line count. A malformed spec
// (see ValidLines) or an empty range returns no text and a note saying so.
func Lines(text, spec, source string) (out, note string) {
	if !ValidLines(spec) {
		return "", MalformedLines(spec)
	}
	a, b, _ := parseRange(spec)
	lines := digest.SplitLines(text)
	a = max(1, a)
	b = min(float64(len(lines)), b)
	if a > b {
		return "", "empty range " + rawjson.FormatJSNumber(a) + "-" + rawjson.FormatJSNumber(b) +
			" (" + source + " has " + strconv.Itoa(len(lines)) + " " + plural(len(lines), "line", "lines") + ")"
	}
	first, last := int(a), int(b)
	var kept []string
	sum := 0
	clipped := false
	for i := first - 1; i < last; i++ {
		body, c := clip(lines[i], LineCharCap, -1)
		clipped = clipped || c
		numbered := strconv.Itoa(i+1) + ": " + body
		sum += tokens.Estimate(numbered) + 1
		if len(kept) > 0 && sum > WholeTokenCap {
			break
		}
		kept = append(kept, numbered)
	}
	shown := first + len(kept) - 1
	if shown < last || clipped {
		note = "lines " + strconv.Itoa(first) + "-" + strconv.Itoa(shown) + " of " + strconv.Itoa(first) + "-" + strconv.Itoa(last) +
			" requested (" + source + ", ~" + strconv.Itoa(WholeTokenCap) + " tok cap"
		if clipped {
			note += ", long line clipped"
		}
		note += ") — narrow the range or grep"
	} else {
		note = "lines " + strconv.Itoa(first) + "-" + strconv.Itoa(last) + " of " + strconv.Itoa(len(lines)) + " (" + source + ")"
	}
	return strings.Join(kept, "\n"), note
}

// CharsForm says what a chars= range must look like.
const CharsForm = `"start-end", two character positions with start ≤ end, e.g. chars=1-7200`

// ValidChars reports whether spec is a well-formed character range, read as
// a line range is (see ValidLines). A range past the end is well formed.
func ValidChars(spec string) bool { return ValidLines(spec) }

// MalformedChars is the answer to a malformed chars= range: recall_folded
// returns it as an error, before reading anything.
func MalformedChars(spec string) string {
	return `malformed chars="` + spec + `": want ` + CharsForm + ` — nothing returned`
}

// Chars returns UTF-16 units a-b of text (spec "a-b", 1-based, inclusive:
// JavaScript string positions plus one) exactly as they are: no line
// numbers, nothing added, at most CharsPageCap units. a is raised to 1 and
// b lowered to the text's length. A surrogate pair is never split: a start
// inside one moves back to take it whole, an end inside one moves back to
// leave it out (unless that would leave nothing, then forward to take it),
// so the next page, which starts right after this one, starts on a
// character. A lone surrogate (WTF-8) or a byte that is not UTF-8 is one
// unit. The note says which range was returned and, when the request was
// capped or the text goes on, the chars= range to ask for next.
func Chars(text, spec, source string) (out, note string) {
	return chars(text, spec, source, ToolArgs)
}

func chars(text, spec, source string, sp Spelling) (out, note string) {
	if !ValidChars(spec) {
		return "", MalformedChars(spec)
	}
	ra, rb, _ := parseRange(spec)
	n := tokens.Units(text)
	a, b := max(1, ra), min(float64(n), rb)
	if a > b {
		return "", "empty range " + rawjson.FormatJSNumber(a) + "-" + rawjson.FormatJSNumber(b) +
			" (" + source + " has " + strconv.Itoa(n) + " " + plural(n, "char", "chars") + ")"
	}
	// Units [lo, hi), 0-based; from and to are their byte offsets.
	lo, hi := int(a)-1, int(b)
	from, at := unitOffset(text, lo)
	if at > lo {
		// lo is a pair's second half: unitOffset stepped past the pair,
		// a four-byte character, two units.
		from, at = from-4, at-2
	}
	lo = at
	capped := hi-lo > CharsPageCap
	if capped {
		hi = lo + CharsPageCap
	}
	to, end := unitOffset(text[from:], hi-lo)
	to, end = from+to, lo+end
	if end > hi && end-2 > lo {
		to, end = to-4, end-2 // hi fell inside a pair: leave it out
	}
	first, last := lo+1, end
	note = "chars " + strconv.Itoa(first) + "-" + strconv.Itoa(last) + " of " + strconv.Itoa(n) + " (" + source
	if moved := first != int(a) || last != hi; moved || capped {
		note += "; " + rawjson.FormatJSNumber(ra) + "-" + rawjson.FormatJSNumber(rb) + " requested"
		if capped {
			note += ", " + strconv.Itoa(CharsPageCap) + "-char page cap"
		}
		if moved {
			note += ", a surrogate pair is never split"
		}
	}
	note += ")"
	if last < n {
		// What is left of the request, or, when it is done, the next page.
		next := min(n, last+CharsPageCap)
		if capped {
			next = min(next, int(b))
		}
		note += " — next: " + sp.arg("chars", strconv.Itoa(last+1)+"-"+strconv.Itoa(next))
	}
	return text[from:to], note
}

// parseRange parses `^\s*(\d+)\s*-\s*(\d+)\s*$` as JavaScript reads it
// (\s is JavaScript whitespace, \d ASCII digits) and the two numbers as
// parseInt would: float64, so an absurd bound still compares and prints as
// it does there.
func parseRange(spec string) (a, b float64, ok bool) {
	s := strings.TrimLeftFunc(spec, tokens.IsSpace)
	a, s, ok = digits(s)
	if !ok {
		return 0, 0, false
	}
	s = strings.TrimLeftFunc(s, tokens.IsSpace)
	if !strings.HasPrefix(s, "-") {
		return 0, 0, false
	}
	s = strings.TrimLeftFunc(s[1:], tokens.IsSpace)
	b, s, ok = digits(s)
	if !ok || strings.TrimLeftFunc(s, tokens.IsSpace) != "" {
		return 0, 0, false
	}
	return a, b, true
}

func digits(s string) (float64, string, bool) {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n == 0 {
		return 0, s, false
	}
	f, err := strconv.ParseFloat(s[:n], 64)
	if err != nil && f == 0 {
		return 0, s, false
	}
	return f, s[n:], true
}

// Grep returns the lines of text containing term, case-insensitively, each
// as "<n>: <window>" where the window is at most GrepLineCharCap units
// centred on the first match, within SliceTokenCap (at least one hit). An
// empty term matches every line, as indexOf("") does; callers treat an empty
// grep as absent.
func Grep(text, term, source string) (out, note string) {
	f := newFinder(term)
	var kept []string
	sum, hits, n := 0, 0, 0
	stopped := false
	for _, line := range digest.SplitLines(text) {
		n++
		at := f.index(line)
		if at < 0 {
			continue
		}
		hits++
		if stopped {
			continue // over the cap: only counting
		}
		h := strconv.Itoa(n) + ": " + ClipLine(line, GrepLineCharCap, at)
		sum += tokens.Estimate(h) + 1
		if len(kept) > 0 && sum > SliceTokenCap {
			stopped = true
			continue
		}
		kept = append(kept, h)
	}
	switch {
	case hits == 0:
		return "", `no lines match "` + term + `" (searched ` + source + ", " + strconv.Itoa(n) + " " + plural(n, "line", "lines") + ")"
	case len(kept) < hits:
		note = strconv.Itoa(len(kept)) + " of " + strconv.Itoa(hits) + ` matches for "` + term + `" (` + source + ") — narrow your query or use lines=<a-b>"
	default:
		note = strconv.Itoa(hits) + " " + plural(hits, "match", "matches") + ` for "` + term + `" (` + source + ")"
	}
	return strings.Join(kept, "\n"), note
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Block is one folded block for Search. Note labels what was served (the
// route notes of render.go); it is rendered after the label. Unverified
// marks text that is not known to be the folded bytes (it failed the
// fold-time sha256 check, or there is none to check): its hits are flagged
// in the search's first line too.
type Block struct {
	Code, Label, Note string
	Text              string
	Unverified        bool
}

// Hit is one block's matching lines, "<n>: <window>", numbered as Lines
// numbers them so a follow-up lines=<a-b> slice is valid.
type Hit struct {
	Code, Label, Note string
	Lines             []string
	Unverified        bool
}

// Search sweeps term over blocks in order, as Grep does per block, with one
// SearchTokenCap across all of them: once the running total passes it (and
// at least one line is kept) the sweep stops and truncated is set. note is
// the summary the search output carries.
func Search(blocks []Block, term string) (hits []Hit, truncated bool, note string) {
	f := newFinder(term)
	sum, total := 0, 0
	for _, b := range blocks {
		var lines []string
		n := 0
		for _, line := range digest.SplitLines(b.Text) {
			n++
			at := f.index(line)
			if at < 0 {
				continue
			}
			h := strconv.Itoa(n) + ": " + ClipLine(line, GrepLineCharCap, at)
			sum += tokens.Estimate(h) + 1
			if sum > SearchTokenCap && (len(hits) > 0 || len(lines) > 0) {
				truncated = true
				break
			}
			lines = append(lines, h)
		}
		if len(lines) > 0 {
			hits = append(hits, Hit{Code: b.Code, Label: b.Label, Note: b.Note, Lines: lines, Unverified: b.Unverified})
			total += len(lines)
		}
		if truncated {
			break
		}
	}
	if truncated {
		note = "capped at ~" + strconv.Itoa(SearchTokenCap) + " tok — narrow the term, or follow up with recall_folded {code} lines=<a-b>"
	} else {
		note = strconv.Itoa(total) + " matching " + plural(total, "line", "lines") + " across " +
			strconv.Itoa(len(hits)) + " of " + strconv.Itoa(len(blocks)) + " folded blocks"
	}
	return hits, truncated, note
}

// ClipLine bounds one line to limit UTF-16 units. A line that fits is
// returned unchanged. Without an anchor (around < 0), or with the anchor in
// the first half of the budget, the head is kept and a marker says how to
// reach the rest. Otherwise a window of limit units centred on around is
// kept, prefixed by its position. Cuts never split a surrogate pair: a
// window that would start inside one starts after it, and its position says
// so (the TypeScript prints start+1..start+limit regardless, and can emit a
// lone low surrogate there).
func ClipLine(line string, limit, around int) string {
	s, _ := clip(line, limit, around)
	return s
}

// clip is ClipLine that also reports whether it cut.
func clip(line string, limit, around int) (string, bool) {
	limit = max(limit, 0)
	n := tokens.Units(line)
	if n <= limit {
		return line, false
	}
	if around < 0 || 2*around <= limit || limit == 0 {
		return tokens.SafeSlice(line, limit) + "…[line clipped: " + strconv.Itoa(n) + " chars — grep=<term> targets content inside it]", true
	}
	start := min(max(0, around-limit/2), n-limit)
	at, start := unitOffset(line, start)
	shown := tokens.SafeSlice(line[at:], limit)
	return "[…chars " + strconv.Itoa(start+1) + "-" + strconv.Itoa(start+tokens.Units(shown)) + " of " + strconv.Itoa(n) + "…] " + shown + "…", true
}

// unitOffset returns the byte offset of UTF-16 unit u in s. When u falls
// between the two halves of a surrogate pair it moves to the end of the pair
// and reports the unit it moved to.
func unitOffset(s string, u int) (at, unit int) {
	units := 0
	for i := 0; i < len(s); {
		if units >= u {
			return i, units
		}
		w, size := 1, 1
		if c := s[i]; c >= utf8.RuneSelf {
			r, sz := utf8.DecodeRuneInString(s[i:])
			size = sz
			if _, ok := rawjson.IsSurrogateAt(s, i); ok {
				size = 3
			} else if r >= 0x10000 {
				w = 2
			}
		}
		units += w
		i += size
	}
	return len(s), units
}

// finder is a case-insensitive substring search returning UTF-16 offsets.
// Case is folded rune by rune with unicode.ToLower, which differs from
// JavaScript's toLowerCase only in its context-dependent and one-to-many
// mappings (final sigma, U+0130).
type finder struct {
	needle []byte
	buf    []byte
}

func newFinder(term string) *finder {
	return &finder{needle: lower(nil, term)}
}

// index returns the UTF-16 offset of the first match in line, or -1.
func (f *finder) index(line string) int {
	f.buf = lower(f.buf[:0], line)
	k := bytes.Index(f.buf, f.needle)
	if k < 0 {
		return -1
	}
	// Lower-casing keeps every character's unit count (no case pair spans
	// the BMP boundary), so units before the match in the lowered line are
	// units before it in the line.
	return tokens.Units(string(f.buf[:k]))
}

// lower appends s lower-cased. Bytes that are not UTF-8 (a lone surrogate
// kept as WTF-8 among them) are copied as they are.
func lower(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, c)
			i++
			continue
		}
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
		i += size
	}
	return dst
}
