package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/proxy/codec"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// output is turn k's tool output: about 9 KB, three error lines.
func output(k int) string {
	var b strings.Builder
	for i := 1; i <= 120; i++ {
		if i%40 == 0 {
			fmt.Fprintf(&b, "ERROR: turn %d step %d failed: disk quota exceeded on /var/tmp/build-%d\n", k, i, i)
			continue
		}
		fmt.Fprintf(&b, "INFO: turn %d step %d ok - compiled module_%d.o in 0.%02ds (padding padding padding)\n", k, i, i, i%100)
	}
	return b.String()
}

// client builds the body a client of api sends at turn n: the whole
// conversation, n tool calls with their results.
type client struct {
	api  codec.API
	path string
	body func(n int) string
	// outputs reads the tool outputs of a body, by call id.
	outputs func(t *testing.T, body []byte) map[string]string
}

// testFolder is a Folder planning for window tokens over a store in a
// fresh temporary directory; both are closed when tb ends.
func testFolder(tb testing.TB, window int, log *slog.Logger) *Folder {
	tb.Helper()
	st, err := foldstore.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	f := NewFolder(st, schedule.Economic{}, window, log)
	tb.Cleanup(func() {
		f.Close()
		st.Close()
	})
	return f
}

func callID(k int) string { return fmt.Sprintf("call_%03d", k) }

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

var clients = []client{
	{codec.Chat, "/v1/chat/completions", func(n int) string {
		msgs := []any{map[string]any{"role": "system", "content": "You are a test agent."}, map[string]any{"role": "user", "content": "Run the build."}}
		for k := 1; k <= n; k++ {
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": callID(k), "type": "function", "function": map[string]any{"name": "bash", "arguments": js(map[string]any{"command": fmt.Sprintf("make step%d", k)})}}}},
				map[string]any{"role": "tool", "tool_call_id": callID(k), "content": output(k)})
		}
		return js(map[string]any{"model": "m", "messages": msgs, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}}, "stream": true})
	}, func(t *testing.T, body []byte) map[string]string {
		var b struct {
			Messages []struct {
				Role       string
				ToolCallID string `json:"tool_call_id"`
				Content    any
			}
		}
		decode(t, body, &b)
		out := map[string]string{}
		for _, m := range b.Messages {
			if s, ok := m.Content.(string); ok && m.ToolCallID != "" {
				out[m.ToolCallID] = s
			}
		}
		return out
	}},
	{codec.Responses, "/v1/responses", func(n int) string {
		items := []any{map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "You are a test agent."}}},
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Run the build."}}}}
		for k := 1; k <= n; k++ {
			items = append(items,
				map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%d", k), "summary": []any{}, "encrypted_content": "opaque"},
				map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", k), "call_id": callID(k), "name": "exec_command", "arguments": js(map[string]any{"cmd": fmt.Sprintf("make step%d", k)})},
				map[string]any{"type": "function_call_output", "call_id": callID(k), "output": output(k)})
		}
		return js(map[string]any{"model": "m", "input": items, "tools": []any{map[string]any{"type": "function", "name": "exec_command"}}, "store": false, "prompt_cache_key": "thread-1", "stream": true})
	}, func(t *testing.T, body []byte) map[string]string {
		var b struct {
			Input []struct {
				Type   string
				CallID string `json:"call_id"`
				Output any
			}
		}
		decode(t, body, &b)
		out := map[string]string{}
		for _, it := range b.Input {
			if s, ok := it.Output.(string); ok && it.Type == "function_call_output" {
				out[it.CallID] = s
			}
		}
		return out
	}},
	{codec.Messages, "/v1/messages?beta=true", func(n int) string {
		msgs := []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Run the build."}}}}
		for k := 1; k <= n; k++ {
			result := map[string]any{"type": "tool_result", "tool_use_id": callID(k), "content": output(k), "is_error": false}
			if k == n {
				// Claude Code moves its last breakpoint to the newest block.
				result["cache_control"] = map[string]any{"type": "ephemeral"}
			}
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "thinking", "thinking": "plan", "signature": "sig"}, map[string]any{"type": "tool_use", "id": callID(k), "name": "Bash", "input": map[string]any{"command": fmt.Sprintf("make step%d", k)}}}},
				map[string]any{"role": "user", "content": []any{result}})
		}
		return js(map[string]any{"model": "m", "messages": msgs, "system": []any{map[string]any{"type": "text", "text": "You are a test agent.", "cache_control": map[string]any{"type": "ephemeral"}}}, "tools": []any{map[string]any{"name": "Bash", "input_schema": map[string]any{"type": "object"}}}, "stream": true})
	}, func(t *testing.T, body []byte) map[string]string {
		var b struct {
			Messages []struct {
				Content any
			}
		}
		decode(t, body, &b)
		out := map[string]string{}
		for _, m := range b.Messages {
			blocks, _ := m.Content.([]any)
			for _, bl := range blocks {
				bm := bl.(map[string]any)
				if s, ok := bm["content"].(string); ok && bm["type"] == "tool_result" {
					out[bm["tool_use_id"].(string)] = s
				}
			}
		}
		return out
	}},
}

