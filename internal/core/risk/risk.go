// Package risk is the error lexicon: it decides which lines of a tool output
// carry a failure or warning signal that must stay visible when the output is
// folded (docs/DESIGN.md §8.6).
//
// The lexicon is deliberately broad and any-case, because test runners and
// build tools print failures in every spelling and often with isError=false:
// "3 failed", "fatal:", "npm ERR!", "Segmentation fault", "Permission denied",
// "✗", tracebacks, non-zero exit codes. It is a hand-written word scanner with
// no allocations (about 150 MB/s), run once per block. Zero counts ("0 failed",
// "no errors", "errors: 0") are not failures and are not flagged, and
// neither are lines of source code that merely name a failure ("raise
// ValueError(", "} catch (error) {", "# raise an error when …"), which file
// listings are full of and which would crowd real failures out of a digest.
package risk

import (
	"strings"
	"unicode/utf8"
)

// Class is how much a line matters when its block folds.
type Class uint8

const (
	// None marks an ordinary line.
	None Class = iota
	// Warning marks a warning or deprecation.
	Warning
	// Error marks a failure signal.
	Error
)

func (c Class) String() string {
	switch c {
	case Error:
		return "error"
	case Warning:
		return "warning"
	}
	return "none"
}

// errorWords are whole words (compared lowercase) that signal a failure.
var errorWords = map[string]bool{
	"error": true, "errors": true, "errored": true, "erroring": true,
	"fail": true, "fails": true, "failed": true, "failing": true, "failure": true, "failures": true,
	"exception": true, "exceptions": true, "traceback": true,
	"panic": true, "panicked": true, "panics": true,
	"fatal": true, "abort": true, "aborted": true, "aborting": true,
	"segfault": true, "segmentation": true, "crash": true, "crashed": true,
	"denied": true, "refused": true, "unauthorized": true, "forbidden": true,
	"assertion": true, "unhandled": true, "uncaught": true,
	"cannot": true, "unable": true, "killed": true, "oom": true,
	"conflict": true, "invalid": true,
}

// exactErrorWords are case-sensitive words that signal a failure only in the
// spelling given (an upper-case log level, errno names).
var exactErrorWords = map[string]bool{
	"ERR": true, "ENOENT": true, "EACCES": true, "EPERM": true, "ECONNREFUSED": true,
	"ECONNRESET": true, "EADDRINUSE": true, "ETIMEDOUT": true, "EEXIST": true, "EISDIR": true,
	"ENOTDIR": true, "ENOSPC": true, "EPIPE": true, "ENOMEM": true,
}

// warningWords are whole words (lowercase) that signal a warning.
var warningWords = map[string]bool{
	"warning": true, "warnings": true, "warn": true, "deprecated": true, "deprecation": true,
}

// listedShapes[n] has bit c-'a' set when a word of errorWords, warningWords
// or exactErrorWords has n bytes and starts with letter c (either case): most
// words of an output are none of those, and are told so without hashing.
var listedShapes = func() (t [25]uint32) {
	for _, m := range []map[string]bool{errorWords, warningWords, exactErrorWords} {
		for w := range m {
			c := w[0] | 0x20
			if len(w) >= len(t) || c < 'a' || c > 'z' {
				panic("risk: listed word " + w + " outside listedShapes")
			}
			t[len(w)] |= 1 << (c - 'a')
		}
	}
	return t
}()

// mayBeListed reports whether w could be a key of the word lists.
func mayBeListed(w string) bool {
	c := w[0] | 0x20
	return len(w) < len(listedShapes) && c >= 'a' && c <= 'z' && listedShapes[len(w)]&(1<<(c-'a')) != 0
}

// zeroWords before a failure word cancel it: "no errors", "0 failed".
var zeroWords = map[string]bool{"0": true, "no": true, "zero": true, "without": true, "none": true}

// errorSymbols signal a failure wherever they appear.
var errorSymbols = []string{"✗", "✘", "❌", "💥"}

type word struct {
	s          string // the word as written
	start, end int
}

func isWordByte(c byte) bool { return wordByte[c] }

// wordByte is [A-Za-z0-9_] as a table: classify asks for every byte.
var wordByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	return t
}()

// Classify returns the class of one line.
func Classify(line string) Class {
	var buf [32]word
	return classify(line, buf[:0])
}

// classify flags a line by its words, then clears a flagged line that is
// source code: a file listing's "raise ValueError(" or "} catch (error) {"
// reports no failure, and would crowd real ones out of a digest.
func classify(line string, words []word) Class {
	c := classifyWords(line, words)
	if c != None && sourceLine(line) {
		return None
	}
	return c
}

