// Package recall renders bounded reads of folded blocks and the texts of the
// recall_folded and unfold tools.
//
// Recall exists so a fold is reversible, but one recall must never hand back
// the flood that folding removed. Every read therefore goes through a cap,
// whichever route serves it (the ledger, a tool's full-output file, the live
// history; docs/EDGES.md #14):
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
// included, and the notes of the others name the chars= range of a line
// they clip. Lengths are UTF-16 code units and token figures come from
// tokens.Estimate, as in the TypeScript design; no cut ever splits a
// surrogate pair.
//
// The package is pure: no I/O, no clock. A host hands Answer its stores
// (Store: Pi's session file, the proxy's conversation record), which say
// what is folded, what serves a code and whether its text verified; this
// package looks codes up, slices and renders the answer, including the
// label that says what was served (docs/EDGES.md #24): a verified ledger
// block, an unverified legacy record, a live block served because the
// ledger check failed, a truncated view. Strings match the TypeScript
// implementation unless a comment says otherwise.
package recall

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/tokens"
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
		return lines(text, o.Lines, source, o.Spelling)
	case o.Grep != "":
		return grep(text, o.Grep, source, o.Spelling)
	}
	return whole(text, o.Spelling)
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

// inOther names source in a slice note, " (full output)", only when it is
// not the text the answer's label already names: the label says where the
// block was read from, and saying it twice in one header says nothing.
func inOther(source string) string {
	if source == SourceFullOutput {
		return " (" + source + ")"
	}
	return ""
}

// otherFirst is inOther's form at the head of a parenthesis: "full output, ".
func otherFirst(source string) string {
	if source == SourceFullOutput {
		return source + ", "
	}
	return ""
}

// charsReads reports whether source is the text chars= reads, so that
// positions in it are chars= positions: every source but a tool's full
// output file, which only line reads search (see Options.Partial).
func charsReads(source string) bool { return source != SourceFullOutput }

// cursor counts the UTF-16 units of text before a byte offset, moving
// forward only and only when asked: most reads never need a position.
type cursor struct {
	text string
	b, u int
}

// unitsAt returns the units of text before byte offset at (at ≥ any
// offset asked before).
func (c *cursor) unitsAt(at int) int {
	c.u += tokens.Units(c.text[c.b:at])
	c.b = at
	return c.u
}

// readLine is the hint for a clipped line of n units that starts after off
// units of the text chars= reads: its range, and the page that starts it.
func readLine(lineNo, off, n int, sp Spelling) string {
	return "line " + strconv.Itoa(lineNo) + " is chars " + span(off+1, off+n) +
		"; read it with " + sp.arg("chars", span(off+1, off+min(n, CharsPageCap))) + ", then on"
}

func span(a, b int) string { return strconv.Itoa(a) + "-" + strconv.Itoa(b) }

// Whole returns text unchanged when it fits WholeTokenCap. Otherwise it
// keeps whole lines from the top, each clipped to LineCharCap, while the
// running total of Estimate(line)+1 stays within the cap (the first line is
// always kept), and the note says how much is shown and how to reach the
// rest: for a clipped line, the chars= range that holds it, since only
// chars= reads a line that long whole. text is the block's own text, the
// one chars= reads.
func Whole(text string) (out, note string) { return whole(text, ToolArgs) }

