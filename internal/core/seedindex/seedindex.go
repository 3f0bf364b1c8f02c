// Package seedindex extracts the seed index: a deterministic, verbatim record
// of what a fold event moved out of view — files touched, commands run, error
// lines, identifiers, the first lines of the user messages in the folded
// span, and a recovery span (id, code, extent, sha256) per block.
//
// Nothing here paraphrases: every string is copied from the blocks, so a
// grep over the index finds what the blocks said. Extraction is a
// hand-written tokenizer, not regular expressions, because it runs inside a
// fold event's time budget over hundreds of kilobytes.
package seedindex

import (
	"sort"
	"strings"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/risk"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

// Caps bound one record.
const (
	MaxFiles       = 32
	MaxCommands    = 24
	MaxErrors      = 24
	MaxIdentifiers = 64
	ErrorClip      = 240
	CommandClip    = 200
	UserClip       = 200
	pathMax        = 200
)

// Facts are the index fields of one block's text, computed once per block.
type Facts struct {
	Files       []string
	Errors      []string
	Identifiers []string
}

// Extract harvests the facts of one text.
func Extract(text string) Facts {
	return ExtractLines(text, risk.Lines(text, risk.Error))
}

// ExtractLines is Extract with the text's flagged lines precomputed; lines
// below Error are ignored.
func ExtractLines(text string, lines []risk.Line) Facts {
	return extract(text, lines, MaxFiles, MaxErrors, MaxIdentifiers)
}

// ExtractAll is ExtractLines without the per-block caps, for a summary that
// states exactly how much it leaves out.
func ExtractAll(text string, lines []risk.Line) Facts {
	return extract(text, lines, -1, -1, -1)
}

// extract harvests up to the given number of each fact (-1: all).
func extract(text string, lines []risk.Line, maxFiles, maxErrors, maxIdents int) Facts {
	var f Facts
	files := newSet(maxFiles)
	idents := newSet(maxIdents)
	errs := newSet(maxErrors)
	for _, l := range lines {
		if l.Class != risk.Error {
			continue
		}
		if errs.full() {
			break
		}
		if t := tokens.Trim(l.Text); t != "" {
			errs.add(clipUnits(t, ErrorClip))
		}
	}
	f.Errors = errs.list
	scanFields(text, func(field string) bool {
		if p := stripLineCol(field); isPath(p) {
			files.add(p)
		}
		scanIdents(field, idents.add)
		return !(files.full() && idents.full())
	})
	f.Files = files.list
	f.Identifiers = idents.list
	return f
}

// clipUnits keeps s whole when it fits in n units; otherwise its first n-1
// units and a "…" that says it was cut, so a cut line never reads as whole.
func clipUnits(s string, n int) string {
	if tokens.Units(s) <= n {
		return s
	}
	return tokens.SafeSlice(s, n-1) + tokens.Ellipsis
}

type set struct {
	seen map[string]bool
	list []string
	cap  int
}

// newSet holds up to n values; n < 0 means no limit.
func newSet(n int) *set { return &set{seen: make(map[string]bool), cap: n} }

func (s *set) full() bool { return s.cap >= 0 && len(s.list) >= s.cap }

func (s *set) add(v string) {
	if v == "" || s.full() || s.seen[v] {
		return
	}
	s.seen[v] = true
	s.list = append(s.list, v)
}

func isSep(c byte) bool { return sepByte[c] }

// sepByte is the field separators, as a table: scanFields asks for every
// byte of every output.
var sepByte = func() (t [256]bool) {
	for _, c := range []byte(" \t\n\r\"'`()[]{}<>,;=|") {
		t[c] = true
	}
	return t
}()

// scanFields calls fn for each separator-delimited field, stripped of
// trailing sentence punctuation, until fn returns false.
func scanFields(text string, fn func(string) bool) {
	for i := 0; i < len(text); {
		if isSep(text[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(text) && !isSep(text[j]) {
			j++
		}
		k := j
		for k > i && (text[k-1] == '.' || text[k-1] == ':' || text[k-1] == '!' || text[k-1] == '?') {
			k--
		}
		if f := text[i:k]; f != "" && !fn(f) {
			return
		}
		i = j
	}
}

var fileExts = map[string]bool{
	"go": true, "ts": true, "tsx": true, "js": true, "jsx": true, "mjs": true, "cjs": true, "json": true,
	"jsonl": true, "md": true, "css": true, "html": true, "rs": true, "py": true, "java": true, "rb": true,
	"yml": true, "yaml": true, "toml": true, "sh": true, "log": true, "conf": true, "cfg": true, "txt": true,
	"sql": true, "proto": true, "lock": true, "c": true, "h": true, "cc": true, "cpp": true, "hpp": true,
	"zig": true, "swift": true, "kt": true, "php": true, "mod": true, "sum": true, "ini": true, "xml": true,
}

// stripLineCol drops a trailing ":line" or ":line:col" (compiler and test
// output), so "parse.go:12:5" indexes as "parse.go".
func stripLineCol(f string) string {
	for {
		i := strings.LastIndexByte(f, ':')
		if i <= 0 || i == len(f)-1 {
			return f
		}
		for _, c := range []byte(f[i+1:]) {
			if c < '0' || c > '9' {
				return f
			}
		}
		f = f[:i]
	}
}

// isPath reports a path-shaped field: slash-joined segments (not a URL), or a
// file name with a known extension.
func isPath(f string) bool {
	// No "://" test: a URL's ':' fails the byte check below.
	if len(f) < 3 || len(f) > pathMax {
		return false
	}
	word := 0
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			word++
		case c == '/', c == '.', c == '_', c == '-', c == '@', c == '~', c == '+':
		default:
			return false
		}
	}
	if word == 0 {
		return false
	}
	if strings.IndexByte(f, '/') >= 0 {
		segs := 0
		for rest := f; ; {
			i := strings.IndexByte(rest, '/')
			seg := rest
			if i >= 0 {
				seg = rest[:i]
			}
			if seg != "" && seg != "." && seg != ".." {
				segs++
			}
			if i < 0 {
				break
			}
			rest = rest[i+1:]
		}
		return segs >= 2 || strings.HasPrefix(f, "/") || strings.HasPrefix(f, "./") || strings.HasPrefix(f, "~/")
	}
	dot := strings.LastIndexByte(f, '.')
	return dot > 0 && fileExts[strings.ToLower(f[dot+1:])]
}

func isIdentByte(c byte) bool { return identByte[c] }

// identByte is [A-Za-z0-9_] as a table.
var identByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	return t
}()

