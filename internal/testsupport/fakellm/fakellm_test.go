package fakellm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	Name string
	Data string
}

// readSSE parses a text/event-stream body into events.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data != "" || cur.Name != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur.Data != "" {
		t.Fatalf("stream ended without a blank line after %q", cur.Data)
	}
	return out
}

// oaStreamResult is an OpenAI stream reassembled the way a client would.
type oaStreamResult struct {
	Role         string
	Text         string
	Reasoning    string // the reasoning_content deltas
	ToolCalls    []ToolCall
	FinishReason string
	Usage        map[string]any
	Done         bool
	Chunks       int
}

func assembleOpenAI(t *testing.T, events []sseEvent) oaStreamResult {
	t.Helper()
	var res oaStreamResult
	for i, ev := range events {
		if res.Done {
			t.Fatalf("event after [DONE]: %q", ev.Data)
		}
		if ev.Data == "[DONE]" {
			res.Done = true
			continue
		}
		var c struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Model   string `json:"model"`
			Choices []struct {
				Delta struct {
					Role             string  `json:"role"`
					Content          *string `json:"content"`
					ReasoningContent *string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			t.Fatalf("chunk %d: %v: %s", i, err, ev.Data)
		}
		if c.Object != "chat.completion.chunk" || c.Model != "fake-model" || !strings.HasPrefix(c.ID, "chatcmpl-") {
			t.Errorf("chunk %d header: %s", i, ev.Data)
		}
		res.Chunks++
		if c.Usage != nil {
			if len(c.Choices) != 0 {
				t.Errorf("usage chunk has choices: %s", ev.Data)
			}
			res.Usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Delta.Role != "" {
				res.Role = ch.Delta.Role
			}
			if ch.Delta.Content != nil {
				res.Text += *ch.Delta.Content
			}
			if ch.Delta.ReasoningContent != nil {
				res.Reasoning += *ch.Delta.ReasoningContent
			}
			for _, tc := range ch.Delta.ToolCalls {
				for len(res.ToolCalls) <= tc.Index {
					res.ToolCalls = append(res.ToolCalls, ToolCall{})
				}
				cur := &res.ToolCalls[tc.Index]
				if tc.ID != "" {
					cur.ID = tc.ID
				}
				if tc.Function.Name != "" {
					cur.Name = tc.Function.Name
				}
				cur.Arguments = append(cur.Arguments, tc.Function.Arguments...)
			}
			if ch.FinishReason != nil {
				res.FinishReason = *ch.FinishReason
			}
		}
	}
	return res
}

func start(t *testing.T, script Script, opts Options) *Server {
	t.Helper()
	s, err := Start(script, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func post(t *testing.T, url string, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const toolsJSON = `[{"type":"function","function":{"name":"bash","description":"run","parameters":{"type":"object"}}},` +
	`{"type":"function","function":{"name":"recall_folded","parameters":{}}}]`

func TestListensOnLoopbackOnly(t *testing.T) {
	s := start(t, ScriptFunc(func(*Request) Reply { return Reply{} }), Options{})
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	if u.Hostname() != "127.0.0.1" || u.Path != "/v1" || u.Port() == "" || u.Port() == "0" {
		t.Errorf("URL() = %q", s.URL())
	}
	if got := s.AnthropicURL(); got+"/v1" != s.URL() {
		t.Errorf("AnthropicURL() = %q", got)
	}
}

func TestOpenAIStreamText(t *testing.T) {
	var calls atomic.Int32
	text := "FINAL: déjà vu, " + strings.Repeat("0123456789", 20) // multi-byte runes cross chunk edges
	s := start(t, ScriptFunc(func(req *Request) Reply {
		calls.Add(1)
		return Reply{Text: text}
	}), Options{ChunkBytes: 7})
	body := `{"model":"fake-model","messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"hi"}]}],` +
		`"stream":true,"stream_options":{"include_usage":true},"tools":` + toolsJSON + `}`
	resp := post(t, s.URL()+"/chat/completions", body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := readSSE(t, resp.Body)
	res := assembleOpenAI(t, events)
	if !res.Done || res.Role != "assistant" || res.Text != text || res.FinishReason != "stop" || len(res.ToolCalls) != 0 {
		t.Errorf("assembled %+v", res)
	}
	if res.Chunks < 4 {
		t.Errorf("only %d chunks; text should be split", res.Chunks)
	}
	for _, ev := range events {
		if ev.Name != "" {
			t.Errorf("OpenAI stream has an event name %q", ev.Name)
		}
	}
	details, _ := res.Usage["prompt_tokens_details"].(map[string]any)
	if res.Usage["prompt_tokens"] != float64(len(body)/4) || details == nil ||
		details["cached_tokens"] != float64(0) || details["cache_write_tokens"] != float64(len(body)/4) {
		t.Errorf("usage %v", res.Usage)
	}
	if calls.Load() != 1 {
		t.Errorf("script called %d times", calls.Load())
	}
}

func TestOpenAIStreamToolCalls(t *testing.T) {
	s := start(t, ScriptFunc(func(req *Request) Reply {
		return Reply{ToolCalls: []ToolCall{
			{ID: "call_a", Name: "bash", Arguments: json.RawMessage(`{"command":"bash gen.sh 1"}`)},
			{Name: "recall_folded", Arguments: json.RawMessage(`{"codes":["abc123"]}`)},
		}, Usage: Usage{Prompt: 1201, Cached: 1000, CacheWrite: 100, Completion: 20}}
	}), Options{ChunkBytes: 5})
	resp := post(t, s.URL()+"/chat/completions",
		`{"model":"fake-model","messages":[{"role":"user","content":"go"}],"stream":true,"tools":`+toolsJSON+`}`)
	events := readSSE(t, resp.Body)
	// The first chunk opens the assistant message with null content, as real servers do.
	if !strings.Contains(events[0].Data, `"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"bash","arguments":""}}]}`) {
		t.Errorf("first chunk %s", events[0].Data)
	}
	res := assembleOpenAI(t, events)
	if res.FinishReason != "tool_calls" || res.Text != "" || len(res.ToolCalls) != 2 {
		t.Fatalf("assembled %+v", res)
	}
	if tc := res.ToolCalls[0]; tc.ID != "call_a" || tc.Name != "bash" || string(tc.Arguments) != `{"command":"bash gen.sh 1"}` {
		t.Errorf("call 0 %+v", tc)
	}
	if tc := res.ToolCalls[1]; tc.ID != "call_1_1" || tc.Name != "recall_folded" || string(tc.Arguments) != `{"codes":["abc123"]}` {
		t.Errorf("call 1 %+v (%s)", tc, tc.Arguments)
	}
	want := `{"prompt_tokens":1201,"completion_tokens":20,"total_tokens":1221,"prompt_tokens_details":{"cached_tokens":1000,"cache_write_tokens":100}}`
	last := events[len(events)-2].Data
	if !strings.HasSuffix(last, `"choices":[],"usage":`+want+`}`) {
		t.Errorf("usage chunk %s", last)
	}
	rec := s.Requests()[0]
	if rec.Reply.ToolCalls[1].ID != "call_1_1" || rec.Reply.FinishReason != "tool_calls" || rec.Usage.Cached != 1000 {
		t.Errorf("recorded reply %+v usage %+v", rec.Reply, rec.Usage)
	}
}

func TestRequestParsingAndRecording(t *testing.T) {
	s := start(t, ScriptFunc(func(req *Request) Reply { return Reply{Text: "ok"} }), Options{})
	msgs := `[{"role":"system","content":"You are pi"},` +
		`{"role":"user","content":[{"type":"text","text":"run "},{"type":"text","text":"it"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"echo hi\"}"}}]},` +
		`{"role":"tool","content":"hi\n","tool_call_id":"call_1"}]`
	body := `{"model":"fake-model","messages":` + msgs + `,"stream":true,"store":false,"max_completion_tokens":4096,"tools":` + toolsJSON + `}`
	post(t, s.URL()+"/chat/completions", body)
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	r := reqs[0]
	if r.Seq != 1 || r.API != OpenAI || r.Method != "POST" || r.Path != "/v1/chat/completions" || string(r.Body) != body ||
		r.Model != "fake-model" || !r.Stream || r.MaxTokens != 4096 || r.Status != 200 {
		t.Errorf("recorded %+v", r)
	}
	if string(r.MessagesJSON) != msgs {
		t.Errorf("MessagesJSON = %s", r.MessagesJSON)
	}
	if strings.Join(r.Tools, ",") != "bash,recall_folded" || r.ToolLess() || !r.HasTool("bash") || r.HasTool("unfold") {
		t.Errorf("tools %v", r.Tools)
	}
	if len(r.Messages) != 4 {
		t.Fatalf("%d messages", len(r.Messages))
	}
	if m := r.Messages[1]; m.Role != "user" || m.Content != "run it" {
		t.Errorf("user %+v", m)
	}
	if m := r.Messages[2]; m.Role != "assistant" || m.Content != "" || len(m.ToolCalls) != 1 ||
		m.ToolCalls[0].ID != "call_1" || m.ToolCalls[0].Name != "bash" || string(m.ToolCalls[0].Arguments) != `{"command":"echo hi"}` {
		t.Errorf("assistant %+v", m)
	}
	if m := r.Messages[3]; m.Role != "tool" || m.Content != "hi\n" || m.ToolCallID != "call_1" ||
		string(m.Raw) != `{"role":"tool","content":"hi\n","tool_call_id":"call_1"}` {
		t.Errorf("tool %+v", m)
	}
	if out, ok := r.ToolResult("call_1"); !ok || out != "hi\n" {
		t.Errorf("ToolResult = %q, %v", out, ok)
	}
	if calls := r.ToolCallsSeen(); len(calls) != 1 || calls[0].ID != "call_1" {
		t.Errorf("ToolCallsSeen = %+v", calls)
	}
	if !strings.Contains(r.Text(), "run it\n") || strings.Contains(r.Text(), "You are pi") {
		t.Errorf("Text() = %q", r.Text())
	}
}

func TestComputedUsageCachesCommonPrefix(t *testing.T) {
	s := start(t, ScriptFunc(func(req *Request) Reply { return Reply{Text: "0123456789abcdef"} }), Options{})
	m1 := `[{"role":"system","content":"` + strings.Repeat("s", 400) + `"},{"role":"user","content":"go"}`
	m2 := m1 + `,{"role":"assistant","content":"x"},{"role":"user","content":"more"}]`
	m1 += "]"
	b1 := `{"model":"fake-model","messages":` + m1 + `,"stream":true,"tools":` + toolsJSON + `}`
	b2 := `{"model":"fake-model","messages":` + m2 + `,"stream":true,"tools":` + toolsJSON + `}`
	post(t, s.URL()+"/chat/completions", b1)
	post(t, s.URL()+"/chat/completions", b2)
	reqs := s.Requests()
	u1, u2 := reqs[0].Usage, reqs[1].Usage
	if u1 != (Usage{Prompt: len(b1) / 4, Cached: 0, CacheWrite: len(b1) / 4, Completion: 4}) {
		t.Errorf("first usage %+v", u1)
	}
	shared := len(m1) - 1 // all but the closing bracket
	if u2.Prompt != len(b2)/4 || u2.Cached != shared/4 || u2.CacheWrite != u2.Prompt-u2.Cached {
		t.Errorf("second usage %+v, want prompt %d cached %d", u2, len(b2)/4, shared/4)
	}
}

func TestToolLessRequestIsSummarized(t *testing.T) {
	var calls atomic.Int32
	s := start(t, ScriptFunc(func(req *Request) Reply {
		calls.Add(1)
		return Reply{Text: "script"}
	}), Options{})
	body := `{"model":"fake-model","messages":[{"role":"system","content":"You are a context summarization assistant."},` +
		`{"role":"user","content":[{"type":"text","text":"# Conversation\n[User]: hi"}]}],"stream":true,"stream_options":{"include_usage":true}}`
	res := assembleOpenAI(t, readSSE(t, post(t, s.URL()+"/chat/completions", body).Body))
	if res.Text != DefaultSummaryText || res.FinishReason != "stop" {
		t.Errorf("assembled %+v", res)
	}
	if calls.Load() != 0 {
		t.Error("script asked about a tool-less request")
	}
	if r := s.Requests()[0]; !r.ToolLess() || len(r.Tools) != 0 || r.Reply.Text != DefaultSummaryText {
		t.Errorf("recorded %+v", r)
	}
}

type summarizingScript struct{}

func (summarizingScript) Reply(*Request) Reply { return Reply{Text: "x"} }
func (summarizingScript) Summary(req *Request) string {
	return "custom summary of " + req.Messages[len(req.Messages)-1].Content
}

func TestSummarizerAndSummaryText(t *testing.T) {
	body := `{"model":"fake-model","messages":[{"role":"user","content":"abc"}],"stream":true}`
	s := start(t, summarizingScript{}, Options{SummaryText: "ignored"})
	if res := assembleOpenAI(t, readSSE(t, post(t, s.URL()+"/chat/completions", body).Body)); res.Text != "custom summary of abc" {
		t.Errorf("Summarizer text %q", res.Text)
	}
	s2 := start(t, ScriptFunc(func(*Request) Reply { return Reply{} }), Options{SummaryText: "opt summary"})
	if res := assembleOpenAI(t, readSSE(t, post(t, s2.URL()+"/chat/completions", body).Body)); res.Text != "opt summary" {
		t.Errorf("SummaryText %q", res.Text)
	}
}

func TestNonStreamingOpenAI(t *testing.T) {
	s := start(t, ScriptFunc(func(req *Request) Reply {
		return Reply{ToolCalls: []ToolCall{{ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)}}}
	}), Options{})
	resp := post(t, s.URL()+"/chat/completions", `{"model":"fake-model","messages":[{"role":"user","content":"go"}],"tools":`+toolsJSON+`}`)
	var got struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	c := got.Choices[0]
	if got.Object != "chat.completion" || c.FinishReason != "tool_calls" || c.Message.Content != nil ||
		c.Message.ToolCalls[0].ID != "c1" || c.Message.ToolCalls[0].Function.Arguments != `{"command":"ls"}` || got.Usage.PromptTokens == 0 {
		t.Errorf("got %+v", got)
	}
}

func TestModels(t *testing.T) {
	s := start(t, ScriptFunc(func(*Request) Reply { return Reply{} }), Options{})
	resp, err := http.Get(s.URL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"id":"fake-model"`) {
		t.Errorf("models: %d %s", resp.StatusCode, b)
	}
	if s.Len() != 0 {
		t.Error("GET /models recorded as a model request")
	}
	resp2, err := http.Get(s.URL() + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != 404 || len(s.Unhandled()) != 1 || s.Unhandled()[0] != "GET /v1/nope" {
		t.Errorf("unhandled: %d %v", resp2.StatusCode, s.Unhandled())
	}
}

func TestErrorsAndOverflow(t *testing.T) {
	s := start(t, ScriptFunc(func(req *Request) Reply {
		if strings.Contains(req.Text(), "fail") {
			return Reply{Status: 503, ErrorMessage: "overloaded"}
		}
		return Reply{Text: "ok"}
	}), Options{MaxPromptTokens: 100})
	resp := post(t, s.URL()+"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"fail"}],"stream":true,"tools":`+toolsJSON+`}`)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(b), "overloaded") {
		t.Errorf("error reply: %d %s", resp.StatusCode, b)
	}
	big := strings.Repeat("x", 1000)
	resp = post(t, s.URL()+"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`+big+`"}],"stream":true,"tools":`+toolsJSON+`}`)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "maximum context length is 100 tokens") {
		t.Errorf("overflow: %d %s", resp.StatusCode, b)
	}
	resp = post(t, s.URL()+"/chat/completions", `{not json`)
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("bad json: %d", resp.StatusCode)
	}
	reqs := s.Requests()
	if len(reqs) != 3 || reqs[0].Status != 503 || reqs[1].Status != 400 || reqs[2].ParseError == "" {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestAnthropicStream(t *testing.T) {
	var seen *Request
	s := start(t, ScriptFunc(func(req *Request) Reply {
		cp := *req
		seen = &cp
		return Reply{Text: "hello", ToolCalls: []ToolCall{{ID: "toolu_1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)}},
			Usage: Usage{Prompt: 1300, Cached: 1000, CacheWrite: 100, Completion: 20}}
	}), Options{})
	body := `{"model":"fake-claude","max_tokens":4096,"stream":true,"system":[{"type":"text","text":"sys prompt","cache_control":{"type":"ephemeral"}}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"go"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_0","name":"bash","input":{"command":"echo hi"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_0","content":"hi\n","is_error":false}]}],` +
		`"tools":[{"name":"bash","input_schema":{}}]}`
	resp := post(t, s.AnthropicURL()+"/v1/messages?beta=true", body)
	events := readSSE(t, resp.Body)
	var names []string
	text, args := "", ""
	for _, ev := range events {
		names = append(names, ev.Name)
		var d struct {
			Type  string `json:"type"`
			Delta struct {
				Type, Text, PartialJSON string
				StopReason              string `json:"stop_reason"`
			} `json:"delta"`
			Message struct {
				Usage map[string]int `json:"usage"`
			} `json:"message"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
			t.Fatal(err)
		}
		if d.Type != ev.Name {
			t.Errorf("event %q has data type %q", ev.Name, d.Type)
		}
		text += d.Delta.Text
		var pj struct {
			Delta struct {
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
		}
		json.Unmarshal([]byte(ev.Data), &pj)
		args += pj.Delta.PartialJSON
		if ev.Name == "message_start" && (d.Message.Usage["input_tokens"] != 200 || d.Message.Usage["cache_read_input_tokens"] != 1000 ||
			d.Message.Usage["cache_creation_input_tokens"] != 100) {
			t.Errorf("message_start usage %v", d.Message.Usage)
		}
		if ev.Name == "message_delta" && d.Delta.StopReason != "tool_use" {
			t.Errorf("stop_reason %q", d.Delta.StopReason)
		}
	}
	want := "message_start content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(names, " ") != want {
		t.Errorf("events %v", names)
	}
	if text != "hello" || args != `{"command":"ls"}` {
		t.Errorf("text %q args %q", text, args)
	}
	if seen == nil || seen.API != Anthropic || seen.Query != "beta=true" || len(seen.Messages) != 4 {
		t.Fatalf("parsed %+v", seen)
	}
	roles := []string{}
	for _, m := range seen.Messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool" || seen.Messages[0].Content != "sys prompt" ||
		seen.Messages[2].ToolCalls[0].ID != "toolu_0" || seen.Messages[3].ToolCallID != "toolu_0" || seen.Messages[3].Content != "hi\n" {
		t.Errorf("messages %+v", seen.Messages)
	}
}

