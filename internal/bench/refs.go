package bench

import (
	"encoding/json"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/core/block"
)

// Hidden references measure what a policy takes away from the agent: the
// distinctive strings the agent's next action uses that came from the
// context, are visible nowhere in the request the policy sent, and sit in
// content the policy folded, masked, cleared or compacted. BENCHMARKS.md
// defines the metric; this file is its one implementation, fed either by a
// replay as it goes or by the traces a replay wrote (-trace), which is how
// anyone can check the bench's figures.

// What makes a string distinctive, and so a reference (RefClass names
// the kind):
//   - a path: a word with a slash and a letter that is absolute, relative
//     to ".", has two slashes or ends in a file name (not /dev/null and
//     the like), and each of its suffixes at
//     a slash that still holds a slash or a dot (an action may name
//     "db/models.py" where the context printed "/testbed/django/db/models.py");
//   - a name: an identifier of six or more characters with an inner
//     underscore or a lower-to-upper case change (parse_header,
//     ParseHeader), or a dotted name of eight or more that is a file name
//     or has such a part (self.assertEqual, models.py; not django.db);
//   - a number: three or more digits, or four or more letters and digits
//     mixed that start with a letter or hold two (1057, E01057, 3f2a9c1;
//     not 1026p);
//   - a line: a whole trimmed line of at least MinRefLine characters, eight
//     of them letters.
// Words are maximal runs of letters, digits and _ . / -.

// MinRefLine is the shortest line that counts as a reference by itself.
const MinRefLine = 24

// Refs returns the distinct references in text, in order of first
// occurrence.
func Refs(text string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for line := range strings.SplitSeq(text, "\n") {
		if t := strings.TrimSpace(line); utf8.RuneCountInString(t) >= MinRefLine && hasLetters(t, 8) {
			add(t)
		}
		for _, tok := range words(line) {
			classify(tok, add)
		}
	}
	return out
}

// RefClass names the kind of a reference: "line", "path", "number" or
// "name".
func RefClass(r string) string {
	switch {
	case strings.ContainsAny(r, " \t"):
		return "line"
	case strings.Contains(r, "/"):
		return "path"
	case hasDigit(r) && alnum(r):
		return "number"
	}
	return "name"
}

// words splits a line into maximal runs of letters, digits and _ . / -,
// trimmed of the punctuation that ends sentences and paths.
func words(line string) []string {
	var out []string
	start := -1
	for i := 0; i <= len(line); i++ {
		in := i < len(line) && wordByte(line[i])
		if in && start < 0 {
			start = i
		}
		if !in && start >= 0 {
			if w := strings.TrimRight(strings.TrimLeft(line[start:i], ".-"), ".-/"); w != "" {
				out = append(out, w)
			}
			start = -1
		}
	}
	return out
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '/' || c == '-'
}

// classify adds the references a word holds: a path and its suffixes at
// each slash (an action may name "db/models.py" where the context printed
// "/testbed/django/db/models.py"), a dotted name, identifiers, numbers.
func classify(w string, add func(string)) {
	if strings.Contains(w, "/") {
		if len(w) >= 5 && hasLetters(w, 1) && pathLike(w) && !systemPath[w] {
			add(w)
			for i := 0; i < len(w); i++ {
				if w[i] == '/' && i+1 < len(w) {
					if s := w[i+1:]; len(s) >= 5 && hasLetters(s, 1) && (strings.Contains(s, "/") || strings.Contains(s, ".")) {
						add(s)
					}
				}
			}
		}
		for _, part := range strings.Split(w, "/") {
			classifyPart(part, false, add)
		}
		return
	}
	classifyPart(w, true, add)
}

// pathLike tells a path from prose with a slash ("begin/end", "and/or"):
// it is absolute or relative to ".", has two slashes, or ends in a file
// name with an extension.
func pathLike(w string) bool {
	if strings.HasPrefix(w, "/") || strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../") || strings.Count(w, "/") >= 2 {
		return true
	}
	last := w[strings.LastIndexByte(w, '/')+1:]
	if i := strings.LastIndexByte(last, '.'); i > 0 {
		return fileExt[strings.ToLower(last[i+1:])]
	}
	return false
}

