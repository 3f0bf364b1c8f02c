package digest

import (
	"strings"

	"github.com/contextfold/contextfold/internal/tokens"
)

// Shown is how a digest shows one line of the block it replaced.
type Shown uint8

// How a line is shown.
const (
	Hidden  Shown = iota
	InGroup       // a counted group's first line, of the same Shape, is shown
	Clipped       // shown as a prefix ending in the ellipsis
	Whole         // shown verbatim
)

// ShowLines reports how dig shows each of lines: a block's distinct
// flagged lines, trimmed, in order of first occurrence (the order the
// digest groups them in). It is the definition of "visible" the bench and
// the invariant tests share.
func ShowLines(dig string, lines []string) []Shown {
	shown := strings.Split(dig, "\n")
	if IsBounded(dig) {
		shown = boundedShown(dig)
	}
	out := make([]Shown, len(lines))
	shapes := make([]string, len(lines))
	for j, line := range lines {
		shapes[j] = Shape(line)
	}
	for j, line := range lines {
		if out[j] = showLine(shown, line, false); out[j] != Hidden {
			continue
		}
		for k := 0; k < j; k++ {
			if shapes[k] == shapes[j] {
				if showLine(shown, lines[k], true) != Hidden {
					out[j] = InGroup
				}
				break
			}
		}
	}
	return out
}

// showLine reports how the digest lines show line; with group set, only a
// line carrying a group count counts.
func showLine(shown []string, line string, group bool) Shown {
	best := Hidden
	for _, d := range shown {
		d, n := GroupCount(d)
		if group && n < 2 {
			continue
		}
		if d == line {
			return Whole
		}
		if p, ok := strings.CutSuffix(d, tokens.Ellipsis); ok && p != "" && strings.HasPrefix(line, p) {
			best = Clipped
		}
	}
	return best
}
