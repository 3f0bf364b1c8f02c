package fakellm

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// antReq builds a Messages API body the way Pi does: system and the last
// tool carry a breakpoint, and so does the last block of the last message.
type antReq struct {
	model    string
	system   string
	thinking map[string]any
	msgs     []map[string]any
	betas    []string
}

func (a antReq) body() string {
	msgs := make([]any, len(a.msgs))
	for i, m := range a.msgs {
		c := map[string]any{}
		for k, v := range m {
			c[k] = v
		}
		if i == len(a.msgs)-1 {
			blocks := append([]any(nil), c["content"].([]any)...)
			last := map[string]any{}
			for k, v := range blocks[len(blocks)-1].(map[string]any) {
				last[k] = v
			}
			last["cache_control"] = map[string]any{"type": "ephemeral"}
			blocks[len(blocks)-1] = last
			c["content"] = blocks
		}
		msgs[i] = c
	}
	body := map[string]any{
		"model": a.model, "max_tokens": 4096, "stream": true,
		"system":   []any{map[string]any{"type": "text", "text": a.system, "cache_control": map[string]any{"type": "ephemeral"}}},
		"tools":    []any{map[string]any{"name": "bash", "input_schema": map[string]any{"type": "object"}, "cache_control": map[string]any{"type": "ephemeral"}}},
		"messages": msgs,
	}
	if a.thinking != nil {
		body["thinking"] = a.thinking
	}
	if a.betas != nil {
		body["betas"] = a.betas
	}
	b, _ := json.Marshal(body)
	return string(b)
}

func user(text string) map[string]any {
	return map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}}
}

func toolResult(id, text string) map[string]any {
	return map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": text, "is_error": false}}}
}

func assistant(blocks ...map[string]any) map[string]any {
	bs := make([]any, len(blocks))
	for i, b := range blocks {
		bs[i] = b
	}
	return map[string]any{"role": "assistant", "content": bs}
}

func thinkingBlock(text, sig string) map[string]any {
	return map[string]any{"type": "thinking", "thinking": text, "signature": sig}
}

func toolUse(id string) map[string]any {
	return map[string]any{"type": "tool_use", "id": id, "name": "bash", "input": map[string]any{"command": "ls"}}
}

