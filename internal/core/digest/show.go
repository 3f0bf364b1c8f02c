package digest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/contextfold/contextfold/internal/core/risk"

	"github.com/contextfold/contextfold/internal/core/tokens"
)

// Shown is how a digest shows one line of the block it replaced.
type Shown uint8

// How a line is shown.
const (
	Hidden  Shown = iota
	InGroup       // not shown, but counted by a "more lines like this" mark under a line of its Shape
	Clipped       // shown cut, with a mark saying so
	Whole         // shown verbatim and whole
)

// ShowLines reports how dig shows each of lines: a block's distinct
// flagged lines, trimmed. It is the definition of "visible" the bench and
// the invariant tests share.
func ShowLines(dig string, lines []string) []Shown {
	shown := strings.Split(dig, "\n")
	if IsBounded(dig) {
		shown = boundedShown(dig)
	}
	whole := make(map[string]bool, len(shown))
	var cut []string             // prefixes of lines shown cut
	grouped := map[string]bool{} // shapes a mark counts
	for j, d := range shown {
		if strings.HasPrefix(d, MarkPrefix) {
			if j > 0 && strings.Contains(d, " like this") {
				prev, _ := GroupCount(shown[j-1])
				grouped[Shape(prev)] = true
			}
			continue
		}
		if i := strings.Index(d, cutMark); i > 0 {
			cut = append(cut, d[:i])
			continue
		}
		line, _ := GroupCount(d)
		whole[line] = true
	}
	out := make([]Shown, len(lines))
	for j, line := range lines {
		switch {
		case whole[line]:
			out[j] = Whole
		case hasPrefixIn(line, cut):
			out[j] = Clipped
		case len(grouped) > 0 && grouped[Shape(line)]:
			out[j] = InGroup
		}
	}
	return out
}

func hasPrefixIn(line string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// VerifyRisk checks that shown, the risk lines of a digest of text, state
// only what is so: every shown line is a whole flagged line of text (or the
// one line marked cut), shown once; every " (×N)" is the exact number of
// identical occurrences of its line; every "N more lines like this" mark is
// the exact number of occurrences, not shown, of lines of the shape of the
// line above it, and its grep term is in each of them; the closing mark
// counts the rest; and every flagged occurrence is shown or counted exactly
// once. The fuzz tests and the bench-set test hold every digest to it.
func VerifyRisk(text string, shown []string) error {
	count := map[string]int{}
	var order []string
	for _, l := range risk.Lines(text, risk.Warning) {
		if tl := tokens.Trim(l.Text); tl != "" {
			if count[tl] == 0 {
				order = append(order, tl)
			}
			count[tl]++
		}
	}
	total := 0
	for _, n := range count {
		total += n
	}
	if len(order) > 0 && len(shown) == 0 {
		return fmt.Errorf("flagged text with no risk line shown")
	}
	isShown := map[string]bool{}
	for _, l := range shown {
		if strings.HasPrefix(l, MarkPrefix) {
			continue
		}
		if line, n := GroupCount(l); n > 1 && count[line] > 0 {
			isShown[line] = true
		} else {
			isShown[l] = true
		}
	}
	accounted := 0
	seen := map[string]bool{}
	for j, l := range shown {
		if rest, ok := strings.CutPrefix(l, MarkPrefix); ok {
			n, err := strconv.Atoi(rest[:max(0, strings.IndexByte(rest, ' '))])
			if err != nil || n < 1 {
				return fmt.Errorf("mark %q has no count", l)
			}
			if strings.Contains(rest, " like this") {
				if j == 0 {
					return fmt.Errorf("mark %q follows no line", l)
				}
				prev, _ := GroupCount(shown[j-1])
				want := 0
				for _, tl := range order {
					if Shape(tl) == Shape(prev) && !isShown[tl] {
						want += count[tl]
					}
				}
				if n != want {
					return fmt.Errorf("mark %q counts %d; the lines of its shape not shown occur %d times", l, n, want)
				}
				if i := strings.Index(rest, `grep="`); i >= 0 {
					end := strings.LastIndex(rest, `"`)
					term, err := strconv.Unquote(rest[i+len("grep=") : end+1])
					if err != nil {
						return fmt.Errorf("mark %q: grep term: %w", l, err)
					}
					for _, tl := range order {
						if Shape(tl) == Shape(prev) && !isShown[tl] && !strings.Contains(strings.ToLower(tl), strings.ToLower(term)) {
							return fmt.Errorf("mark %q: grep term %q misses %q", l, term, tl)
						}
					}
				}
			}
			accounted += n
			continue
		}
		if i := strings.Index(l, cutMark); i >= 0 && j == 0 && count[l] == 0 {
			ok := false
			for _, tl := range order {
				if !ownLike(tl) {
					ok = strings.HasPrefix(tl, l[:i]) && tokens.Units(tl) > tokens.Units(l[:i])
					break
				}
			}
			if !ok {
				return fmt.Errorf("cut line %q is not the first flagged line that may be shown, cut", l)
			}
			accounted++ // one occurrence; the closing mark counts the rest
			continue
		}
		line, n := GroupCount(l)
		if n > 1 && count[line] == 0 || n == 1 {
			line, n = l, 1 // a line that itself ends in a count-like suffix
		}
		if count[line] == 0 {
			return fmt.Errorf("shown line %q is not a whole flagged line of the text", l)
		}
		if ownLike(line) {
			return fmt.Errorf("shown line %q reads like the digest's own marks", l)
		}
		if count[line] != n {
			return fmt.Errorf("line %q: shown with count %d, occurs %d times", l, n, count[line])
		}
		if seen[line] {
			return fmt.Errorf("line %q shown twice", line)
		}
		seen[line] = true
		accounted += n
	}
	if accounted != total {
		return fmt.Errorf("%d of %d flagged occurrences shown or counted: %q", accounted, total, shown)
	}
	return nil
}