// scanIdents finds the identifiers in a field (see identLike), and a field
// that is a whole version number.
func scanIdents(f string, add func(string)) {
	if v := strings.TrimPrefix(f, "v"); isVersion(v) {
		add(f)
		return
	}
	for i := 0; i < len(f); {
		if !isIdentByte(f[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(f) && isIdentByte(f[j]) {
			j++
		}
		if w := f[i:j]; identLike(w) {
			add(w)
		}
		i = j
	}
}

// isVersion reports a major.minor.patch version ("1.22.3"). Four or more
// parts are left out: in logs those are IP addresses.
func isVersion(s string) bool {
	parts, run := 1, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			if run == 0 {
				return false
			}
			parts, run = parts+1, 0
		case c >= '0' && c <= '9':
			if run++; run > 6 {
				return false
			}
		default:
			return false
		}
	}
	return parts == 3 && run > 0
}

// identLike reports a word worth listing as an exact identifier, a grep key:
//
//   - an error code: one to four capitals and three to five digits (E0308,
//     TS2345, SC2086);
//   - snake_case or SCREAMING_SNAKE (max_len, MAX_RETRIES, x86_64);
//   - camelCase, or mixed case with a capital after the first letter
//     (maxLen, TestParse, HTTPServer, parseHeaderV2);
//   - a word with a number suffix (sha256, int32, utf8, Win32).
//
// Never a number, a hex string or a hex-looking fragment, nor a word with a
// unit letter: in logs and tool output those are timestamps, PIDs,
// durations, byte counts, hashes, addresses and request ids — noise, not
// names. Plain words (error, version) and capitalised or upper-case words
// (Hello, ERROR, FAIL) are not identifiers either; error lines are carried
// whole in their own section.
func identLike(w string) bool {
	if len(w) < 4 || len(w) > 80 {
		return false
	}
	if errorCode(w) {
		return true
	}
	letters, lower, digits, digitRuns := 0, 0, 0, 0
	under, upperInside, hexOnly := false, false, true
	for k := 0; k < len(w); k++ {
		c := w[k]
		switch {
		case c >= '0' && c <= '9':
			digits++
			if k == 0 || w[k-1] < '0' || w[k-1] > '9' {
				digitRuns++
			}
		case c >= 'a' && c <= 'z':
			letters++
			lower++
			hexOnly = hexOnly && c <= 'f'
		case c >= 'A' && c <= 'Z':
			letters++
			upperInside = upperInside || k > 0
			hexOnly = hexOnly && c <= 'F'
		case c == '_':
			under = true
			hexOnly = false
		}
	}
	switch {
	case letters < 2, w[0] >= '0' && w[0] <= '9':
		return false // numbers, and numbers with a unit (1532ms, 13T10)
	case hexOnly && digits > 0:
		return false // hashes, ids, addresses (9f8e7d6c, e29b, DEADBEEF1)
	case strings.HasSuffix(w, "Error") || strings.HasSuffix(w, "Exception"):
		return false // carried whole in errors
	case under:
		return true
	case lower > 0 && upperInside:
		return digitRuns < 2 // not base64 or a token (eyJhbGciOiJIUzI1NiJ9)
	case digits > 0:
		return digitRuns == 1 && w[len(w)-1] >= '0' && w[len(w)-1] <= '9'
	}
	return false
}