func decode(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
}

var codeRE = regexp.MustCompile(`\{#([0-9a-z]+) FOLDED\}`)

// foldingFront is a proxy with a Folder over store dir, before up.
func foldingFront(t *testing.T, up *upstream, dir string, window int) (base string, stop func()) {
	store, err := foldstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	folder := NewFolder(store, schedule.Economic{}, window, nil)
	s, _ := front(t, up, up, func(c *Config) { c.Folder = folder })
	return s.URL, func() {
		s.Close()
		folder.Close()
		store.Close()
	}
}

func send(t *testing.T, base, path, body string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(path, "/v1/messages") {
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("x-claude-code-session-id", "session-1")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
}

// TestFoldsAConversation: over a 40-turn conversation of each wire format,
// old tool outputs reach the upstream as digests, each digest's bytes
// never change once sent, error lines stay visible in it, the store holds
// every folded output byte for byte, and the newest outputs go raw.
func TestFoldsAConversation(t *testing.T) {
	for _, cl := range clients {
		t.Run(string(cl.api), func(t *testing.T) {
			up := newUpstream(t, "up", nil)
			dir := t.TempDir()
			base, stop := foldingFront(t, up, dir, 40_000)
			defer stop()
			const turns = 40
			frozen := map[string]string{} // call id → the digest first sent
			for n := 1; n <= turns; n++ {
				send(t, base, cl.path, cl.body(n))
				reqs := up.requests()
				got := cl.outputs(t, reqs[len(reqs)-1].body)
				if len(got) != n {
					t.Fatalf("turn %d: %d tool outputs upstream, want %d", n, len(got), n)
				}
				for k := 1; k <= n; k++ {
					id, text := callID(k), got[callID(k)]
					if d, ok := frozen[id]; ok {
						if text != d {
							t.Fatalf("turn %d: %s's digest changed:\n%q\nthen\n%q", n, id, d, text)
						}
						continue
					}
					if text != output(k) {
						if !codeRE.MatchString(text) {
							t.Fatalf("turn %d: %s is neither raw nor a digest: %q", n, id, text)
						}
						frozen[id] = text
					}
				}
				if got[callID(n)] != output(n) {
					t.Fatalf("turn %d: the newest output did not go raw", n)
				}
			}
			if len(frozen) < turns/2 {
				t.Fatalf("only %d of %d outputs folded", len(frozen), turns)
			}
			files, _ := foldstore.Files(dir)
			if len(files) != 1 {
				t.Fatalf("%d conversation files, want 1", len(files))
			}
			contents, err := foldstore.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			recs := contents.Records()
			for id, digest := range frozen {
				k := 0
				fmt.Sscanf(id, "call_%d", &k)
				code := codeRE.FindStringSubmatch(digest)[1]
				rec, ok := recs[code]
				st := contents.Texts[rec.ID]
				if !ok || rec.ID != "r:"+id || st.Text != output(k) || !st.Verified(&rec) || rec.SHA256 != registry.Sum(output(k)) {
					t.Errorf("%s (%s): record %+v ok %v, stored text matches %v", id, code, rec, ok, st.Text == output(k))
				}
				if !strings.Contains(digest, fmt.Sprintf("ERROR: turn %d step 40 failed", k)) {
					t.Errorf("%s: an error line is not visible in its digest:\n%s", id, digest)
				}
			}
		})
	}
}

// TestReplayAndUnfold: a restarted proxy sends the same folded bytes for
// the conversation (from its file), and a reader's unfold request makes
// the block raw from the next request on.
func TestReplayAndUnfold(t *testing.T) {
	cl := clients[1] // Responses: keyed by prompt_cache_key
	up := newUpstream(t, "up", nil)
	dir := t.TempDir()
	base, stop := foldingFront(t, up, dir, 40_000)
	for n := 1; n <= 30; n++ {
		send(t, base, cl.path, cl.body(n))
	}
	reqs := up.requests()
	before := cl.outputs(t, reqs[len(reqs)-1].body)
	stop()

	base, stop = foldingFront(t, up, dir, 40_000)
	defer stop()
	send(t, base, cl.path, cl.body(31))
	reqs = up.requests()
	after := cl.outputs(t, reqs[len(reqs)-1].body)
	var folded string
	for k := 1; k <= 30; k++ {
		id := callID(k)
		if before[id] != after[id] {
			t.Fatalf("%s changed across the restart:\n%q\n%q", id, before[id], after[id])
		}
		if folded == "" && before[id] != output(k) {
			folded = id
		}
	}
	if folded == "" {
		t.Fatal("nothing folded")
	}
	code := codeRE.FindStringSubmatch(after[folded])[1]
	files, _ := foldstore.Files(dir)
	if err := foldstore.RequestUnfold(files[0], []string{code}); err != nil {
		t.Fatal(err)
	}
	send(t, base, cl.path, cl.body(32))
	reqs = up.requests()
	k := 0
	fmt.Sscanf(folded, "call_%d", &k)
	if got := cl.outputs(t, reqs[len(reqs)-1].body)[folded]; got != output(k) {
		t.Fatalf("after unfold, %s reads %q", folded, got)
	}
}

// TestSideRequestsPassThrough: requests without tools, continued Responses
// conversations and unknown bodies reach the upstream byte for byte.
func TestSideRequestsPassThrough(t *testing.T) {
	up := newUpstream(t, "up", nil)
	base, stop := foldingFront(t, up, t.TempDir(), 1_000)
	defer stop()
	big := output(1)
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", js(map[string]any{"model": "small", "messages": []any{map[string]any{"role": "system", "content": "Generate a title"}, map[string]any{"role": "tool", "tool_call_id": "c", "content": big}}})},
		{"/v1/responses", js(map[string]any{"previous_response_id": "resp_1", "tools": []any{map[string]any{"type": "function", "name": "f"}}, "input": []any{map[string]any{"type": "function_call_output", "call_id": "c", "output": big}}})},
		{"/v1/chat/completions", `{"tools":[1],"messages":"not an array"}`},
		{"/v1/chat/completions", `not json at all`},
	} {
		send(t, base, c.path, c.body)
		reqs := up.requests()
		if got := string(reqs[len(reqs)-1].body); got != c.body {
			t.Errorf("%s: body changed:\n%s", c.path, got)
		}
	}
}

