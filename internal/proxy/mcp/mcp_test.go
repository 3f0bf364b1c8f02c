package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/compact"
	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/recall"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/core/tokens"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// session runs a server over pipes and returns a call function.
func session(t *testing.T, s *Server) func(line string) map[string]any {
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), inR, outW); outW.Close() }()
	t.Cleanup(func() {
		inW.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	br := bufio.NewReader(outR)
	return func(line string) map[string]any {
		t.Helper()
		if _, err := inW.WriteString(line + "\n"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(line, `"id"`) {
			return nil
		}
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("answer %q: %v", l, err)
		}
		return m
	}
}

var texts = map[string]string{
	"r:call_1": "line one\nERROR: disk full\nline three\n",
	"r:call_2": strings.Repeat("padding line\n", 50) + "needle here\n",
}

// fixture writes a store with one conversation that folded texts.
func fixture(t *testing.T) (dir, path string) {
	dir = t.TempDir()
	st, err := foldstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, _, err := st.Conversation("anthropic-messages", "", "session-1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ev := &engine.Event{Seq: 1, Trigger: "budget"}
	for _, id := range []string{"r:call_1", "r:call_2"} {
		b, l := registry.Extent(texts[id])
		ev.Folds = append(ev.Folds, registry.Record{ID: id, Code: digest.Code(id), Bytes: b, Lines: l, SHA256: registry.Sum(texts[id]), Tool: "Bash", Kind: "tool_result", Digest: "d"})
	}
	if err := c.Commit(ev, func(id string) (string, bool) { t, ok := texts[id]; return t, ok }); err != nil {
		t.Fatal(err)
	}
	return dir, c.Path()
}

func textOf(t *testing.T, m map[string]any) (string, bool) {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result: %v", m)
	}
	c := r["content"].([]any)[0].(map[string]any)
	return c["text"].(string), r["isError"].(bool)
}

func call(name, args string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}`
}

// callAs is call with _meta naming the model's call id as Claude Code does.
func callAs(name, args, id string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `,"_meta":{"claudecode/toolUseId":"` + id + `","progressToken":2}}}`
}

// note notes in the file at path, as the proxy does, that the model called
// name with args.
func note(t *testing.T, path, id, name, args string) {
	t.Helper()
	if err := foldstore.NoteCall(path, foldstore.Call{ID: id, Name: name, Args: args, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// placed returns a call function whose calls come from the conversation
// at path: each is noted there, as the proxy notes it, and made with the
// model's call id, as Claude Code makes it.
func placed(t *testing.T, path string) func(name, args string) string {
	n := 0
	return func(name, args string) string {
		n++
		id := fmt.Sprintf("toolu_%d", n)
		note(t, path, id, "mcp__contextfold__"+name, args)
		return callAs(name, args, id)
	}
}

// TestProtocol: the handshake the three clients make, and the errors.
func TestProtocol(t *testing.T) {
	dir, _ := fixture(t)
	rpc := session(t, &Server{Name: "contextfold", Version: "test", Tools: Tools(dir)})
	// Claude Code probes first and falls back on "method not found".
	if m := rpc(`{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"protocolVersion":"2026-07-28"}}`); m["error"].(map[string]any)["code"].(float64) != codeNotFound || m["id"] != "server-discover-probe-1" {
		t.Fatalf("discover: %v", m)
	}
	for _, v := range []string{"2025-11-25", "2025-06-18"} {
		m := rpc(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		r := m["result"].(map[string]any)
		if r["protocolVersion"] != v || r["serverInfo"].(map[string]any)["name"] != "contextfold" || r["instructions"] != Instructions {
			t.Fatalf("initialize %s: %v", v, m)
		}
	}
	if r := rpc(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}`)["result"].(map[string]any); r["protocolVersion"] != Versions[0] {
		t.Fatalf("unknown version answered with %v", r["protocolVersion"])
	}
	rpc(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	rpc(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`)
	tools := rpc(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)["result"].(map[string]any)["tools"].([]any)
	if len(tools) != 2 || tools[0].(map[string]any)["name"] != "recall_folded" || tools[1].(map[string]any)["name"] != "unfold" {
		t.Fatalf("tools: %v", tools)
	}
	if _, ok := tools[0].(map[string]any)["inputSchema"].(map[string]any)["properties"].(map[string]any)["search"]; !ok {
		t.Fatal("recall_folded declares no search argument")
	}
	if m := rpc(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); m["result"] == nil {
		t.Fatalf("ping: %v", m)
	}
	for _, bad := range []string{`not json`, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, `{"jsonrpc":"1.0","id":4,"method":"ping"}`, call("nope", `{}`)} {
		if m := rpc(bad + ` `); m != nil && m["error"] == nil {
			t.Errorf("%s: no error: %v", bad, m)
		}
	}
}

// TestRecallAndUnfold: recall_folded serves the stored text byte for
// byte, verified, sliced as asked; a tampered text is refused; unfold
// appends the request the proxy applies.
func TestRecallAndUnfold(t *testing.T) {
	dir, path := fixture(t)
	rpc := session(t, &Server{Name: "contextfold", Version: "test", Tools: Tools(dir)})
	c1, c2 := digest.Code("r:call_1"), digest.Code("r:call_2")
	call := placed(t, path)

	text, isErr := textOf(t, rpc(call("recall_folded", `{"codes":["{#`+c1+` FOLDED}"]}`)))
	if isErr || !strings.HasSuffix(text, "===\n"+texts["r:call_1"]) || !strings.Contains(text, "✓ "+c1+" — Bash · context-fold record · sha256 verified") {
		t.Fatalf("whole recall:\n%s", text)
	}
	text, _ = textOf(t, rpc(call("recall_folded", `{"codes":["`+c1+`"],"grep":"error"}`)))
	if !strings.Contains(text, "ERROR: disk full") || strings.Contains(text, "line three") {
		t.Errorf("grep:\n%s", text)
	}
	text, _ = textOf(t, rpc(call("recall_folded", `{"codes":["`+c1+`"],"lines":"3-3"}`)))
	if !strings.Contains(text, "line three") || strings.Contains(text, "line one") {
		t.Errorf("lines:\n%s", text)
	}
	if text, isErr = textOf(t, rpc(call("recall_folded", `{"codes":["`+c1+`"],"lines":"abc"}`))); !isErr {
		t.Errorf("malformed lines accepted:\n%s", text)
	}
	text, _ = textOf(t, rpc(call("recall_folded", `{"search":"needle"}`)))
	if !strings.Contains(text, c2) || !strings.Contains(text, "needle here") || strings.Contains(text, c1) {
		t.Errorf("search:\n%s", text)
	}
	// code=, the single form every hint prints, is taken too.
	text, isErr = textOf(t, rpc(call("recall_folded", `{"code":"`+c1+`","grep":"error"}`)))
	if isErr || !strings.Contains(text, "ERROR: disk full") || strings.Contains(text, "line three") {
		t.Errorf("code= and grep:\n%s", text)
	}
	text, _ = textOf(t, rpc(call("recall_folded", `{"codes":["zzzzzz"]}`)))
	if !strings.Contains(text, "✗ zzzzzz — no folded block with that code") {
		t.Errorf("missing code:\n%s", text)
	}
	if _, isErr := textOf(t, rpc(call("recall_folded", `{"codes":"notalist"}`))); !isErr {
		t.Error("bad arguments accepted")
	}

	text, isErr = textOf(t, rpc(call("unfold", `{"code":"`+c2+`","codes":["zzzzzz"]}`)))
	if isErr || !strings.Contains(text, "✓ "+c2) || !strings.Contains(text, "✗ zzzzzz") {
		t.Fatalf("unfold:\n%s", text)
	}
	raw, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(raw), `{"t":"unfold-request","codes":["`+c2+`"]}`+"\n") {
		t.Fatalf("no unfold request in the file:\n%s", raw[len(raw)-200:])
	}

	// A stored text that no longer matches its sha256 is not served.
	tampered := strings.Replace(string(raw), "ERROR: disk full", "ERROR: disk fine", 1)
	os.WriteFile(path, []byte(tampered), 0o600)
	text, isErr = textOf(t, rpc(call("recall_folded", `{"codes":["`+c1+`"]}`)))
	if !isErr || strings.Contains(text, "disk fine") || !strings.Contains(text, "⚠ "+c1) {
		t.Fatalf("tampered text:\n%s", text)
	}
	text, _ = textOf(t, rpc(call("recall_folded", `{"search":"disk"}`)))
	if strings.Contains(text, "disk fine") || !strings.Contains(text, c1+" — not searched") {
		t.Fatalf("tampered text searched:\n%s", text)
	}
}

// TestTextsMatchPi: the tools say what the Pi extension's say.
func TestTextsMatchPi(t *testing.T) {
	ts, err := os.ReadFile(filepath.Join("..", "..", "..", "extension", "tools.ts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{recallDescription, unfoldDescription, codeDescription, codesDescription, grepDescription, linesDescription, charsDescription, searchDescription, unfoldCodes} {
		if !strings.Contains(string(ts), s) {
			t.Errorf("extension/tools.ts does not say %q", s)
		}
	}
}

// TestHintsNameTheSchema: every recall_folded hint the model can read (a
// digest's "lines like this" mark, the bounded views, the compaction index,
// unfold's and search's answers) names only arguments the tool declares,
// and never a bare positional code the schema has no place for.
func TestHintsNameTheSchema(t *testing.T) {
	var props map[string]any
	for _, tool := range Tools(t.TempDir()) {
		if tool.Name == "recall_folded" {
			var s struct {
				Properties map[string]any `json:"properties"`
			}
			if err := json.Unmarshal(tool.InputSchema, &s); err != nil {
				t.Fatal(err)
			}
			props = s.Properties
		}
	}
	var errs []string
	for i := 0; i < 40; i++ {
		errs = append(errs, fmt.Sprintf("ERROR: widget failed at step %d", i))
	}
	many := strings.Repeat("a long line of build output that goes on\n", 3000) + strings.Join(errs, "\n")
	oneLine := strings.Repeat(`{"k":"v"},`, 4000)
	blocks := []block.Block{
		{ID: "u1", Kind: block.User, Text: "fix the widget", Turn: 1},
		{ID: "c1", Kind: block.ToolCall, ToolName: "bash", CallID: "call_1", Args: []byte(`{"command":"make"}`), Turn: 1},
		{ID: "r1", Kind: block.ToolResult, ToolName: "bash", CallID: "call_1", Text: strings.Join(errs, "\n"), Turn: 1},
	}
	texts := map[string]string{
		"digest":        digest.ToolResult("abc123", "bash", strings.Join(errs, "\n"), true, 900, digest.Limits{MaxChars: 200, MaxLineChar: 500}),
		"bounded lines": digest.Bounded("abc123", "bash", many, true, tokens.Block(many), 2000),
		"bounded chars": digest.Bounded("abc123", "read", oneLine, false, tokens.Block(oneLine), 300),
		"compaction":    compact.Render(compact.Input{Title: "Compaction summary", Blocks: blocks, Codes: map[string]string{"r1": "abc123"}, SessionFile: "s.jsonl"}),
		"unfold answer": recall.RenderUnfold(recall.Unfold{Compacted: []string{"{#abc123 FOLDED}"}}),
	}
	hint := regexp.MustCompile("recall_folded`? +([^ `\n]+)")
	for name, text := range texts {
		found := hint.FindAllStringSubmatch(text, -1)
		if len(found) == 0 && name != "bounded chars" {
			t.Errorf("%s: no hint found in\n%.600s", name, text)
		}
		for _, m := range found {
			arg := m[1]
			key, _, isArg := strings.Cut(arg, "=")
			switch {
			case isArg && props[key] == nil:
				t.Errorf("%s: hint %q names %s=, which recall_folded does not declare", name, m[0], key)
			case !isArg && (arg == "abc123" || strings.HasPrefix(arg, "<") || strings.HasPrefix(arg, "{")):
				t.Errorf("%s: hint %q passes a code positionally; the tool takes code= or codes", name, m[0])
			}
		}
	}
}

// conversationWith writes a conversation key of client session session to
// the store at dir that folded id with text, and returns its file and the
// block's code.
func conversationWith(t *testing.T, st *foldstore.Store, session, key, id, text string) (string, string) {
	t.Helper()
	c, _, err := st.Conversation("anthropic-messages", session, key)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, l := registry.Extent(text)
	code := digest.ScopedCode(key, id)
	ev := &engine.Event{Seq: 1, Trigger: "budget", Folds: []registry.Record{{ID: id, Code: code, Bytes: b, Lines: l, SHA256: registry.Sum(text), Tool: "Bash", Kind: "tool_result", Digest: "d"}}}
	if err := c.Commit(ev, func(string) (string, bool) { return text, true }); err != nil {
		t.Fatal(err)
	}
	return c.Path(), code
}

// TestCallerScoping: recall and unfold read only the conversation the call
// comes from (and, for a code, the other conversations of its client
// session), told by the call id the client gives (Claude Code, Codex) and
// the call's arguments, or, when it gives no id (opencode), by a fresh
// call the proxy saw. When the caller cannot be told, nothing is read:
// the answer says so. Two conversations of a local model server that
// numbers its calls alike share call ids; an id with other arguments is
// not a match.
func TestCallerScoping(t *testing.T) {
	dir := t.TempDir()
	st, err := foldstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, ca := conversationWith(t, st, "", "a", "r:call_1", "needle in conversation A\n")
	b, cb := conversationWith(t, st, "", "b", "r:call_1", "needle in conversation B\n")
	sub, csub := conversationWith(t, st, "x-claude-code-session-id:s", "parent", "r:toolu_p", "needle in the parent\n")
	agent, _ := conversationWith(t, st, "x-claude-code-session-id:s", "subagent", "r:toolu_s", "needle in the subagent\n")
	st.Close()
	if ca == cb {
		t.Fatalf("two conversations folding call_1 got one code, %s", ca)
	}
	var slept time.Duration
	s := store{dir: dir, wait: 200 * time.Millisecond, now: func() time.Time { return time.Now().Add(slept) }, sleep: func(d time.Duration) { slept += d }}
	rpc := session(t, &Server{Name: "contextfold", Version: "test", Tools: s.tools()})
	ask := func(req string) (string, bool) { return textOf(t, rpc(req)) }
	only := func(what, text string, in, out string) {
		t.Helper()
		if !strings.Contains(text, in) || strings.Contains(text, out) {
			t.Errorf("%s: want %s and not %s:\n%s", what, in, out, text)
		}
	}
	refused := func(what, req string) {
		t.Helper()
		text, isErr := ask(req)
		if !isErr || !strings.HasSuffix(text, UnknownCaller) || strings.Contains(text, "needle") {
			t.Errorf("%s: want the refusal, got:\n%s", what, text)
		}
	}

	note(t, a, "toolu_a", "mcp__contextfold__recall_folded", `{"search":"needle"}`)
	text, _ := ask(callAs("recall_folded", `{"search":"needle"}`, "toolu_a"))
	only("Claude Code's call id", text, ca, cb)

	note(t, b, "call_b", "recall_folded", `{"search":"needle"}`)
	text, _ = ask(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"recall_folded","arguments":{"search":"needle"},"_meta":{"callId":"call_b","x-codex-turn-metadata":{}}}}`)
	only("Codex's call id", text, cb, ca)

	// Both conversations' models called call_3, with other codes: each
	// call reads its own conversation.
	note(t, a, "call_3", "recall_folded", `{"codes":["`+ca+`"]}`)
	note(t, b, "call_3", "recall_folded", `{"codes":["`+cb+`"]}`)
	text, _ = ask(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"recall_folded","arguments":{"codes":["` + ca + `"]},"_meta":{"callId":"call_3"}}}`)
	only("a repeated call id, A's arguments", text, "needle in conversation A", "conversation B")
	text, _ = ask(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"recall_folded","arguments":{"codes":["` + cb + `"]},"_meta":{"callId":"call_3"}}}`)
	only("a repeated call id, B's arguments", text, "needle in conversation B", "conversation A")
	// A's code asked under B's call: B never folded it, and A is not
	// B's session: nothing is read.
	note(t, b, "call_4", "recall_folded", `{"codes":["`+ca+`"]}`)
	text, _ = ask(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"recall_folded","arguments":{"codes":["` + ca + `"]},"_meta":{"callId":"call_4"}}}`)
	if !strings.Contains(text, "✗ "+ca+" — no folded block with that code") || strings.Contains(text, "needle") {
		t.Errorf("another conversation's code was read:\n%s", text)
	}
	// The same id and arguments from two conversations at once cannot be
	// told apart.
	note(t, a, "call_5", "recall_folded", `{"search":"needle"}`)
	note(t, b, "call_5", "recall_folded", `{"search":"needle"}`)
	refused("one call in two conversations", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"recall_folded","arguments":{"search":"needle"},"_meta":{"callId":"call_5"}}}`)

	// No id: the newest same call. Conversation B made it last, but A's
	// was under 30 s before: they cannot be told apart.
	refused("two conversations made the same call", call("recall_folded", `{"search":"needle"}`))
	note(t, a, "call_x", "contextfold_recall_folded", `{ "search" : "needle", "grep": "" }`)
	text, _ = ask(call("recall_folded", `{"search":"needle","grep":""}`))
	only("opencode's arguments", text, ca, cb)

	// An id never noted: waited for, then refused, codes and search alike.
	slept = 0
	if refused("an unknown call id", callAs("recall_folded", `{"search":"needle"}`, "toolu_unknown")); slept < 200*time.Millisecond {
		t.Errorf("an unknown call id: waited only %v", slept)
	}
	refused("recall by code without a known caller", callAs("recall_folded", `{"codes":["`+cb+`"]}`, "toolu_unknown"))
	refused("unfold without a known caller", callAs("unfold", `{"codes":["`+cb+`"]}`, "toolu_unknown"))

	// A subagent given its parent's code reads it: one client session.
	note(t, agent, "toolu_sub", "mcp__contextfold__recall_folded", `{"codes":["`+csub+`"]}`)
	text, _ = ask(callAs("recall_folded", `{"codes":["`+csub+`"]}`, "toolu_sub"))
	only("a subagent recalling its parent's code", text, "needle in the parent", "conversation")
	_ = sub

	// Without an id, only a fresh note counts: an older one of the same
	// call may be another conversation's whose own note is missing.
	if err := foldstore.NoteCall(b, foldstore.Call{ID: "call_old", Name: "contextfold_recall_folded", Args: `{"search":"old"}`, At: time.Now().Add(-callFresh - time.Second)}); err != nil {
		t.Fatal(err)
	}
	refused("a stale note", call("recall_folded", `{"search":"old"}`))
}

