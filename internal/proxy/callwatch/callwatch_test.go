package callwatch

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// The shell command the sample streams call, as JSON string contents.
const sampleCmd = `for i in $(seq 1 120); do if [ $((i % 20)) -eq 0 ]; then echo \"ERROR: step $i failed: disk quota exceeded on /var/tmp/build-$i\"; else echo \"INFO: step $i ok - compiled module_$i.o in 0.0${i}s (padding padding padding)\"; fi; done; echo \"SUMMARY: $((120 - 6)) ok, 6 errors\"`

// TestSamples runs the streams real clients got from the fake in
// /work/shared/clients/samples/sse (copied to testdata).
func TestSamples(t *testing.T) {
	tests := []struct {
		file string
		f    Format
		want []Call
	}{
		{"anthropic-turn1.sse", Messages, []Call{{ID: "toolu_fake_mx6d47wg7dnyky", Name: "Bash",
			Args: `{"command":"` + sampleCmd + `","timeout":60000}`}}},
		{"anthropic-turn3.sse", Messages, nil},
		{"chat-turn1.sse", Chat, []Call{{ID: "call_fake_mx6d47y90gmco9", Name: "bash",
			Args: `{"command":"` + sampleCmd + `"}`}}},
		{"chat-turn3.sse", Chat, nil},
		{"responses-turn1.sse", Responses, []Call{{ID: "call_fake_mx6d47xfj2wr0x", Name: "exec_command",
			Args: `{"cmd":"` + sampleCmd + `"}`}}},
		{"responses-turn3.sse", Responses, nil},
		// A client-executed tool_search_call names no tool (and its
		// arguments are an object): not a tool call to report.
		{"responses-tool-search.sse", Responses, nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tt.want {
				if !json.Valid([]byte(c.Args)) {
					t.Fatalf("test args not JSON: %s", c.Args)
				}
			}
			checkAll(t, tt.f, true, nil, body, tt.want)
			checkAll(t, tt.f, true, func(string) bool { return false }, body, nil)
			checkAll(t, tt.f, true, recallOnly, body, nil)
			crlf := bytes.ReplaceAll(body, []byte("\n"), []byte("\r\n"))
			checkAll(t, tt.f, true, nil, crlf, tt.want)
			cr := bytes.ReplaceAll(body, []byte("\n"), []byte("\r"))
			checkAll(t, tt.f, true, nil, cr, tt.want)
			checkTruncated(t, tt.f, true, nil, body)
			// Another format's watcher finds nothing in it.
			for _, other := range []Format{Messages, Responses, Chat} {
				if other != tt.f {
					checkAll(t, other, true, nil, body, nil)
				}
			}
		})
	}
}

// Replies for fakellm to stream, each in every format.
var replies = []struct {
	name  string
	reply fakellm.Reply
}{
	{"one call", fakellm.Reply{ToolCalls: []fakellm.ToolCall{
		{ID: "call_one", Name: "recall_folded", Arguments: json.RawMessage(`{"codes":["F1"]}`)}}}},
	{"thinking text and calls", fakellm.Reply{
		Thinking: []string{"I should look at the folded output first."},
		Text:     "Let me recall that and list the directory.",
		ToolCalls: []fakellm.ToolCall{
			{ID: "call_bash", Name: "bash", Arguments: json.RawMessage(`{"command":"ls -la /tmp && echo \"ok\""}`)},
			{ID: "call_r1", Name: "recall_folded", Arguments: json.RawMessage(`{"codes":["F2","F3"],"note":"ünïcødé 😀 <a>&amp; \"q\" \\ \n\t\u2028 end"}`)},
			{ID: "call_r2", Name: "recall_folded"}, // empty arguments: sent as {}
		}}},
	{"text only", fakellm.Reply{Thinking: []string{"nothing to call"},
		Text: strings.Repeat("A long answer with \"quotes\", content_block_start, function_call and tool_calls in it. ", 30)}},
	{"unwanted call only", fakellm.Reply{ToolCalls: []fakellm.ToolCall{
		{ID: "call_big", Name: "write_file", Arguments: json.RawMessage(`{"path":"a.txt","content":"` + strings.Repeat("x", 3000) + `"}`)}}}},
	{"big wanted call", fakellm.Reply{ToolCalls: []fakellm.ToolCall{
		{ID: "call_bigr", Name: "recall_folded", Arguments: json.RawMessage(`{"codes":["` + strings.Repeat("F", 3000) + `"]}`)}}}},
	{"namespaced call", fakellm.Reply{ToolCalls: []fakellm.ToolCall{
		{ID: "call_ns", Name: "recall_folded", Namespace: "mcp__contextfold", Arguments: json.RawMessage(`{"codes":["F9"]}`)}}}},
	{"finish length", fakellm.Reply{FinishReason: "length", ToolCalls: []fakellm.ToolCall{
		{ID: "call_len", Name: "recall_folded", Arguments: json.RawMessage(`{"codes":["F4"]}`)}}}},
}

