package fakellm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The bodies in testdata/clients are requests real clients sent to the fake
// of shared/clients (fake-llm.mjs), whole but with every string over 1,500
// characters cut to its head and tail: Claude Code 2.1.332 (claude-*.json,
// POST /v1/messages?beta=true), Codex 0.169.1 (codex-*.json, POST
// /v1/responses) and opencode 1.18.33 (opencode-*.json, POST
// /v1/chat/completions). The number is the turn: 1 + the tool results in
// the conversation. claude-mcp-4.json carries a ToolSearch result
// (tool_reference block) and an MCP result; codex-mcp-4.json a
// tool_search_call/tool_search_output pair and a namespaced MCP call;
// opencode-title.json is opencode's tool-less title request.

type clientSample struct {
	file string
	api  API
	// turn is ClientTurn of the body; 0 for a request without a shell tool.
	turn int
	// shell and field are the shell tool and its command field.
	shell, field string
}

var clientSamples = []clientSample{
	{"claude-1.json", Anthropic, 1, "Bash", "command"},
	{"claude-3.json", Anthropic, 3, "Bash", "command"},
	{"claude-mcp-4.json", Anthropic, 4, "Bash", "command"},
	{"codex-1.json", Responses, 1, "exec_command", "cmd"},
	{"codex-3.json", Responses, 3, "exec_command", "cmd"},
	{"codex-mcp-4.json", Responses, 3, "exec_command", "cmd"}, // tool_search_output is no tool result
	{"opencode-title.json", OpenAI, 0, "", ""},
	{"opencode-1.json", OpenAI, 1, "bash", "command"},
	{"opencode-3.json", OpenAI, 3, "bash", "command"},
}

func readSample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "clients", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sendClient posts a body on the route of api the way the client does.
func sendClient(t *testing.T, s *Server, api API, body []byte) *http.Response {
	t.Helper()
	var url string
	switch api {
	case Anthropic:
		url = s.AnthropicURL() + "/v1/messages?beta=true"
	case Responses:
		url = s.URL() + "/responses"
	default:
		url = s.URL() + "/chat/completions"
	}
	return post(t, url, string(body))
}

// clientStreamed reassembles a streamed answer into its text and tool calls.
func clientStreamed(t *testing.T, api API, resp *http.Response) (string, []ToolCall) {
	t.Helper()
	events := readSSE(t, resp.Body)
	switch api {
	case OpenAI:
		res := assembleOpenAI(t, events)
		return res.Text, res.ToolCalls
	case Responses:
		res := assembleResponses(t, events)
		var calls []ToolCall
		for _, it := range res.Items {
			if it["type"] == "function_call" {
				name, _ := it["name"].(string)
				calls = append(calls, ToolCall{Name: name, Arguments: json.RawMessage(res.Args[len(calls)])})
			}
		}
		return res.Text, calls
	}
	text := ""
	var calls []ToolCall
	for _, ev := range events {
		var e struct {
			Type         string `json:"type"`
			ContentBlock struct {
				Type string `json:"type"`
				Name string `json:"name"`
			} `json:"content_block"`
			Delta struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			t.Fatal(err)
		}
		switch {
		case e.Type == "content_block_start" && e.ContentBlock.Type == "tool_use":
			calls = append(calls, ToolCall{Name: e.ContentBlock.Name})
		case e.Delta.Type == "text_delta":
			text += e.Delta.Text
		case e.Delta.Type == "input_json_delta":
			calls[len(calls)-1].Arguments = append(calls[len(calls)-1].Arguments, e.Delta.PartialJSON...)
		}
	}
	return text, calls
}

