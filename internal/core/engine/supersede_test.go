package engine

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// tcall is one tool call of an assistant message in a supersede test.
type tcall struct{ id, name, args string }

// calls appends an assistant message with these tool calls.
func (s *session) calls(cs ...tcall) *session {
	s.resp++
	var parts []string
	for _, c := range cs {
		parts = append(parts, `{"type":"toolCall","id":`+rawjson.QuoteString(c.id)+`,"name":`+rawjson.QuoteString(c.name)+`,"arguments":`+c.args+`}`)
	}
	s.msgs = append(s.msgs, []byte(`{"role":"assistant","content":[`+strings.Join(parts, ",")+`],"api":"openai-completions","provider":"fake","model":"m","usage":{"input":1},"stopReason":"toolUse","timestamp":`+s.tick()+`,"responseId":"resp-`+strconv.Itoa(s.resp)+`"}`))
	return s
}

// res appends the result of call id of tool name.
func (s *session) res(id, name, text string, isError bool) *session {
	s.msgs = append(s.msgs, []byte(`{"role":"toolResult","toolCallId":`+rawjson.QuoteString(id)+`,"toolName":`+rawjson.QuoteString(name)+`,"content":[{"type":"text","text":`+rawjson.QuoteString(text)+`}],"isError":`+strconv.FormatBool(isError)+`,"timestamp":`+s.tick()+`}`))
	return s
}

func readArgs(p string, extra string) string {
	return `{"path":` + rawjson.QuoteString(p) + extra + `}`
}

func bashArgs(cmd string) string { return `{"command":` + rawjson.QuoteString(cmd) + `}` }

// superseded returns "result id → superseding id" for every superseded
// block the engine's view marks.
func superseded(e *Engine) []string {
	var out []string
	for _, vb := range e.view {
		if vb.Superseded {
			out = append(out, vb.ID+" → "+vb.SupersededBy+" ("+e.sup.later[vb.Order]+")")
		}
	}
	sort.Strings(out)
	return out
}

