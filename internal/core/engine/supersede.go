package engine

// Superseded results: a tool result whose content a later call made stale.
// The schedule folds them first and even inside the protected tail, since
// the tail protects what the agent works with and a superseded result is
// not that any more.
//
// The rules, each deliberately narrow (a false "superseded" would fold
// what the agent still needs; a missed one only costs tokens):
//
//   - A file read is superseded by a later read of the same path whose
//     shown range covers at least the earlier read's, or by a later
//     successful write or edit of that path.
//   - A shell command's output is superseded by a later run of the
//     identical command (exact string equality after trimming space), on
//     the same tool.
//   - "Later" means a call in a later assistant message. Calls of one
//     message may run in parallel and their results arrive in any order,
//     so none of them supersedes another.
//   - The superseding call must have its result, and that result must not
//     be an error: a failed write did not change the file, a failed read
//     showed nothing newer. The superseded result may itself be an error.
//   - Paths compare as given after path.Clean: "src/x.ts" and "./src/x.ts"
//     are one path, "/repo/src/x.ts" is another (no cwd is guessed).
//
// The call shapes understood, and nothing else:
//
//   - Pi's read {"path", "offset"?, "limit"?}: lines offset (1-based,
//     default 1) up to offset+limit (default: to the end), narrowed to the
//     lines Pi says it showed when it cut the output ("Use offset=N to
//     continue"); a read whose line was too long to show ("Use bash")
//     shows no range and supersedes nothing.
//   - Pi's edit and write {"path", ...}: a change of the file. Pi's bash
//     {"command"}: a command.
//   - str_replace_editor (OpenHands, SWE-agent) {"command": "view", "path",
//     "view_range"?}: a read of lines view_range[0]..view_range[1] (-1: to
//     the end); "create", "str_replace", "insert", "undo_edit": a change.
//   - A shell command (bash, execute_bash) that is exactly "cat [-n] FILE"
//     or "sed -n 'A,Bp' FILE", optionally after "cd /absolute/dir && ", is
//     also a read of FILE (joined to the directory when relative); FILE
//     must be a plain word (no quotes, globs, variables or redirections).
//     Its output supersedes other reads only when the agent did not cut
//     it (no truncation notice), since a cut output does not show the
//     range the command names. Shell commands that change files (sed -i,
//     heredocs, redirections) are not recognised as changes: their effect
//     cannot be told from the command alone.
//
// The index is incremental: each new block is looked at once, against the
// still-current results for its path or command, so a request costs work
// in its new blocks only. A resync that drops messages rebuilds it over the
// kept blocks (a superseding result may be among those dropped).

import (
	"encoding/json"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/rawjson"
)

type effectKind uint8

const (
	noEffect effectKind = iota
	readEffect
	changeEffect
	runEffect
)

// toEnd is the open end of a read range.
const toEnd = math.MaxInt

// effect is what one tool call does, as far as superseding goes.
type effect struct {
	kind effectKind
	path string // cleaned; read and change
	// start and end are the read's lines, [start, end), 1-based.
	start, end int
	// shell marks a read through a shell command, whose output counts as
	// covering its range only when it was not cut.
	shell bool
	// later is how a change is described to the reads it supersedes.
	later string
	// subject names the read in the digest ("" for a shell read: its call
	// stays in context and says it).
	subject string
	// run is the command key (tool and trimmed command) of a run.
	run string
}