// TestClientSessionRealBodies sends every sample body through the strict
// server: each is accepted, and the answer is the scripted one for its turn.
func TestClientSessionRealBodies(t *testing.T) {
	for _, turns := range []int{5, 2} {
		for _, c := range clientSamples {
			t.Run(fmt.Sprintf("%s/turns=%d", c.file, turns), func(t *testing.T) {
				s := start(t, &ClientSession{Turns: turns}, Options{})
				body := readSample(t, c.file)
				resp := sendClient(t, s, c.api, body)
				if resp.StatusCode != http.StatusOK {
					b, _ := io.ReadAll(resp.Body)
					t.Fatalf("status %d: %s", resp.StatusCode, b)
				}
				text, calls := clientStreamed(t, c.api, resp)
				rec := s.Requests()[0]
				if rec.API != c.api {
					t.Errorf("api %s, want %s", rec.API, c.api)
				}
				if c.turn == 0 {
					if !rec.ToolLess() || text != ClientSideText || len(calls) != 0 {
						t.Errorf("side request: tool-less %v, text %q, calls %v", rec.ToolLess(), text, calls)
					}
					return
				}
				if got := ClientTurn(&rec.Request); got != c.turn {
					t.Errorf("ClientTurn = %d, want %d", got, c.turn)
				}
				if c.turn > turns {
					if !strings.HasPrefix(text, ClientFinal) || len(calls) != 0 {
						t.Errorf("after %d turns: text %q, calls %v", turns, text, calls)
					}
					return
				}
				if len(calls) != 1 || calls[0].Name != c.shell || text != "" {
					t.Fatalf("text %q, calls %+v; want one %s call", text, calls, c.shell)
				}
				var args map[string]any
				if err := json.Unmarshal(calls[0].Arguments, &args); err != nil {
					t.Fatalf("arguments %s: %v", calls[0].Arguments, err)
				}
				if args[c.field] != ClientCommand(c.turn) || len(args) != 1 {
					t.Errorf("arguments %s, want only %s = ClientCommand(%d)", calls[0].Arguments, c.field, c.turn)
				}
			})
		}
	}
}

// TestClientSessionRetryKeepsTurn: the same request twice gets the same
// answer, and a side request in between does not shift the turn.
func TestClientSessionRetryKeepsTurn(t *testing.T) {
	s := start(t, &ClientSession{}, Options{})
	for _, f := range []string{"opencode-3.json", "opencode-title.json", "opencode-3.json"} {
		resp := sendClient(t, s, OpenAI, readSample(t, f))
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", f, resp.StatusCode)
		}
		io.Copy(io.Discard, resp.Body)
	}
	reqs := s.Requests()
	a, b := reqs[0].Reply.ToolCalls, reqs[2].Reply.ToolCalls
	if len(a) != 1 || len(b) != 1 || string(a[0].Arguments) != string(b[0].Arguments) {
		t.Errorf("retry answered %+v, then %+v", a, b)
	}
}

func TestShellArgs(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"}},"required":["command"]}`,
			`{"command":"echo hi"}`},
		{`{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"]}`,
			`{"command":["bash","-lc","echo hi"]}`},
		{`{"type":"object","properties":{"cmd":{"type":"string"},"justification":{"type":"string"},"yield_time_ms":{"type":"number","minimum":250}},"required":["cmd","justification","yield_time_ms"]}`,
			`{"cmd":"echo hi","justification":"Run the scripted build step","yield_time_ms":250}`},
		{`{"type":"object","properties":{"command":{"type":["string","null"]},"login":{"type":"boolean"},"env":{"type":"object"}},"required":["login","env"]}`,
			`{"command":"echo hi","env":{},"login":false}`},
		{``, `{"command":"echo hi"}`},
	} {
		if got := string(ShellArgs(ToolDecl{Name: "x", Schema: json.RawMessage(c.schema)}, "echo hi")); got != c.want {
			t.Errorf("schema %s:\n got %s\nwant %s", c.schema, got, c.want)
		}
	}
}

func TestShellToolChoice(t *testing.T) {
	for _, c := range clientSamples {
		req := &Request{API: c.api, Body: readSample(t, c.file)}
		tool, ok := ShellTool(req)
		if ok != (c.shell != "") || tool.Name != c.shell {
			t.Errorf("%s: ShellTool = %q, %v; want %q", c.file, tool.Name, ok, c.shell)
		}
		if ok && len(tool.Schema) == 0 {
			t.Errorf("%s: %s has no schema", c.file, tool.Name)
		}
	}
	// A Responses custom (freeform) tool named like a shell is not one.
	req := &Request{API: Responses, Body: []byte(`{"tools":[{"type":"custom","name":"shell"},{"type":"function","name":"bash","parameters":{}}]}`)}
	if tool, _ := ShellTool(req); tool.Name != "bash" {
		t.Errorf("picked %q", tool.Name)
	}
}