// TestGenerated runs the replies through fakellm in each format, streamed
// and not, with small argument pieces.
func TestGenerated(t *testing.T) {
	g := newGen(t, 7)
	for _, r := range replies {
		for _, f := range []Format{Messages, Responses, Chat} {
			for _, stream := range []bool{true, false} {
				name := r.name + "/" + f.String()
				if !stream {
					name += "/json"
				}
				t.Run(name, func(t *testing.T) {
					body, calls := g.body(t, f, stream, r.reply)
					for _, want := range []func(string) bool{nil, recallOnly, func(string) bool { return false }} {
						exp := expected(f, calls, want)
						if f == Messages && !stream {
							// The JSON body carries input as an object that
							// Go's encoder compacted and HTML-escaped.
							for i := range exp {
								var c, h bytes.Buffer
								json.Compact(&c, []byte(exp[i].Args))
								json.HTMLEscape(&h, c.Bytes())
								exp[i].Args = h.String()
							}
						}
						checkAll(t, f, stream, want, body, exp)
					}
					checkTruncated(t, f, stream, recallOnly, body)
					if stream {
						crlf := bytes.ReplaceAll(body, []byte("\n"), []byte("\r\n"))
						checkAll(t, f, stream, nil, crlf, expected(f, calls, nil))
					}
				})
			}
		}
	}
}

// TestTruncatedBeforeEnd cuts each stream just before the event that
// completes its call: the arguments are all there but the call is not done.
func TestTruncatedBeforeEnd(t *testing.T) {
	g := newGen(t, 5)
	reply := fakellm.Reply{ToolCalls: []fakellm.ToolCall{
		{ID: "call_t", Name: "recall_folded", Arguments: json.RawMessage(`{"codes":["F1"]}`)}}}
	marks := map[Format]string{
		Messages:  `"type":"content_block_stop"`,
		Responses: `"type":"response.output_item.done"`,
		Chat:      `"finish_reason":"tool_calls"`,
	}
	for f, mark := range marks {
		t.Run(f.String(), func(t *testing.T) {
			body, _ := g.body(t, f, true, reply)
			i := bytes.LastIndex(body, []byte(mark))
			if i < 0 {
				t.Fatalf("no %s in\n%s", mark, body)
			}
			// Everything up to the end of the completing event's line, but
			// not the blank line that ends the event.
			end := i + bytes.IndexByte(body[i:], '\n') + 1
			if got := watch(f, true, nil, [][]byte{body[:end]}); len(got) != 0 {
				t.Errorf("reported %s", show(got))
			}
			if got := watch(f, true, nil, [][]byte{body[:end+1]}); len(got) != 1 {
				t.Errorf("with the blank line: reported %s", show(got))
			}
		})
	}
}