// classifyPart adds the references of a word without slashes (or one
// segment of a path, whose dotted whole the path suffixes already cover).
func classifyPart(w string, dottedToo bool, add func(string)) {
	if w == "" {
		return
	}
	if parts := strings.Split(w, "."); dottedToo && len(parts) >= 2 && len(w) >= 8 && dotted(parts) && distinctiveDotted(parts) {
		add(w)
	}
	for _, p := range strings.FieldsFunc(w, func(r rune) bool { return r == '.' || r == '-' }) {
		switch {
		case allDigits(p):
			if len(p) >= 3 {
				add(p)
			}
		case len(p) >= 4 && hasDigit(p) && alnum(p) && (hasLetters(p[:1], 1) || hasLetters(p, 2)):
			// A code (E01057, TS2554) or a hash (3f2a9c1), not a number
			// with a unit or command letter (1026p in sed -n 1015,1026p).
			add(p)
		case len(p) >= 6 && identifier(p) && (innerUnderscore(p) || caseChange(p)):
			add(p)
		}
	}
}

// distinctiveDotted keeps dotted names a model would not write from
// general knowledge: a file name (test_base.py) or a name with a part that
// is itself distinctive (self.assertEqual). Sampling showed plain module
// paths (django.db.models) counted as hidden where the agent needed no
// context to write them.
func distinctiveDotted(parts []string) bool {
	if fileExt[strings.ToLower(parts[len(parts)-1])] {
		return true
	}
	for _, p := range parts {
		if innerUnderscore(p) || caseChange(p) || hasDigit(p) {
			return true
		}
	}
	return false
}

// systemPath are paths every shell user writes without context.
var systemPath = map[string]bool{"/dev/null": true, "/dev/stdout": true, "/dev/stderr": true, "/dev/zero": true, "/usr/bin/env": true, "/bin/bash": true, "/bin/sh": true}

// fileExt are the extensions that make a dotted word a file name.
var fileExt = map[string]bool{}

func init() {
	for _, e := range strings.Fields("py go ts tsx js jsx mjs cjs json md txt rs c h cc cpp hpp java kt rb php cs swift scala sh bash zsh yml yaml toml cfg ini xml html htm css scss sql rst proto gradle pyi ipynb vue svelte") {
		fileExt[e] = true
	}
}

func dotted(parts []string) bool {
	for _, p := range parts {
		if p == "" || !(p[0] >= 'a' && p[0] <= 'z' || p[0] >= 'A' && p[0] <= 'Z' || p[0] == '_') {
			return false
		}
	}
	return true
}

func hasLetters(s string, n int) bool {
	for i := 0; i < len(s) && n > 0; i++ {
		if c := s[i]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 {
			n--
		}
	}
	return n == 0
}

func hasDigit(s string) bool { return strings.ContainsAny(s, "0123456789") }

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func alnum(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func identifier(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// innerUnderscore: snake_case or CONST_CASE, not just __dunder__ padding.
func innerUnderscore(s string) bool {
	t := strings.Trim(s, "_")
	return strings.Contains(t, "_")
}

// caseChange: camelCase or PascalCase with a lower-to-upper step.
func caseChange(s string) bool {
	for i := 1; i < len(s); i++ {
		if s[i-1] >= 'a' && s[i-1] <= 'z' && s[i] >= 'A' && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// messageText is what the model reads of a message's blocks: each block's
// text on its own lines, a tool call as its name and then each argument's
// value (strings decoded, anything else as compact JSON), one per line.
// subst, when it returns ok, replaces a block's text (a fold's digest).
func messageText(blocks []block.Block, subst func(b *block.Block) (string, bool)) string {
	var sb strings.Builder
	for k := range blocks {
		b := &blocks[k]
		if sb.Len() > 0 {
			sb.WriteByte('\n')
		}
		if subst != nil {
			if s, ok := subst(b); ok {
				sb.WriteString(s)
				continue
			}
		}
		if b.Kind == block.ToolCall {
			sb.WriteString(callText(b.ToolName, b.Args))
			continue
		}
		sb.WriteString(b.Text)
	}
	return sb.String()
}

// callText renders a tool call as its name and its arguments' values.
func callText(name string, args []byte) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		var s string
		if json.Unmarshal(args, &s) == nil {
			return name + "\n" + s
		}
		return name + "\n" + string(args)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	sb.WriteString(name)
	for _, k := range keys {
		sb.WriteByte('\n')
		var s string
		if json.Unmarshal(obj[k], &s) == nil {
			sb.WriteString(s)
			continue
		}
		sb.Write(obj[k])
	}
	return sb.String()
}