// antScript thinks and calls bash on every request.
func antScript(req *Request) Reply {
	return Reply{Thinking: []string{"I will run step " + itoa(req.Seq)}, ToolCalls: []ToolCall{{ID: "toolu_" + itoa(req.Seq), Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)}}}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func sendAnt(t *testing.T, s *Server, body string) (int, string) {
	t.Helper()
	resp := post(t, s.AnthropicURL()+"/v1/messages?beta=true", body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var thinkingOn = map[string]any{"type": "enabled", "budget_tokens": 1024}
var dropBlock = map[string]any{"type": "adaptive", "block_binding": map[string]any{"prefix_mismatch_behavior": "drop_block"}}

// conversation runs n tool turns against s and returns the messages the
// client would send next, with every thinking block as minted.
func conversation(t *testing.T, s *Server, base antReq, n int) []map[string]any {
	t.Helper()
	msgs := []map[string]any{user("go")}
	for k := 0; k < n; k++ {
		r := base
		r.msgs = msgs
		if code, body := sendAnt(t, s, r.body()); code != http.StatusOK {
			t.Fatalf("turn %d: %d %s", k, code, body)
		}
		rec := s.Requests()[s.Len()-1]
		msgs = append(msgs, assistant(thinkingBlock(rec.Reply.Thinking[0], rec.Signatures[0]), toolUse(rec.Reply.ToolCalls[0].ID)),
			toolResult(rec.Reply.ToolCalls[0].ID, strings.Repeat("output line\n", 40)))
	}
	return msgs
}

func TestAnthropicThinkingRules(t *testing.T) {
	s := start(t, ScriptFunc(antScript), Options{MinCacheTokens: 1})
	base := antReq{model: "fake-claude-thinking", system: "sys", thinking: thinkingOn}
	msgs := conversation(t, s, base, 3)
	replace := func(i, j int, blk map[string]any) []map[string]any {
		out := append([]map[string]any(nil), msgs...)
		m := map[string]any{"role": out[i]["role"]}
		bs := append([]any(nil), out[i]["content"].([]any)...)
		bs[j] = blk
		m["content"] = bs
		out[i] = m
		return out
	}
	sig1 := msgs[1]["content"].([]any)[0].(map[string]any)["signature"].(string)
	cases := []struct {
		name   string
		msgs   []map[string]any
		status int
		want   string
	}{
		{"replay as minted", msgs, 200, ""},
		{"changed text under its signature", replace(1, 0, thinkingBlock("{#abc123 FOLDED} thought", sig1)), 400,
			"messages.1.content.0: Invalid `signature` in `thinking` block"},
		{"signature moved to another block", replace(3, 0, thinkingBlock("I will run step 2", sig1)), 400,
			"messages.3.content.0: Invalid `signature` in `thinking` block"},
		{"earlier thinking sent as text", replace(1, 0, map[string]any{"type": "text", "text": "{#abc123 FOLDED} thought"}), 200, ""},
		{"final cycle without its thinking", replace(5, 0, map[string]any{"type": "text", "text": "digest"}), 400,
			"messages.5.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`"},
		{"orphan tool_use", append(append([]map[string]any(nil), msgs[:6]...), user("hi")), 400, "without `tool_result` blocks immediately after"},
	}
	for _, c := range cases {
		r := base
		r.msgs = c.msgs
		code, body := sendAnt(t, s, r.body())
		if code != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %d %q", c.name, code, body, c.status, c.want)
		}
		if code == 400 && !strings.Contains(body, `"type":"invalid_request_error"`) {
			t.Errorf("%s: error shape %s", c.name, body)
		}
	}
	// Without thinking enabled the final-cycle rule does not apply.
	r := antReq{model: "fake-claude-thinking", system: "sys", msgs: replace(5, 0, map[string]any{"type": "text", "text": "digest"})}
	if code, body := sendAnt(t, s, r.body()); code != 200 {
		t.Errorf("thinking off: %d %s", code, body)
	}
}

func TestAnthropicPreservedThinking(t *testing.T) {
	s := start(t, ScriptFunc(antScript), Options{MinCacheTokens: 1})
	base := antReq{model: PreservedClaude, system: "sys", thinking: dropBlock, betas: []string{BindingBeta}}
	msgs := conversation(t, s, base, 4) // user, (a, r) × 4: assistants at 1, 3, 5, 7
	r := base
	r.msgs = msgs
	if code, body := sendAnt(t, s, r.body()); code != 200 || strings.Contains(body, "input_transformations") {
		t.Fatalf("unchanged replay: %d %s", code, body)
	}
	// Fold the tool result at message 2: the thinking at 3, 5 and 7 is bound
	// to a prefix that no longer exists; the one at 1 is not.
	folded := append([]map[string]any(nil), msgs...)
	folded[2] = toolResult(msgs[1]["content"].([]any)[1].(map[string]any)["id"].(string), "{#q6fnlt FOLDED} bash → 40 lines")
	r.msgs = folded
	code, body := sendAnt(t, s, r.body())
	if code != 200 {
		t.Fatalf("drop_block: %d %s", code, body)
	}
	got := s.Requests()[s.Len()-1].Dropped
	var paths []string
	for _, d := range got {
		paths = append(paths, d.Path+" "+d.Reason)
	}
	want := "messages.3.content.0 prefix_binding_mismatch,messages.5.content.0 prefix_binding_mismatch,messages.7.content.0 prefix_binding_mismatch"
	if strings.Join(paths, ",") != want {
		t.Errorf("dropped %v, want %s", paths, want)
	}
	if !strings.Contains(body, `"input_transformations":[{"type":"thinking_dropped","path":"messages.3.content.0","reason":"prefix_binding_mismatch"}`) {
		t.Errorf("input_transformations not in message_start: %s", body)
	}
	// Thinking minted after the change is bound to the new prefix.
	rec := s.Requests()[s.Len()-1]
	after := append(folded, assistant(thinkingBlock(rec.Reply.Thinking[0], rec.Signatures[0]), toolUse(rec.Reply.ToolCalls[0].ID)),
		toolResult(rec.Reply.ToolCalls[0].ID, "ok"))
	r.msgs = after
	sendAnt(t, s, r.body())
	if d := s.Requests()[s.Len()-1].Dropped; len(d) != 3 {
		t.Errorf("after the change: dropped %v, want the same three", d)
	}
	// Without drop_block the same change is a 400.
	r = antReq{model: PreservedClaude, system: "sys", thinking: map[string]any{"type": "adaptive"}, msgs: folded}
	if code, body := sendAnt(t, s, r.body()); code != 400 || !strings.Contains(body, "messages.3.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation.") {
		t.Errorf("without drop_block: %d %s", code, body)
	}
	// drop_block needs its beta.
	r = antReq{model: PreservedClaude, system: "sys", thinking: dropBlock, msgs: folded}
	if code, body := sendAnt(t, s, r.body()); code != 400 || !strings.Contains(body, "block_binding: Extra inputs are not permitted") {
		t.Errorf("without the beta: %d %s", code, body)
	}
	// Thinking removed from the start: the rest still passes. Removed from
	// the middle: the blocks after the gap fail.
	stripThinking := func(ms []map[string]any, i int) []map[string]any {
		out := append([]map[string]any(nil), ms...)
		out[i] = assistant(ms[i]["content"].([]any)[1].(map[string]any))
		return out
	}
	r = base
	r.msgs = stripThinking(msgs, 1)
	if code, body := sendAnt(t, s, r.body()); code != 200 || len(s.Requests()[s.Len()-1].Dropped) != 0 {
		t.Errorf("oldest thinking removed: %d %s", code, body)
	}
	r.msgs = stripThinking(msgs, 3)
	sendAnt(t, s, r.body())
	if d := s.Requests()[s.Len()-1].Dropped; len(d) != 2 || d[0].Path != "messages.5.content.0" {
		t.Errorf("middle thinking removed: dropped %v, want messages 5 and 7", d)
	}
	// The same change on an ordinary thinking model drops nothing.
	s2 := start(t, ScriptFunc(antScript), Options{MinCacheTokens: 1})
	plain := antReq{model: "fake-claude-thinking", system: "sys", thinking: thinkingOn}
	m2 := conversation(t, s2, plain, 4)
	m2[2] = toolResult(m2[1]["content"].([]any)[1].(map[string]any)["id"].(string), "{#q6fnlt FOLDED}")
	plain.msgs = m2
	if code, body := sendAnt(t, s2, plain.body()); code != 200 || len(s2.Requests()[s2.Len()-1].Dropped) != 0 {
		t.Errorf("ordinary model: %d %s", code, body)
	}
}

func TestAnthropicPromptCache(t *testing.T) {
	s := start(t, ScriptFunc(func(*Request) Reply { return Reply{Text: "ok"} }), Options{MinCacheTokens: 50})
	sys := strings.Repeat("s", 800) // 200 tokens and more with the JSON around it
	mk := func(msgs ...map[string]any) string {
		return antReq{model: "fake-claude", system: sys, msgs: msgs}.body()
	}
	usage := func(body string) Usage {
		t.Helper()
		if code, b := sendAnt(t, s, body); code != 200 {
			t.Fatalf("%d %s", code, b)
		}
		return s.Requests()[s.Len()-1].Usage
	}
	u1 := usage(mk(user("first " + strings.Repeat("x", 400))))
	if u1.Cached != 0 || u1.CacheWrite != u1.Prompt || u1.Prompt < 300 {
		t.Errorf("cold request: %+v, want everything written", u1)
	}
	// The breakpoint moved to a newer message: the old prefix is read back
	// through the lookback, only the new blocks are written.
	long := user("first " + strings.Repeat("x", 400))
	u2 := usage(mk(long, assistant(map[string]any{"type": "text", "text": "ok"}), user("second")))
	if u2.Cached != u1.Prompt || u2.CacheWrite != u2.Prompt-u1.Prompt {
		t.Errorf("moved breakpoint: %+v, want cached %d", u2, u1.Prompt)
	}
	// A change in the first message: only tools and system are read.
	u3 := usage(mk(user("FIRST "+strings.Repeat("x", 400)), assistant(map[string]any{"type": "text", "text": "ok"}), user("second")))
	if u3.Cached == 0 || u3.Cached >= u1.Prompt-100 || u3.Cached+u3.CacheWrite != u3.Prompt {
		t.Errorf("early change: %+v, want only tools and system read", u3)
	}
	// More than 20 blocks past the last written prefix: no hit.
	msgs := []map[string]any{long, assistant(map[string]any{"type": "text", "text": "ok"}), user("second")}
	for i := 0; i < 12; i++ {
		msgs = append(msgs, assistant(map[string]any{"type": "text", "text": "a"}), user("b"))
	}
	u4 := usage(mk(msgs...))
	if u4.Cached >= u2.Prompt {
		t.Errorf("beyond the lookback: %+v, want no read of the message prefix", u4)
	}
	// Five breakpoints are a 400.
	five := strings.Replace(mk(long), `"text":"first`, `"cache_control":{"type":"ephemeral"},"text":"first`, 1)
	five = strings.Replace(five, `"role":"user"`, `"role":"user","x":1`, 1)
	five = strings.Replace(five, `"system":[`, `"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}},`, 1)
	if code, body := sendAnt(t, s, five); code != 400 || !strings.Contains(body, "A maximum of 4 blocks with cache_control") {
		t.Errorf("five breakpoints: %d %s", code, body)
	}
	// Expired entries are not read.
	clock := &fakeClock{}
	s2 := start(t, ScriptFunc(func(*Request) Reply { return Reply{Text: "ok"} }), Options{MinCacheTokens: 50, Now: clock.now})
	sendAnt(t, s2, mk(long))
	clock.advance(6 * 60)
	sendAnt(t, s2, mk(long, assistant(map[string]any{"type": "text", "text": "ok"}), user("second")))
	if u := s2.Requests()[1].Usage; u.Cached != 0 {
		t.Errorf("after six idle minutes: %+v, want a cold cache", u)
	}
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time {
	if c.t.IsZero() {
		c.t = time.Unix(1_800_000_000, 0)
	}
	return c.t
}

func (c *fakeClock) advance(sec int) { c.now(); c.t = c.t.Add(time.Duration(sec) * time.Second) }