// foldIDs is a policy that folds exactly its ids, once they are there.
type foldIDs []string

func (p foldIDs) Conduct(v *policy.View) policy.Decision {
	var fold []string
	for _, id := range p {
		for _, b := range v.Blocks {
			if b.ID == id && b.Candidate() {
				fold = append(fold, id)
			}
		}
	}
	return policy.Decision{Fold: fold, Trigger: policy.Economic}
}

// TestFoldsByTheHostsPolicy: the Folder folds what the policy its host
// hands it decides, and nothing without one.
func TestFoldsByTheHostsPolicy(t *testing.T) {
	cl := clients[0]
	for _, tc := range []struct {
		name   string
		pol    policy.Policy
		folded []string // nil: at least half the outputs
	}{
		{"the schedule", schedule.Economic{}, nil},
		{"none", nil, []string{}},
		{"two ids", foldIDs{"r:" + callID(2), "r:" + callID(5)}, []string{callID(2), callID(5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, "up", nil)
			store, err := foldstore.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			folder := NewFolder(store, tc.pol, 40_000, nil)
			s, _ := front(t, up, up, func(c *Config) { c.Folder = folder })
			defer func() { s.Close(); folder.Close(); store.Close() }()
			const turns = 40
			for n := 1; n <= turns; n++ {
				send(t, s.URL, cl.path, cl.body(n))
			}
			reqs := up.requests()
			got := cl.outputs(t, reqs[len(reqs)-1].body)
			var folded []string
			for k := 1; k <= turns; k++ {
				if got[callID(k)] != output(k) {
					folded = append(folded, callID(k))
				}
			}
			if tc.folded == nil {
				if len(folded) < turns/2 {
					t.Fatalf("the schedule folded %d of %d outputs", len(folded), turns)
				}
			} else if !slices.Equal(folded, tc.folded) && len(folded)+len(tc.folded) > 0 {
				t.Fatalf("folded %q, want %q", folded, tc.folded)
			}
		})
	}
}