// TestClientCommandOutput runs the commands: about 10 KB each, different per
// turn, ClientErrorLines ERROR lines, the marker last and not in the text.
func TestClientCommandOutput(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs a POSIX shell")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	seen := map[string]bool{}
	for turn := 1; turn <= 6; turn++ {
		cmd := ClientCommand(turn)
		out, err := exec.Command(sh, "-c", cmd).Output()
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		s := string(out)
		lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		if len(out) < 9000 || len(out) > 11000 || len(lines) != 121 {
			t.Errorf("turn %d: %d bytes, %d lines", turn, len(out), len(lines))
		}
		if n := strings.Count(s, "ERROR: "); n != ClientErrorLines {
			t.Errorf("turn %d: %d ERROR lines", turn, n)
		}
		if last := lines[len(lines)-1]; last != ClientMarker(turn) {
			t.Errorf("turn %d: last line %q, want %q", turn, last, ClientMarker(turn))
		}
		if strings.Contains(cmd, ClientMarker(turn)) || strings.Contains(cmd, fmt.Sprint(7000+100*turn+14)) {
			t.Errorf("turn %d: the marker is in the command text", turn)
		}
		if seen[s] {
			t.Errorf("turn %d: same output as an earlier turn", turn)
		}
		seen[s] = true
	}
}

// TestClientMarkers plays a Chat Completions client: each tool result is the
// marker of its turn (turn 3's is missing), with a title request first.
func TestClientMarkers(t *testing.T) {
	s := start(t, &ClientSession{Turns: 4}, Options{})
	tools := `[{"type":"function","function":{"name":"bash","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}}]`
	title := `{"model":"fake-model","stream":true,"messages":[{"role":"system","content":"title"},{"role":"user","content":"go"}]}`
	resp := post(t, s.URL()+"/chat/completions", title)
	io.Copy(io.Discard, resp.Body)
	msgs := []any{map[string]any{"role": "user", "content": "go"}}
	for i := 0; i < 6; i++ {
		b, _ := json.Marshal(msgs)
		resp := post(t, s.URL()+"/chat/completions", `{"model":"fake-model","stream":true,"messages":`+string(b)+`,"tools":`+tools+`}`)
		text, calls := clientStreamed(t, OpenAI, resp)
		if len(calls) == 0 {
			if !strings.HasPrefix(text, ClientFinal) {
				t.Fatalf("request %d: text %q", i, text)
			}
			break
		}
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs, map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
			map[string]any{"id": id, "type": "function", "function": map[string]any{"name": calls[0].Name, "arguments": string(calls[0].Arguments)}}}})
		out := "INFO: ...\n" + ClientMarker(i+1) + "\n"
		if i+1 == 3 {
			out = "lost\n"
		}
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": id, "content": out})
	}
	if n := s.Len(); n != 6 { // title + 4 turns + final
		t.Errorf("%d requests", n)
	}
	got := fmt.Sprint(ClientMarkers(s.Requests(), 4))
	if want := "[3 4 0 6]"; got != want {
		t.Errorf("ClientMarkers = %s, want %s", got, want)
	}
}

// clientThought reassembles a streamed answer into its text, tool calls
// and reasoning: the thinking texts (Anthropic thinking blocks, Responses
// reasoning summaries, the Chat reasoning_content) and, per block, its
// signature (Anthropic signature_delta, Responses encrypted_content; none
// on Chat).
func clientThought(t *testing.T, api API, resp *http.Response) (text string, calls []ToolCall, thinking, sigs []string) {
	t.Helper()
	events := readSSE(t, resp.Body)
	switch api {
	case OpenAI:
		res := assembleOpenAI(t, events)
		if res.Reasoning != "" {
			thinking = []string{res.Reasoning}
		}
		return res.Text, res.ToolCalls, thinking, nil
	case Responses:
		res := assembleResponses(t, events)
		for _, it := range res.Items {
			switch it["type"] {
			case "function_call":
				name, _ := it["name"].(string)
				calls = append(calls, ToolCall{Name: name, Arguments: json.RawMessage(res.Args[len(calls)])})
			case "reasoning":
				enc, _ := it["encrypted_content"].(string)
				sigs = append(sigs, enc)
			}
		}
		return res.Text, calls, res.Thinking, sigs
	}
	for _, ev := range events {
		var e struct {
			Type         string `json:"type"`
			ContentBlock struct {
				Type string `json:"type"`
				Name string `json:"name"`
			} `json:"content_block"`
			Delta struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				Thinking    string `json:"thinking"`
				Signature   string `json:"signature"`
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			t.Fatal(err)
		}
		switch {
		case e.Type == "content_block_start" && e.ContentBlock.Type == "tool_use":
			calls = append(calls, ToolCall{Name: e.ContentBlock.Name})
		case e.Type == "content_block_start" && e.ContentBlock.Type == "thinking":
			thinking = append(thinking, "")
			sigs = append(sigs, "")
		case e.Delta.Type == "thinking_delta":
			thinking[len(thinking)-1] += e.Delta.Thinking
		case e.Delta.Type == "signature_delta":
			sigs[len(sigs)-1] += e.Delta.Signature
		case e.Delta.Type == "text_delta":
			text += e.Delta.Text
		case e.Delta.Type == "input_json_delta":
			calls[len(calls)-1].Arguments = append(calls[len(calls)-1].Arguments, e.Delta.PartialJSON...)
		}
	}
	return text, calls, thinking, sigs
}

