package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/bench/trajectory"
)

func TestRefs(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"see /testbed/django/db/models.py", []string{"see /testbed/django/db/models.py", "/testbed/django/db/models.py", "testbed/django/db/models.py", "django/db/models.py", "db/models.py", "models.py"}},
		{"parse_header, ParseHeader", []string{"parse_header, ParseHeader", "parse_header", "ParseHeader"}},
		{"not parse or __init__", nil},
		{"self.assertEqual(x)", []string{"self.assertEqual", "assertEqual"}},
		{"at 1057 (E01057) 0x1f3a", []string{"1057", "E01057", "0x1f3a"}},
		{"sed -n 1015,1026p x > /dev/null", []string{"sed -n 1015,1026p x > /dev/null", "1015"}},
		{"not 42 or v1.2", nil},
		{"    return self.cleaned_data['email']  ", []string{"return self.cleaned_data['email']", "self.cleaned_data", "cleaned_data"}},
		{"----------------------------------------", nil},
	}
	for _, tt := range tests {
		if got := Refs(tt.text); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Refs(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
	for r, want := range map[string]string{"db/models.py": "path", "ParseHeader": "name", "E01057": "number", "1057": "number", "return self.cleaned_data['email']": "line", "models.py": "name"} {
		if got := RefClass(r); got != want {
			t.Errorf("RefClass(%q) = %s, want %s", r, got, want)
		}
	}
}

// handMade is a four-step session: a failing test run, an unrelated
// listing, then an action that uses what the failing run printed.
func handMade() *Trace {
	str := func(s string) *string { return &s }
	call := func(id, cmd string) []trajectory.Call {
		args, _ := json.Marshal(map[string]string{"command": cmd})
		return []trajectory.Call{{ID: id, Name: "bash", Arguments: args}}
	}
	ms := []trajectory.Message{
		{Role: "user", Text: "fix the failing test"},
		{Role: "assistant", Text: "Run the tests first.", ToolCalls: call("c1", "go test ./...")},
		{Role: "toolResult", ToolCallID: str("c1"), ToolName: str("bash"), Text: "--- FAIL: TestParseHeader (0.00s)\n    parser_test.go:1057: got ErrBadMagic, want nil\nFAIL\tgithub.com/acme/widget/internal/parser\t0.012s"},
		{Role: "assistant", Text: "Look around.", ToolCalls: call("c2", "ls")},
		{Role: "toolResult", ToolCallID: str("c2"), ToolName: str("bash"), Text: "README.md\ngo.mod"},
		{Role: "assistant", Text: "TestParseHeader fails with ErrBadMagic.", ToolCalls: call("c3", "sed -n 1050,1060p internal/parser/parser_test.go # line 1057")},
		{Role: "toolResult", ToolCallID: str("c3"), ToolName: str("bash"), Text: "ok"},
	}
	return Prepare("hand", "made", ms, DefaultSystemTokens)
}

// TestHiddenRefsHandMade checks the metric on a session whose answer is
// known: what the third action takes from the failing run.
func TestHiddenRefsHandMade(t *testing.T) {
	tr := handMade()
	k := len(tr.Requests) - 1 // the request before the third action
	if tr.Requests[k] != 5 {
		t.Fatalf("request %d precedes message %d", k, tr.Requests[k])
	}
	// The action's references that came from the context: all from the
	// failing run (message 2).
	want := []string{"TestParseHeader", "ErrBadMagic", "parser_test.go", "parser_test", "1057"}
	if got := tr.refs().action[k]; !reflect.DeepEqual(got, want) {
		t.Fatalf("context references %q, want %q", got, want)
	}
	seen := func(repl map[int]string) []Seen {
		s := rawSeen(tr, nil, 0, 5)
		for i, text := range repl {
			s[i] = Seen{I: i, Text: text}
		}
		return s
	}
	tests := []struct {
		name   string
		msgs   []Seen
		hidden int
	}{
		{"raw shows everything", seen(nil), 0},
		{"the failing run cleared", seen(map[int]string{2: "[cleared]"}), 5},
		{"an unrelated result cleared", seen(map[int]string{4: "[cleared]"}), 0},
		{"a digest keeping the error line", seen(map[int]string{2: "{#abcdef FOLDED} bash → 3 lines\nparser_test.go:1057: got ErrBadMagic, want nil"}), 1},
		{"compacted away behind a summary", append([]Seen{{I: -1, Text: "(summary)"}}, rawSeen(tr, nil, 3, 5)...), 5},
	}
	for _, tt := range tests {
		m := newRefMeter(tr, 10)
		m.observe(k, tt.msgs)
		if m.out.Context != 5 || m.out.Hidden != tt.hidden {
			t.Errorf("%s: %d of %d hidden, want %d of 5: %+v", tt.name, m.out.Hidden, m.out.Context, tt.hidden, m.out.Samples)
		}
		// The breakdown: all five sat in the failing run's tool result,
		// three messages before the action (5 − 2); two are names
		// (TestParseHeader, ErrBadMagic), parser_test.go and parser_test
		// names too, 1057 a number. Whatever the policy, the context
		// counts stay; the hidden ones follow.
		bd := m.out.Breakdown
		wantIn := Tally{Context: 5, Hidden: tt.hidden}
		if bd["in/tool result"] != wantIn || bd[AgeBucket(3)] != wantIn || bd["in/other message"].Context != 0 {
			t.Errorf("%s: breakdown by place and age %+v, want all %+v in a tool result 3 messages back", tt.name, bd, wantIn)
		}
		if got := bd["kind/name"].Context + bd["kind/number"].Context; got != 5 || bd["kind/number"].Context != 1 {
			t.Errorf("%s: breakdown by kind %+v, want 4 names and 1 number", tt.name, bd)
		}
		if tt.hidden > 0 && (m.out.WithHidden != 1 || m.out.Recall[k] != tr.Tokens[2]) {
			t.Errorf("%s: %d requests with one, recall of %d tokens, want 1 and message 2's %d", tt.name, m.out.WithHidden, m.out.Recall[k], tr.Tokens[2])
		}
	}
	// A reference the agent itself wrote earlier stays visible in its own
	// message when the result is cleared.
	tr.Text[1] += "\nTestParseHeader is the one"
	tr.refIdx = nil
	m := newRefMeter(tr, 10)
	m.observe(k, seen(map[int]string{2: "[cleared]"}))
	if m.out.Hidden != 4 {
		t.Errorf("with the name in the agent's own message: %d hidden, want 4", m.out.Hidden)
	}
}

// TestTraceRoundTrip writes traces of two policies and recomputes the
// hidden-reference figures from them: they must equal the bench's.
func TestTraceRoundTrip(t *testing.T) {
	dir := t.TempDir()
	traces := loadDir(t, "../../testdata/trajectories")
	pols := []Policy{Raw{}, ObservationMasking{M: 10}, DefaultPolicies()[5]}
	rep, err := Run(traces, Options{Windows: []int{32_000}, SystemTokens: DefaultSystemTokens, Policies: pols,
		Trace: dir, TracePolicies: []string{"default", "observation-masking(M=10)"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Windows[0].Overall {
		files, _ := filepath.Glob(filepath.Join(dir, Slug(r.Policy)+"-32k", "*", "*.jsonl.gz"))
		if r.Policy == "raw" {
			if len(files) != 0 {
				t.Fatalf("raw was traced though not asked for: %v", files)
			}
			continue
		}
		if len(files) != len(traces) {
			t.Fatalf("%s: %d trace files for %d trajectories", r.Policy, len(files), len(traces))
		}
		var sum HiddenRefs
		affected := 0
		for _, tr := range traces {
			h, err := RefsFromTrace(TracePath(dir, r.Policy, 32_000, tr), tr)
			if err != nil {
				t.Fatal(err)
			}
			sum.Context += h.Context
			sum.Hidden += h.Hidden
			sum.Requests += h.Requests
			sum.WithHidden += h.WithHidden
			if h.WithHidden > 0 {
				affected++
			}
		}
		got := fmt.Sprint(sum.Context, sum.Hidden, sum.Requests, sum.WithHidden, affected)
		want := fmt.Sprint(r.Refs, r.RefsHidden, r.RefRequests, r.WithHidden, r.Affected)
		if got != want || r.RefsHidden == 0 {
			t.Errorf("%s: from the traces %s, the bench says %s (context, hidden, requests, with one, sessions)", r.Policy, got, want)
		}
		t.Logf("%s: %s", r.Policy, want)
	}
	// A trace that does not match its trajectory is refused.
	other := handMade()
	if _, err := RefsFromTrace(TracePath(dir, ShippedName, 32_000, traces[0]), other); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("mismatched trace: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}

// TestTraceKeepsLoneSurrogates: block text keeps a lone surrogate as
// WTF-8; a trace must give it back byte-exact, or a message sent unchanged
// would read back as rewritten.
func TestTraceKeepsLoneSurrogates(t *testing.T) {
	tr := handMade()
	text := "error: bad \xed\xa0\x80 surrogate and <html> & \"quotes\"\n\ttab"
	w, err := CreateTrace(t.TempDir(), "x", 32_000, tr)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(0, []Seen{{I: 0, Text: text}, {I: -1, Text: "summary"}})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var got []TraceEntry
	if err := ReadTrace(w.f.Name(), func(l TraceLine) error { got = l.Messages; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Text != text || *got[0].I != 0 || got[1].I != nil {
		t.Fatalf("read back %+v", got)
	}
}