func TestSuperseded(t *testing.T) {
	file := output("src", 30)
	cases := []struct {
		name  string
		build func(s *session)
		want  []string
	}{
		{"read then read", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("src/x.ts", "")}).res("c1", "read", file, false)
			s.calls(tcall{"c2", "read", readArgs("./src/x.ts", "")}).res("c2", "read", file, false)
		}, []string{"r:c1 → r:c2 (read again later)"}},
		{"absolute and relative paths differ", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("src/x.ts", "")}).res("c1", "read", file, false)
			s.calls(tcall{"c2", "read", readArgs("/repo/src/x.ts", "")}).res("c2", "read", file, false)
		}, nil},
		{"read then edit", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("src/x.ts", "")}).res("c1", "read", file, false)
			s.calls(tcall{"c2", "edit", `{"path":"src/x.ts","oldText":"a","newText":"b"}`}).res("c2", "edit", "Successfully replaced text in src/x.ts.", false)
		}, []string{"r:c1 → r:c2 (edited later)"}},
		{"read then write", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("src/x.ts", `,"offset":10,"limit":5`)}).res("c1", "read", file, false)
			s.calls(tcall{"c2", "write", `{"path":"src/x.ts","content":"x"}`}).res("c2", "write", "Successfully wrote 1 bytes to src/x.ts", false)
		}, []string{"r:c1 → r:c2 (written later)"}},
		{"read then failed write", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("src/x.ts", "")}).res("c1", "read", file, false)
			s.calls(tcall{"c2", "write", `{"path":"src/x.ts","content":"x"}`}).res("c2", "write", "EACCES: permission denied", true)
		}, nil},
		{"read then failed read", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("src/x.ts", "")}).res("c1", "read", file, false)
			s.calls(tcall{"c2", "read", readArgs("src/x.ts", "")}).res("c2", "read", "ENOENT: no such file", true)
		}, nil},
		{"write without its result yet", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("src/x.ts", "")}).res("c1", "read", file, false)
			s.calls(tcall{"c2", "write", `{"path":"src/x.ts","content":"x"}`})
		}, nil},
		{"partial range covered by a wider one", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("a.go", `,"offset":10,"limit":20`)}).res("c1", "read", file, false)
			s.calls(tcall{"c2", "read", readArgs("a.go", `,"offset":5,"limit":40`)}).res("c2", "read", file, false)
		}, []string{"r:c1 → r:c2 (read again later)"}},
		{"wider range not covered by a partial one", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("a.go", `,"offset":5,"limit":40`)}).res("c1", "read", file, false)
			s.calls(tcall{"c2", "read", readArgs("a.go", `,"offset":10,"limit":20`)}).res("c2", "read", file, false)
			s.calls(tcall{"c3", "read", readArgs("a.go", `,"offset":30`)}).res("c3", "read", file, false)
		}, nil},
		{"a full read cut by Pi covers only what it showed", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("a.go", `,"offset":2500,"limit":10`)}).res("c1", "read", file, false)
			s.calls(tcall{"c2", "read", readArgs("a.go", "")}).res("c2", "read", file+"\n\n[Showing lines 1-2000 of 5000. Use offset=2001 to continue.]", false)
			s.calls(tcall{"c3", "read", readArgs("a.go", `,"offset":1,"limit":100`)}).res("c3", "read", file, false)
		}, nil}, // c2 shows lines 1-2000 only, so c1 (2500-2509) stays; c3 is later than c2
		{"a file that mentions Pi's notice is not cut by it", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("notes.md", "")}).res("c1", "read", "line 1\nPi says [Showing lines 1-50 of 300. Use offset=51 to continue.] when it cuts\nline 3", false)
			s.calls(tcall{"c2", "read", readArgs("notes.md", `,"offset":1,"limit":60`)}).res("c2", "read", "line 1", false)
		}, nil}, // c1 showed the whole file; c2 covers only lines 1-60
		{"bash repeated", func(s *session) {
			s.user("go").calls(tcall{"c1", "bash", bashArgs("npm run check")}).res("c1", "bash", "error TS2304", true)
			s.calls(tcall{"c2", "bash", bashArgs("  npm run check\n")}).res("c2", "bash", "ok", false)
		}, []string{"r:c1 → r:c2 (ran again later)"}},
		{"bash repeated, the later run fails", func(s *session) {
			s.user("go").calls(tcall{"c1", "bash", bashArgs("npm run check")}).res("c1", "bash", "ok", false)
			s.calls(tcall{"c2", "bash", bashArgs("npm run check")}).res("c2", "bash", "error TS2304", true)
		}, nil},
		{"bash different commands", func(s *session) {
			s.user("go").calls(tcall{"c1", "bash", bashArgs("npm run check")}).res("c1", "bash", "ok", false)
			s.calls(tcall{"c2", "bash", bashArgs("npm run check -- --strict")}).res("c2", "bash", "ok", false)
		}, nil},
		{"out-of-order parallel calls", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("a.go", "")}, tcall{"c2", "bash", bashArgs("ls")}).
				res("c2", "bash", "a.go", false).res("c1", "read", file, false)
			s.calls(tcall{"c3", "read", readArgs("a.go", "")}, tcall{"c4", "bash", bashArgs("ls")}).
				res("c4", "bash", "a.go", false).res("c3", "read", file, false)
		}, []string{"r:c1 → r:c3 (read again later)", "r:c2 → r:c4 (ran again later)"}},
		{"calls of one message never supersede each other", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("a.go", "")}, tcall{"c2", "edit", `{"path":"a.go","oldText":"a","newText":"b"}`}, tcall{"c3", "read", readArgs("a.go", "")}).
				res("c3", "read", file, false).res("c2", "edit", "ok", false).res("c1", "read", file, false)
		}, nil},
		{"a late result of an earlier call", func(s *session) {
			// The earlier call's result arrives after the later call's: it is
			// still the older content.
			s.user("go").calls(tcall{"c1", "read", readArgs("a.go", "")})
			s.calls(tcall{"c2", "read", readArgs("a.go", "")}).res("c2", "read", file, false).res("c1", "read", file, false)
		}, []string{"r:c1 → r:c2 (read again later)"}},
		{"openhands view then str_replace", func(s *session) {
			s.user("go").calls(tcall{"c1", "str_replace_editor", `{"command":"view","path":"/w/a.c","view_range":[10,40]}`}).res("c1", "str_replace_editor", file, false)
			s.calls(tcall{"c2", "str_replace_editor", `{"command":"view","path":"/w/a.c","view_range":[1,-1]}`}).res("c2", "str_replace_editor", file, false)
			s.calls(tcall{"c3", "str_replace_editor", `{"command":"str_replace","path":"/w/a.c","old_str":"a","new_str":"b"}`}).res("c3", "str_replace_editor", "edited", false)
		}, []string{"r:c1 → r:c2 (read again later)", "r:c2 → r:c3 (edited later)"}},
		{"shell reads", func(s *session) {
			s.user("go").calls(tcall{"c1", "bash", bashArgs("sed -n '10,20p' a.py")}).res("c1", "bash", file, false)
			s.calls(tcall{"c2", "bash", bashArgs("cd /testbed && cat a.py")}).res("c2", "bash", file, false)
			s.calls(tcall{"c3", "bash", bashArgs("cat /testbed/a.py")}).res("c3", "bash", file, false)
			s.calls(tcall{"c4", "bash", bashArgs("cat -n a.py")}).res("c4", "bash", file+"<elided_chars>\n9 characters elided", false)
			s.calls(tcall{"c5", "edit", `{"path":"/testbed/a.py","oldText":"a","newText":"b"}`}).res("c5", "edit", "ok", false)
		}, []string{"r:c2 → r:c3 (read again later)", "r:c3 → r:c5 (edited later)"}},
		// c1 reads the relative a.py, not /testbed/a.py; c4 was cut, so it
		// shows no range and supersedes nothing.
		{"shell commands that are not plain reads", func(s *session) {
			s.user("go").calls(tcall{"c1", "read", readArgs("a.py", "")}).res("c1", "read", file, false)
			s.calls(tcall{"c2", "bash", bashArgs("cat a.py | head")}).res("c2", "bash", file, false)
			s.calls(tcall{"c3", "bash", bashArgs("cat $F")}).res("c3", "bash", file, false)
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession()
			tc.build(s)
			e := New(shipped())
			e.Sync(0, s.msgs)
			if got := superseded(e); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("superseded = %q, want %q", got, tc.want)
			}
			// Incremental: one message at a time gives the same marks.
			inc := New(shipped())
			for i := range s.msgs {
				inc.Sync(i, s.msgs[i:i+1])
			}
			if got, want := superseded(inc), superseded(e); !reflect.DeepEqual(got, want) {
				t.Errorf("incremental superseded = %q, batch %q", got, want)
			}
			// A resync that drops the superseding messages clears the marks.
			inc.Sync(3, nil)
			if got := superseded(inc); len(got) != 0 {
				t.Errorf("after dropping to the first exchange: %q", got)
			}
		})
	}
}