// TestClientSessionThinking: with Thinking on, every scripted answer to a
// real client's body (shell calls and the final text) carries one
// reasoning block, ClientThinking of its turn, signed where the wire signs
// it, and otherwise the same text and calls as with Thinking off; a side
// request gets none; with Thinking off no answer has any.
func TestClientSessionThinking(t *testing.T) {
	// The samples, with a model that thinks on each wire: Claude Code sends
	// thinking "adaptive" whatever the model; a Responses model thinks when
	// its id says "reasoning" or "preserved" (gpt-5.5 does not, for the fake).
	models := map[API][2]string{
		Anthropic: {`"model":"claude-opus-5-5"`, `"model":"` + PreservedClaude + `"`},
		Responses: {`"model":"gpt-5.5"`, `"model":"gpt-preserved-fake"`},
	}
	for _, turns := range []int{5, 2} {
		for _, c := range clientSamples {
			t.Run(fmt.Sprintf("%s/turns=%d", c.file, turns), func(t *testing.T) {
				body := readSample(t, c.file)
				if m, ok := models[c.api]; ok {
					body = []byte(strings.Replace(string(body), m[0], m[1], 1))
				}
				type answer struct {
					text           string
					calls          []ToolCall
					thinking, sigs []string
				}
				var got [2]answer
				for i, on := range []bool{false, true} {
					s := start(t, &ClientSession{Turns: turns, Thinking: on}, Options{})
					resp := sendClient(t, s, c.api, body)
					if resp.StatusCode != http.StatusOK {
						b, _ := io.ReadAll(resp.Body)
						t.Fatalf("thinking %v: status %d: %s", on, resp.StatusCode, b)
					}
					a := &got[i]
					a.text, a.calls, a.thinking, a.sigs = clientThought(t, c.api, resp)
					if rec := s.Requests()[0]; on && c.turn > 0 && len(rec.Reply.Thinking) != 1 {
						t.Errorf("recorded reply thinking %q", rec.Reply.Thinking)
					}
				}
				off, on := got[0], got[1]
				if len(off.thinking) != 0 {
					t.Errorf("thinking off: the answer carries %q", off.thinking)
				}
				if on.text != off.text || fmt.Sprint(on.calls) != fmt.Sprint(off.calls) {
					t.Errorf("thinking changed the answer: %q %s, without %q %s", on.text, on.calls, off.text, off.calls)
				}
				if c.turn == 0 {
					if len(on.thinking) != 0 {
						t.Errorf("side request: thinking %q", on.thinking)
					}
					return
				}
				if want := ClientThinking(c.turn); len(on.thinking) != 1 || on.thinking[0] != want {
					t.Fatalf("thinking %q, want [%q]", on.thinking, want)
				}
				if c.api != OpenAI && (len(on.sigs) != 1 || on.sigs[0] == "") {
					t.Errorf("signatures %q, want one", on.sigs)
				}
			})
		}
	}
	if ClientThinking(1) == ClientThinking(2) {
		t.Error("ClientThinking is the same for two turns")
	}
}