// handcrafted are bodies for what the fake does not produce.
var handcrafted = []struct {
	name   string
	f      Format
	stream bool
	want   func(string) bool
	body   string
	calls  []Call
}{
	{name: "messages: no space after colon, comments, no event lines, split surrogate pair",
		f: Messages, stream: true, body: ": keep-alive\n\n" +
			`data:{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"tu1","name":"recall_folded","input":{}}}` + "\n\n" +
			`data:{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":\"\ud83d"}}` + "\n\n" +
			": comment\n" +
			`data:{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\ude00\u003c\"}"}}` + "\n\n" +
			`data:{"type":"content_block_stop","index":0}` + "\n\n",
		calls: []Call{{ID: "tu1", Name: "recall_folded", Args: `{"a":"😀<"}`}}},
	{name: "messages: BOM, input without deltas, mcp_tool_use, server_tool_use",
		f: Messages, stream: true, body: "\xEF\xBB\xBFevent: content_block_start\n" +
			`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"tu1","name":"a","input":{"codes":["X"]}}}` + "\n\n" +
			`data: {"type":"content_block_stop","index":0}` + "\n\n" +
			`data: {"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srv1","name":"web_search","input":{}}}` + "\n\n" +
			`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"x\"}"}}` + "\n\n" +
			`data: {"type":"content_block_stop","index":1}` + "\n\n" +
			`data: {"type":"content_block_start","index":2,"content_block":{"type":"mcp_tool_use","id":"mcptu1","name":"recall_folded","server_name":"contextfold","input":{}}}` + "\n\n" +
			`data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"codes\":[\"F1\"]}"}}` + "\n\n" +
			`data: {"type":"content_block_stop","index":2}` + "\n\n",
		calls: []Call{{ID: "tu1", Name: "a", Args: `{"codes":["X"]}`},
			{ID: "mcptu1", Name: "recall_folded", Namespace: "contextfold", Args: `{"codes":["F1"]}`}}},
	{name: "messages: interleaved blocks, multi-line data, malformed event, want filter",
		f: Messages, stream: true, want: recallOnly, body: `data: {"type":"content_block_start","index":0,` + "\n" +
			`data:  "content_block":{"type":"tool_use","id":"tu0","name":"recall_folded","input":{}}}` + "\n\n" +
			`data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"tu1","name":"recall_folded","input":{}}}` + "\n\n" +
			`data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"tu2","name":"bash","input":{}}}` + "\n\n" +
			`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"b\":1}"}}` + "\n\n" +
			`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}` + "\n\n" +
			`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":` + "\n\n" +
			`data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{}"}}` + "\n\n" +
			`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"0}"}}` + "\n\n" +
			`data: {"type":"content_block_stop","index":1}` + "\n\n" +
			`data: {"type":"content_block_stop","index":2}` + "\n\n" +
			`data: {"type":"content_block_stop","index":0}` + "\n\n" +
			`data: {"type":"content_block_stop","index":5}` + "\n\n",
		calls: []Call{{ID: "tu1", Name: "recall_folded", Args: `{"b":1}`}, {ID: "tu0", Name: "recall_folded", Args: `{"a":0}`}}},
	{name: "messages: a new message drops the blocks left open",
		f: Messages, stream: true, body: `data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"tu0","name":"a","input":{}}}` + "\n\n" +
			`data: {"type":"message_start","message":{"content":[]}}` + "\n\n" +
			`data: {"type":"content_block_stop","index":0}` + "\n\n"},
	{name: "messages: data: [DONE] and an event with no data are ignored",
		f: Messages, stream: true, body: "event: ping\n\ndata: [DONE]\n\n"},

	{name: "responses: only in response.completed, then once; incomplete item; custom and mcp calls",
		f: Responses, stream: true, body: `data: {"type":"response.output_item.done","item":{"type":"custom_tool_call","call_id":"c1","name":"apply_patch","input":"*** Begin Patch\n"}}` + "\n\n" +
			`data: {"type":"response.output_item.done","item":{"type":"function_call","call_id":"c2","name":"recall_folded","arguments":"{\"codes\":[]}","status":"incomplete"}}` + "\n\n" +
			`data: {"type":"response.output_item.done","item":{"type":"mcp_call","id":"mcp_1","name":"recall_folded","server_label":"contextfold","arguments":"{}","status":"completed"}}` + "\n\n" +
			`data: {"type":"response.output_item.added","item":{"type":"function_call","call_id":"c3","name":"x","arguments":"","status":"in_progress"}}` + "\n\n" +
			`data: {"type":"response.completed","response":{"output":[` +
			`{"type":"custom_tool_call","call_id":"c1","name":"apply_patch","input":"*** Begin Patch\n"},` +
			`{"type":"function_call","call_id":"c3","name":"x","namespace":"mcp__s","arguments":"{\"k\":\"v\"}","status":"completed"}]}}` + "\n\n",
		calls: []Call{{ID: "c1", Name: "apply_patch", Args: "*** Begin Patch\n"},
			{ID: "mcp_1", Name: "recall_folded", Namespace: "contextfold", Args: "{}"},
			{ID: "c3", Name: "x", Namespace: "mcp__s", Args: `{"k":"v"}`}}},
	{name: "responses: the incomplete response's finished calls",
		f: Responses, stream: true, body: `data: {"type":"response.incomplete","response":{"status":"incomplete","output":[` +
			`{"type":"function_call","call_id":"c1","name":"a","arguments":"{}","status":"completed"},` +
			`{"type":"function_call","call_id":"c2","name":"b","arguments":"{\"x","status":"incomplete"}]}}` + "\n\n",
		calls: []Call{{ID: "c1", Name: "a", Args: "{}"}}},

	{name: "chat: parallel calls, two choices, finish in the last pieces' chunk, repeated ids",
		f: Chat, stream: true, body: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"recall_folded","arguments":""}},{"index":1,"id":"b","function":{"name":"bash","arguments":"{\"c"}}]}},` +
			`{"index":1,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"recall_folded","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"arguments":"\":1}"}},{"index":0,"id":"a","function":{"arguments":"{\"x\":"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"\\u00e9\"}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n" +
			"data: [DONE]\n\n",
		calls: []Call{{ID: "c", Name: "recall_folded", Args: "{}"}, {ID: "a", Name: "recall_folded", Args: `{"x":"\u00e9"}`},
			{ID: "b", Name: "bash", Args: `{"c":1}`}}},
	{name: "chat: every call at index 0 (or none), told apart by id; [DONE] without finish_reason",
		f: Chat, stream: true, body: `data: {"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{\"y\":2}"}}]}}]}` + "\n\n" +
			"data: [DONE]\n\n",
		calls: []Call{{ID: "a", Name: "f", Args: "{}"}, {ID: "b", Name: "g", Args: `{"y":2}`}}},
	{name: "chat: arguments before the name are kept",
		f: Chat, stream: true, want: recallOnly, body: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"arguments":"{\"k\""}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"recall_folded","arguments":":1}"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n",
		calls: []Call{{ID: "a", Name: "recall_folded", Args: `{"k":1}`}}},
	{name: "chat: a call starts with its id; pieces of no call are ignored; unwanted calls are skipped",
		f: Chat, stream: true, want: recallOnly, body: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"recall_folded","arguments":"{\"a\":"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"u","function":{"name":"bash","arguments":"{"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"}"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"w","function":{"name":"recall_folded","arguments":"{\"b\":2}"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n",
		calls: []Call{{ID: "w", Name: "recall_folded", Args: `{"b":2}`}}},
	{name: "chat: no finish_reason and no [DONE] is a cut stream",
		f: Chat, stream: true, body: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}` + "\n\n"},
	{name: "chat: malformed chunks are skipped",
		f: Chat, stream: true, body: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"z\":` + "\n\n" +
			`data: {"choices":[{"index":"0"}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]},"finish_reason":"stop"}]}` + "\n\n",
		calls: []Call{{ID: "a", Name: "f", Args: "{}"}}},

	{name: "messages json: tool_use and mcp_tool_use", f: Messages,
		body: `{"id":"msg_1","type":"message","content":[{"type":"text","text":"hi \"tool_use\""},` +
			`{"type":"tool_use","id":"tu1","name":"recall_folded","input":{"codes":["A"]}},` +
			`{"type":"mcp_tool_use","id":"m1","name":"recall_folded","server_name":"cf","input":{}},` +
			`{"type":"server_tool_use","id":"s1","name":"web_search","input":{}}]}`,
		calls: []Call{{ID: "tu1", Name: "recall_folded", Args: `{"codes":["A"]}`},
			{ID: "m1", Name: "recall_folded", Namespace: "cf", Args: "{}"}}},
	{name: "responses json: function and custom calls", f: Responses, want: recallOnly,
		body: `{"id":"resp_1","object":"response","output":[{"type":"message","content":[{"type":"output_text","text":"x"}]},` +
			`{"type":"function_call","call_id":"c1","name":"recall_folded","arguments":"{\"codes\":[\"B\"]}","status":"completed"},` +
			`{"type":"custom_tool_call","call_id":"c2","name":"recall_folded","input":"free text"},` +
			`{"type":"function_call","call_id":"c3","name":"bash","arguments":"{}"}]}`,
		calls: []Call{{ID: "c1", Name: "recall_folded", Args: `{"codes":["B"]}`},
			{ID: "c2", Name: "recall_folded", Args: "free text"}}},
	{name: "chat json: function and custom tool calls", f: Chat,
		body: `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
			`{"id":"c1","type":"function","function":{"name":"recall_folded","arguments":"{\"codes\":[\"C\"]}"}},` +
			`{"id":"c2","type":"custom","custom":{"name":"grammar_tool","input":"raw input"}}]},"finish_reason":"tool_calls"}]}`,
		calls: []Call{{ID: "c1", Name: "recall_folded", Args: `{"codes":["C"]}`},
			{ID: "c2", Name: "grammar_tool", Args: "raw input"}}},
	{name: "chat json: malformed", f: Chat, body: `{"choices":[{"message":{"tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{}"}}]}}`},
}

// TestHandcrafted runs the handcrafted bodies.
func TestHandcrafted(t *testing.T) {
	for _, tt := range handcrafted {
		t.Run(tt.name, func(t *testing.T) {
			checkAll(t, tt.f, tt.stream, tt.want, []byte(tt.body), tt.calls)
			checkTruncated(t, tt.f, tt.stream, tt.want, []byte(tt.body))
			if tt.stream {
				crlf := strings.ReplaceAll(tt.body, "\n", "\r\n")
				checkAll(t, tt.f, tt.stream, tt.want, []byte(crlf), tt.calls)
			}
		})
	}
}

// TestLimits checks the memory bounds: arguments up to MaxArgs are
// reported and over it not; a line over MaxLine is skipped with its event
// and the stream goes on; a JSON body over MaxBody is not parsed.
func TestLimits(t *testing.T) {
	args := func(n int) string { return `{"a":"` + strings.Repeat("y", n-8) + `"}` }
	streams := map[Format]func(a string) string{
		Messages: func(a string) string {
			q, _ := json.Marshal(a)
			return `data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}` + "\n\n" +
				`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":` + string(q[:len(q)/2]) + `"}}` + "\n\n" +
				`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"` + string(q[len(q)/2:]) + `}}` + "\n\n" +
				`data: {"type":"content_block_stop","index":0}` + "\n\n"
		},
		Responses: func(a string) string {
			q, _ := json.Marshal(a)
			return `data: {"type":"response.output_item.done","item":{"type":"function_call","call_id":"t","name":"f","arguments":` + string(q) + `}}` + "\n\n"
		},
		Chat: func(a string) string {
			q, _ := json.Marshal(a)
			return `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"f","arguments":` + string(q[:len(q)/2]) + `"}}]}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + string(q[len(q)/2:]) + `}}]},"finish_reason":"tool_calls"}]}` + "\n\n"
		},
	}
	for f, mk := range streams {
		t.Run(f.String(), func(t *testing.T) {
			// MaxArgs counts the escaped bytes: two quotes escape to four.
			fits := args(MaxArgs - 4)
			if got := watch(f, true, nil, split([]byte(mk(fits)), []int{100, 1000})); len(got) != 1 || got[0].Args != fits {
				t.Errorf("%d bytes of args: got %d calls", len(fits), len(got))
			}
			over := args(MaxArgs - 3)
			if got := watch(f, true, nil, split([]byte(mk(over)), []int{100, 1000})); len(got) != 0 {
				t.Errorf("%d bytes of args: got %d calls", len(over), len(got))
			}
		})
	}

	small := streams[Chat](`{}`)
	long := "data: {\"x\":\"" + strings.Repeat("z", MaxLine) + "\"}\n"
	comment := ":" + strings.Repeat("c", MaxLine) + "\r\n"
	body := []byte(long + "\n" + small + comment + "\n" + small + long + "\n" + small)
	want := []Call{{ID: "t", Name: "f", Args: "{}"}, {ID: "t", Name: "f", Args: "{}"}, {ID: "t", Name: "f", Args: "{}"}}
	for _, cuts := range [][]int{nil, {5, len(long) - 1, len(long) + 3, len(long) + len(small) + 100}, {MaxLine / 2, MaxLine + 7, MaxLine*2 + 30}} {
		if got := watch(Chat, true, nil, split(body, cuts)); !sameCalls(got, want) {
			t.Errorf("cuts %v: got %s", cuts, show(got))
		}
	}
	// A line of exactly MaxLine bytes is read, one more is not.
	line := func(n int) string {
		l := `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}],"pad":"`
		return l + strings.Repeat("p", n-len(l)-2) + `"}`
	}
	for _, cuts := range [][]int{nil, {MaxLine - 1}, {3, MaxLine}} {
		if got := watch(Chat, true, nil, split([]byte(line(MaxLine)+"\n\n"), cuts)); len(got) != 1 {
			t.Errorf("line of MaxLine bytes, cuts %v: got %s", cuts, show(got))
		}
		if got := watch(Chat, true, nil, split([]byte(line(MaxLine+1)+"\n\n"), cuts)); len(got) != 0 {
			t.Errorf("line of MaxLine+1 bytes, cuts %v: got %s", cuts, show(got))
		}
	}

	js := `{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}}],"pad":"`
	js += strings.Repeat("p", MaxBody-len(js)-2) + `"}`
	if got := watch(Chat, false, nil, split([]byte(js), []int{10})); len(got) != 1 {
		t.Errorf("JSON body of MaxBody bytes: got %s", show(got))
	}
	if got := watch(Chat, false, nil, split([]byte(js+" "), []int{10})); len(got) != 0 {
		t.Errorf("JSON body over MaxBody: got %s", show(got))
	}
}