// TestFrozenEndBreakpoint: through the proxy, an Anthropic request whose
// client leaves one of the four breakpoints free carries one more, with the
// client's own value, on the newest tool result folded before it (the end
// of the frozen region, engine.Result.Anchor); none while nothing is
// frozen, none when the client uses all four, none with caching off.
func TestFrozenEndBreakpoint(t *testing.T) {
	cl := clients[len(clients)-1]
	if cl.api != codec.Messages {
		t.Fatal("the last test client is not Anthropic's")
	}
	const client = `"cache_control":{"type":"ephemeral"}`
	for _, tc := range []struct {
		name  string
		body  func(n int) string
		marks bool
	}{
		{"two of four used", cl.body, true},
		{"all four used", func(n int) string {
			b := strings.Replace(cl.body(n), `{"input_schema":`, `{`+client+`,"input_schema":`, 1)
			return strings.Replace(b, `{"text":"Run the build."`, `{`+client+`,"text":"Run the build."`, 1)
		}, false},
		{"caching off", func(n int) string { return strings.ReplaceAll(cl.body(n), client+",", "") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := testFolder(t, 40_000, nil)
			r := httptest.NewRequest("POST", cl.path, nil)
			r.Header.Set("x-claude-code-session-id", "marks")
			var folded []string // call ids folded in the previous request, in order
			marked := 0
			for n := 1; n <= 40; n++ {
				body := tc.body(n)
				if n == 1 && strings.Count(body, `"cache_control":`) != map[string]int{"two of four used": 2, "all four used": 4, "caching off": 0}[tc.name] {
					t.Fatalf("setup: %s", body)
				}
				out, why := f.Fold(r, cl.api, []byte(body), nil)
				if why != "" {
					t.Fatalf("request %d: %s", n, why)
				}
				sent := bytes.Join(out, nil)
				var b struct {
					Messages []struct {
						Content json.RawMessage
					}
				}
				decode(t, sent, &b)
				if got := bytes.Count(sent, []byte(`"cache_control":`)); got > codec.MaxBreakpoints {
					t.Fatalf("request %d: %d breakpoints", n, got)
				}
				var now []string
				mark := ""
				for _, m := range b.Messages {
					var blocks []map[string]json.RawMessage
					if json.Unmarshal(m.Content, &blocks) != nil {
						continue
					}
					for _, bl := range blocks {
						if string(bl["type"]) != `"tool_result"` {
							continue
						}
						var id string
						json.Unmarshal(bl["tool_use_id"], &id)
						if bytes.Contains(bl["content"], []byte(" FOLDED}")) {
							now = append(now, id)
						}
						if cc, ok := bl["cache_control"]; ok && id != callID(n) {
							if mark != "" {
								t.Fatalf("request %d: two marks", n)
							}
							mark = id
							if string(cc) != `{"type":"ephemeral"}` {
								t.Errorf("request %d: mark %s, not the client's value", n, cc)
							}
						}
					}
				}
				want := ""
				if tc.marks && len(folded) > 0 {
					want = folded[len(folded)-1]
				}
				if mark != want {
					t.Fatalf("request %d: mark on %q, want %q (folded before: %v)", n, mark, want, folded)
				}
				if mark != "" {
					marked++
				}
				folded = now
			}
			if tc.marks && marked == 0 {
				t.Fatal("nothing folded: the test does not exercise the mark")
			}
			t.Logf("%d of 40 requests marked", marked)
		})
	}
}