// parseEffect returns the effect of a tool call block.
func parseEffect(b *block.Block) effect {
	switch b.ToolName {
	case "read", "edit", "write", "str_replace_editor", "bash", "execute_bash":
	default:
		return effect{} // no tool whose effect we know: its arguments do not matter
	}
	// The arguments' members, read in place; a repeated key means its last
	// value, as a map decoded by encoding/json would hold.
	ms, err := rawjson.Object(b.Args)
	if err != nil {
		return effect{} // not an object: not a shape we know
	}
	args := func(k string) ([]byte, bool) { return rawjson.Get(ms, k) }
	strArg := func(k string) (string, bool) {
		raw, ok := args(k)
		if !ok {
			return "", false
		}
		if s, ok := rawjson.PlainString(raw); ok {
			return s, true
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	}
	intArg := func(k string) (int, bool, bool) { // value, present, valid
		raw, ok := args(k)
		if !ok || string(raw) == "null" {
			return 0, false, true
		}
		var n float64
		if json.Unmarshal(raw, &n) != nil || n != math.Trunc(n) {
			return 0, true, false
		}
		return int(n), true, true
	}
	p, hasPath := strArg("path")
	if hasPath {
		p = strings.TrimSpace(p)
		hasPath = p != ""
	}
	switch b.ToolName {
	case "read":
		if !hasPath {
			return effect{}
		}
		off, hasOff, ok1 := intArg("offset")
		lim, hasLim, ok2 := intArg("limit")
		if !ok1 || !ok2 {
			return effect{}
		}
		ef := effect{kind: readEffect, path: path.Clean(p), start: 1, end: toEnd, subject: p}
		if hasOff {
			ef.start = max(off, 1)
			ef.subject += " offset=" + strconv.Itoa(off)
		}
		if hasLim {
			if lim <= 0 {
				return effect{}
			}
			ef.end = ef.start + lim
			ef.subject += " limit=" + strconv.Itoa(lim)
		}
		return ef
	case "edit":
		if hasPath {
			return effect{kind: changeEffect, path: path.Clean(p), later: "edited later"}
		}
	case "write":
		if hasPath {
			return effect{kind: changeEffect, path: path.Clean(p), later: "written later"}
		}
	case "str_replace_editor":
		if !hasPath {
			return effect{}
		}
		cmd, _ := strArg("command")
		switch cmd {
		case "view":
			ef := effect{kind: readEffect, path: path.Clean(p), start: 1, end: toEnd, subject: "view " + p}
			if raw, ok := args("view_range"); ok && string(raw) != "null" {
				var r []int
				if json.Unmarshal(raw, &r) != nil || len(r) != 2 || r[0] < 1 || (r[1] != -1 && r[1] < r[0]) {
					return effect{}
				}
				ef.start = r[0]
				if r[1] != -1 {
					ef.end = r[1] + 1
				}
				ef.subject += " view_range=[" + strconv.Itoa(r[0]) + ", " + strconv.Itoa(r[1]) + "]"
			}
			return ef
		case "create":
			return effect{kind: changeEffect, path: path.Clean(p), later: "written later"}
		case "str_replace", "insert", "undo_edit":
			return effect{kind: changeEffect, path: path.Clean(p), later: "edited later"}
		}
	case "bash", "execute_bash":
		cmd, ok := strArg("command")
		cmd = strings.TrimSpace(cmd)
		if !ok || cmd == "" {
			return effect{}
		}
		if in, ok := args("is_input"); ok && string(in) != "false" && string(in) != `"false"` {
			return effect{} // input to a running process, not a command
		}
		ef := effect{kind: runEffect, run: b.ToolName + "\x00" + cmd}
		if rd, ok := shellRead(cmd); ok {
			rd.run = ef.run
			return rd
		}
		return ef
	}
	return effect{}
}

var (
	cdPrefixRE = regexp.MustCompile(`^cd (/[A-Za-z0-9_./+-]*) && (.*)$`)
	catRE      = regexp.MustCompile(`^cat (?:-n )?([A-Za-z0-9_./+-]+)$`)
	sedRE      = regexp.MustCompile(`^sed -n '?([0-9]+),([0-9]+)p'? ([A-Za-z0-9_./+-]+)$`)
)

// shellRead recognises the shell commands that do nothing but print a file
// or a range of its lines.
func shellRead(cmd string) (effect, bool) {
	dir := ""
	if m := cdPrefixRE.FindStringSubmatch(cmd); m != nil {
		dir, cmd = m[1], m[2]
	}
	ef := effect{kind: readEffect, shell: true, start: 1, end: toEnd}
	var file string
	if m := catRE.FindStringSubmatch(cmd); m != nil {
		file = m[1]
	} else if m := sedRE.FindStringSubmatch(cmd); m != nil {
		a, err1 := strconv.Atoi(m[1])
		z, err2 := strconv.Atoi(m[2])
		if err1 != nil || err2 != nil || a < 1 || z < a {
			return effect{}, false
		}
		ef.start, ef.end, file = a, z+1, m[3]
	} else {
		return effect{}, false
	}
	if strings.HasPrefix(file, "-") {
		return effect{}, false
	}
	if dir != "" && !path.IsAbs(file) {
		file = path.Join(dir, file)
	}
	ef.path = path.Clean(file)
	return ef, true
}

// piContinueRE is Pi's read notice where a cut output stops: the bracketed
// last line ("[Showing lines 1-50 of 300. Use offset=51 to continue.]",
// "[250 more lines in file. Use offset=51 to continue.]"). Anchored at the
// end, so a file that merely mentions such a notice does not narrow a read.
var piContinueRE = regexp.MustCompile(`\[[^\]\n]*Use offset=([0-9]+) to continue\.\]\s*$`)

// shown narrows a read's range to what its result shows: Pi's read says
// where a cut output stops; a shell read that was cut, or a read whose
// line was too long to show, shows no range it can vouch for (ok false).
func shown(ef effect, text string) (start, end int, ok bool) {
	start, end = ef.start, ef.end
	if ef.shell {
		for _, mark := range []string{"<elided_chars>", "[Showing lines", "Full output:", "output was too long", "<response clipped>"} {
			if strings.Contains(text, mark) {
				return 0, 0, false
			}
		}
		return start, end, true
	}
	if strings.Contains(text, "<response clipped>") || strings.Contains(text, "Use bash: sed") {
		return 0, 0, false
	}
	if m := piContinueRE.FindStringSubmatch(text); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n <= start {
			return 0, 0, false
		}
		end = min(end, n)
	}
	return start, end, true
}