func TestMaxLifetime(t *testing.T) {
	s, err := Start(ScriptFunc(func(*Request) Reply { return Reply{} }), Options{MaxLifetime: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("server did not stop by itself")
	}
	c := &http.Client{Timeout: 2 * time.Second}
	if resp, err := c.Get(s.URL() + "/models"); err == nil {
		resp.Body.Close()
		t.Error("server still answers after its lifetime")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestPieces(t *testing.T) {
	for _, s := range []string{"", "a", "héllo wörld", strings.Repeat("😀", 5)} {
		for n := 1; n < 6; n++ {
			ps := pieces(s, n)
			if strings.Join(ps, "") != s {
				t.Errorf("pieces(%q,%d) = %q", s, n, ps)
			}
			for _, p := range ps {
				if !bytes.Equal([]byte(p), []byte(strings.ToValidUTF8(p, "?"))) {
					t.Errorf("pieces(%q,%d) split a rune: %q", s, n, p)
				}
			}
		}
	}
}

// TestOpenAIReasoningContent: a reply's Thinking goes out on Chat
// Completions as reasoning_content, before the text and calls, the first
// chunk carrying the role; redacted entries are left out; non-streaming,
// it is the message's reasoning_content.
func TestOpenAIReasoningContent(t *testing.T) {
	s := start(t, ScriptFunc(func(req *Request) Reply {
		return Reply{Thinking: []string{"first thought", RedactedPrefix + "hidden", "second thought"},
			Text: "ok", ToolCalls: []ToolCall{{ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)}}}
	}), Options{ChunkBytes: 8})
	body := `{"model":"fake-model","messages":[{"role":"user","content":"go"}],"stream":true,"tools":` + toolsJSON + `}`
	events := readSSE(t, post(t, s.URL()+"/chat/completions", body).Body)
	if want := `"delta":{"role":"assistant","content":null,"reasoning_content":"first th"}`; !strings.Contains(events[0].Data, want) {
		t.Errorf("first chunk %s, want %s", events[0].Data, want)
	}
	roles := 0
	for _, ev := range events {
		roles += strings.Count(ev.Data, `"role"`)
	}
	if roles != 1 {
		t.Errorf("%d chunks carry the role", roles)
	}
	res := assembleOpenAI(t, events)
	if res.Reasoning != "first thought\n\nsecond thought" || res.Text != "ok" || len(res.ToolCalls) != 1 || res.Role != "assistant" {
		t.Errorf("assembled %+v", res)
	}
	var got struct {
		Choices []struct {
			Message struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
	}
	resp := post(t, s.URL()+"/chat/completions", strings.Replace(body, `"stream":true`, `"stream":false`, 1))
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if m := got.Choices[0].Message; m.ReasoningContent != "first thought\n\nsecond thought" || m.Content != "ok" {
		t.Errorf("message %+v", m)
	}
}