// TestNeverAltersChunks checks Write leaves p as it was and keeps no
// reference to it: the proxy reuses its buffer for the next read.
func TestNeverAltersChunks(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "anthropic-turn1.sse"))
	if err != nil {
		t.Fatal(err)
	}
	var got []Call
	w := New(Messages, true, nil, func(c Call) { got = append(got, c) })
	buf := make([]byte, 37)
	orig := make([]byte, len(buf))
	for rest := body; len(rest) > 0; {
		n := copy(buf, rest)
		copy(orig, buf[:n])
		w.Write(buf[:n])
		if !bytes.Equal(buf[:n], orig[:n]) {
			t.Fatal("Write changed its chunk")
		}
		for i := range buf {
			buf[i] = '\n' // what a reused buffer may hold next: clobber it
		}
		rest = rest[n:]
	}
	w.Close()
	w.Write([]byte("data: after close\n\n"))
	if len(got) != 1 || !strings.HasPrefix(got[0].Args, `{"command":"for i in`) {
		t.Errorf("got %s", show(got))
	}
}

// TestCloseFromReport closes the Watcher from report, in the middle of a
// batch of calls: nothing more is reported and nothing breaks.
func TestCloseFromReport(t *testing.T) {
	for _, tt := range handcrafted {
		if len(tt.calls) < 2 {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			var got []Call
			var w *Watcher
			w = New(tt.f, tt.stream, tt.want, func(c Call) {
				got = append(got, c)
				w.Close()
			})
			w.Write([]byte(tt.body))
			w.Close()
			if len(got) != 1 || got[0] != tt.calls[0] {
				t.Errorf("got %s", show(got))
			}
		})
	}
}

