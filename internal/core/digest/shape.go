package digest

import (
	"strings"
)

// Shape returns a line with its variable parts replaced by placeholders, so
// that failures repeated across files, lines, test cases or runs group
// together: file paths become "<path>", quoted names "'_'", runs of digits
// and long hexadecimal ids "#". Two lines with the same shape are the same
// failure reported for different things.
func Shape(line string) string {
	var b strings.Builder
	b.Grow(len(line))
	for i := 0; i < len(line); {
		c := line[i]
		if n := pathLen(line, i); n > 0 {
			b.WriteString("<path>")
			i += n
			continue
		}
		if (c == '\'' || c == '"' || c == '`') && (i == 0 || !isWord(line[i-1])) {
			if end := strings.IndexByte(line[i+1:], c); end > 0 && end <= maxQuoted {
				b.WriteByte(c)
				b.WriteByte('_')
				b.WriteByte(c)
				i += end + 2
				continue
			}
		}
		if isWord(c) && (i == 0 || !isWord(line[i-1])) {
			n := wordLen(line, i)
			if w := line[i : i+n]; isHexID(w) {
				b.WriteByte('#')
				i += n
				continue
			}
		}
		if isDigit(c) {
			b.WriteByte('#')
			for i < len(line) && isDigit(line[i]) {
				i++
			}
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

// maxQuoted bounds a quoted span that counts as a name: longer quotes are
// prose or code and stay part of the shape.
const maxQuoted = 80

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isWord(c byte) bool {
	return c == '_' || isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func wordLen(s string, i int) int {
	j := i
	for j < len(s) && isWord(s[j]) {
		j++
	}
	return j - i
}

// isHexID reports a word of 7+ hexadecimal digits holding both a digit and a
// letter: a commit, object or request id.
func isHexID(w string) bool {
	if len(w) < 7 {
		return false
	}
	digit, letter := false, false
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case isDigit(c):
			digit = true
		case c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F':
			letter = true
		default:
			return false
		}
	}
	return digit && letter
}

func isPathByte(c byte) bool {
	return isWord(c) || c == '/' || c == '\\' || c == '.' || c == '-' || c == '~' || c == '@' || c == '+' || c == ':'
}

// pathLen returns the length of the file path starting at i (with any
// trailing ":line:col" or "(line,col)"), or 0. A path is a run of path bytes,
// not starting mid-word, holding a separator or ending in a known source
// extension.
func pathLen(s string, i int) int {
	if i > 0 && isPathByte(s[i-1]) {
		return 0
	}
	j := i
	for j < len(s) && isPathByte(s[j]) {
		j++
	}
	// Trailing colons and dots are punctuation, not path ("in foo.py:").
	for j > i && (s[j-1] == ':' || s[j-1] == '.') {
		j--
	}
	run := s[i:j]
	if len(run) < 3 {
		return 0
	}
	// A URL scheme or a drive letter is part of the path; a bare "a:b" is not.
	sep := strings.ContainsAny(run, "/\\")
	if !sep && !hasSourceExt(run) {
		return 0
	}
	// "(12,5)" after the path is its position.
	if j < len(s) && s[j] == '(' {
		if k := strings.IndexByte(s[j:], ')'); k > 1 && k < 16 && onlyDigitsAnd(s[j+1:j+k], ',') {
			j += k + 1
		}
	}
	return j - i
}

func onlyDigitsAnd(s string, extra byte) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) && s[i] != extra && s[i] != ' ' {
			return false
		}
	}
	return true
}

// hasSourceExt reports whether the run (up to any ":line" suffix) ends in a
// file extension common in tool output.
func hasSourceExt(run string) bool {
	if k := strings.IndexByte(run, ':'); k >= 0 {
		run = run[:k]
	}
	dot := strings.LastIndexByte(run, '.')
	if dot <= 0 || dot == len(run)-1 {
		return false
	}
	_, ok := sourceExts[strings.ToLower(run[dot+1:])]
	return ok
}

var sourceExts = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, e := range strings.Fields(`py pyi go ts tsx js jsx mjs cjs json rs c h cc cpp hpp cxx java kt kts scala rb php cs
		swift mm md txt rst yaml yml toml ini cfg conf sh bash zsh lock html htm css scss less vue svelte sql xml
		gradle properties mod sum proto lua pl jl ex exs erl hs ml dart zig nim log out err diff patch ipynb`) {
		m[e] = struct{}{}
	}
	return m
}()