func whole(text string, sp Spelling) (out, note string) {
	total := tokens.Estimate(text)
	if total <= WholeTokenCap {
		return text, ""
	}
	var kept []string
	sum, n := 0, 0
	stopped := false
	cur := &cursor{text: text}
	long := "" // the hint for the first clipped line
	at := 0
	for _, line := range digest.SplitLines(text) {
		n++
		start := at
		at += len(line) + 1
		if stopped {
			continue // counting the lines
		}
		body, c := clip(line, LineCharCap, -1, cur, start, sp)
		// Like the TypeScript, the line that overflows the cap still marks
		// the read clipped: chars= is the one way into it either way.
		if c && long == "" {
			long = readLine(n, cur.unitsAt(start), tokens.Units(line), sp)
		}
		sum += tokens.Estimate(body) + 1
		if len(kept) > 0 && sum > WholeTokenCap {
			stopped = true
			continue
		}
		kept = append(kept, body)
	}
	note = "result is ~" + strconv.Itoa(total) + " tok; showing lines 1-" + strconv.Itoa(len(kept)) +
		" of " + strconv.Itoa(n) + " (~" + strconv.Itoa(WholeTokenCap) + " tok cap)"
	if long != "" {
		note += " · LONG LINE CLIPPED: " + long + ", or " + sp.arg("grep", "<term>") + " inside it"
	} else {
		note += " — use " + sp.arg("lines", "<a-b>") + " or " + sp.arg("grep", "<term>") + " for the rest"
	}
	if sp == CLIFlags {
		// The command can also write the whole original, unbounded.
		note += "; -raw writes all of it"
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
// A clipped line's hint names its chars= range, unless source is a text
// chars= does not read (a full output file).
func Lines(text, spec, source string) (out, note string) {
	return lines(text, spec, source, ToolArgs)
}

func lines(text, spec, source string, sp Spelling) (out, note string) {
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
	var cur *cursor
	at := 0
	if charsReads(source) {
		cur = &cursor{text: text}
		for _, l := range lines[:first-1] {
			at += len(l) + 1
		}
	}
	var kept []string
	sum := 0
	long := "" // the hint for the first clipped line
	for i := first - 1; i < last; i++ {
		start := at
		at += len(lines[i]) + 1
		body, c := clip(lines[i], LineCharCap, -1, cur, start, sp)
		if c && long == "" {
			if cur != nil {
				long = readLine(i+1, cur.unitsAt(start), tokens.Units(lines[i]), sp)
			} else {
				long = sp.arg("grep", "<term>") + " reaches inside the long line (" + sp.arg("chars", "<a-b>") + " reads the folded block, not the " + source + ")"
			}
		}
		numbered := strconv.Itoa(i+1) + ": " + body
		sum += tokens.Estimate(numbered) + 1
		if len(kept) > 0 && sum > WholeTokenCap {
			break
		}
		kept = append(kept, numbered)
	}
	shown := first + len(kept) - 1
	if shown < last || long != "" {
		note = "lines " + strconv.Itoa(first) + "-" + strconv.Itoa(shown) + " of " + strconv.Itoa(first) + "-" + strconv.Itoa(last) +
			" requested (" + otherFirst(source) + "~" + strconv.Itoa(WholeTokenCap) + " tok cap"
		var hints []string
		if shown < last {
			hints = append(hints, "narrow the range or grep")
		}
		if long != "" {
			note += ", long line clipped"
			hints = append(hints, long)
		}
		note += ") — " + strings.Join(hints, "; ")
	} else {
		note = "lines " + strconv.Itoa(first) + "-" + strconv.Itoa(last) + " of " + strconv.Itoa(len(lines)) + inOther(source)
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
	var paren []string
	if o := inOther(source); o != "" {
		paren = append(paren, source)
	}
	if moved := first != int(a) || last != hi; moved || capped {
		req := rawjson.FormatJSNumber(ra) + "-" + rawjson.FormatJSNumber(rb) + " requested"
		if capped {
			req += ", " + strconv.Itoa(CharsPageCap) + "-char page cap"
		}
		if moved {
			req += ", a surrogate pair is never split"
		}
		paren = append(paren, req)
	}
	note = "chars " + strconv.Itoa(first) + "-" + strconv.Itoa(last) + " of " + strconv.Itoa(n)
	if len(paren) > 0 {
		note += " (" + strings.Join(paren, "; ") + ")"
	}
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
// grep as absent. A clipped hit's marker names its chars= range, unless
// source is a text chars= does not read (a full output file).
func Grep(text, term, source string) (out, note string) {
	return grep(text, term, source, ToolArgs)
}

func grep(text, term, source string, sp Spelling) (out, note string) {
	f := newFinder(term)
	var kept []string
	sum, hits, n := 0, 0, 0
	stopped := false
	var cur *cursor
	if charsReads(source) {
		cur = &cursor{text: text}
	}
	start := 0
	for _, line := range digest.SplitLines(text) {
		n++
		lineAt := start
		start += len(line) + 1
		at := f.index(line)
		if at < 0 {
			continue
		}
		hits++
		if stopped {
			continue // over the cap: only counting
		}
		body, _ := clip(line, GrepLineCharCap, at, cur, lineAt, sp)
		h := strconv.Itoa(n) + ": " + body
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
		note = strconv.Itoa(len(kept)) + " of " + strconv.Itoa(hits) + ` matches for "` + term + `"` + inOther(source) + " — narrow your query or use " + sp.arg("lines", "<a-b>")
	default:
		note = strconv.Itoa(hits) + " " + plural(hits, "match", "matches") + ` for "` + term + `"` + inOther(source)
	}
	return strings.Join(kept, "\n"), note
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Count says n things, in the singular for one ("1 fold event", "2 fold
// events"), for every count a person or the model reads.
func Count(n int, one, many string) string {
	return strconv.Itoa(n) + " " + plural(n, one, many)
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
// the summary the search output carries; its hints, and those of clipped
// lines' markers, are spelled sp. A block's Text is the text chars= reads.
func Search(blocks []Block, term string, sp Spelling) (hits []Hit, truncated bool, note string) {
	f := newFinder(term)
	sum, total := 0, 0
	for _, b := range blocks {
		var lines []string
		n := 0
		cur := &cursor{text: b.Text}
		start := 0
		for _, line := range digest.SplitLines(b.Text) {
			n++
			lineAt := start
			start += len(line) + 1
			at := f.index(line)
			if at < 0 {
				continue
			}
			body, _ := clip(line, GrepLineCharCap, at, cur, lineAt, sp)
			h := strconv.Itoa(n) + ": " + body
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
		follow := "recall_folded code={code} " + sp.arg("lines", "<a-b>")
		if sp == CLIFlags {
			follow = "a recall of {code} with " + sp.arg("lines", "<a-b>")
		}
		note = "capped at ~" + strconv.Itoa(SearchTokenCap) + " tok — narrow the term, or follow up with " + follow
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
// kept, prefixed by its position in the line. Cuts never split a surrogate
// pair: a window that would start inside one starts after it, and its
// position says so (the TypeScript prints start+1..start+limit regardless,
// and can emit a lone low surrogate there). ClipLine knows nothing of the
// text around the line, so its marks name no chars= range; the reads of
// this package name one wherever their text is the one chars= reads.
func ClipLine(line string, limit, around int) string {
	s, _ := clip(line, limit, around, nil, 0, ToolArgs)
	return s
}

// clip is ClipLine that also reports whether it cut. When cur is not nil,
// the line starts at byte at of cur's text, the text chars= reads, and the
// marks name the line's chars= positions (spelled sp): the way on from a
// head, the exact range of a window.
func clip(line string, limit, around int, cur *cursor, at int, sp Spelling) (string, bool) {
	limit = max(limit, 0)
	n := tokens.Units(line)
	if n <= limit {
		return line, false
	}
	if around < 0 || 2*around <= limit || limit == 0 {
		head := tokens.SafeSlice(line, limit)
		if cur == nil {
			return head + "…[line clipped: " + strconv.Itoa(n) + " chars — " + sp.arg("grep", "<term>") + " targets content inside it]", true
		}
		off := cur.unitsAt(at)
		on := off + tokens.Units(head) + 1
		return head + "…[line clipped: " + strconv.Itoa(n) + " chars, chars " + span(off+1, off+n) +
			" — read on with " + sp.arg("chars", span(on, min(off+n, on+CharsPageCap-1))) + "]", true
	}
	start := min(max(0, around-limit/2), n-limit)
	b, start := unitOffset(line, start)
	shown := tokens.SafeSlice(line[b:], limit)
	end := start + tokens.Units(shown)
	pos := "line chars " + span(start+1, end) + " of " + strconv.Itoa(n)
	if cur != nil {
		off := cur.unitsAt(at)
		pos = sp.arg("chars", span(off+start+1, off+end)) + ", " + pos
	}
	return "[…" + pos + "…] " + shown + "…", true
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
