package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// respTools is the tool list Pi sends: function tools with a name.
var respTools = []any{map[string]any{"type": "function", "name": "bash", "description": "run",
	"parameters": map[string]any{"type": "object"}, "strict": false}}

// respBodyOf builds a request body the way Pi does for a reasoning model
// with thinking on: stream, store false, encrypted reasoning included.
func respBodyOf(model string, input []any, extra map[string]any) string {
	body := map[string]any{
		"model": model, "input": input, "stream": true, "store": false, "tools": respTools,
		"reasoning": map[string]any{"effort": "high", "summary": "auto"},
		"include":   []string{"reasoning.encrypted_content"}, "prompt_cache_key": "session-1",
	}
	for k, v := range extra {
		if v == nil {
			delete(body, k)
		} else {
			body[k] = v
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func respUser(text string) map[string]any {
	return map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}
}

func respOutputItem(callID, out string) map[string]any {
	return map[string]any{"type": "function_call_output", "call_id": callID, "output": out}
}

// respScript thinks and makes two bash calls per request, or answers with
// text when the context asks for a final answer.
func respScript(req *Request) Reply {
	thinking := []string{fmt.Sprintf("Thinking about request %d.", req.Seq)}
	if strings.Contains(req.Text(), "final") {
		return Reply{Thinking: thinking, Text: "All done."}
	}
	calls := []ToolCall{
		{ID: fmt.Sprintf("call_%d_a", req.Seq), Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)},
		{ID: fmt.Sprintf("call_%d_b", req.Seq), Name: "bash", Arguments: json.RawMessage(`{"command":"pwd"}`)},
	}
	return Reply{Thinking: thinking, ToolCalls: calls}
}

// respStream is a Responses stream reassembled the way Pi's
// processResponsesStream reads it.
type respStream struct {
	Events    []string
	Created   bool
	Thinking  []string         // per reasoning item, from the summary deltas
	Text      string           // from the output_text deltas
	Args      []string         // per function call, from the argument deltas
	Items     []map[string]any // output_item.done items, in order
	Final     map[string]any   // the response of response.completed / .incomplete
	Terminal  string
	Transform []Transformation
}

func assembleResponses(t *testing.T, events []sseEvent) respStream {
	t.Helper()
	var res respStream
	kinds := map[int]string{}
	thinking := map[int]*strings.Builder{}
	args := map[int]*strings.Builder{}
	for n, ev := range events {
		var e struct {
			Type        string          `json:"type"`
			Seq         int             `json:"sequence_number"`
			OutputIndex int             `json:"output_index"`
			Item        map[string]any  `json:"item"`
			Delta       string          `json:"delta"`
			Arguments   string          `json:"arguments"`
			Response    json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			t.Fatalf("event %d: %v: %s", n, err, ev.Data)
		}
		if e.Type != ev.Name {
			t.Fatalf("event %d: name %q, type %q", n, ev.Name, e.Type)
		}
		if e.Seq != n {
			t.Fatalf("event %d has sequence_number %d", n, e.Seq)
		}
		if res.Terminal != "" {
			t.Fatalf("event %s after %s", e.Type, res.Terminal)
		}
		res.Events = append(res.Events, e.Type)
		switch e.Type {
		case "response.created":
			res.Created = true
		case "response.output_item.added":
			typ, _ := e.Item["type"].(string)
			if _, dup := kinds[e.OutputIndex]; dup {
				t.Fatalf("output_index %d added twice", e.OutputIndex)
			}
			kinds[e.OutputIndex] = typ
			if typ == "reasoning" {
				if _, ok := e.Item["encrypted_content"]; ok {
					t.Errorf("output_item.added carries encrypted_content")
				}
				thinking[e.OutputIndex] = &strings.Builder{}
			}
			if typ == "function_call" {
				args[e.OutputIndex] = &strings.Builder{}
			}
		case "response.reasoning_summary_text.delta":
			if kinds[e.OutputIndex] != "reasoning" {
				t.Fatalf("summary delta for %q item", kinds[e.OutputIndex])
			}
			thinking[e.OutputIndex].WriteString(e.Delta)
		case "response.output_text.delta":
			if kinds[e.OutputIndex] != "message" {
				t.Fatalf("text delta for %q item", kinds[e.OutputIndex])
			}
			res.Text += e.Delta
		case "response.function_call_arguments.delta":
			args[e.OutputIndex].WriteString(e.Delta)
		case "response.function_call_arguments.done":
			if got := args[e.OutputIndex].String(); got != e.Arguments {
				t.Errorf("argument deltas %q, done %q", got, e.Arguments)
			}
		case "response.output_item.done":
			typ, _ := e.Item["type"].(string)
			if kinds[e.OutputIndex] != typ {
				t.Fatalf("output_item.done %q for added %q", typ, kinds[e.OutputIndex])
			}
			if e.OutputIndex != len(res.Items) {
				t.Fatalf("output_item.done index %d, want %d", e.OutputIndex, len(res.Items))
			}
			res.Items = append(res.Items, e.Item)
			switch typ {
			case "reasoning":
				res.Thinking = append(res.Thinking, thinking[e.OutputIndex].String())
			case "function_call":
				res.Args = append(res.Args, args[e.OutputIndex].String())
			}
		case "response.completed", "response.incomplete":
			res.Terminal = e.Type
			json.Unmarshal(e.Response, &res.Final)
			var tr struct {
				InputTransformations []Transformation `json:"input_transformations"`
			}
			json.Unmarshal(e.Response, &tr)
			res.Transform = tr.InputTransformations
		}
	}
	if !res.Created || res.Terminal == "" {
		t.Fatalf("stream without response.created or terminal event: %v", res.Events)
	}
	return res
}

// respSend posts body to s and returns the status and, for a 200, the
// reassembled stream; for an error, the error message.
func respSend(t *testing.T, s *Server, body string) (int, respStream, string) {
	t.Helper()
	resp := post(t, s.URL()+"/responses", body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatal(err)
		}
		if e.Error.Type != "invalid_request_error" {
			t.Errorf("error type %q", e.Error.Type)
		}
		return resp.StatusCode, respStream{}, e.Error.Message
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	return resp.StatusCode, assembleResponses(t, readSSE(t, resp.Body)), ""
}

// replayItems converts a response's output into the input items Pi replays:
// a reasoning item as received (its thinkingSignature is the JSON of the
// output_item.done item), a message and a function call rebuilt from their
// text and arguments with the received ids.
func replayItems(res respStream) []any {
	var out []any
	for _, it := range res.Items {
		switch it["type"] {
		case "reasoning":
			b, _ := json.Marshal(it)
			var cp map[string]any
			json.Unmarshal(b, &cp)
			out = append(out, cp)
		case "message":
			text := it["content"].([]any)[0].(map[string]any)["text"]
			out = append(out, map[string]any{"type": "message", "role": "assistant", "status": "completed", "id": it["id"],
				"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
		case "function_call":
			out = append(out, map[string]any{"type": "function_call", "id": it["id"], "call_id": it["call_id"],
				"name": it["name"], "arguments": it["arguments"]})
		}
	}
	for _, it := range res.Items {
		if it["type"] == "function_call" {
			out = append(out, respOutputItem(it["call_id"].(string), "output of "+it["call_id"].(string)))
		}
	}
	return out
}

// respConversation runs n tool turns against s and returns the input the
// client sends next.
func respConversation(t *testing.T, s *Server, model string, n int) []any {
	t.Helper()
	input := []any{map[string]any{"role": "developer", "content": "You are a test."}, respUser("go")}
	for k := 0; k < n; k++ {
		code, res, msg := respSend(t, s, respBodyOf(model, input, nil))
		if code != http.StatusOK {
			t.Fatalf("turn %d: %d %s", k, code, msg)
		}
		input = append(input, replayItems(res)...)
	}
	return input
}

// clone deep-copies a JSON value.
func respClone(v []any) []any {
	b, _ := json.Marshal(v)
	var out []any
	json.Unmarshal(b, &out)
	return out
}

func respAt(in []any, k int) map[string]any { return in[k].(map[string]any) }

// indexOf returns the index of the first item with the given type and id
// (or call_id for outputs).
func respIndex(t *testing.T, in []any, typ, id string) int {
	t.Helper()
	for k := range in {
		it := respAt(in, k)
		if it["type"] == typ && (it["id"] == id || it["call_id"] == id) {
			return k
		}
	}
	t.Fatalf("no %s %s in input", typ, id)
	return -1
}

func respRemove(in []any, ks ...int) []any {
	var out []any
	for k, v := range in {
		drop := false
		for _, r := range ks {
			drop = drop || r == k
		}
		if !drop {
			out = append(out, v)
		}
	}
	return out
}

func TestParseResponses(t *testing.T) {
	body := `{"model":"m","stream":true,"max_output_tokens":300,"instructions":"be brief",` +
		`"tools":[{"type":"function","name":"bash","parameters":{}},{"type":"web_search"}],` +
		`"input":[{"role":"developer","content":"sys prompt"},` +
		`{"role":"user","content":[{"type":"input_text","text":"hello "},{"type":"input_image","image_url":"x"},{"type":"input_text","text":"there"}]},` +
		`{"type":"reasoning","id":"rs_1_0","summary":[{"type":"summary_text","text":"hmm"}],"encrypted_content":"x"},` +
		`{"type":"message","role":"assistant","id":"msg_1","content":[{"type":"output_text","text":"Running.","annotations":[]}]},` +
		`{"type":"function_call","id":"fc_1_0","call_id":"call_a","name":"bash","arguments":"{\"command\":\"ls\"}"},` +
		` {"type":"function_call","call_id":"call_b","name":"bash","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"call_a","output":"file.txt"},` +
		`{"type":"function_call_output","call_id":"call_b","output":[{"type":"input_text","text":"/work"}]},` +
		`{"type":"configuration_update","reasoning":{"effort":"low"}},` +
		`{"role":"user","content":"next"},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}]}`
	req, err := ParseResponses([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if req.API != Responses || req.Model != "m" || !req.Stream || req.MaxTokens != 300 {
		t.Errorf("request %+v", req)
	}
	if want := []string{"bash", "web_search"}; !reflect.DeepEqual(req.Tools, want) {
		t.Errorf("tools %v", req.Tools)
	}
	type view struct {
		Role, Content, ToolCallID string
		Calls                     []string
	}
	var got []view
	for _, m := range req.Messages {
		v := view{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			v.Calls = append(v.Calls, tc.ID+" "+tc.Name+" "+string(tc.Arguments))
		}
		got = append(got, v)
	}
	want := []view{
		{Role: "system", Content: "be brief"},
		{Role: "system", Content: "sys prompt"},
		{Role: "user", Content: "hello there"},
		{Role: "assistant", Content: "Running.", Calls: []string{`call_a bash {"command":"ls"}`, "call_b bash {}"}},
		{Role: "tool", Content: "file.txt", ToolCallID: "call_a"},
		{Role: "tool", Content: "/work", ToolCallID: "call_b"},
		{Role: "user", Content: "next"},
		{Role: "assistant", Content: "ok"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("messages\n got %+v\nwant %+v", got, want)
	}
	input := body[strings.Index(body, `"input":`)+len(`"input":`) : len(body)-1]
	if string(req.MessagesJSON) != input {
		t.Errorf("MessagesJSON %s", req.MessagesJSON)
	}
	run := req.Messages[3].Raw
	if !strings.HasPrefix(string(run), `{"type":"reasoning"`) || !strings.HasSuffix(string(run), `"arguments":"{}"}`) ||
		!strings.Contains(input, string(run)) {
		t.Errorf("assistant run Raw %s", run)
	}
	if string(req.Messages[4].Raw) != `{"type":"function_call_output","call_id":"call_a","output":"file.txt"}` {
		t.Errorf("tool Raw %s", req.Messages[4].Raw)
	}
	if got := req.ToolCallsSeen(); len(got) != 2 {
		t.Errorf("ToolCallsSeen %v", got)
	}
	if out, ok := req.ToolResult("call_b"); !ok || out != "/work" {
		t.Errorf("ToolResult %q %v", out, ok)
	}

	// A string input is one user message.
	req, err = ParseResponses([]byte(`{"model":"m","input":"hi"}`))
	if err != nil || len(req.Messages) != 1 || req.Messages[0].Role != "user" || req.Messages[0].Content != "hi" {
		t.Fatalf("string input: %v %+v", err, req)
	}
	if _, err := ParseResponses([]byte(`{"model":"m","input":[{"type":"function_call","arguments":{}}]}`)); err == nil {
		t.Error("object arguments parsed")
	}
}

func TestResponsesStream(t *testing.T) {
	s := start(t, ScriptFunc(func(req *Request) Reply {
		r := respScript(req)
		if strings.Contains(req.Text(), "long") {
			r.FinishReason = "length"
		}
		return r
	}), Options{ChunkBytes: 5})
	model := "fake-gpt-reasoning"
	code, res, msg := respSend(t, s, respBodyOf(model, []any{respUser("go")}, nil))
	if code != http.StatusOK {
		t.Fatal(code, msg)
	}
	rec := s.Requests()[0]
	if rec.API != Responses || rec.Status != http.StatusOK || len(rec.Signatures) != 1 || rec.Signatures[0] == "" {
		t.Fatalf("recorded %+v", rec)
	}
	wantEvents := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_summary_part.added"}
	if !reflect.DeepEqual(res.Events[:4], wantEvents) {
		t.Errorf("events %v", res.Events)
	}
	types := []string{}
	for _, it := range res.Items {
		types = append(types, it["type"].(string))
	}
	if want := []string{"reasoning", "function_call", "function_call"}; !reflect.DeepEqual(types, want) {
		t.Fatalf("items %v", types)
	}
	rs := res.Items[0]
	if rs["id"] != "rs_1_0" || rs["encrypted_content"] != rec.Signatures[0] ||
		!strings.HasPrefix(rec.Signatures[0], "g") || res.Thinking[0] != "Thinking about request 1." {
		t.Errorf("reasoning item %v, deltas %q", rs, res.Thinking)
	}
	if sum := rs["summary"].([]any); len(sum) != 1 || sum[0].(map[string]any)["text"] != "Thinking about request 1." {
		t.Errorf("summary %v", rs["summary"])
	}
	for i, it := range res.Items[1:] {
		tc := rec.Reply.ToolCalls[i]
		if it["id"] != fmt.Sprintf("fc_1_%d", i) || it["call_id"] != tc.ID || it["name"] != "bash" ||
			it["arguments"] != string(tc.Arguments) || res.Args[i] != string(tc.Arguments) {
			t.Errorf("call %d: %v (args deltas %q)", i, it, res.Args[i])
		}
	}
	if res.Terminal != "response.completed" || res.Final["status"] != "completed" || res.Final["id"] != "resp_1" {
		t.Errorf("final %s %v", res.Terminal, res.Final)
	}
	if out := res.Final["output"].([]any); len(out) != 3 {
		t.Errorf("final output has %d items", len(out))
	}
	if _, ok := res.Final["input_transformations"]; ok {
		t.Error("input_transformations without removals")
	}
	u := res.Final["usage"].(map[string]any)
	reasoning := int(u["output_tokens_details"].(map[string]any)["reasoning_tokens"].(float64))
	if int(u["input_tokens"].(float64)) != rec.Usage.Prompt ||
		int(u["input_tokens_details"].(map[string]any)["cached_tokens"].(float64)) != rec.Usage.Cached ||
		reasoning != len("Thinking about request 1.")/4 ||
		int(u["output_tokens"].(float64)) != rec.Usage.Completion+reasoning ||
		int(u["total_tokens"].(float64)) != rec.Usage.Prompt+rec.Usage.Completion+reasoning {
		t.Errorf("usage %v, recorded %+v", u, rec.Usage)
	}

	// A text answer is a message item after the reasoning; finish reason
	// "length" ends the stream with response.incomplete.
	code, res, _ = respSend(t, s, respBodyOf(model, []any{respUser("final and long")}, nil))
	if code != http.StatusOK || len(res.Items) != 2 || res.Items[1]["type"] != "message" || res.Items[1]["id"] != "msg_2" ||
		res.Text != "All done." || res.Terminal != "response.incomplete" || res.Final["status"] != "incomplete" {
		t.Errorf("text answer: %d %v %q %s", code, res.Items, res.Text, res.Terminal)
	}

	// Without include there is no encrypted content; with effort "none" or
	// a non-reasoning model no reasoning at all.
	_, res, _ = respSend(t, s, respBodyOf(model, []any{respUser("go")}, map[string]any{"include": nil}))
	if _, ok := res.Items[0]["encrypted_content"]; ok || res.Items[0]["type"] != "reasoning" {
		t.Errorf("without include: %v", res.Items[0])
	}
	for _, extra := range []map[string]any{{"reasoning": map[string]any{"effort": "none"}}, {"model": "fake-gpt"}} {
		_, res, _ = respSend(t, s, respBodyOf(model, []any{respUser("go")}, extra))
		rec := s.Requests()[s.Len()-1]
		if res.Items[0]["type"] != "function_call" || rec.Reply.Thinking != nil || rec.Signatures != nil {
			t.Errorf("%v: items %v, thinking %q", extra, res.Items, rec.Reply.Thinking)
		}
	}

	// A non-streaming request gets the response object.
	resp := post(t, s.URL()+"/responses", respBodyOf(model, []any{respUser("go")}, map[string]any{"stream": false}))
	var obj struct {
		Object string           `json:"object"`
		Output []map[string]any `json:"output"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&obj); err != nil || obj.Object != "response" || len(obj.Output) != 3 {
		t.Errorf("non-streaming: %v %+v", err, obj)
	}
}

func TestResponsesRules(t *testing.T) {
	const model = "fake-gpt-reasoning"
	s := start(t, ScriptFunc(respScript), Options{})
	base := respConversation(t, s, model, 2)
	// A final text turn, whose message is paired with its reasoning.
	withText := append(respClone(base), respUser("final answer please"))
	code, res, msg := respSend(t, s, respBodyOf(model, withText, nil))
	if code != http.StatusOK {
		t.Fatal(code, msg)
	}
	withText = append(withText, replayItems(res)...)
	withText = append(withText, respUser("thanks"))
	textSeq := s.Len()

	rs1 := respIndex(t, base, "reasoning", "rs_1_0")
	fc1a := respIndex(t, base, "function_call", "fc_1_0")
	fc1b := respIndex(t, base, "function_call", "fc_1_1")
	out1a := respIndex(t, base, "function_call_output", "call_1_a")
	out1b := respIndex(t, base, "function_call_output", "call_1_b")
	rs2 := respIndex(t, base, "reasoning", "rs_2_0")

	cases := []struct {
		name   string
		model  string
		input  func() []any
		status int
		msg    string // exact error message, or a substring when it ends in "…"
	}{
		{name: "clean replay", input: func() []any { return respClone(base) }, status: 200},
		{name: "clean replay with a paired message", input: func() []any { return respClone(withText) }, status: 200},
		{name: "tampered summary", status: 400, input: func() []any {
			in := respClone(base)
			respAt(in, rs1)["summary"].([]any)[0].(map[string]any)["text"] = "Thinking about something else."
			return in
		}, msg: "The encrypted content for item rs_1_0 could not be verified. Reason: The summary does not match the encrypted content."},
		{name: "summary removed", status: 400, input: func() []any {
			in := respClone(base)
			respAt(in, rs2)["summary"] = []any{}
			return in
		}, msg: "The encrypted content for item rs_2_0 could not be verified…"},
		{name: "tampered encrypted content", status: 400, input: func() []any {
			in := respClone(base)
			enc := respAt(in, rs1)["encrypted_content"].(string)
			respAt(in, rs1)["encrypted_content"] = enc[:20] + "A" + enc[21:]
			return in
		}, msg: "The encrypted content for item rs_1_0 could not be verified. Reason: Encrypted content could not be decrypted or parsed."},
		{name: "encrypted content of another item", status: 400, input: func() []any {
			in := respClone(base)
			respAt(in, rs1)["encrypted_content"] = respAt(in, rs2)["encrypted_content"]
			return in
		}, msg: "The encrypted content for item rs_1_0 could not be verified. Reason: The encrypted content belongs to another item."},
		{name: "renamed reasoning item", status: 400, input: func() []any {
			in := respClone(base)
			respAt(in, rs1)["id"] = "rs_9_0"
			return in
		}, msg: "The encrypted content for item rs_9_0 could not be verified…"},
		{name: "missing encrypted content", status: 404, input: func() []any {
			in := respClone(base)
			delete(respAt(in, rs1), "encrypted_content")
			return in
		}, msg: "Item with id 'rs_1_0' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."},
		{name: "dropped reasoning item with its paired call", status: 400,
			input: func() []any { return respRemove(respClone(base), rs1) },
			msg:   "Item 'fc_1_0' of type 'function_call' was provided without its required 'reasoning' item: 'rs_1_0'."},
		{name: "dropped reasoning item with its paired message", status: 400, input: func() []any {
			in := respClone(withText)
			return respRemove(in, respIndex(t, in, "reasoning", fmt.Sprintf("rs_%d_0", textSeq)))
		}, msg: fmt.Sprintf("Item 'msg_%d' of type 'message' was provided without its required 'reasoning' item: 'rs_%d_0'.", textSeq, textSeq)},
		{name: "dropped reasoning item and the item ids", status: 200, input: func() []any {
			in := respRemove(respClone(base), rs1)
			delete(respAt(in, fc1a-1), "id")
			delete(respAt(in, fc1b-1), "id")
			return in
		}},
		{name: "outputs interleaved between the calls of one response", status: 400, input: func() []any {
			in := respClone(base)
			in[fc1b], in[out1a] = in[out1a], in[fc1b]
			return in
		}, msg: "Item 'fc_1_1' of type 'function_call' was provided without its required 'reasoning' item: 'rs_1_0'."},
		{name: "reasoning item without its following item", status: 400, input: func() []any {
			return respRemove(respClone(base), fc1a, fc1b, out1a, out1b)
		}, msg: "Item 'rs_1_0' of type 'reasoning' was provided without its required following item."},
		{name: "reasoning item last", status: 400, input: func() []any {
			return respClone(base)[:rs2+1]
		}, msg: "Item 'rs_2_0' of type 'reasoning' was provided without its required following item."},
		{name: "reasoning replayed to a non-reasoning model", model: "fake-gpt", status: 400,
			input: func() []any { return respClone(base) }, msg: respNotReasoning},
		{name: "reasoning replayed to another reasoning model", model: "fake-gpt-reasoning-mini", status: 400,
			input: func() []any { return respClone(base) },
			msg:   "The encrypted content for item rs_1_0 could not be verified. Reason: The encrypted content was created by another model."},
		{name: "output without its call", status: 400, input: func() []any {
			return append(respClone(base), respOutputItem("call_nowhere", "x"))
		}, msg: "No tool call found for function call output with call_id call_nowhere."},
		{name: "call without its output", status: 400, input: func() []any {
			return respRemove(respClone(base), out1b)
		}, msg: "No tool output found for function call call_1_b."},
		{name: "call without call_id", status: 400, input: func() []any {
			in := respClone(base)
			delete(respAt(in, fc1a), "call_id")
			return in
		}, msg: fmt.Sprintf("Missing required parameter: 'input[%d].call_id'.", fc1a)},
		{name: "edited earlier input binds nothing on a non-preserved model", status: 200, input: func() []any {
			in := respClone(base)
			respAt(in, 1)["content"] = []any{map[string]any{"type": "input_text", "text": "GO!"}}
			respAt(in, out1a)["output"] = "{#abc123 FOLDED}"
			return in
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.model
			if m == "" {
				m = model
			}
			before := s.Len()
			code, _, msg := respSend(t, s, respBodyOf(m, c.input(), nil))
			if code != c.status {
				t.Fatalf("status %d (%s), want %d", code, msg, c.status)
			}
			if want, prefix := strings.CutSuffix(c.msg, "…"); (prefix && !strings.HasPrefix(msg, want)) || (!prefix && msg != c.msg) {
				t.Errorf("message\n got %q\nwant %q", msg, c.msg)
			}
			rec := s.Requests()[before]
			if rec.Status != c.status || (c.status != 200) != (rec.Error != nil) || len(rec.Dropped) != 0 {
				t.Errorf("recorded status %d error %v dropped %v", rec.Status, rec.Error, rec.Dropped)
			}
		})
	}
}

func TestResponsesPreservedReasoning(t *testing.T) {
	const model = "fake-gpt-preserved"
	s := start(t, ScriptFunc(respScript), Options{})
	base := respConversation(t, s, model, 3) // rs_1_0, rs_2_0, rs_3_0
	send := func(t *testing.T, m string, in []any) ([]Transformation, respStream) {
		t.Helper()
		before := s.Len()
		code, res, msg := respSend(t, s, respBodyOf(m, in, nil))
		if code != http.StatusOK {
			t.Fatalf("status %d: %s", code, msg)
		}
		rec := s.Requests()[before]
		if !reflect.DeepEqual(rec.Dropped, res.Transform) {
			t.Errorf("recorded drops %v, reported %v", rec.Dropped, res.Transform)
		}
		return rec.Dropped, res
	}
	removed := func(reason string, ids ...string) []Transformation {
		var out []Transformation
		for _, id := range ids {
			out = append(out, Transformation{Type: "reasoning", ID: id, Action: "removed", Reason: reason})
		}
		return out
	}

	if got, _ := send(t, model, respClone(base)); got != nil {
		t.Errorf("clean replay dropped %v", got)
	}

	// An edit of the first user message removes every replayed item.
	in := respClone(base)
	respAt(in, 1)["content"] = []any{map[string]any{"type": "input_text", "text": "GO!"}}
	if got, _ := send(t, model, in); !reflect.DeepEqual(got, removed("prefix_mismatch", "rs_1_0", "rs_2_0", "rs_3_0")) {
		t.Errorf("edited first message: dropped %v", got)
	}

	// A folded tool output of turn 1 removes the items after it only; the
	// reasoning minted for the edited context binds the new prefix and is
	// kept on the next replay, while the old ones are reported again.
	in = respClone(base)
	respAt(in, respIndex(t, in, "function_call_output", "call_1_a"))["output"] = "{#abc123 FOLDED}"
	got, res := send(t, model, in)
	if !reflect.DeepEqual(got, removed("prefix_mismatch", "rs_2_0", "rs_3_0")) {
		t.Errorf("folded output: dropped %v", got)
	}
	in = append(in, replayItems(res)...)
	if got, _ := send(t, model, in); !reflect.DeepEqual(got, removed("prefix_mismatch", "rs_2_0", "rs_3_0")) {
		t.Errorf("after the fold: dropped %v", got)
	}

	// Editing reasoning itself is still an error, and so is a paired call
	// without its reasoning item: the pairing is judged before removals.
	in = respClone(base)
	respAt(in, 1)["content"] = "edited"
	respAt(in, respIndex(t, in, "reasoning", "rs_2_0"))["summary"] = []any{}
	if code, _, msg := respSend(t, s, respBodyOf(model, in, nil)); code != 400 || !strings.Contains(msg, "rs_2_0 could not be verified") {
		t.Errorf("edited summary: %d %s", code, msg)
	}
	in = respClone(base)
	respAt(in, 1)["content"] = "edited"
	in = respRemove(in, respIndex(t, in, "reasoning", "rs_2_0"))
	if code, _, msg := respSend(t, s, respBodyOf(model, in, nil)); code != 400 || !strings.Contains(msg, "without its required 'reasoning' item: 'rs_2_0'") {
		t.Errorf("dropped paired reasoning: %d %s", code, msg)
	}

	// Reasoning from another model is removed, not rejected.
	if got, _ := send(t, "fake-gpt-preserved-2", respClone(base)); !reflect.DeepEqual(got, removed("model_mismatch", "rs_1_0", "rs_2_0", "rs_3_0")) {
		t.Errorf("other model: dropped %v", got)
	}
}

func TestResponsesSeveralReasoningItems(t *testing.T) {
	const model = "fake-gpt-preserved"
	s := start(t, ScriptFunc(func(req *Request) Reply {
		r := respScript(req)
		r.Thinking = append(r.Thinking, RedactedPrefix+"hidden reasoning")
		return r
	}), Options{})
	in := respConversation(t, s, model, 2)
	rs0, rs1 := respIndex(t, in, "reasoning", "rs_1_0"), respIndex(t, in, "reasoning", "rs_1_1")
	if rs1 != rs0+1 || len(respAt(in, rs1)["summary"].([]any)) != 0 || len(respAt(in, rs0)["summary"].([]any)) != 1 {
		t.Fatalf("reasoning items %v %v", in[rs0], in[rs1])
	}
	if code, res, msg := respSend(t, s, respBodyOf(model, in, nil)); code != 200 || res.Transform != nil {
		t.Fatalf("replay: %d %s %v", code, msg, res.Transform)
	}
	// Swapping the two items of one response breaks the following-item
	// rule; an edit before them removes both (and the later ones).
	swapped := respClone(in)
	swapped[rs0], swapped[rs1] = swapped[rs1], swapped[rs0]
	if code, _, msg := respSend(t, s, respBodyOf(model, swapped, nil)); code != 400 ||
		msg != "Item 'rs_1_1' of type 'reasoning' was provided without its required following item." {
		t.Errorf("swapped: %d %s", code, msg)
	}
	edited := respClone(in)
	respAt(edited, 1)["content"] = "edited"
	_, res, _ := respSend(t, s, respBodyOf(model, edited, nil))
	var ids []string
	for _, tr := range res.Transform {
		ids = append(ids, tr.ID)
	}
	if want := []string{"rs_1_0", "rs_1_1", "rs_2_0", "rs_2_1"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("removed %v, want %v", ids, want)
	}
}