// TestRecallPagesALongLineByChars: a folded text that is one 30,000-character
// line comes back from the store byte for byte by chars= pages, each found
// in the note before it; a malformed chars= is refused before anything is
// read.
func TestRecallPagesALongLineByChars(t *testing.T) {
	dir := t.TempDir()
	st, err := foldstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Unit 7200, a page's end, is the first half of a pair.
	long := "xyz" + strings.Repeat("é😀ab", 5999) + "zz"
	path, code := conversationWith(t, st, "", "a", "r:long", long)
	st.Close()
	rpc := session(t, &Server{Name: "contextfold", Version: "test", Tools: Tools(dir)})
	call := placed(t, path)

	text, _ := textOf(t, rpc(call("recall_folded", `{"codes":["`+code+`"]}`)))
	if !strings.Contains(text, "LONG LINE CLIPPED: line 1 is chars 1-30000; read it with chars=1-7200, then on") {
		t.Fatalf("whole read:\n%.300s", text)
	}
	var got strings.Builder
	next, pages := "1-7200", 0
	for next != "" {
		text, isErr := textOf(t, rpc(call("recall_folded", `{"codes":["`+code+`"],"chars":"`+next+`"}`)))
		header, body, ok := strings.Cut(text, " ===\n")
		first, _, _ := strings.Cut(header, "\n")
		if isErr || !ok || !strings.HasPrefix(first, "✓ "+code+" — Bash · context-fold record · sha256 verified · chars ") {
			t.Fatalf("chars=%s:\n%.300s", next, text)
		}
		if u := tokens.Units(body); u > recall.CharsPageCap || u == 0 {
			t.Fatalf("chars=%s: a page of %d units", next, u)
		}
		if pages == 0 && !strings.Contains(first, "chars 1-7199 of 30000") {
			t.Fatalf("the first page splits the pair at its end:\n%s", first)
		}
		got.WriteString(body)
		_, next, _ = strings.Cut(first, " — next: chars=")
		if pages++; pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if got.String() != long || pages != 5 {
		t.Fatalf("%d pages give %d bytes, want the %d folded bytes", pages, got.Len(), len(long))
	}
	if text, isErr := textOf(t, rpc(call("recall_folded", `{"codes":["`+code+`"],"chars":"9-2"}`))); !isErr || !strings.HasPrefix(text, `malformed chars="9-2"`) {
		t.Errorf("malformed chars accepted:\n%s", text)
	}
}
