package e2e

// Unit tests of the harness pieces that need no Pi: the LongSession script's
// decisions and the request helpers. They always run.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// convo builds OpenAI request bodies the way Pi sends them.
type convo struct {
	tools []string
	msgs  []map[string]any
}

func newConvo(tools ...string) *convo {
	c := &convo{tools: tools}
	c.msgs = append(c.msgs, map[string]any{"role": "system", "content": "You are pi. Tags look like {#<code> FOLDED}."})
	c.msgs = append(c.msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": longPrompt}}})
	return c
}

// answer appends the assistant tool calls of r and a tool result for each.
func (c *convo) answer(r fakellm.Reply, result func(fakellm.ToolCall) string) {
	var calls []any
	for _, tc := range r.ToolCalls {
		calls = append(calls, map[string]any{"id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": string(tc.Arguments)}})
	}
	c.msgs = append(c.msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
	for _, tc := range r.ToolCalls {
		c.msgs = append(c.msgs, map[string]any{"role": "tool", "content": result(tc), "tool_call_id": tc.ID})
	}
}

func (c *convo) request(t *testing.T) *fakellm.Request {
	t.Helper()
	body := map[string]any{"model": "fake-model", "messages": c.msgs, "stream": true}
	if len(c.tools) > 0 {
		var tools []any
		for _, n := range c.tools {
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": n}})
		}
		body["tools"] = tools
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := fakellm.ParseOpenAI(b)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func callOf(t *testing.T, r fakellm.Reply) fakellm.ToolCall {
	t.Helper()
	if len(r.ToolCalls) != 1 {
		t.Fatalf("reply %+v, want one tool call", r)
	}
	return r.ToolCalls[0]
}

func TestLongSessionPhases(t *testing.T) {
	s := &LongSession{Steps: 3}
	c := newConvo("bash", "recall_folded", "unfold")
	// A fake fold: outputs of steps 1 and 2 are replaced by tags.
	codes := map[string]string{GenCallID(1): "a1b2c3", GenCallID(2): "d4e5f6"}
	for i := 1; i <= 3; i++ {
		req := c.request(t)
		r := s.Reply(req)
		if r2 := s.Reply(req); fmt.Sprint(r2) != fmt.Sprint(r) {
			t.Fatalf("a retried request got a different reply: %+v vs %+v", r, r2)
		}
		tc := callOf(t, r)
		if tc.ID != GenCallID(i) || tc.Name != "bash" || string(tc.Arguments) != fmt.Sprintf(`{"command":"bash gen.sh %d"}`, i) {
			t.Fatalf("step %d: %+v (%s)", i, tc, tc.Arguments)
		}
		c.answer(r, func(tc fakellm.ToolCall) string { return "output of " + tc.ID })
	}
	for _, m := range c.msgs {
		if code, ok := codes[fmt.Sprint(m["tool_call_id"])]; ok {
			m["content"] = "[step output] {#" + code + " FOLDED}"
		}
	}

	r := s.Reply(c.request(t))
	if tc := callOf(t, r); tc.ID != RecallCallID || tc.Name != "recall_folded" || string(tc.Arguments) != `{"codes":["a1b2c3"]}` {
		t.Fatalf("recall: %+v (%s)", tc, tc.Arguments)
	}
	c.answer(r, func(fakellm.ToolCall) string { return "=== a1b2c3 ===\noutput of call_gen_1" })

	r = s.Reply(c.request(t))
	if tc := callOf(t, r); tc.ID != UnfoldCallID || tc.Name != "unfold" || string(tc.Arguments) != `{"codes":["a1b2c3"]}` {
		t.Fatalf("unfold: %+v (%s)", tc, tc.Arguments)
	}
	c.answer(r, func(fakellm.ToolCall) string { return "Expanded 1 block(s)" })

	if r = s.Reply(c.request(t)); r.Text != "FINAL: done after 3 steps" || len(r.ToolCalls) != 0 {
		t.Fatalf("final: %+v", r)
	}
	if got := s.Recalled(); len(got) != 1 || got[0] != "a1b2c3" {
		t.Errorf("Recalled() = %v", got)
	}
	if got := s.Unfolded(); len(got) != 1 || got[0] != "a1b2c3" {
		t.Errorf("Unfolded() = %v", got)
	}
}

func TestLongSessionSkipsAndSummaries(t *testing.T) {
	// Without tags (or without the tools) the recall and unfold phases are
	// skipped.
	s := &LongSession{Steps: 1}
	c := newConvo("bash")
	c.answer(s.Reply(c.request(t)), func(fakellm.ToolCall) string { return "{#a1b2c3 FOLDED}" })
	if r := s.Reply(c.request(t)); r.Text == "" {
		t.Errorf("without recall tools: %+v", r)
	}
	s = &LongSession{Steps: 1, SkipRecall: true, SkipUnfold: true, Final: "bye"}
	c = newConvo("bash", "recall_folded", "unfold")
	c.answer(s.Reply(c.request(t)), func(fakellm.ToolCall) string { return "{#a1b2c3 FOLDED}" })
	if r := s.Reply(c.request(t)); r.Text != "bye" {
		t.Errorf("skipped phases: %+v", r)
	}

	// A compaction summary carries the progress, and the next request
	// continues from it.
	s = &LongSession{Steps: 5, SkipRecall: true}
	sumReq := (&convo{msgs: []map[string]any{
		{"role": "system", "content": "You are a context summarization assistant."},
		{"role": "user", "content": "# Conversation\n[User]: run gen.sh 99 times\n\n[Assistant tool calls]: bash(command=\"bash gen.sh 1\")\n\n" +
			"[Tool result]: x\n\n[Assistant tool calls]: bash(command=\"bash gen.sh 2\")\n\n[Tool result]: y\n\n" +
			"[Assistant tool calls]: unfold(codes=[\"a1b2c3\"])"},
	}}).request(t)
	summary := s.Summary(sumReq)
	if !strings.Contains(summary, "[longsession progress: steps=2 recall=pending unfold=done]") {
		t.Fatalf("summary %q", summary)
	}
	c = &convo{tools: []string{"bash"}, msgs: []map[string]any{
		{"role": "system", "content": "sys"},
		{"role": "user", "content": "The conversation history before this point was compacted into the following summary:\n\n<summary>\n" + summary + "</summary>"},
	}}
	if tc := callOf(t, s.Reply(c.request(t))); tc.ID != GenCallID(3) {
		t.Errorf("after summary: %+v", tc)
	}

	// The safety net ends a session that never shows progress.
	s = &LongSession{Steps: 2, MaxReplies: 3}
	req := newConvo("bash").request(t)
	for range 3 {
		s.Reply(req)
	}
	if r := s.Reply(req); !strings.HasPrefix(r.Text, "LONGSESSION ABORTED") {
		t.Errorf("safety net: %+v", r)
	}
}

func TestFoldedTags(t *testing.T) {
	text := "a {#abc123 FOLDED} b {#zz9999 FOLDED} {#abc123 FOLDED} {#ABC123 FOLDED} {#abc12 FOLDED} {#<code> FOLDED}"
	if got := FoldedCodes(text); strings.Join(got, ",") != "abc123,zz9999" {
		t.Errorf("FoldedCodes = %v", got)
	}
	c := newConvo("bash")
	c.msgs = append(c.msgs, map[string]any{"role": "tool", "content": "x {#abc123 FOLDED}", "tool_call_id": GenCallID(4)})
	tags := FoldedTags(c.request(t))
	if len(tags) != 1 || tags[0] != (FoldedTag{Code: "abc123", Msg: 2, Role: "tool", ToolCallID: GenCallID(4)}) {
		t.Errorf("FoldedTags = %+v", tags)
	}
	if i, ok := StepOfCallID(tags[0].ToolCallID); !ok || i != 4 {
		t.Errorf("StepOfCallID = %d, %v", i, ok)
	}
	if _, ok := StepOfCallID(RecallCallID); ok {
		t.Error("StepOfCallID accepted call_recall")
	}
}

func TestPrefixHelpers(t *testing.T) {
	c := newConvo("bash")
	r1 := c.request(t)
	c.answer(fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "c1", Name: "bash", Arguments: json.RawMessage(`{}`)}}},
		func(fakellm.ToolCall) string { return "out" })
	r2 := c.request(t)
	if err := CheckBytePrefix(r1, r2); err != nil {
		t.Errorf("append-only: %v", err)
	}
	if d := FirstMessageDiff(r1.Messages, r2.Messages); d != -1 {
		t.Errorf("FirstMessageDiff = %d", d)
	}
	if errs := PrefixBreaks([]fakellm.Recorded{{Request: *r1}, {Request: *r2}}); len(errs) != 0 {
		t.Errorf("PrefixBreaks = %v", errs)
	}

	c.msgs[1]["content"] = "rewritten prompt"
	r3 := c.request(t)
	err := CheckBytePrefix(r2, r3)
	if err == nil || !strings.Contains(err.Error(), "(message 1)") {
		t.Errorf("rewrite not reported at message 1: %v", err)
	}
	if d := FirstMessageDiff(r2.Messages, r3.Messages); d != 1 {
		t.Errorf("FirstMessageDiff = %d", d)
	}

	a := fakellm.Message{Raw: json.RawMessage(`{"role":"tool","content":"x","tool_call_id":"c1"}`)}
	b := fakellm.Message{Raw: json.RawMessage(`{ "tool_call_id": "c1", "role": "tool", "content": "x" }`)}
	if !SameMessage(a, b) || SameMessage(a, fakellm.Message{Raw: json.RawMessage(`{"role":"tool","content":"y"}`)}) {
		t.Error("SameMessage")
	}
	if got := string(Canonical([]byte(`{"b":1.50,"a":["<x>"]}`))); got != `{"a":["<x>"],"b":1.50}` {
		t.Errorf("Canonical = %s", got)
	}
}

func TestGenScript(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gen.sh")
	if err := os.WriteFile(path, []byte(GenScript(40)), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(step int) string {
		out, err := exec.Command("/bin/bash", path, fmt.Sprint(step)).Output()
		if err != nil {
			t.Fatalf("gen.sh %d: %v", step, err)
		}
		return string(out)
	}
	o7 := run(7)
	lines := strings.Split(strings.TrimSuffix(o7, "\n"), "\n")
	if len(lines) != 41 || lines[19] != "ERROR: step 7 failed" || len(o7) < 3000 {
		t.Errorf("gen.sh 7: %d lines, %d bytes, line 20 %q", len(lines), len(o7), lines[min(19, len(lines)-1)])
	}
	if run(7) != o7 || run(8) == o7 || strings.Count(o7, "ERROR") != 1 {
		t.Error("gen.sh is not deterministic per step or not distinct across steps")
	}
}
