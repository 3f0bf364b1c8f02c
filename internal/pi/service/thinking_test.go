package service

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/engine"
)

func TestDroppedThinkingFromDiagnostics(t *testing.T) {
	cases := []struct {
		msg  string
		n    int
		isOK bool
	}{
		{`{"role":"assistant","content":[],"diagnostics":[{"type":"anthropic_input_transformations","timestamp":1,"details":{"transformations":[` +
			`{"type":"thinking_dropped","path":"messages.3.content.0","reason":"prefix_binding_mismatch"},` +
			`{"type":"thinking_mismatch_allowed","path":"messages.5.content.0"},` +
			`{"type":"thinking_dropped","path":"messages.7.content.0","reason":"model_binding_mismatch"}]}}]}`, 2, true},
		{`{"role":"assistant","content":[],"diagnostics":[{"type":"openai_input_transformations","details":{"transformations":[` +
			`{"type":"reasoning","id":"rs_1","action":"removed","reason":"prefix_mismatch"}]}},{"type":"other"}]}`, 1, true},
		{`{"role":"assistant","content":[]}`, 0, true},
		{`{"role":"assistant","diagnostics":"bad"}`, 0, true},
		{`{"role":"toolResult","diagnostics":[]}`, 0, false},
		{`{"role":"assistant","stopReason":"aborted","content":[]}`, 0, false}, // no answer to judge by
		{`not json`, 0, false},
	}
	for _, c := range cases {
		n, ok := droppedThinking([]byte(c.msg))
		if n != c.n || ok != c.isOK {
			t.Errorf("%.60s: %d %v, want %d %v", c.msg, n, ok, c.n, c.isOK)
		}
	}
}

func TestThinkingLogAttributesDropsToEvents(t *testing.T) {
	drops := func(n int) []byte {
		s := `{"role":"assistant","content":[],"diagnostics":[{"type":"anthropic_input_transformations","details":{"transformations":[`
		for i := 0; i < n; i++ {
			if i > 0 {
				s += ","
			}
			s += `{"type":"thinking_dropped"}`
		}
		return []byte(s + `]}}]}`)
	}
	l := newThinkingLog()
	if l.lines() != nil {
		t.Fatal("status lines before any event")
	}
	l.observe([][]byte{drops(0)})
	l.event(1, engine.ThinkingCost{Invalidated: 5, Folded: 4, Dropped: 1, Lost: []string{"a:x:p0"}}, false)
	l.observe([][]byte{drops(7), []byte(`{"role":"toolResult"}`), drops(1), []byte(`{"role":"assistant","stopReason":"error"}`)})
	l.event(2, engine.ThinkingCost{Invalidated: 3, Folded: 2, Dropped: 1}, false)
	l.observe([][]byte{drops(2)})
	got := strings.Join(l.lines(), "\n")
	for _, want := range []string{
		"invalidated 8 signed blocks: 6 folded with the event, 2 left to the provider",
		"the latest response reports 2 dropped",
		"event 1: invalidated 5, folded 4, expected dropped 1 · provider dropped +1",
		"event 2: invalidated 3, folded 2, expected dropped 1 · provider dropped +1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	// A replayed event is shown without a provider answer to wait for.
	r := newThinkingLog()
	r.event(3, engine.ThinkingCost{Invalidated: 1, Dropped: 1}, true)
	if got := strings.Join(r.lines(), "\n"); !strings.Contains(got, "invalidated 1 signed blocks") || !strings.Contains(got, "event 3: invalidated 1, folded 0, expected dropped 1 · from an earlier run") {
		t.Errorf("after a resume: %s", got)
	}
}

func TestReplayedThinkingCountsAcceptedEventsOnce(t *testing.T) {
	rec := `{"id":"r:c1","code":"abc123","seq":%d,"bytes":10,"lines":1,"sha256":"x","kind":"tool_result","digest":"{#abc123 FOLDED} d"}`
	fold := func(seq int, code string) json.RawMessage {
		r := strings.Replace(fmt.Sprintf(rec, seq), "abc123", code, -1)
		r = strings.Replace(r, `"r:c1"`, `"r:`+code+`"`, 1)
		return json.RawMessage(fmt.Sprintf(`{"v":1,"kind":"fold","seq":%d,"folds":[%s],"thinking":{"invalidated":3,"folded":2,"dropped":1,"lost":["a:x:p0"]}}`, seq, r))
	}
	entries := []json.RawMessage{
		fold(1, "aaaaa1"),
		fold(1, "aaaaa1"), // the same event persisted twice
		fold(2, "bbbbb2"),
		json.RawMessage(`{"v":1,"kind":"void","seq":2}`),
		fold(3, "ccccc3"),
	}
	s := New(nil, nil)
	if _, err := s.open(OpenParams{SessionID: "s", Entries: entries}); err != nil {
		t.Fatal(err)
	}
	if got := s.s.thinking.sum; got.Invalidated != 6 || got.Dropped != 2 || len(s.s.thinking.events) != 2 {
		t.Errorf("replayed %+v over %d events, want events 1 and 3 only", got, len(s.s.thinking.events))
	}
}
