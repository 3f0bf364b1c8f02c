package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// antClient plays a Claude Code-like client of the Messages API: adaptive
// thinking, the whole conversation every request, the assistant's content
// sent back exactly as the provider returned it (signatures included), and
// the last cache_control breakpoint moved to the newest block.
type antClient struct {
	model     string
	dropBlock bool
	msgs      []map[string]any
}

func (c *antClient) body() []byte {
	msgs := make([]any, len(c.msgs))
	for i, m := range c.msgs {
		msgs[i] = m
	}
	if n := len(c.msgs); n > 0 {
		// The moving breakpoint, on a copy: the stored message stays plain.
		last := c.msgs[n-1]
		blocks := last["content"].([]any)
		cp := append([]any(nil), blocks...)
		lb := map[string]any{}
		for k, v := range blocks[len(blocks)-1].(map[string]any) {
			lb[k] = v
		}
		lb["cache_control"] = map[string]any{"type": "ephemeral"}
		cp[len(cp)-1] = lb
		msgs[n-1] = map[string]any{"role": last["role"], "content": cp}
	}
	thinking := map[string]any{"type": "adaptive"}
	if c.dropBlock {
		thinking["block_binding"] = map[string]any{"prefix_mismatch_behavior": "drop_block"}
	}
	return []byte(js(map[string]any{
		"model": c.model, "max_tokens": 4096, "thinking": thinking, "messages": msgs,
		"system": []any{map[string]any{"type": "text", "text": "You are a test agent.", "cache_control": map[string]any{"type": "ephemeral"}}},
		"tools":  []any{map[string]any{"name": "Bash", "input_schema": map[string]any{"type": "object"}}},
	}))
}

func (c *antClient) add(role string, blocks ...any) {
	c.msgs = append(c.msgs, map[string]any{"role": role, "content": blocks})
}

// send posts the conversation through base and appends the answer.
func (c *antClient) send(t *testing.T, base string) (content []any, status int, errBody string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/messages?beta=true", bytes.NewReader(c.body()))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-claude-code-session-id", "thinking-session")
	if c.dropBlock {
		req.Header.Set("anthropic-beta", fakellm.BindingBeta)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return nil, res.StatusCode, string(raw)
	}
	var m struct {
		Content []any
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("answer is not JSON: %v", err)
	}
	c.add("assistant", m.Content...)
	return m.Content, 200, ""
}

// thinkingScript: every answer thinks first; every userEvery-th answer ends
// the turn with text (the client then sends a new user message), the others
// call Bash; the outputs are output(k).
func thinkingScript(userEvery int) fakellm.Script {
	n := 0
	return fakellm.ScriptFunc(func(req *fakellm.Request) fakellm.Reply {
		n++
		think := []string{fmt.Sprintf("Step %d: the build log so far shows errors at steps 40 and 80; next I look at turn %d.", n, n)}
		if n%userEvery == 0 {
			return fakellm.Reply{Thinking: think, Text: fmt.Sprintf("Turn %d done.", n)}
		}
		return fakellm.Reply{Thinking: think, ToolCalls: []fakellm.ToolCall{{Name: "Bash", Arguments: json.RawMessage(fmt.Sprintf(`{"command":"make step%d"}`, n))}}}
	})
}

