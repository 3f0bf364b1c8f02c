// Package synth generates long coding sessions shaped like Claude Code's,
// for the bench: the public benchmark set holds mostly short SWE-bench
// runs, while the sessions where folding hides most are long ones that
// read a file, work elsewhere for a hundred messages, and come back to edit
// it with text copied from that first read.
//
// A session works on a generated Python repository with Claude Code's
// tools and output formats:
//   - Read {file_path[, offset, limit]}: the file as `cat -n` prints it,
//     each line prefixed with its number and "→";
//   - Grep {pattern, output_mode "content", -n}: "path:line:text" hits,
//     which the agent then opens;
//   - Edit {file_path, old_string, new_string}: old_string is copied from
//     the file as the agent last read it, which is often long before (the
//     read is not repeated);
//   - Bash: test runs that fail with a traceback naming the file, line and
//     function, re-run after each fix until they pass; and listings;
//   - Write: new test files, superseding nothing.
//
// The shapes and their rates were chosen from what Claude Code's tools
// print and from the long sessions issue 30 describes (Read/Edit/Grep/Bash,
// N→ line prefixes, edits whose old_string is copied from a read long
// before, greps whose hits are opened later, test runs re-run after fixes),
// not fitted to any figure. Everything is a pure function of the seed.
package synth

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/contextfold/contextfold/internal/bench/trajectory"
)

// Family is the family name generated sessions carry.
const Family = "synthetic-claude-code"

var (
	nouns = strings.Fields("order customer invoice payment session cache token record ledger account " +
		"shipment cart price discount tax report schedule queue worker batch config policy audit event " +
		"profile address vendor refund coupon balance")
	verbs = strings.Fields("load save parse validate compute render apply resolve build merge fetch " +
		"update delete normalize serialize check refresh dispatch collect")
	pkgs = strings.Fields("billing checkout inventory accounts shipping reports")
)

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

