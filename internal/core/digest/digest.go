// Package digest writes what a folded block becomes: a {#code FOLDED} tag and
// a short deterministic body that keeps the block's error lines verbatim.
//
// The code is a pure function of the block's durable id and the
// conversation it belongs to (FNV-1a over their UTF-16 code units, mod 36^6,
// six base-36 digits; see ScopedCode), so the same block has the same code
// in every process, and two conversations whose clients number their tool
// calls alike (call_1, call_2, …) still get different codes. The engine is
// the only author of the tag: text a policy supplies is stripped of
// anything tag-shaped before the authoritative tag is prepended (docs/DESIGN.md §8
// invariant 2).
package digest

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/core/risk"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

// codeSpace is 36^6: every code fits six base-36 digits.
const codeSpace = 36 * 36 * 36 * 36 * 36 * 36

// ScopedCode returns the fold code of durable block id in the conversation
// named scope (a Pi session id, a proxy conversation): Code of scope, a NUL
// and id. An empty scope gives Code(id), the code of a block outside any
// conversation (benchmark replays, records older than scoping).
func ScopedCode(scope, id string) string {
	if scope == "" {
		return Code(id)
	}
	return Code(scope + "\x00" + id)
}

// Code returns the six-character fold code of a durable block id.
func Code(id string) string {
	h := uint32(0x811c9dc5)
	mix := func(u uint32) {
		h ^= u
		h *= 0x01000193
	}
	for i := 0; i < len(id); {
		c := id[i]
		if c < utf8.RuneSelf {
			mix(uint32(c))
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(id[i:])
		if r == utf8.RuneError && size == 1 {
			if i+2 < len(id) && id[i] == 0xED && id[i+1] >= 0xA0 && id[i+1] <= 0xBF {
				// A lone surrogate kept as WTF-8 hashes as its own code unit.
				mix(uint32(id[i]&0x0F)<<12 | uint32(id[i+1]&0x3F)<<6 | uint32(id[i+2]&0x3F))
				i += 3
				continue
			}
			mix(0xFFFD)
			i++
			continue
		}
		if r >= 0x10000 {
			r -= 0x10000
			mix(uint32(0xD800 + (r >> 10)))
			mix(uint32(0xDC00 + (r & 0x3FF)))
		} else {
			mix(uint32(r))
		}
		i += size
	}
	s := strconv.FormatUint(uint64(h%codeSpace), 36)
	return strings.Repeat("0", 6-len(s)) + s
}

// Tag returns the marker the model sees in place of a folded block.
func Tag(code string) string { return "{#" + code + " FOLDED}" }

var tagRE = regexp.MustCompile(`\{#[0-9a-z]{6} FOLDED\}`)
var (
	codeRE  = regexp.MustCompile(`^#?([0-9a-z]{6})$`)
	tagInRE = regexp.MustCompile(`\{#([0-9a-z]{6})\s+folded\}`)
)

// StripTags removes every tag-shaped marker from text a policy supplied.
func StripTags(s string) string {
	if !strings.Contains(s, "{#") {
		return s
	}
	return tokens.Trim(tagRE.ReplaceAllString(s, ""))
}

// ParseCode accepts what a model types for a code: a bare code ("0qq769"),
// "#0qq769", or text containing a whole tag ("{#0qq769 FOLDED}"), in any
// case and with surrounding whitespace, and returns the code.
func ParseCode(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if m := tagInRE.FindStringSubmatch(s); m != nil {
		return m[1], true
	}
	m := codeRE.FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Authored prepends the authoritative tag for code to a body, after
// stripping any tag the body carries.
func Authored(code, body string) string {
	body = StripTags(body)
	if body == "" {
		return Tag(code)
	}
	return Tag(code) + " " + body
}

// Limits bound the verbatim risk lines a tool-result digest keeps.
type Limits struct {
	// MaxChars bounds the shown lines and their marks, in UTF-16 units,
	// newlines included.
	MaxChars int
	// MaxLineChar is the longest line shown: a flagged line is shown whole
	// or not at all (counted instead), never clipped, except that a block
	// whose every flagged line is longer shows its first one clipped, with
	// a mark saying so.
	MaxLineChar int
}

// DefaultLimits were chosen on the tune half of the bench set, replaying
// the shipped schedule: the least room that keeps at least 95 % of the
// distinct error lines of folded blocks whole at every window (at 200k:
// 82.1 % at 1,600 units, 92.7 % at 2,400, 99.2 % at 3,200), for 0.3 % more
// cost than 1,600. Most digests need far less: the median block has two
// error lines. See BENCHMARKS.md.
var DefaultLimits = Limits{MaxChars: 3200, MaxLineChar: 500}

// Risk is the selection of verbatim risk lines for one text.
type Risk struct {
	// Lines are what the digest shows, in order: flagged lines verbatim and
	// whole, errors first, each in order of first occurrence; a line that
	// occurs N > 1 times identically ends in " (×N)". After a shown line, a
	// mark (starting with MarkPrefix) may count the lines of the same Shape
	// that are not shown, with a grep term they all contain.
	Lines []string
	// Omitted counts the flagged lines neither shown nor counted by a mark,
	// every occurrence counted.
	Omitted int
}

// MarkPrefix starts every line of a digest that is not a line of the
// block: the counts of lines not shown.
const MarkPrefix = "… "

// SelectRisk picks the flagged lines of text within the limits.
func SelectRisk(text string, lim Limits) Risk {
	return SelectRiskLines("", risk.Lines(text, risk.Warning), lim)
}

// countSuffix marks a line that occurs n times identically: "line (×3)".
func countSuffix(n int) string { return " (×" + strconv.Itoa(n) + ")" }

// GroupCount splits a digest line into the verbatim line and how many
// times it occurs identically in the block (1 when it has no count).
func GroupCount(line string) (string, int) {
	if !strings.HasSuffix(line, ")") {
		return line, 1
	}
	k := strings.LastIndex(line, " (×")
	if k < 0 {
		return line, 1
	}
	n, err := strconv.Atoi(line[k+len(" (×") : len(line)-1])
	if err != nil || n < 2 {
		return line, 1
	}
	return line[:k], n
}

// flagged is one distinct trimmed flagged line.
type flagged struct {
	text  string
	shape string
	units int
	count int // identical occurrences
	shown bool
	// own marks a line that reads like the digest's own text (a mark, a
	// count suffix, a cut mark): shown, it would state something untrue,
	// so it is only ever counted.
	own bool
}

// ownLike reports whether a block's line could be read as the digest's
// own text rather than a line of the block.
func ownLike(t string) bool {
	if strings.HasPrefix(t, MarkPrefix) || strings.Contains(t, cutMark) {
		return true
	}
	_, n := GroupCount(t)
	return n > 1
}

// cutMark follows a line shown cut.
const cutMark = tokens.Ellipsis + " [line cut at "

// SelectRiskLines is SelectRisk over lines already classified (at least
// Warning), so a caller that needs them elsewhere scans the text once. code
// names the block in the marks' recall hint ("" leaves it out).
//
// Every shown line is a whole line of the block, and every count states
// exactly what it counts: " (×N)" identical occurrences of that line, a
// mark "N more lines like this" the occurrences of lines of the same Shape
// not shown, "N more error or warning lines" the rest.
func SelectRiskLines(code string, lines []risk.Line, lim Limits) Risk {
	if len(lines) == 0 {
		return Risk{}
	}
	var errs, warns []*flagged
	byText := make(map[string]*flagged, len(lines))
	for _, l := range lines {
		t := tokens.Trim(l.Text)
		if t == "" {
			continue
		}
		f := byText[t]
		if f == nil {
			f = &flagged{text: t, units: tokens.Units(t), own: ownLike(t)}
			byText[t] = f
			if l.Class == risk.Error {
				errs = append(errs, f)
			} else {
				warns = append(warns, f)
			}
		}
		f.count++
	}
	all := append(errs, warns...)
	if len(all) == 0 {
		return Risk{}
	}
	for _, f := range all {
		f.shape = Shape(f.text)
	}
	cost := func(f *flagged) int {
		c := f.units + 1
		if f.count > 1 {
			c += tokens.Units(countSuffix(f.count))
		}
		return c
	}
	// Fit whole lines: first one line of each shape, in order, then the
	// rest in order, so that an avalanche of one compiler error does not
	// crowd out the different lines after it ("Command exited with code
	// 1"). A line too long for the room left is skipped, not cut, and a
	// later shorter one may still fit. Marks take room too: when the result
	// is over, the last line added gives way. Shown lines keep the order of
	// first occurrence.
	room := lim.MaxChars + 1 // the first line has no newline before it
	var shown []*flagged
	used := 0
	try := func(f *flagged) {
		if f.shown || f.own || f.units > lim.MaxLineChar || used+cost(f) > room {
			return
		}
		f.shown = true
		shown = append(shown, f)
		used += cost(f)
	}
	firstOfShape := make(map[string]bool, len(all))
	for _, f := range all {
		if !firstOfShape[f.shape] {
			firstOfShape[f.shape] = true
			try(f)
		}
	}
	for _, f := range all {
		try(f)
	}
	for {
		r, size := render(code, all)
		if size <= room || len(shown) == 0 {
			if len(shown) == 0 {
				return clipFirst(all, lim)
			}
			return r
		}
		last := shown[len(shown)-1]
		last.shown = false
		shown = shown[:len(shown)-1]
	}
}

// render lays out the shown lines with their marks and returns the
// selection and its size in units (newlines included, plus one).
func render(code string, all []*flagged) (Risk, int) {
	var r Risk
	size := 0
	add := func(s string) {
		r.Lines = append(r.Lines, s)
		size += tokens.Units(s) + 1
	}
	// Hidden lines of a shown line's shape are counted under the last
	// shown line of that shape.
	first := map[string]*flagged{}
	for _, f := range all {
		if f.shown {
			first[f.shape] = f
		}
	}
	like := map[*flagged][]*flagged{}
	for _, f := range all {
		if f.shown {
			continue
		}
		if g := first[f.shape]; g != nil {
			like[g] = append(like[g], f)
			continue
		}
		r.Omitted += f.count
	}
	for _, f := range all {
		if !f.shown {
			continue
		}
		line := f.text
		if f.count > 1 {
			line += countSuffix(f.count)
		}
		add(line)
		if hid := like[f]; len(hid) > 0 {
			add(likeMark(code, f, hid))
		}
	}
	if r.Omitted > 0 {
		add(MarkPrefix + strconv.Itoa(r.Omitted) + " more error or warning " + plural(r.Omitted, "line", "lines") + " not shown")
	}
	return r, size
}

// likeMark counts the lines of f's shape that are not shown and names a
// grep term they all contain, when there is one.
func likeMark(code string, f *flagged, hid []*flagged) string {
	n := 0
	for _, h := range hid {
		n += h.count
	}
	var b strings.Builder
	b.WriteString(MarkPrefix)
	b.WriteString(strconv.Itoa(n))
	b.WriteString(plural(n, " more line like this", " more lines like this"))
	if term := commonTerm(f, hid); term != "" {
		b.WriteString("; recall_folded")
		if code != "" {
			b.WriteString(" code=" + code)
		}
		b.WriteString(" grep=")
		b.WriteString(strconv.Quote(term))
		b.WriteString(plural(n, " shows it", " shows them"))
	}
	return b.String()
}

// commonTerm returns the longest constant run of f's shape (text between
// the placeholders Shape puts for numbers, paths, ids and quoted strings)
// that every hidden line contains, case-insensitively as recall's grep
// matches; "" when no run of at least four characters does.
func commonTerm(f *flagged, hid []*flagged) string {
	runs := strings.FieldsFunc(f.shape, func(r rune) bool { return r == '#' || r == '<' || r == '>' || r == '_' })
	best := ""
	for _, run := range runs {
		run = strings.Trim(run, " \t:;,.'\"`()[]{}")
		if tokens.Units(run) < 4 || tokens.Units(run) <= tokens.Units(best) || run == "path" {
			continue
		}
		low := strings.ToLower(run)
		ok := strings.Contains(strings.ToLower(f.text), low)
		for _, h := range hid {
			ok = ok && strings.Contains(strings.ToLower(h.text), low)
		}
		if ok {
			best = run
		}
	}
	return best
}

// clipFirst is the selection when no flagged line fits whole: the first
// one that may be shown, cut, with a mark that says so and how long it is,
// so a block with a failure never folds to a digest without one. A block
// whose every flagged line reads like the digest's own text gets only the
// count.
func clipFirst(all []*flagged, lim Limits) Risk {
	var r Risk
	var first *flagged
	total := 0
	for _, f := range all {
		total += f.count
		if first == nil && !f.own {
			first = f
		}
	}
	closing := func(n int) string {
		return MarkPrefix + strconv.Itoa(n) + " more error or warning " + plural(n, "line", "lines") + " not shown"
	}
	if first == nil {
		r.Omitted = total
		r.Lines = []string{closing(total)}
		return r
	}
	r.Omitted = total - first.count
	room := lim.MaxChars
	if r.Omitted > 0 {
		room -= tokens.Units(closing(r.Omitted)) + 1
	}
	keep := max(1, min(lim.MaxLineChar, room-tokens.Units(cutMark)-16))
	line := first.text
	if first.units > keep {
		line = tokens.SafeSlice(first.text, keep) + cutMark + strconv.Itoa(keep) + " of " + strconv.Itoa(first.units) + " chars]"
	} else if first.count > 1 {
		line += countSuffix(first.count)
	}
	if first.units > keep {
		r.Omitted += first.count - 1 // the cut line stands for one occurrence
	}
	r.Lines = append(r.Lines, line)
	if r.Omitted > 0 {
		r.Lines = append(r.Lines, closing(r.Omitted))
	}
	return r
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// ToolResult returns the digest of a tool result: the tag, then
// "name → N lines, ~T tok · first line", then its risk lines. tokens is the
// block's full cost.
func ToolResult(code, toolName, text string, isError bool, blockTokens int, lim Limits) string {
	return ToolResultLines(code, toolName, text, isError, blockTokens, lim, risk.Lines(text, risk.Warning))
}

// ToolResultLines is ToolResult with the text's flagged lines precomputed.
func ToolResultLines(code, toolName, text string, isError bool, blockTokens int, lim Limits, lines []risk.Line) string {
	return ToolResultSource(code, toolName, text, isError, blockTokens, lim, lines, Source{})
}

// Source is what the engine knows, when a result folds, about where its
// content came from: which file it showed and whether a later call made it
// stale. The zero value says nothing and gives the plain digest.
type Source struct {
	// Subject names what the call read, as its arguments gave it: a path
	// and any range ("src/x.ts offset=720 limit=50"); "" names nothing.
	Subject string
	// File marks the content of a file, which may have changed since the
	// call read it; the digest says so.
	File bool
	// Later says what a later call did that superseded this result ("read
	// again later", "edited later", "ran again later"); "" when none did.
	Later string
}

// ToolResultSource is ToolResultLines with what is known of the result's
// source: "name subject → N lines, ~T tok, may have changed since; read
// again later · first line". Its risk lines are exactly ToolResultLines'.
func ToolResultSource(code, toolName, text string, isError bool, blockTokens int, lim Limits, lines []risk.Line, src Source) string {
	name := toolName
	if name == "" {
		name = "result"
	}
	var b strings.Builder
	b.WriteString(Tag(code))
	b.WriteByte(' ')
	b.WriteString(name)
	if src.Subject != "" {
		b.WriteByte(' ')
		b.WriteString(src.Subject)
	}
	b.WriteString(" → ")
	if tokens.IsBlank(text) {
		if isError {
			b.WriteString("error")
		} else {
			b.WriteString("empty")
		}
		writeStale(&b, src)
		return b.String()
	}
	if isError {
		b.WriteString("error")
	} else {
		n := LineCount(text)
		b.WriteString(strconv.Itoa(n))
		if n == 1 {
			b.WriteString(" line")
		} else {
			b.WriteString(" lines")
		}
	}
	b.WriteString(", ~")
	b.WriteString(strconv.Itoa(blockTokens))
	b.WriteString(" tok")
	writeStale(&b, src)
	if peek := tokens.FirstLine(text, 60); peek != "" {
		b.WriteString(" · ")
		b.WriteString(peek)
	}
	r := SelectRiskLines(code, lines, lim)
	for _, l := range r.Lines {
		b.WriteByte('\n')
		b.WriteString(l)
	}
	return b.String()
}

// writeStale appends what src says about the content's freshness: that a
// file may have changed since it was read, and what a later call did.
func writeStale(b *strings.Builder, src Source) {
	sep := ", "
	if src.File {
		b.WriteString(", may have changed since")
		sep = "; "
	}
	if src.Later != "" {
		b.WriteString(sep)
		b.WriteString(src.Later)
	}
}

// Thinking returns the digest of a thinking part: "thought · ~T tok · first line".
func Thinking(code, text string) string {
	var b strings.Builder
	b.WriteString(Tag(code))
	b.WriteString(" thought · ~")
	b.WriteString(strconv.Itoa(tokens.Estimate(text)))
	b.WriteString(" tok")
	if gist := tokens.FirstLine(text, 80); gist != "" {
		b.WriteString(" · ")
		b.WriteString(gist)
	}
	return b.String()
}