// current is a result that nothing has superseded yet.
type current struct {
	k, msg     int // block index and its call's message
	start, end int // shown lines, for a read
	ok         bool
	// supersedes marks a result that may supersede others: not an error,
	// and, for a read, showing the range it names.
	supersedes bool
}

// changeAt is a successful change of a file: its result block, its call's
// message, and how it is described to the reads it supersedes.
type changeAt struct {
	k, msg int
	later  string
}

// supersedeIndex follows which results later calls superseded.
type supersedeIndex struct {
	calls  map[string]callAt     // CallID → its effect and message
	reads  map[string][]current  // path → current reads
	change map[string]changeAt   // path → the latest successful change
	runs   map[string][]current  // command → current outputs
	later  map[int]string        // superseded block → what the later call did
	by     map[int]int           // superseded block → the superseding block
	srcs   map[int]digest.Source // result block → what its digest says of its source
}

type callAt struct {
	ef  effect
	msg int
}

func newSupersedeIndex() supersedeIndex {
	return supersedeIndex{
		calls: map[string]callAt{}, reads: map[string][]current{}, change: map[string]changeAt{},
		runs: map[string][]current{}, later: map[int]string{}, by: map[int]int{}, srcs: map[int]digest.Source{},
	}
}

// supersede marks block k superseded by block by, unless it already is
// (the first superseder stands: it is the one that was known first).
func (e *Engine) supersede(k, by int, later string) {
	ix := &e.sup
	if _, done := ix.by[k]; done {
		return
	}
	ix.by[k] = by
	ix.later[k] = later
	vb := &e.view[k]
	vb.Superseded = true
	vb.SupersededBy = e.tr.Blocks()[by].ID
	if m := &e.meta[k]; m.done {
		// The digest says what superseded it, so a digest computed before
		// (Prepare) is stale; frozen bytes are unaffected.
		m.done, m.digest, m.tokens, m.facts = false, "", 0, nil
		e.prepared = min(e.prepared, k)
	}
}

