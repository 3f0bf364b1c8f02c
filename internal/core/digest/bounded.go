package digest

import (
	"strconv"
	"strings"

	"github.com/contextfold/contextfold/internal/core/risk"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

// A bounded view is what a tool result too large to send whole becomes on
// its first delivery (the engine decides when; see engine.oversize). Unlike
// a digest it is read in place of the result the model has not seen yet, so
// it shows as much of the original as its size cap allows, and only ever
// whole lines of it:
//
//	{#code FOLDED} <header: what the result is and what is shown>
//	<the first lines, verbatim>
//	… lines A-B not shown; …                   (a mark)
//	<line>: <each distinct error line of A-B, verbatim and whole>
//	… lines C-N: …                             (a mark)
//	<the last lines, verbatim>
//
// Every mark starts with the ellipsis and states exact line numbers, which
// are those recall_folded's lines= argument reads (1-based, SplitLines).
// A result with no line break is the one case cut by characters, and the
// header says so.

// MinBoundedTokens is the smallest size cap BoundedLines honours: below it
// the header and marks alone would not fit.
const MinBoundedTokens = 256

// boundedNameChars bounds the tool name in the header.
const boundedNameChars = 40

// Bounded returns the bounded view of a tool result that must not be sent
// whole: at most maxTokens (tokens.Block) when maxTokens ≥ MinBoundedTokens,
// else at most MinBoundedTokens. blockTokens is the result's full cost.
func Bounded(code, toolName, text string, isError bool, blockTokens, maxTokens int) string {
	return BoundedLines(code, toolName, text, isError, blockTokens, maxTokens, risk.Lines(text, risk.Error))
}

// BoundedLines is Bounded with the text's flagged lines precomputed (any
// class; only errors are used), so a caller that classified the text for its
// digest does not scan a large result twice.
func BoundedLines(code, toolName, text string, isError bool, blockTokens, maxTokens int, flagged []risk.Line) string {
	maxTokens = max(maxTokens, MinBoundedTokens)
	// tokens.Block is ceil(units/4) + BlockOverhead: this many units fit.
	room := (maxTokens - tokens.BlockOverhead) * tokens.CharsPerToken
	in := boundedInput{
		code:   code,
		tag:    Tag(code),
		name:   toolName,
		text:   text,
		tokens: blockTokens,
		error:  isError,
		lines:  SplitLines(text),
	}
	if in.name == "" {
		in.name = "result"
	}
	in.name = tokens.Clip(in.name, boundedNameChars)
	in.errs = errorEntries(flagged, len(in.lines))
	// Plan the body with room for the header and marks set aside, then
	// check the rendered whole: the header's numbers are only known after
	// planning. Each retry sets aside what the last one overran.
	reserve := 320 + tokens.Units(in.name)
	for range 8 {
		p := in.plan(room - reserve)
		if len(in.lines) == 1 && !p.everyLineSeen {
			// One line too long to show whole: the one case cut by characters.
			return in.cutByChars(room)
		}
		v := in.render(p)
		over := tokens.Units(v) - room
		if over <= 0 {
			return v
		}
		reserve += over + 16
	}
	// Unreachable in practice (the header is far below MinBoundedTokens);
	// showing no line at all always fits.
	return in.render(in.plan(0))
}

// boundedMarker is in the header of every bounded view and of no digest.
const boundedMarker = ", too large to send whole"

// IsBounded reports whether a folded block's text is a bounded view.
func IsBounded(text string) bool {
	header, _, _ := strings.Cut(text, "\n")
	return strings.HasPrefix(header, "{#") && strings.Contains(header, boundedMarker)
}

// boundedShown returns the lines a bounded view shows of its original,
// trimmed as ShowLines compares them: the head and tail lines, and the
// listed error lines without their line-number prefix.
func boundedShown(view string) []string {
	lines := strings.Split(view, "\n")[1:]
	var out []string
	listing := false
	for _, l := range lines {
		if strings.HasPrefix(l, "… ") {
			// A mark: the first opens the error list, the tail mark closes it.
			listing = strings.HasSuffix(l, ":") && strings.Contains(l, " not shown") || listing && !strings.HasSuffix(l, ":")
			continue
		}
		if listing {
			if _, body, ok := strings.Cut(l, ": "); ok {
				l = body
			}
		}
		out = append(out, tokens.Trim(l))
	}
	return out
}

// boundedInput is one result being bounded.
type boundedInput struct {
	code, tag, name string
	text            string
	tokens          int
	error           bool
	lines           []string
	errs            []errEntry
}

// errEntry is one distinct error line: its text and every 0-based line
// index it occurs at, first occurrence first.
type errEntry struct {
	text string
	at   []int
}

// boundedPlan says what a view shows: lines [0, head) and [tail, n), and
// the error entries listed between them; omitted are the entries shown
// nowhere.
type boundedPlan struct {
	head, tail    int
	listed        []*errEntry
	omitted       []*errEntry
	middleErrors  bool // some error line lies in [head, tail)
	everyLineSeen bool // head and tail meet: the whole text is shown
}

// errorEntries groups the error lines among flagged by exact text, in order
// of first occurrence. Only identical lines share an entry: a count never
// stands for lines that differ.
func errorEntries(flagged []risk.Line, n int) []errEntry {
	var out []errEntry
	index := map[string]int{}
	for _, l := range flagged {
		if l.Class != risk.Error || l.Index >= n {
			continue
		}
		k, ok := index[l.Text]
		if !ok {
			k = len(out)
			index[l.Text] = k
			out = append(out, errEntry{text: l.Text})
		}
		out[k].at = append(out[k].at, l.Index)
	}
	return out
}

// lineCost is what a shown line takes: its units and its newline.
func lineCost(s string) int { return tokens.Units(s) + 1 }

// listedLine is how an error line appears in the list: its 1-based line
// number, how many more times the identical line occurs, and the line.
func listedLine(e *errEntry) string {
	p := strconv.Itoa(e.at[0] + 1)
	if more := len(e.at) - 1; more > 0 {
		p += " (and " + strconv.Itoa(more) + " more " + plural(more, "time", "times") + ")"
	}
	return p + ": " + e.text
}

// plan fits the body into body units: a quarter each for the first and
// last lines, then the error lines between them in order of first
// occurrence (each whole or not at all), then whatever is left extends the
// head and the tail.
func (in *boundedInput) plan(body int) boundedPlan {
	n := len(in.lines)
	p := boundedPlan{tail: n}
	headUsed, tailUsed := 0, 0
	growHead := func(limit int) {
		for p.head < p.tail && headUsed+lineCost(in.lines[p.head]) <= limit {
			headUsed += lineCost(in.lines[p.head])
			p.head++
		}
	}
	growTail := func(limit int) {
		for p.tail > p.head && tailUsed+lineCost(in.lines[p.tail-1]) <= limit {
			tailUsed += lineCost(in.lines[p.tail-1])
			p.tail--
		}
	}
	if body <= 0 {
		return in.classify(p, 0)
	}
	growHead(body / 4)
	growTail(body / 4)
	// Error lines first: a failure buried in the middle is what the model
	// most needs to see (docs/DESIGN.md §8.6).
	p = in.classify(p, body-headUsed-tailUsed)
	errUsed := 0
	for _, e := range p.listed {
		errUsed += lineCost(listedLine(e))
	}
	left := body - headUsed - tailUsed - errUsed
	growHead(headUsed + left/2)
	left = body - headUsed - tailUsed - errUsed
	growTail(tailUsed + left)
	left = body - headUsed - tailUsed - errUsed
	growHead(headUsed + left)
	// The head and tail grew over some listed lines: those now show whole
	// in place, so re-list what is still in the middle, within what the
	// first listing took.
	return in.classify(p, errUsed)
}

// classify lists, within room units, the error entries that occur only
// between head and tail, in order of first occurrence; an entry with any
// occurrence in the head or tail is visible there already. An entry too long
// for the room left is skipped, not cut, and later ones still may fit.
func (in *boundedInput) classify(p boundedPlan, room int) boundedPlan {
	p.listed, p.omitted, p.middleErrors = nil, nil, false
	p.everyLineSeen = p.head >= p.tail
	used := 0
	for k := range in.errs {
		e := &in.errs[k]
		inMiddle, visible := false, false
		for _, i := range e.at {
			if i >= p.head && i < p.tail {
				inMiddle = true
			} else {
				visible = true
			}
		}
		if inMiddle {
			p.middleErrors = true
		}
		if visible {
			continue
		}
		if c := lineCost(listedLine(e)); used+c <= room {
			used += c
			p.listed = append(p.listed, e)
			continue
		}
		p.omitted = append(p.omitted, e)
	}
	return p
}

// render writes the view a plan describes.
func (in *boundedInput) render(p boundedPlan) string {
	n := len(in.lines)
	var b strings.Builder
	b.WriteString(in.tag)
	b.WriteByte(' ')
	b.WriteString(in.name)
	b.WriteString(" → ")
	if in.error {
		b.WriteString("error, ")
	}
	b.WriteString(strconv.Itoa(n))
	b.WriteString(plural(n, " line", " lines"))
	b.WriteString(", ~")
	b.WriteString(strconv.Itoa(in.tokens))
	b.WriteString(" tok")
	if p.everyLineSeen {
		b.WriteString(", shown whole")
		for _, l := range in.lines {
			b.WriteByte('\n')
			b.WriteString(l)
		}
		return b.String()
	}
	code := in.code
	b.WriteString(boundedMarker + ": showing ")
	var parts []string
	if p.head > 0 {
		parts = append(parts, "lines 1-"+strconv.Itoa(p.head))
	}
	if len(p.listed) > 0 || len(p.omitted) > 0 {
		s := "the " + strconv.Itoa(len(p.listed))
		if len(p.omitted) > 0 {
			s = strconv.Itoa(len(p.listed)) + " of the " + strconv.Itoa(len(p.listed)+len(p.omitted))
		}
		s += plural(len(p.listed)+len(p.omitted), " distinct error line", " distinct error lines") +
			" among lines " + strconv.Itoa(p.head+1) + "-" + strconv.Itoa(p.tail)
		parts = append(parts, s)
	}
	if p.tail < n {
		parts = append(parts, "lines "+strconv.Itoa(p.tail+1)+"-"+strconv.Itoa(n))
	}
	switch len(parts) {
	case 0:
		b.WriteString("no line whole (each is too long)")
	case 1:
		b.WriteString(parts[0])
	case 2:
		b.WriteString(parts[0] + " and " + parts[1])
	default:
		b.WriteString(strings.Join(parts[:len(parts)-1], ", "))
		b.WriteString(", and ")
		b.WriteString(parts[len(parts)-1])
	}
	b.WriteString("; recall_folded code=")
	b.WriteString(code)
	b.WriteString(" lines=A-B (or grep=<term>) reads the rest")
	for _, l := range in.lines[:p.head] {
		b.WriteByte('\n')
		b.WriteString(l)
	}
	b.WriteString("\n… lines ")
	b.WriteString(strconv.Itoa(p.head + 1))
	b.WriteByte('-')
	b.WriteString(strconv.Itoa(p.tail))
	b.WriteString(" not shown")
	switch {
	case len(p.listed) > 0:
		b.WriteString("; their error lines, as \"line: text\", each distinct line once:")
	case len(p.omitted) > 0:
		b.WriteString("; none of their error lines fits here")
	case p.middleErrors:
		b.WriteString("; each error line among them is identical to one shown here")
	default:
		b.WriteString("; no error line among them")
	}
	for _, e := range p.listed {
		b.WriteByte('\n')
		b.WriteString(listedLine(e))
	}
	if len(p.omitted) > 0 {
		b.WriteByte('\n')
		b.WriteString(omittedNote(code, p.omitted))
	}
	if p.tail < n {
		b.WriteString("\n… lines ")
		b.WriteString(strconv.Itoa(p.tail + 1))
		b.WriteByte('-')
		b.WriteString(strconv.Itoa(n))
		b.WriteByte(':')
		for _, l := range in.lines[p.tail:] {
			b.WriteByte('\n')
			b.WriteString(l)
		}
	}
	return b.String()
}

// grepTerms are the recall grep terms offered for error lines that did not
// fit, most general first. recall's grep is a case-insensitive substring
// match, so "fail" also finds "failed" and "FAILURE".
var grepTerms = []string{
	"error", "fail", "fatal", "panic", "exception", "traceback", "abort", "denied", "refused",
	"cannot", "unable", "invalid", "crash", "segmentation", "segfault", "killed", "assert",
	"conflict", "unauthorized", "forbidden", "unhandled", "uncaught", "oom", "err",
	"✗", "✘", "❌", "💥",
}

// maxGrepHints bounds the grep terms an omitted-errors note offers.
const maxGrepHints = 3

// omittedNote says exactly how many distinct error lines are not shown and
// which recall greps match them: up to maxGrepHints terms, chosen greedily
// by how many of the not-yet-matched lines each matches, and the line
// numbers of any that none matches.
func omittedNote(code string, omitted []*errEntry) string {
	var b strings.Builder
	n := len(omitted)
	b.WriteString("… ")
	b.WriteString(strconv.Itoa(n))
	b.WriteString(plural(n, " more distinct error line", " more distinct error lines"))
	b.WriteString(" not shown (first at line ")
	b.WriteString(strconv.Itoa(omitted[0].at[0] + 1))
	b.WriteString(")")
	lowered := make([]string, n)
	for i, e := range omitted {
		lowered[i] = strings.ToLower(e.text)
	}
	matched := make([]bool, n)
	left := n
	var hints []string
	for len(hints) < maxGrepHints && left > 0 {
		best, bestN := "", 0
		for _, t := range grepTerms {
			c := 0
			for i := range lowered {
				if !matched[i] && strings.Contains(lowered[i], t) {
					c++
				}
			}
			if c > bestN {
				best, bestN = t, c
			}
		}
		if bestN == 0 {
			break
		}
		for i := range lowered {
			if !matched[i] && strings.Contains(lowered[i], best) {
				matched[i] = true
			}
		}
		left -= bestN
		h := "grep=" + best + " matches "
		switch {
		case len(hints) > 0:
			h += strconv.Itoa(bestN) + " more"
		case bestN == n:
			h += plural(n, "it", "all of them")
		default:
			h += strconv.Itoa(bestN) + " of them"
		}
		hints = append(hints, h)
	}
	if len(hints) > 0 {
		b.WriteString(": recall_folded code=")
		b.WriteString(code)
		b.WriteByte(' ')
		b.WriteString(strings.Join(hints, ", "))
	}
	if left > 0 {
		var at []string
		for i, e := range omitted {
			if !matched[i] && len(at) < 5 {
				at = append(at, strconv.Itoa(e.at[0]+1))
			}
		}
		if len(hints) > 0 {
			b.WriteString("; ")
		} else {
			b.WriteString(": ")
		}
		b.WriteString(strconv.Itoa(left))
		if len(hints) > 0 {
			b.WriteString(" others")
		}
		b.WriteString(" first at lines ")
		b.WriteString(strings.Join(at, ", "))
		if left > len(at) {
			b.WriteString(", …")
		}
		b.WriteString(" (read with lines=A-B)")
	}
	return b.String()
}

// cutByChars bounds a result that is one line too long for any line-based
// view: its first and last characters, the one place a line is cut, and the
// header says so. Cuts never split a surrogate pair.
func (in *boundedInput) cutByChars(room int) string {
	line := in.lines[0]
	total := tokens.Units(line)
	code := in.code
	flagged := len(in.errs) > 0
	header := func(headN, tailFrom int) string {
		s := in.tag + " " + in.name + " → "
		if in.error {
			s += "error, "
		}
		s += "1 line of " + strconv.Itoa(total) + " chars, ~" + strconv.Itoa(in.tokens) +
			" tok" + boundedMarker + " and without line breaks, so cut by characters: showing chars 1-" +
			strconv.Itoa(headN) + " and " + strconv.Itoa(tailFrom) + "-" + strconv.Itoa(total)
		if flagged {
			s += " (the line is an error line)"
		}
		return s + "; recall_folded code=" + code + " grep=<term> reads inside it"
	}
	mark := func(headN, tailFrom int) string {
		return "… chars " + strconv.Itoa(headN+1) + "-" + strconv.Itoa(tailFrom-1) + " not shown …"
	}
	// Set aside the header and mark with the widest numbers they can hold.
	reserve := tokens.Units(header(total, total)) + tokens.Units(mark(total, total)) + 3
	body := max(0, room-reserve)
	head := tokens.SafeSlice(line, body/2)
	tail := tokens.SafeSuffix(line, body-tokens.Units(head))
	headN := tokens.Units(head)
	tailFrom := total - tokens.Units(tail) + 1
	return header(headN, tailFrom) + "\n" + head + "\n" + mark(headN, tailFrom) + "\n" + tail
}