// TestOtherBlocksSkipParsing: with no tool block open, the start of a text
// or thinking block, its deltas and its stop are passed over without
// decoding their JSON (no allocation), for the proxy watches every event
// before it forwards it; a tool block's start is still decoded.
func TestOtherBlocksSkipParsing(t *testing.T) {
	w := New(Messages, true, func(string) bool { return true }, nil)
	for _, ev := range []string{
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Done."}}`,
		`{"type":"content_block_stop","index":0}`,
	} {
		chunk := []byte("event: x\ndata: " + ev + "\n\n")
		if n := testing.AllocsPerRun(50, func() { w.Write(chunk) }); n != 0 {
			t.Errorf("%s: %v allocations per event", ev, n)
		}
	}
	var got []Call
	w = New(Messages, true, func(string) bool { return true }, func(c Call) { got = append(got, c) })
	for _, ev := range []string{
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"recall_folded","input":{}}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"code\":\"ab12cd\"}"}}`,
		`{"type":"content_block_stop","index":1}`,
	} {
		w.Write([]byte("data: " + ev + "\n\n"))
	}
	w.Close()
	if len(got) != 1 || got[0].ID != "toolu_1" || got[0].Name != "recall_folded" || string(got[0].Args) != `{"code":"ab12cd"}` {
		t.Fatalf("the tool block: %+v", got)
	}
}
