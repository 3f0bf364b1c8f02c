// Package tokens estimates token cost and cuts text for digests.
//
// Every figure is counted in UTF-16 code units, the unit JavaScript strings
// and Pi's own chars/4 estimate use: "é😀" is 3 units, not 6 bytes. Cutting
// never splits a surrogate pair or a UTF-8 sequence. Whitespace means what
// JavaScript's \s and String.prototype.trim mean (NBSP, U+2028 and the BOM
// included), so digests built here match the TypeScript design byte for byte.
package tokens

import (
	"strings"
	"unicode/utf8"
)

// CharsPerToken is the divisor of the estimate.
const CharsPerToken = 4

// BlockOverhead is the structural cost added to every block (role tags,
// delimiters).
const BlockOverhead = 4

// Units returns the length of s in UTF-16 code units. A lone surrogate kept as
// WTF-8 counts one unit; an invalid byte counts one (it decodes to U+FFFD).
func Units(s string) int {
	n := 0
	for i := 0; i < len(s); {
		// Eight ASCII bytes at a time: one unit each.
		for i+8 <= len(s) {
			w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			if w&0x8080808080808080 != 0 {
				break
			}
			n += 8
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			if isWTF8Surrogate(s, i) {
				size = 3
			}
			n++
		case r >= 0x10000:
			n += 2
		default:
			n++
		}
		i += size
	}
	return n
}

func isWTF8Surrogate(s string, i int) bool {
	return i+2 < len(s) && s[i] == 0xED && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2] >= 0x80 && s[i+2] <= 0xBF
}

// Estimate is ceil(units/4): the token estimate of a text.
func Estimate(s string) int {
	return (Units(s) + CharsPerToken - 1) / CharsPerToken
}

// EstimateUnits is Estimate for a known unit count.
func EstimateUnits(units int) int {
	return (units + CharsPerToken - 1) / CharsPerToken
}

// Block is the cost of one block of text: Estimate plus BlockOverhead. It is
// the single token oracle the engine uses (docs/DESIGN.md §8.4).
func Block(s string) int { return Estimate(s) + BlockOverhead }

// SafeSlice returns the longest prefix of s that is at most n UTF-16 units and
// ends on a character boundary: a pair that would be cut is dropped whole.
func SafeSlice(s string, n int) string {
	if n <= 0 {
		return ""
	}
	units := 0
	for i := 0; i < len(s); {
		w, size := char(s, i)
		if units+w > n {
			return s[:i]
		}
		units += w
		i += size
	}
	return s
}

// char returns the UTF-16 width and the byte size of the character at s[i]
// (a lone surrogate kept as WTF-8 is one unit of three bytes).
func char(s string, i int) (w, size int) {
	if s[i] < utf8.RuneSelf {
		return 1, 1
	}
	r, sz := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && sz == 1 && isWTF8Surrogate(s, i):
		return 1, 3
	case r >= 0x10000:
		return 2, sz
	}
	return 1, sz
}

// SafeSuffix returns the longest suffix of s that is at most n UTF-16 units
// and starts on a character boundary: a pair that would be cut is dropped
// whole. It is SafeSlice from the other end, for showing a text's tail.
func SafeSuffix(s string, n int) string {
	if n <= 0 {
		return ""
	}
	skip := Units(s) - n
	if skip <= 0 {
		return s
	}
	// Walk characters from the start until at least skip units are behind:
	// the suffix then starts on a boundary and holds at most n units.
	units := 0
	for i := 0; i < len(s); {
		if units >= skip {
			return s[i:]
		}
		w, size := char(s, i)
		units += w
		i += size
	}
	return ""
}

// IsSpace reports whether r is whitespace for JavaScript's \s and trim().
func IsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x00A0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// Trim removes JavaScript whitespace from both ends of s.
func Trim(s string) string {
	return strings.TrimFunc(s, IsSpace)
}

// TrimEnd removes JavaScript whitespace from the end of s.
func TrimEnd(s string) string {
	return strings.TrimRightFunc(s, IsSpace)
}

// IsBlank reports whether s is empty after Trim.
func IsBlank(s string) bool {
	for _, r := range s {
		if !IsSpace(r) {
			return false
		}
	}
	return true
}

// collapseSpace replaces each run of whitespace with one space and trims.
func collapseSpace(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	pending := false
	for i := 0; i < len(s); {
		c := s[i]
		var r rune
		size := 1
		if c < utf8.RuneSelf {
			r = rune(c)
		} else {
			r, size = utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 && isWTF8Surrogate(s, i) {
				size = 3
			}
		}
		if IsSpace(r) {
			pending = true
			i += size
			continue
		}
		if pending && b.Len() > 0 {
			b.WriteByte(' ')
		}
		pending = false
		b.WriteString(s[i : i+size])
		i += size
	}
	return b.String()
}

// Ellipsis ends every clipped text.
const Ellipsis = "…"

// Clip collapses whitespace runs to one space, trims, and cuts the result to at
// most n units, ending a cut text with "…" (the ellipsis counts toward n).
func Clip(s string, n int) string {
	m := max(1, n)
	t := collapseSpace(s)
	if Units(t) <= m {
		return t
	}
	return TrimEnd(SafeSlice(t, m-1)) + Ellipsis
}

// FirstLine returns the first line of s that is not blank, trimmed and clipped
// to n units.
func FirstLine(s string, n int) string {
	for len(s) > 0 {
		line, rest, _ := strings.Cut(s, "\n")
		if !IsBlank(line) {
			return Clip(Trim(line), n)
		}
		s = rest
	}
	return ""
}

// CountLines counts the lines of s that are not blank.
func CountLines(s string) int {
	n := 0
	for len(s) > 0 {
		line, rest, found := strings.Cut(s, "\n")
		if !IsBlank(line) {
			n++
		}
		if !found {
			break
		}
		s = rest
	}
	return n
}