// TestClientSessionTurnsPerPrompt plays Claude Code fed two prompts, two
// calls each: the calls of a prompt are counted from its last user prompt,
// text riding with a tool result is no prompt, the commands and the
// thinking follow the turn over the whole conversation.
func TestClientSessionTurnsPerPrompt(t *testing.T) {
	s := &ClientSession{TurnsPerPrompt: 2, Thinking: true}
	tools := `[{"name":"Bash","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}]`
	msgs := []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "first"}}}}
	var got []string
	for i := 0; i < 7; i++ {
		b, _ := json.Marshal(msgs)
		req, err := ParseAnthropic([]byte(`{"model":"m","messages":` + string(b) + `,"tools":` + tools + `}`))
		if err != nil {
			t.Fatal(err)
		}
		r := s.Reply(req)
		if len(r.Thinking) != 1 || r.Thinking[0] != ClientPromptThinking(ClientPrompt(req), ClientTurn(req)) {
			t.Errorf("request %d: thinking %q", i, r.Thinking)
		}
		if len(r.ToolCalls) == 0 {
			got = append(got, r.Text)
			msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": r.Text}}},
				map[string]any{"role": "user", "content": "second"})
			continue
		}
		var a struct{ Command string }
		json.Unmarshal(r.ToolCalls[0].Arguments, &a)
		if a.Command != ClientCommand(ClientTurn(req)) {
			t.Errorf("request %d: command of another turn than %d", i, ClientTurn(req))
		}
		got = append(got, fmt.Sprintf("call %d", ClientTurn(req)))
		id := fmt.Sprintf("c%d", i)
		result := []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "out"}}
		if i == 0 {
			result = append(result, map[string]any{"type": "text", "text": "a note riding with the result"})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": result})
	}
	want := []string{"call 1", "call 2", ClientPromptFinal(1, 2), "call 3", "call 4", ClientPromptFinal(2, 2), "call 5"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("answers\n got %q\nwant %q", got, want)
	}
	if ClientPromptThinking(1, 3) == ClientPromptThinking(2, 3) {
		t.Error("ClientPromptThinking is the same for two prompts")
	}
}

// TestClientSessionRecallSearch: a Recall session with Search calls
// recall_folded by code, then recall_folded {"search":Search}, then unfold
// on the recalled code, then answers; without Search the search call is
// not made; without the recall tool the answer comes at once.
func TestClientSessionRecallSearch(t *testing.T) {
	tool := func(name string) map[string]any {
		return map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": map[string]any{"type": "object"}}}
	}
	// run plays a conversation with s on the Chat Completions route, each
	// call answered with a tool result holding a fold tag, and returns the
	// calls the model made ("name args") and its final text.
	run := func(s *ClientSession, tools ...string) ([]string, string) {
		var decl []any
		for _, n := range tools {
			decl = append(decl, tool(n))
		}
		msgs := []any{map[string]any{"role": "user", "content": "build"}}
		var calls []string
		for i := 1; i <= 10; i++ {
			body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "tools": decl})
			req, err := ParseOpenAI(body)
			if err != nil {
				t.Fatal(err)
			}
			r := s.Reply(req)
			if len(r.ToolCalls) == 0 {
				return calls, r.Text
			}
			tc := r.ToolCalls[0]
			calls = append(calls, tc.Name+" "+string(tc.Arguments))
			id := fmt.Sprintf("call_%d", i)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": string(tc.Arguments)}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": fmt.Sprintf("{#c%d FOLDED} digest of output %d", i, i)})
		}
		t.Fatal("no final text")
		return nil, ""
	}
	shell := `bash {"command":"` + strings.ReplaceAll(ClientCommandN(1, 120), `"`, `\"`) + `"}`
	all := []string{"bash", "contextfold_recall_folded", "contextfold_unfold"}
	for _, c := range []struct {
		search string
		tools  []string
		want   []string
		final  string
	}{
		{"ERROR: turn 1", all, []string{shell, `contextfold_recall_folded {"codes":["c1"]}`, `contextfold_recall_folded {"search":"ERROR: turn 1"}`, `contextfold_unfold {"codes":["c1"]}`}, ClientFinal},
		{`a "quoted" term`, all, []string{shell, `contextfold_recall_folded {"codes":["c1"]}`, `contextfold_recall_folded {"search":"a \"quoted\" term"}`, `contextfold_unfold {"codes":["c1"]}`}, ClientFinal},
		{"", all, []string{shell, `contextfold_recall_folded {"codes":["c1"]}`, `contextfold_unfold {"codes":["c1"]}`}, ClientFinal},
		{"ERROR", []string{"bash"}, []string{shell}, ClientNoFold},
	} {
		calls, final := run(&ClientSession{Turns: 1, Recall: true, Search: c.search}, c.tools...)
		if strings.Join(calls, "\n") != strings.Join(c.want, "\n") || !strings.HasPrefix(final, c.final) {
			t.Errorf("Search %q, tools %v: calls\n%s\nfinal %q; want calls\n%s\nfinal %s…", c.search, c.tools, strings.Join(calls, "\n"), final, strings.Join(c.want, "\n"), c.final)
		}
	}
}