// TestSignedThinkingThroughTheProxy: a Claude Code-like session with signed
// thinking, through the folding proxy, against the fake's strict Messages
// rules (signatures bound to their text and, on a preserved-thinking model,
// to their prefix). No request is ever rejected; folds reach the upstream;
// on a preserved model a fold event leaves no signed thinking after its
// change except where the request asks the provider to drop it, as the
// proxy does itself when the client does not (its beta header with it),
// so that a single long turn folds too, each event dropping at most the
// current cycle's thinking. Held (Folder.HoldThinking), events wait for a
// user turn, and the log and the status say so.
func TestSignedThinkingThroughTheProxy(t *testing.T) {
	cases := []struct {
		name      string
		model     string
		dropBlock bool // the client asks for drop_block itself
		hold      bool // Folder.HoldThinking
		userEvery int  // every userEvery-th answer ends the turn
		// atUserTurns: fold events only on requests that end with a user
		// message (the provider would reject invalidated thinking).
		atUserTurns bool
		// bound: the proxy adds block_binding and its beta.
		bound bool
		// none: no fold event at all (a single turn, held).
		none bool
	}{
		{name: "preserved, held", model: fakellm.PreservedClaude, hold: true, userEvery: 7, atUserTurns: true},
		{name: "preserved, held, one long turn", model: fakellm.PreservedClaude, hold: true, userEvery: 1000, none: true},
		{name: "preserved, the proxy asks for drop_block", model: fakellm.PreservedClaude, userEvery: 7, bound: true},
		{name: "preserved, the proxy asks for drop_block, one long turn", model: fakellm.PreservedClaude, userEvery: 1000, bound: true},
		{name: "preserved with drop_block", model: fakellm.PreservedClaude, dropBlock: true, userEvery: 7},
		{name: "thinking kept every turn", model: "claude-opus-5-0-fake", userEvery: 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake, err := fakellm.Start(thinkingScript(tc.userEvery), fakellm.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer fake.Close()
			var logs bytes.Buffer
			folder := testFolder(t, 30_000, slog.New(slog.NewTextHandler(&logs, nil)))
			folder.HoldThinking = tc.hold
			up := mustURL(t, fake.AnthropicURL())
			p, err := New(Config{Anthropic: up, OpenAI: up, Folder: folder})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(p)
			defer srv.Close()
			front := srv.URL

			c := &antClient{model: tc.model, dropBlock: tc.dropBlock}
			c.add("user", map[string]any{"type": "text", "text": "Run the build."})
			steps := 0
			for req := 1; req <= 70; req++ {
				content, status, body := c.send(t, front)
				if status != 200 {
					t.Fatalf("request %d: %d %s", req, status, body)
				}
				var call map[string]any
				for _, b := range content {
					if bm := b.(map[string]any); bm["type"] == "tool_use" {
						call = bm
					}
				}
				if call == nil {
					c.add("user", map[string]any{"type": "text", "text": "Go on."})
					continue
				}
				steps++
				c.add("user", map[string]any{"type": "tool_result", "tool_use_id": call["id"], "content": output(steps), "is_error": false})
			}

			// What reached the upstream: digests, folded thinking, and where
			// each fold event happened.
			reqs := fake.Requests()
			events, thinkingFolded := 0, 0
			firstEvent := -1 // the index of the first request with an event
			// A block the provider drops stays invalid, and is dropped again on
			// every request until an event folds it: count each block once.
			droppedPaths := map[string]bool{}
			prevCodes := map[string]bool{}
			for i, q := range reqs {
				if q.Status != 200 || q.Error != nil {
					t.Fatalf("request %d answered %d: %v", i+1, q.Status, q.Error)
				}
				for _, d := range q.Dropped {
					droppedPaths[d.Path] = true
				}
				var body struct {
					Messages []struct {
						Role    string
						Content json.RawMessage
					}
				}
				json.Unmarshal(q.Body, &body)
				codes := map[string]bool{}
				for _, m := range body.Messages {
					for _, code := range codeRE.FindAllStringSubmatch(string(m.Content), -1) {
						codes[code[1]] = true
					}
				}
				newCodes := false
				for code := range codes {
					if !prevCodes[code] {
						newCodes = true
					}
				}
				if newCodes {
					if events == 0 {
						firstEvent = i
					}
					events++
					last := body.Messages[len(body.Messages)-1]
					userTurn := last.Role == "user" && !strings.Contains(string(last.Content), "tool_result")
					if tc.atUserTurns && !userTurn {
						t.Errorf("request %d: a fold event inside a tool-use cycle on a model that rejects invalidated thinking", i+1)
					}
				}
				prevCodes = codes
			}
			dropped := len(droppedPaths)
			last := reqs[len(reqs)-1]
			var body struct {
				Messages []struct {
					Role    string
					Content []map[string]any
				}
			}
			json.Unmarshal(last.Body, &body)
			for _, m := range body.Messages {
				for _, b := range m.Content {
					if m.Role == "assistant" && b["type"] == "text" && codeRE.MatchString(fmt.Sprint(b["text"])) {
						thinkingFolded++
					}
				}
			}
			t.Logf("%d requests, %d fold events, %d codes in the last request, %d thinking blocks folded to text, %d dropped by the provider", len(reqs), events, len(prevCodes), thinkingFolded, dropped)
			bound := 0
			for i, q := range reqs {
				has := bytes.Contains(q.Body, []byte(`"block_binding":{"prefix_mismatch_behavior":"drop_block"}`))
				if has {
					bound++
					if !strings.Contains(strings.Join(q.Header.Values("Anthropic-Beta"), ","), fakellm.BindingBeta) {
						t.Errorf("request %d carries block_binding without its beta", q.Seq)
					}
				} else if beta := q.Header.Values("Anthropic-Beta"); !tc.dropBlock && len(beta) > 0 {
					t.Errorf("request %d carries a beta header without a binding: %q", q.Seq, beta)
				}
				if tc.bound && has != (firstEvent >= 0 && i >= firstEvent) {
					t.Errorf("request %d (the first fold event is request %d): block_binding %v; want it from the first event on, and never before", q.Seq, firstEvent+1, has)
				}
			}
			if !tc.bound && !tc.dropBlock && bound > 0 {
				t.Errorf("%d requests carry a block_binding the client did not send", bound)
			}
			st := proxyStatus(t, front)
			if len(st) != 1 {
				t.Fatalf("status lists %d conversations, want 1", len(st))
			}
			held := strings.Count(logs.String(), "msg=\"fold held\"")
			t.Logf("status: %+v", st[0])
			if tc.none {
				if events != 0 {
					t.Fatalf("%d fold events in a single turn on a model that rejects invalidated thinking", events)
				}
				if st[0].Held == "" || held != 1 {
					t.Errorf("held folds: status %q, %d log lines; want the reason in both, logged once", st[0].Held, held)
				}
				return
			}
			if events == 0 {
				t.Fatal("nothing folded")
			}
			if st[0].Events == 0 || st[0].Folded == 0 || st[0].DropBlock != tc.bound {
				t.Errorf("status %+v: want its events and folds, and DropBlock %v", st[0], tc.bound)
			}
			if tc.bound && st[0].ThinkingDropped != dropped {
				t.Errorf("the proxy reports %d thinking blocks dropped, the provider dropped %d", st[0].ThinkingDropped, dropped)
			}
			if tc.model == fakellm.PreservedClaude && thinkingFolded == 0 {
				t.Error("no invalidated thinking was folded")
			}
			if !tc.dropBlock && !tc.bound && dropped > 0 {
				t.Errorf("the provider dropped %d blocks without drop_block", dropped)
			}
			if (tc.dropBlock || tc.bound) && dropped > events {
				t.Errorf("the provider dropped %d blocks in %d events: more than the current cycle's of each", dropped, events)
			}
		})
	}
}

// proxyStatus is what GET StatusPath on the proxy at base answers.
func proxyStatus(t *testing.T, base string) []ConversationStatus {
	t.Helper()
	res, err := http.Post(base+StatusPath, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d, want 405", StatusPath, res.StatusCode)
	}
	res, err = http.Get(base + StatusPath)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var st struct {
		Folding       bool
		Conversations []ConversationStatus
	}
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil || res.StatusCode != 200 || !st.Folding {
		t.Fatalf("GET %s: %d, folding %v, %v", StatusPath, res.StatusCode, st.Folding, err)
	}
	return st.Conversations
}