func camel(words ...string) string {
	var b strings.Builder
	for _, w := range words {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// file is one module of the generated repository.
type file struct {
	path  string
	lines []string
	funcs []fn // in line order
}

// fn is a function of a file: its name and the line its def is on (0-based).
type fn struct {
	name string
	at   int
}

func (f *file) locate() {
	f.funcs = f.funcs[:0]
	for i, l := range f.lines {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "def ") {
			name := t[4:strings.IndexByte(t, '(')]
			f.funcs = append(f.funcs, fn{name, i})
		}
	}
}

// module writes a module of classes and methods.
func module(r *rand.Rand, path string) *file {
	f := &file{path: path}
	add := func(format string, a ...any) { f.lines = append(f.lines, fmt.Sprintf(format, a...)) }
	add(`"""%s."""`, strings.TrimSuffix(path[strings.LastIndexByte(path, '/')+1:], ".py"))
	add("from __future__ import annotations")
	add("")
	add("import logging")
	add("from decimal import Decimal")
	add("")
	add("log = logging.getLogger(__name__)")
	for c := 0; c < 2+r.IntN(4); c++ {
		noun := pick(r, nouns)
		cls := camel(noun, pick(r, []string{"Repository", "Service", "Builder", "Validator", "Store"}))
		add("")
		add("")
		add("class %s:", cls)
		add("    def __init__(self, session, cache_ttl=%d):", 60*(1+r.IntN(10)))
		add("        self.session = session")
		add("        self.cache_ttl = cache_ttl")
		add("        self._%s_cache = {}", noun)
		for m := 0; m < 3+r.IntN(6); m++ {
			v, o := pick(r, verbs), pick(r, nouns)
			name := v + "_" + o
			arg := o + "_id"
			add("")
			add("    def %s(self, %s, strict=False):", name, arg)
			add(`        """%s the %s for %s."""`, camel(v), o, arg)
			for s := 0; s < 3+r.IntN(9); s++ {
				switch r.IntN(6) {
				case 0:
					add("        if %s is None and strict:", arg)
					add("            raise ValueError(\"%s requires a %s\")", name, arg)
				case 1:
					add("        rows = self.session.query(%sRecord).filter_by(%s=%s)", camel(o), arg, arg)
				case 2:
					add("        total = sum((row.amount for row in rows), Decimal(\"0.%02d\"))", r.IntN(100))
				case 3:
					add("        log.debug(\"%s %%s -> %%s\", %s, self._%s_cache.get(%s))", name, arg, noun, arg)
				case 4:
					add("        self._%s_cache[%s] = self.%s_%s(%s)", noun, arg, pick(r, verbs), pick(r, nouns), arg)
				default:
					add("        result = [self._to_%s(row) for row in rows if row.%s_status != %d]", o, pick(r, nouns), r.IntN(5))
				}
			}
			add("        return result if strict else None")
		}
	}
	f.locate()
	return f
}

// Session generates session i of a set, deterministically from seed.
func Session(seed uint64, i int) []trajectory.Message {
	g := &gen{r: rand.New(rand.NewPCG(seed, uint64(i)))}
	return g.session()
}

type gen struct {
	r     *rand.Rand
	msgs  []trajectory.Message
	files []*file
	// seen is each file's content as the agent last read it (nil: never).
	seen  map[string][]string
	calls int
}

func (g *gen) say(role, text string) {
	g.msgs = append(g.msgs, trajectory.Message{Role: role, Text: text, ToolCalls: []trajectory.Call{}})
}

// call makes one assistant message with one tool call and its result.
func (g *gen) call(thought, name string, args map[string]any, out string, isErr bool) {
	g.calls++
	id := fmt.Sprintf("toolu_%04d", g.calls)
	raw, _ := json.Marshal(args)
	g.msgs = append(g.msgs, trajectory.Message{Role: "assistant", Text: thought, ToolCalls: []trajectory.Call{{ID: id, Name: name, Arguments: raw}}})
	g.msgs = append(g.msgs, trajectory.Message{Role: "toolResult", Text: out, ToolCalls: []trajectory.Call{}, ToolCallID: &id, ToolName: &name, IsError: isErr})
}

func numbered(lines []string, from int) string {
	var b strings.Builder
	for k, l := range lines {
		fmt.Fprintf(&b, "%6d→%s\n", from+k+1, l)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (g *gen) read(f *file, why string) {
	g.call(why, "Read", map[string]any{"file_path": "/repo/" + f.path}, numbered(f.lines, 0), false)
	g.seen[f.path] = slices.Clone(f.lines)
}

func (g *gen) grep(name string) []*file {
	var hits []string
	var in []*file
	for _, f := range g.files {
		found := false
		for k, l := range f.lines {
			if strings.Contains(l, name) {
				hits = append(hits, fmt.Sprintf("%s:%d:%s", f.path, k+1, l))
				found = true
			}
		}
		if found {
			in = append(in, f)
		}
	}
	out := strings.Join(hits, "\n")
	if out == "" {
		out = "No matches found"
	}
	g.call(fmt.Sprintf("Let me find where `%s` is used.", name), "Grep", map[string]any{"pattern": name, "output_mode": "content", "-n": true}, out, false)
	return in
}

// testRun prints a pytest run: failing with a traceback into f at line at
// in function fn, or passing.
func (g *gen) testRun(target string, f *file, fn fn, fail bool) {
	cmd := "python -m pytest " + target + " -x -q"
	var b strings.Builder
	fmt.Fprintf(&b, "============================= test session starts ==============================\nplatform linux -- Python 3.12.4, pytest-8.3.2, pluggy-1.5.0\nrootdir: /repo\ncollected %d items\n\n", 20+g.r.IntN(60))
	n := 10 + g.r.IntN(40)
	if !fail {
		fmt.Fprintf(&b, "%s %s [100%%]\n\n%d passed in %.2fs", target, strings.Repeat(".", n), n, 0.2+g.r.Float64()*3)
		g.call("Run the tests again.", "Bash", map[string]any{"command": cmd, "description": "Run tests"}, b.String(), false)
		return
	}
	line := fn.at + 2 + g.r.IntN(3)
	if line >= len(f.lines) {
		line = fn.at
	}
	fmt.Fprintf(&b, "%s %sF\n\n=================================== FAILURES ===================================\n", target, strings.Repeat(".", n))
	fmt.Fprintf(&b, "____________________________ test_%s ____________________________\n\n", fn.name)
	fmt.Fprintf(&b, "    def test_%s():\n        svc = make_service()\n>       assert svc.%s(%d, strict=True) is not None\n\n", fn.name, fn.name, 1000+g.r.IntN(9000))
	for k := max(fn.at, line-3); k <= line && k < len(f.lines); k++ {
		mark := "    "
		if k == line {
			mark = ">   "
		}
		fmt.Fprintf(&b, "%s%s\n", mark, f.lines[k])
	}
	fmt.Fprintf(&b, "E   AssertionError: %s returned None for a %s with status %d\n\n", fn.name, pick(g.r, nouns), g.r.IntN(5))
	fmt.Fprintf(&b, "%s:%d: AssertionError\n=========================== short test summary info ============================\nFAILED %s::test_%s - AssertionError\n1 failed, %d passed in %.2fs", f.path, line+1, target, fn.name, n, 0.2+g.r.Float64()*3)
	g.call("Run the tests.", "Bash", map[string]any{"command": cmd, "description": "Run tests"}, b.String(), true)
}

// edit replaces a few lines of fn, copied from the agent's last read of f
// (which may be long before); false when those lines are no longer in the
// file exactly once, as Claude Code's Edit requires.
func (g *gen) edit(f *file, fn fn) bool {
	seen := g.seen[f.path]
	def := slices.IndexFunc(seen, func(l string) bool { return strings.Contains(l, "def "+fn.name+"(") })
	if def < 0 {
		return false
	}
	start, n := def+1+g.r.IntN(3), 1+g.r.IntN(4)
	if start+n > len(seen) {
		return false
	}
	old := strings.Join(seen[start:start+n], "\n")
	joined := strings.Join(f.lines, "\n")
	pos := strings.Index(joined, old)
	if strings.Count(joined, old) != 1 || pos > 0 && joined[pos-1] != '\n' ||
		pos+len(old) < len(joined) && joined[pos+len(old)] != '\n' {
		return false
	}
	at := strings.Count(joined[:pos], "\n")
	repl := make([]string, 0, n+1)
	for _, l := range seen[start : start+n] {
		repl = append(repl, strings.Replace(l, "strict", "strict and not self.cache_ttl", 1))
	}
	repl = append(repl, fmt.Sprintf("        # %s: keep %s consistent", fn.name, pick(g.r, nouns)))
	f.lines = slices.Concat(f.lines[:at], repl, f.lines[at+n:])
	f.locate()
	snippet := numbered(f.lines[max(0, at-3):min(len(f.lines), at+len(repl)+3)], max(0, at-3))
	g.call(fmt.Sprintf("The bug is in `%s`: fix it.", fn.name), "Edit",
		map[string]any{"file_path": "/repo/" + f.path, "old_string": old, "new_string": strings.Join(repl, "\n")},
		"The file /repo/"+f.path+" has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n"+snippet, false)
	return true
}

func (g *gen) session() []trajectory.Message {
	r := g.r
	g.seen = map[string][]string{}
	for k := 0; k < 8+r.IntN(10); k++ {
		g.files = append(g.files, module(r, fmt.Sprintf("src/%s/%s_%s.py", pick(r, pkgs), pick(r, nouns), pick(r, []string{"service", "repository", "models", "views", "utils"}))))
	}
	target := g.files[0]
	first := target.funcs[0]
	g.say("system", "You are Claude Code, Anthropic's official CLI for Claude.")
	g.say("user", fmt.Sprintf("The checkout tests fail since the last refactor; start from `%s` in %s and make the whole suite pass.", first.name, target.path))
	var tree []string
	for _, f := range g.files {
		tree = append(tree, f.path)
	}
	g.call("Let me look at the repository.", "Bash", map[string]any{"command": "find src -name '*.py' | sort", "description": "List modules"}, strings.Join(tree, "\n"), false)
	bugs := 12 + r.IntN(24)
	for b := 0; b < bugs; b++ {
		// Work on a file: a new one, or (a third of the time) one read long
		// ago, edited from that read without reading it again.
		var f *file
		if b > 2 && r.IntN(3) == 0 {
			var old []*file
			for _, x := range g.files {
				if g.seen[x.path] != nil {
					old = append(old, x)
				}
			}
			f = pick(r, old)
		} else {
			f = pick(r, g.files)
		}
		fn := pick(r, f.funcs)
		if r.IntN(2) == 0 {
			for _, h := range g.grep(fn.name) {
				if h != f && g.seen[h.path] == nil && r.IntN(3) == 0 {
					g.read(h, "Open a file the search found.")
				}
			}
		}
		if g.seen[f.path] == nil {
			g.read(f, fmt.Sprintf("Read %s.", f.path))
		}
		test := "tests/test_" + strings.TrimSuffix(f.path[strings.LastIndexByte(f.path, '/')+1:], ".py") + ".py"
		g.testRun(test, f, fn, true)
		for try := 0; try < 1+r.IntN(3); try++ {
			if !g.edit(f, fn) {
				g.read(f, "The file changed; read it again.")
				g.edit(f, fn)
			}
			g.testRun(test, f, fn, try < 1 && r.IntN(3) == 0)
		}
		if r.IntN(4) == 0 {
			body := fmt.Sprintf("from %s import *\n\n\ndef test_%s_regression():\n    assert %s is not None\n", strings.ReplaceAll(strings.TrimSuffix(f.path, ".py"), "/", "."), fn.name, fn.name)
			g.call("Add a regression test.", "Write", map[string]any{"file_path": "/repo/tests/test_" + fn.name + ".py", "content": body}, "File created successfully at: /repo/tests/test_"+fn.name+".py", false)
		}
	}
	g.testRun("tests", target, first, false)
	g.say("assistant", fmt.Sprintf("All tests pass now. I fixed %d functions across %d files.", bugs, len(g.seen)))
	return g.msgs
}