// foldIDs is a policy that asks to fold fixed ids, outside IntoTail.
type foldIDs []string

func (p foldIDs) Conduct(*policy.View) policy.Decision {
	return policy.Decision{Fold: p, Trigger: policy.Economic}
}

// readThenList is a session that reads src/x.ts (c1) and then runs ls
// (c2), both outputs file, synced into a new engine.
func readThenList() (file string, s *session, e *Engine) {
	file = output("src", 200)
	s = newSession().user("go")
	s.calls(tcall{"c1", "read", readArgs("src/x.ts", "")}).res("c1", "read", file, false)
	s.calls(tcall{"c2", "bash", bashArgs("ls")}).res("c2", "bash", file, false)
	e = New(shipped())
	e.Sync(0, s.msgs)
	return file, s, e
}

func TestSupersededFoldsInTheTail(t *testing.T) {
	file, s, e := readThenList()
	// The digest computed before the read is superseded says so no more
	// once it is: Prepare must not freeze a stale text.
	e.Prepare(100)
	s.calls(tcall{"c3", "read", readArgs("src/x.ts", "")}).res("c3", "read", file, false)
	s.text("done")
	e.SetPolicy(foldIDs{"r:c1", "r:c2"})
	res := e.Step(Request{Keep: e.Len(), Append: s.msgs[e.Len():]}, nil)
	if res.Event == nil {
		t.Fatalf("no event (%+v)", res)
	}
	var got []string
	for _, rec := range res.Event.Folds {
		got = append(got, rec.ID)
	}
	// Every block is in the default 20k tail: only the superseded one folds.
	if !reflect.DeepEqual(got, []string{"r:c1"}) {
		t.Fatalf("folded %v, want only the superseded r:c1", got)
	}
	d := res.Event.Folds[0].Digest
	want := "{#" + digest.Code("r:c1") + " FOLDED} read src/x.ts → 200 lines, ~"
	if !strings.HasPrefix(d, want) || !strings.Contains(d, ", may have changed since; read again later · src line 0000") ||
		!strings.Contains(d, "\nERROR: src failed at step 100") {
		t.Fatalf("digest %q", d)
	}
}

// TestSupersedeReopensPrepare: a digest made stale by a later read lowers
// the mark Prepare and Step's prefetch start from, so the block is offered
// again; every block before the mark has its digest or cannot fold.
func TestSupersedeReopensPrepare(t *testing.T) {
	file, s, e := readThenList()
	for e.Prepare(100) {
	}
	check := func(when string) {
		t.Helper()
		for k := range e.prepared {
			if e.unprepared(k) {
				t.Fatalf("%s: block %d (%s) has no digest, below the prepared mark %d", when, k, e.tr.Blocks()[k].ID, e.prepared)
			}
		}
	}
	check("after Prepare")
	b, ok := e.Live("r:c1")
	if !ok {
		t.Fatal("no r:c1")
	}
	c1 := b.Order
	if e.prepared != len(e.tr.Blocks()) {
		t.Fatalf("Prepare stopped at %d of %d blocks", e.prepared, len(e.tr.Blocks()))
	}
	s.calls(tcall{"c3", "read", readArgs("src/x.ts", "")}).res("c3", "read", file, false)
	e.Sync(e.Len(), s.msgs[e.Len():])
	check("after the read that supersedes r:c1")
	if !e.unprepared(c1) {
		t.Fatal("r:c1's digest did not go stale")
	}
	for e.Prepare(100) {
	}
	check("after Prepare again")
	if e.unprepared(c1) {
		t.Fatal("Prepare did not offer r:c1 again")
	}
}