// errorCode reports one to four capitals then three to five digits.
func errorCode(w string) bool {
	k := 0
	for k < len(w) && w[k] >= 'A' && w[k] <= 'Z' {
		k++
	}
	if k < 1 || k > 4 || len(w)-k < 3 || len(w)-k > 5 {
		return false
	}
	for _, c := range []byte(w[k:]) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// OwnAnswer reports whether a tool's results are context-fold's own answers
// (recall_folded, unfold) rather than facts of the session. A recall is a
// copy, whole or sliced, of a block the session (or the parent session a
// handoff seed names) already holds and indexes where it first appeared;
// its own header and note lines ("=== code (bash · ledger) — sha256
// verified ===", "recall unavailable — …") are the tool's words. Mining them
// would list the tool's headers as error lines and count copies twice, so
// such results are not a source of files, error lines or identifiers.
func OwnAnswer(tool string) bool { return block.OwnTool(tool) }

// shellTools are tool names whose "command" argument is a shell command.
var shellTools = map[string]bool{"bash": true, "shell": true, "sh": true, "exec": true, "run": true, "terminal": true, "run_command": true, "execute_bash": true}

// pathKeys are tool-call argument names that hold a file path.
var pathKeys = []string{"path", "file_path", "filePath", "file", "filename", "target_file"}

// CallFacts returns the files and command named by a tool call's arguments.
func CallFacts(b *block.Block) (files []string, command string) {
	ms, err := rawjson.Object(b.Args)
	if err != nil {
		return nil, ""
	}
	for _, k := range pathKeys {
		if v, ok := rawjson.Get(ms, k); ok && rawjson.IsString(v) {
			if s, err := rawjson.Unquote(v); err == nil && s != "" && len(s) <= pathMax {
				files = append(files, s)
			}
		}
	}
	if v, ok := rawjson.Get(ms, "command"); ok && rawjson.IsString(v) {
		if s, err := rawjson.Unquote(v); err == nil {
			if shellTools[strings.ToLower(b.ToolName)] || b.ToolName == "" {
				command = tokens.FirstLine(s, CommandClip)
			}
			scanFields(s, func(f string) bool {
				if isPath(f) && len(files) < MaxFiles {
					files = append(files, f)
				}
				return true
			})
		}
	}
	return files, command
}

// Span is one recovery pointer: where a folded block's exact bytes are.
type Span struct {
	ID             string `json:"id"`
	Code           string `json:"code"`
	Tool           string `json:"tool,omitempty"`
	Kind           string `json:"kind"`
	Turn           int    `json:"turn"`
	Bytes          int    `json:"bytes"`
	Lines          int    `json:"lines"`
	SHA256         string `json:"sha256"`
	FullOutputPath string `json:"fullOutputPath,omitempty"`
}

// UserLine is the first line of one user message.
type UserLine struct {
	Turn      int    `json:"turn"`
	FirstLine string `json:"firstLine"`
}

// Usage is the context usage when the event fired.
type Usage struct {
	Tokens   int     `json:"tokens"`
	Window   int     `json:"window"`
	Fraction float64 `json:"fraction"`
}

// Record is one seed-index record, one per fold event.
type Record struct {
	V            int        `json:"v"`
	Kind         string     `json:"kind"` // "fold-index"
	Seq          int        `json:"seq"`
	Trigger      string     `json:"trigger"`
	Usage        Usage      `json:"usage"`
	Files        []string   `json:"files"`
	Commands     []string   `json:"commands"`
	Errors       []string   `json:"errors"`
	Identifiers  []string   `json:"identifiers"`
	UserMessages []UserLine `json:"userMessages"`
	Spans        []Span     `json:"spans"`
}

// Input is what one event's record is built from.
type Input struct {
	Seq     int
	Trigger string
	Usage   Usage
	// Masked are the blocks leaving view, in transcript order, each with its
	// facts and span.
	Masked []Masked
	// Calls maps a call id to its tool-call block, for pairing results.
	Calls map[string]*block.Block
	// Users are the user blocks of the transcript, in order.
	Users []*block.Block
}

// Masked is one block of an event with its precomputed facts and span.
type Masked struct {
	Block *block.Block
	Facts Facts
	Span  Span
}

// Build assembles the record of one event. The same input always yields the
// same record.
func Build(in Input) Record {
	r := Record{V: 1, Kind: "fold-index", Seq: in.Seq, Trigger: in.Trigger, Usage: in.Usage,
		Files: []string{}, Commands: []string{}, Errors: []string{}, Identifiers: []string{},
		UserMessages: []UserLine{}, Spans: []Span{}}
	files := newSet(MaxFiles)
	cmds := newSet(MaxCommands)
	errs := newSet(MaxErrors)
	minTurn, maxTurn := -1, -1
	for _, m := range in.Masked {
		if call, ok := in.Calls[m.Block.CallID]; ok && m.Block.CallID != "" {
			fs, cmd := CallFacts(call)
			for _, f := range fs {
				files.add(f)
			}
			cmds.add(cmd)
		}
		if minTurn < 0 || m.Block.Turn < minTurn {
			minTurn = m.Block.Turn
		}
		maxTurn = max(maxTurn, m.Block.Turn)
		r.Spans = append(r.Spans, m.Span)
	}
	for _, m := range in.Masked {
		for _, f := range m.Facts.Files {
			files.add(f)
		}
		for _, e := range m.Facts.Errors {
			errs.add(e)
		}
	}
	r.Files, r.Commands, r.Errors = files.list, cmds.list, errs.list
	r.Identifiers = rankIdentifiers(in.Masked)
	for _, u := range in.Users {
		if u.Turn >= minTurn && u.Turn <= maxTurn {
			if l := tokens.FirstLine(u.Text, UserClip); l != "" {
				r.UserMessages = append(r.UserMessages, UserLine{Turn: u.Turn, FirstLine: l})
			}
		}
	}
	normalize(&r)
	return r
}

// rankIdentifiers merges per-block identifiers, largest blocks first (a flood
// of output is where buried identifiers live), then orders longer tokens
// first (ties by first sighting) and keeps the first MaxIdentifiers. A
// bucket per length makes it linear: a fold event may carry tens of
// thousands of candidates.
func rankIdentifiers(ms []Masked) []string {
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ms[order[a]].Block.Tokens > ms[order[b]].Block.Tokens })
	var buckets [81][]string // identLike caps identifiers at 80 bytes
	seen := map[string]bool{}
	for _, i := range order {
		for _, s := range ms[i].Facts.Identifiers {
			if seen[s] {
				continue
			}
			seen[s] = true
			n := min(len(s), len(buckets)-1)
			if len(buckets[n]) < MaxIdentifiers {
				buckets[n] = append(buckets[n], s)
			}
		}
	}
	out := make([]string, 0, MaxIdentifiers)
	for n := len(buckets) - 1; n >= 0 && len(out) < MaxIdentifiers; n-- {
		for _, s := range buckets[n] {
			if len(out) == MaxIdentifiers {
				break
			}
			out = append(out, s)
		}
	}
	return out
}

func normalize(r *Record) {
	if r.Files == nil {
		r.Files = []string{}
	}
	if r.Commands == nil {
		r.Commands = []string{}
	}
	if r.Errors == nil {
		r.Errors = []string{}
	}
}
