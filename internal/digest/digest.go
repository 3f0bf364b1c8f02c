// Package digest writes what a folded block becomes: a {#code FOLDED} tag and
// a short deterministic body that keeps the block's error lines verbatim.
//
// The code is a pure function of the block's durable id (FNV-1a over its
// UTF-16 code units, mod 36^6, six base-36 digits), so the same block has the
// same code in every session and every process. The engine is the only author
// of the tag: text a policy supplies is stripped of anything tag-shaped before
// the authoritative tag is prepended (DESIGN §8 invariant 2).
package digest

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/risk"
	"github.com/contextfold/contextfold/internal/tokens"
)

// codeSpace is 36^6: every code fits six base-36 digits.
const codeSpace = 36 * 36 * 36 * 36 * 36 * 36

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

// Authored prepends the authoritative tag for id to a body, after stripping
// any tag the body carries.
func Authored(id, body string) string {
	body = StripTags(body)
	if body == "" {
		return Tag(Code(id))
	}
	return Tag(Code(id)) + " " + body
}

// Limits bound the verbatim risk lines a tool-result digest keeps.
type Limits struct {
	MaxLines    int // lines kept
	MaxChars    int // UTF-16 units across kept lines, newline included
	MaxLineChar int // units of one kept line before it is clipped
	// MinClip is the shortest a kept line is clipped to so that more
	// distinct lines fit (never more than MaxLineChar).
	MinClip int
}

// DefaultLimits keep DESIGN's 400-character budget and 200-character line
// cap; lines are clipped down to 64 units and up to 10 kept, so that more
// distinct failures fit in the same room.
var DefaultLimits = Limits{MaxLines: 10, MaxChars: 400, MaxLineChar: 200, MinClip: 64}

// Risk is the selection of verbatim risk lines for one text.
type Risk struct {
	// Lines are the kept lines, errors first, in order of first occurrence.
	// A line that stands for a group of same-shape lines ends in " (×N)",
	// N counting every occurrence in the group.
	Lines   []string
	Omitted int // distinct flagged lines that did not fit, in no kept group
}

// SelectRisk picks the flagged lines of text within the caps: lines of the
// same Shape group into one, shown as the group's first line verbatim
// (trimmed, clipped to MaxLineChar) with its count; errors before warnings,
// first occurrence first. The first group is always kept, so a block with a
// failure never folds to a digest without one.
func SelectRisk(text string, lim Limits) Risk {
	return SelectRiskLines(risk.Lines(text, risk.Warning), lim)
}

// countSuffix marks a line standing for a group: "line (×3)".
func countSuffix(n int) string { return " (×" + strconv.Itoa(n) + ")" }

// GroupCount splits a digest line into the verbatim line and its group's
// count (1 when the line stands alone).
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

// SelectRiskLines is SelectRisk over lines already classified (at least
// Warning), so a caller that needs them elsewhere scans the text once.
func SelectRiskLines(lines []risk.Line, lim Limits) Risk {
	if len(lines) == 0 {
		return Risk{}
	}
	type group struct {
		text     string
		units    int // UTF-16 units of text
		suffix   int // units of the count suffix
		count    int // occurrences
		distinct int // distinct trimmed lines
	}
	var errs, warns []*group
	byShape := make(map[string]*group, len(lines))
	seen := make(map[string]bool, len(lines))
	for _, l := range lines {
		t := tokens.Trim(l.Text)
		if t == "" {
			continue
		}
		key := Shape(t)
		if l.Class != risk.Error {
			key = "w\x00" + key
		}
		g := byShape[key]
		if g == nil {
			g = &group{text: t, units: tokens.Units(t)}
			byShape[key] = g
			if l.Class == risk.Error {
				errs = append(errs, g)
			} else {
				warns = append(warns, g)
			}
		}
		g.count++
		g.suffix = 0
		if g.count > 1 {
			g.suffix = tokens.Units(countSuffix(g.count))
		}
		if !seen[t] {
			seen[t] = true
			g.distinct++
		}
	}
	all := append(errs, warns...)
	// Fit as many groups as the caps allow, each clipped no shorter than
	// MinClip, then share the room left evenly: more distinct failures at
	// a shorter clip beat fewer at full length.
	minClip := lim.MinClip
	if minClip <= 0 || minClip > lim.MaxLineChar {
		minClip = lim.MaxLineChar // no shared clipping
	}
	minClip = max(minClip, 2)
	cost := func(g *group, clip int) int {
		u := min(g.units, clip)
		if u < g.units {
			u = clip // the clipped text plus its ellipsis
		}
		return u + g.suffix + 1
	}
	var kept []*group
	chars := 0
	for _, g := range all {
		c := cost(g, minClip)
		if len(kept) >= lim.MaxLines || (len(kept) > 0 && chars+c > lim.MaxChars+1) {
			continue
		}
		kept = append(kept, g)
		chars += c
	}
	clip := minClip
	for lo, hi := minClip, lim.MaxLineChar; lo <= hi; {
		mid := (lo + hi) / 2
		total := 0
		for _, g := range kept {
			total += cost(g, mid)
		}
		if total <= lim.MaxChars+1 {
			clip, lo = mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	var r Risk
	in := make(map[*group]bool, len(kept))
	for _, g := range kept {
		in[g] = true
		t := g.text
		if g.units > clip {
			t = tokens.SafeSlice(t, clip-1) + tokens.Ellipsis
		}
		if g.count > 1 {
			t += countSuffix(g.count)
		}
		r.Lines = append(r.Lines, t)
	}
	for _, g := range all {
		if !in[g] {
			r.Omitted += g.distinct
		}
	}
	return r
}

// ToolResult returns the digest of a tool result: the tag, then
// "name → N lines, ~T tok · first line", then its risk lines. tokens is the
// block's full cost.
func ToolResult(id, toolName, text string, isError bool, blockTokens int, lim Limits) string {
	return ToolResultLines(id, toolName, text, isError, blockTokens, lim, risk.Lines(text, risk.Warning))
}

// ToolResultLines is ToolResult with the text's flagged lines precomputed.
func ToolResultLines(id, toolName, text string, isError bool, blockTokens int, lim Limits, lines []risk.Line) string {
	name := toolName
	if name == "" {
		name = "result"
	}
	var b strings.Builder
	b.WriteString(Tag(Code(id)))
	b.WriteByte(' ')
	b.WriteString(name)
	b.WriteString(" → ")
	if tokens.IsBlank(text) {
		if isError {
			b.WriteString("error")
		} else {
			b.WriteString("empty")
		}
		return b.String()
	}
	if isError {
		b.WriteString("error")
	} else {
		n := tokens.CountLines(text)
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
	if peek := tokens.FirstLine(text, 60); peek != "" {
		b.WriteString(" · ")
		b.WriteString(peek)
	}
	r := SelectRiskLines(lines, lim)
	for _, l := range r.Lines {
		b.WriteByte('\n')
		b.WriteString(l)
	}
	if r.Omitted > 0 {
		b.WriteString("\n… +")
		b.WriteString(strconv.Itoa(r.Omitted))
		b.WriteString(" more flagged lines")
	}
	return b.String()
}

// Thinking returns the digest of a thinking part: "thought · ~T tok · first line".
func Thinking(id, text string) string {
	var b strings.Builder
	b.WriteString(Tag(Code(id)))
	b.WriteString(" thought · ~")
	b.WriteString(strconv.Itoa(tokens.Estimate(text)))
	b.WriteString(" tok")
	if gist := tokens.FirstLine(text, 80); gist != "" {
		b.WriteString(" · ")
		b.WriteString(gist)
	}
	return b.String()
}