// index looks at block k once, as it arrives.
func (e *Engine) index(k int) {
	b := &e.tr.Blocks()[k]
	ix := &e.sup
	switch b.Kind {
	case block.ToolCall:
		if b.CallID == "" {
			return
		}
		if _, dup := ix.calls[b.CallID]; dup {
			return // a repeated call id: the first call owns its result
		}
		if ef := parseEffect(b); ef.kind != noEffect {
			ix.calls[b.CallID] = callAt{ef: ef, msg: b.Msg}
		}
	case block.ToolResult:
		if b.CallID == "" || !block.Durable(b.ID) {
			return // a positional result belongs to no call for sure
		}
		c, ok := ix.calls[b.CallID]
		if !ok || c.msg >= b.Msg {
			return
		}
		e.indexResult(k, b, c)
	}
}

func (e *Engine) indexResult(k int, b *block.Block, c callAt) {
	ix := &e.sup
	ef := c.ef
	okResult := !b.IsError
	switch ef.kind {
	case readEffect:
		// An error shows no content of the file, so it says nothing of it.
		ix.srcs[k] = digest.Source{Subject: ef.subject, File: okResult}
		start, end, showsRange := shown(ef, b.Text)
		if !showsRange {
			start, end = ef.start, ef.end
		}
		cur := current{k: k, msg: c.msg, start: start, end: end, ok: okResult, supersedes: okResult && showsRange}
		list := ix.reads[ef.path]
		// A result may arrive after those of later calls (out of order):
		// a later change or covering read already supersedes it.
		if ch, ok := ix.change[ef.path]; ok && ch.msg > c.msg {
			e.supersede(k, ch.k, ch.later)
		}
		for _, o := range list {
			if o.msg > c.msg && o.supersedes && o.start <= cur.start && o.end >= cur.end {
				e.supersede(k, o.k, "read again later")
			}
		}
		kept := list[:0]
		for _, o := range list {
			if cur.supersedes && o.msg < c.msg && cur.start <= o.start && cur.end >= o.end {
				e.supersede(o.k, k, "read again later")
				continue
			}
			kept = append(kept, o)
		}
		if _, done := ix.by[k]; !done {
			kept = append(kept, cur)
		}
		ix.reads[ef.path] = kept
		if ef.shell {
			e.indexRun(k, c, ef.run, okResult)
		}
	case changeEffect:
		if !okResult {
			return // a failed change left the file as it was
		}
		if ch, ok := ix.change[ef.path]; !ok || ch.msg < c.msg {
			ix.change[ef.path] = changeAt{k: k, msg: c.msg, later: ef.later}
		}
		list := ix.reads[ef.path]
		kept := list[:0]
		for _, o := range list {
			if o.msg < c.msg {
				e.supersede(o.k, k, ef.later)
				continue
			}
			kept = append(kept, o)
		}
		ix.reads[ef.path] = kept
	case runEffect:
		e.indexRun(k, c, ef.run, okResult)
	}
}

// indexRun records the output of a command run and supersedes the outputs
// of earlier runs of the identical command.
func (e *Engine) indexRun(k int, c callAt, run string, okResult bool) {
	ix := &e.sup
	list := ix.runs[run]
	for _, o := range list {
		if o.msg > c.msg && o.ok {
			e.supersede(k, o.k, "ran again later")
		}
	}
	kept := list[:0]
	for _, o := range list {
		if okResult && o.msg < c.msg {
			e.supersede(o.k, k, "ran again later")
			continue
		}
		kept = append(kept, o)
	}
	if _, done := ix.by[k]; !done {
		kept = append(kept, current{k: k, msg: c.msg, ok: okResult})
	}
	ix.runs[run] = kept
}

// source returns what block k's digest says of its source.
func (e *Engine) source(k int) digest.Source {
	src := e.sup.srcs[k]
	src.Later = e.sup.later[k]
	return src
}

// reindex rebuilds the index over the blocks kept after a resync dropped
// messages: a kept result may have been superseded by a dropped one.
func (e *Engine) reindex() {
	for k := range e.sup.by {
		if k < len(e.view) {
			e.view[k].Superseded, e.view[k].SupersededBy = false, ""
			if m := &e.meta[k]; m.done {
				m.done, m.digest, m.tokens, m.facts = false, "", 0, nil
				e.prepared = min(e.prepared, k)
			}
		}
	}
	e.sup = newSupersedeIndex()
	for k := range e.tr.Blocks() {
		e.index(k)
	}
}