func classifyWords(line string, words []word) Class {
	if line == "" {
		return None
	}
	nonASCII := false
	for i := 0; i < len(line); {
		if !isWordByte(line[i]) {
			if line[i] >= utf8.RuneSelf {
				nonASCII = true
			}
			i++
			continue
		}
		j := i + 1
		for j < len(line) && isWordByte(line[j]) {
			j++
		}
		words = append(words, word{line[i:j], i, j})
		i = j
	}
	if nonASCII {
		for _, s := range errorSymbols {
			if strings.Contains(line, s) {
				return Error
			}
		}
	}
	warn := false
	var lowbuf [24]byte
	for k, w := range words {
		if len(w.s) < 2 || len(w.s) > 24 {
			continue
		}
		cand := mayBeListed(w.s)
		if cand && exactErrorWords[w.s] {
			return Error
		}
		lw := lower(lowbuf[:0], w.s)
		switch {
		case cand && errorWords[string(lw)]:
			if !zeroed(line, words, k) && !codeIdent(line, w) {
				return Error
			}
		case cand && warningWords[string(lw)]:
			warn = true
		case compound(w.s, "Error") || compound(w.s, "Exception") || compound(w.s, "Fault"):
			return Error
		case compound(w.s, "Warning"):
			warn = true
		case string(lw) == "not" && next(words, k, "found"):
			return Error
		case string(lw) == "no" && next(words, k, "such"):
			return Error
		case string(lw) == "could" && next(words, k, "not"):
			return Error
		case string(lw) == "couldn" || string(lw) == "can" && next(words, k, "t"):
			return Error
		case string(lw) == "timed" && next(words, k, "out"):
			return Error
		case string(lw) == "core" && next(words, k, "dumped"):
			return Error
		case string(lw) == "out" && next(words, k, "of") && k+2 < len(words) && strings.EqualFold(words[k+2].s, "memory"):
			return Error
		case string(lw) == "non" && next(words, k, "zero") || string(lw) == "nonzero":
			return Error
		case isExitWord(string(lw)) && nonZeroAfter(line, w.end):
			return Error
		}
	}
	if warn {
		return Warning
	}
	return None
}

func lower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// compound reports a PascalCase name ending in suffix, such as ImportError or
// RuntimeException; "onError" and "stderr" do not count.
func compound(w, suffix string) bool {
	if len(w) <= len(suffix) || !strings.HasSuffix(w, suffix) {
		return false
	}
	return w[0] >= 'A' && w[0] <= 'Z'
}

func next(words []word, k int, want string) bool {
	return k+1 < len(words) && strings.EqualFold(words[k+1].s, want)
}

// zeroed reports a failure word that states a zero count: "0 failed",
// "no errors", "errors: 0", "failures=0".
func zeroed(line string, words []word, k int) bool {
	if k > 0 && zeroWords[strings.ToLower(words[k-1].s)] {
		return true
	}
	if k+1 < len(words) && words[k+1].s == "0" {
		between := line[words[k].end:words[k+1].start]
		if strings.Trim(between, " \t:=") == "" {
			return true
		}
	}
	return false
}

// codeIdent reports a lower-case failure word used as a name in source code:
// "errors.append(", "self.failures", "error = None", "fail()". Such lines come
// from file listings, not from failures.
func codeIdent(line string, w word) bool {
	if w.s[0] < 'a' || w.s[0] > 'z' {
		return false
	}
	if w.start > 0 && line[w.start-1] == '.' {
		return true
	}
	rest := line[w.end:]
	if len(rest) > 0 && rest[0] == '(' {
		return true
	}
	// "errors[0]" indexes a name; "error[E0308]" is rustc's error code.
	if len(rest) > 1 && rest[0] == '[' && !(rest[1] >= 'A' && rest[1] <= 'Z') {
		return true
	}
	if len(rest) > 1 && rest[0] == '.' && isWordByte(rest[1]) {
		return true
	}
	r := strings.TrimLeft(rest, " ")
	return len(r) > 1 && r[0] == '=' && r[1] != '='
}

func isExitWord(w string) bool {
	switch w {
	case "exit", "exited", "returncode", "exitcode", "exit_code", "exitstatus":
		return true
	}
	return false
}

// nonZeroAfter reports a non-zero integer shortly after an exit word: "exit code
// 2", "exited with code 1", "exit status 127", "returncode=1".
func nonZeroAfter(line string, i int) bool {
	const window = 24
	end := min(len(line), i+window)
	for j := i; j < end; j++ {
		c := line[j]
		if c >= '0' && c <= '9' {
			if line[j-1] == '.' || isWordByte(line[j-1]) {
				return false // part of a name or a version, not a count
			}
			k := j
			for k < len(line) && line[k] >= '0' && line[k] <= '9' {
				k++
			}
			return strings.TrimLeft(line[j:k], "0") != ""
		}
	}
	return false
}

// Line is one classified line of a text.
type Line struct {
	Text  string // the line without its trailing newline
	Class Class
	Index int // 0-based line number
}

// Lines returns every line of text whose class is at least min, in order.
func Lines(text string, min Class) []Line {
	var out []Line
	var buf [64]word
	idx := 0
	for len(text) > 0 {
		line, rest, found := strings.Cut(text, "\n")
		if c := classify(line, buf[:0]); c >= min && c != None {
			out = append(out, Line{Text: line, Class: c, Index: idx})
		}
		idx++
		if !found {
			break
		}
		text = rest
	}
	return out
}

// Has reports whether any line of text is at least min.
func Has(text string, min Class) bool {
	var buf [64]word
	for len(text) > 0 {
		line, rest, found := strings.Cut(text, "\n")
		if c := classify(line, buf[:0]); c >= min && c != None {
			return true
		}
		if !found {
			break
		}
		text = rest
	}
	return false
}

// codeKeywords start a line of source code when followed by a space, "(",
// ":" or the end of the line. They are lower case, as the languages spell
// them; prose and log lines start upper case or with a path or level.
var codeKeywords = map[string]bool{
	"raise": true, "throw": true, "throws": true, "catch": true, "except": true, "try": true, "finally": true,
	"class": true, "def": true, "func": true, "function": true, "fn": true, "return": true, "yield": true,
	"if": true, "elif": true, "else": true, "for": true, "while": true, "switch": true, "case": true,
	"import": true, "from": true, "export": true, "const": true, "let": true, "var": true,
	"async": true, "await": true, "assert": true, "pub": true, "impl": true, "match": true,
	"private": true, "public": true, "protected": true, "static": true, "new": true, "with": true,
}

// sourceLine reports a line that reads as source code rather than output:
// a comment, a statement starting with a keyword, an assignment, a string
// literal continued in a list or call, or a C-family line ending in "{" or
// ";". A leading line number ("  12\t", "12:", "12 |") is skipped, since
// agents list files with numbers.
func sourceLine(line string) bool {
	indented := len(line) > 0 && (line[0] == ' ' || line[0] == '\t')
	s := strings.TrimLeft(line, " \t")
	if n := leadingNumber(s); n > 0 {
		indented = true
		s = s[n:]
	}
	// A diff's added or removed line: "+    except ValueError:".
	if len(s) > 1 && (s[0] == '+' || s[0] == '-') && (s[1] == ' ' || s[1] == '\t') {
		indented = true
		s = s[1:]
	}
	s = strings.TrimLeft(s, " \t")
	s = strings.TrimRight(s, " \t\r")
	if s == "" {
		return false
	}
	switch {
	case strings.HasPrefix(s, "//"), strings.HasPrefix(s, "/*"), strings.HasPrefix(s, "*/"),
		strings.HasPrefix(s, "# "), s == "#", strings.HasPrefix(s, `"""`), strings.HasPrefix(s, "'''"),
		strings.HasPrefix(s, "} "), s == "}", strings.HasPrefix(s, "@") && len(s) > 1 && isWordByte(s[1]):
		return true
	case indented && (strings.HasPrefix(s, "* ") || s == "*"):
		return true // a doc comment's body; a bullet list starts at column 0
	}
	last := s[len(s)-1]
	if last == '{' || last == ';' {
		return true
	}
	if q := s[0]; (q == '"' || q == '\'' || q == '`') && strings.ContainsRune(",([{+", rune(last)) {
		return true
	}
	// An object literal's entry: "error: ColorValueSchema,".
	if last == ',' {
		j := 0
		for j < len(s) && isWordByte(s[j]) {
			j++
		}
		if j > 0 && j < len(s) && s[j] == ':' {
			return true
		}
	}
	// A keyword statement.
	j := 0
	for j < len(s) && s[j] >= 'a' && s[j] <= 'z' {
		j++
	}
	if j > 0 && codeKeywords[s[:j]] && (j == len(s) || s[j] == ' ' || s[j] == '(' || s[j] == ':') {
		return true
	}
	// An assignment: name, name.attr or name[...] then "=" (not "==").
	j = 0
	for j < len(s) && (isWordByte(s[j]) || s[j] == '.' || s[j] == '[' || s[j] == ']' || s[j] == '"' || s[j] == '\'') {
		j++
	}
	if j == 0 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	r := strings.TrimLeft(s[j:], " ")
	if len(r) > 0 && strings.ContainsRune("+-*/|&", rune(r[0])) {
		r = r[1:]
	}
	return len(r) > 1 && r[0] == '=' && r[1] != '=' && r[1] != '>'
}

// leadingNumber returns the length of a line-number prefix: digits then a
// tab, ":" or "-" (grep -n and its context lines) or " |".
func leadingNumber(s string) int {
	j := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == 0 || j == len(s) {
		return 0
	}
	switch {
	case s[j] == '\t', s[j] == ':', s[j] == '-':
		return j + 1
	case strings.HasPrefix(s[j:], " |"), strings.HasPrefix(s[j:], " \t"):
		return j + 2
	}
	return 0
}
