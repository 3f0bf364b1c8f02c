package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// chatConv is a Chat Completions conversation: its first messages, and its
// tool calls' id prefix (a provider's ids are unique to the conversation).
type chatConv struct {
	system, user, ids string
	session           string // the x-session-id header; "" for none
}

func (c chatConv) id(k int) string { return fmt.Sprintf("%s_%03d", c.ids, k) }

func (c chatConv) body(n int) string {
	msgs := []any{map[string]any{"role": "system", "content": c.system}, map[string]any{"role": "user", "content": c.user}}
	for k := 1; k <= n; k++ {
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": c.id(k), "type": "function", "function": map[string]any{"name": "bash", "arguments": js(map[string]any{"command": fmt.Sprintf("make step%d", k)})}}}},
			map[string]any{"role": "tool", "tool_call_id": c.id(k), "content": output(k)})
	}
	return js(map[string]any{"model": "m", "messages": msgs, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}}, "stream": true})
}

// post sends body with c's session header and returns what the upstream
// received.
func (c chatConv) post(t *testing.T, base string, up *upstream, body string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Test-Conv", c.ids)
	if c.session != "" {
		req.Header.Set("x-session-id", c.session)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return ""
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("status %d", res.StatusCode)
	}
	return up.last(c.ids)
}

// alone runs each conversation by itself through a proxy of its own and
// returns the bodies the upstream received, turn by turn.
func alone(t *testing.T, turns, window int, convs ...chatConv) map[string][]string {
	out := map[string][]string{}
	for _, c := range convs {
		up := newUpstream(t, "up", nil)
		base, stop := foldingFront(t, up, t.TempDir(), window)
		for n := 1; n <= turns; n++ {
			out[c.ids] = append(out[c.ids], c.post(t, base, up, c.body(n)))
		}
		stop()
	}
	return out
}

// checkSame fails t where a conversation's bodies differ from its run alone.
func checkSame(t *testing.T, got, want map[string][]string) {
	t.Helper()
	folded := false
	for ids, bodies := range want {
		for n, w := range bodies {
			if got[ids][n] != w {
				t.Fatalf("%s turn %d: the upstream got other bytes than with the conversation alone", ids, n+1)
			}
			folded = folded || codeRE.MatchString(w)
		}
	}
	if !folded {
		t.Fatal("nothing folded")
	}
}

// TestConversationsOfOneSession: two conversations under one session id
// (Claude Code's subagents share its id), interleaved request by request,
// send the upstream exactly the bytes each sends alone: neither disturbs
// the other's folds or its cache. Each has its own file.
func TestConversationsOfOneSession(t *testing.T) {
	const turns, window = 30, 30_000
	main := chatConv{"You are a test agent.", "Run the build.", "main", "ses_1"}
	sub := chatConv{"You are a subagent.", "Find the failing step.", "sub", "ses_1"}
	want := alone(t, turns, window, main, sub)

	up := newUpstream(t, "up", nil)
	dir := t.TempDir()
	base, stop := foldingFront(t, up, dir, window)
	defer stop()
	got := map[string][]string{}
	for n := 1; n <= turns; n++ {
		for _, c := range []chatConv{main, sub} {
			got[c.ids] = append(got[c.ids], c.post(t, base, up, c.body(n)))
		}
	}
	checkSame(t, got, want)
	if files, _ := foldstore.Files(dir); len(files) != 2 {
		t.Fatalf("%d conversation files, want 2", len(files))
	}
}

// TestConversationsWithoutSessionID: two conversations with no session id
// and the same first messages (the same task run twice) are told apart by
// their first tool call; interleaved and across a restart of the proxy,
// each gets exactly the bytes it gets alone.
func TestConversationsWithoutSessionID(t *testing.T) {
	const turns, window = 30, 30_000
	a := chatConv{"You are a test agent.", "Run the build.", "call_a", ""}
	b := chatConv{"You are a test agent.", "Run the build.", "call_b", ""}
	want := alone(t, turns, window, a, b)

	up := newUpstream(t, "up", nil)
	dir := t.TempDir()
	base, stop := foldingFront(t, up, dir, window)
	got := map[string][]string{}
	for n := 1; n <= turns; n++ {
		if n == turns/2 {
			stop() // a restart: the conversations come back from their files
			base, stop = foldingFront(t, up, dir, window)
		}
		for _, c := range []chatConv{a, b} {
			got[c.ids] = append(got[c.ids], c.post(t, base, up, c.body(n)))
		}
	}
	stop()
	checkSame(t, got, want)
	if files, _ := foldstore.Files(dir); len(files) != 2 {
		t.Fatalf("%d conversation files, want 2", len(files))
	}
}

// TestNothingToFoldYet: a conversation's requests before its first tool
// result pass through byte for byte and leave no file.
func TestNothingToFoldYet(t *testing.T) {
	up := newUpstream(t, "up", nil)
	dir := t.TempDir()
	base, stop := foldingFront(t, up, dir, 1_000)
	defer stop()
	c := chatConv{"You are a test agent.", "Run the build. " + output(1), "first", "ses_2"}
	body := c.body(0)
	if got := c.post(t, base, up, body); got != body {
		t.Fatalf("body changed:\n%s", got)
	}
	if files, _ := foldstore.Files(dir); len(files) != 0 {
		t.Fatalf("%d files for a conversation with nothing to fold", len(files))
	}
}

// TestEviction: with room in memory for one conversation only, three
// conversations sent at once evict one another on nearly every request,
// and are replayed from their files; each still gets exactly the bytes it
// gets alone, and no request fails.
func TestEviction(t *testing.T) {
	const turns, window = 20, 30_000
	convs := []chatConv{
		{"You are agent one.", "Build.", "one", "ses_a"},
		{"You are agent two.", "Build.", "two", "ses_b"},
		{"You are agent three.", "Build.", "three", ""},
	}
	want := alone(t, turns, window, convs...)

	up := newUpstream(t, "up", nil)
	folder := testFolder(t, window, nil)
	folder.MaxHeld = 1
	s, _ := front(t, up, up, func(c *Config) { c.Folder = folder })
	var mu sync.Mutex
	got := map[string][]string{}
	var wg sync.WaitGroup
	for _, c := range convs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var bodies []string
			for n := 1; n <= turns; n++ {
				bodies = append(bodies, c.post(t, s.URL, up, c.body(n)))
			}
			mu.Lock()
			got[c.ids] = bodies
			mu.Unlock()
		}()
	}
	wg.Wait()
	checkSame(t, got, want)
	folder.mu.Lock()
	held := len(folder.convs)
	folder.mu.Unlock()
	if held != 1 {
		t.Errorf("%d conversations held, want 1", held)
	}
}

// TestEditKeepsTheSharedPrefix: a request that does not extend its
// conversation (the user edits turn 20 of 30 and goes on from there) is
// folded as the same conversation: every output the edit keeps goes out
// exactly as the last request sent it (frozen digests and raw outputs
// alike), so the provider's cache of that prefix still holds.
func TestEditKeepsTheSharedPrefix(t *testing.T) {
	const window = 30_000
	c := chatConv{"You are a test agent.", "Run the build.", "call", "ses_e"}
	up := newUpstream(t, "up", nil)
	base, stop := foldingFront(t, up, t.TempDir(), window)
	defer stop()
	var last string
	for n := 1; n <= 30; n++ {
		last = c.post(t, base, up, c.body(n))
	}
	before := clients[0].outputs(t, []byte(last))
	// The fork: turns 1-20 kept, then other calls.
	forked := chatConv{c.system, c.user, "fork", c.session}
	msgs := func(body string) []any {
		var v struct{ Messages []any }
		json.Unmarshal([]byte(body), &v)
		return v.Messages
	}
	spliced := append(msgs(c.body(20)), msgs(forked.body(3))[2:]...)
	body := js(map[string]any{"model": "m", "messages": spliced, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}}, "stream": true})
	got := clients[0].outputs(t, []byte(c.post(t, base, up, body)))
	folded := 0
	for k := 1; k <= 20; k++ {
		if got[c.id(k)] != before[c.id(k)] {
			t.Fatalf("turn %d: the edit changed a kept output:\n%q\n%q", k, before[c.id(k)], got[c.id(k)])
		}
		if codeRE.MatchString(got[c.id(k)]) {
			folded++
		}
	}
	if folded == 0 {
		t.Fatal("nothing in the kept prefix was folded: the test shows nothing")
	}
}

// TestScopeOf: a request's scope is the first of the clients' session
// headers it carries with a value, named as the client sends it.
func TestScopeOf(t *testing.T) {
	for _, tc := range []struct {
		headers [][2]string
		want    string
	}{
		{nil, ""},
		{[][2]string{{"X-Claude-Code-Session-Id", "a"}}, "x-claude-code-session-id:a"},
		{[][2]string{{"session-id", "b"}}, "session-id:b"},
		{[][2]string{{"x-session-id", "ses_1"}}, "x-session-id:ses_1"},
		{[][2]string{{"x-session-id", "c"}, {"session-id", "d"}}, "session-id:d"},
		{[][2]string{{"x-claude-code-session-id", ""}, {"x-session-id", "e"}}, "x-session-id:e"},
		{[][2]string{{"session-id", "f"}, {"session-id", "g"}}, "session-id:f"},
		{[][2]string{{"x-session", "h"}}, ""},
	} {
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		for _, h := range tc.headers {
			r.Header.Add(h[0], h[1])
		}
		if got := scopeOf(r); got != tc.want {
			t.Errorf("%v: scope %q, want %q", tc.headers, got, tc.want)
		}
	}
}

// TestIdleWorkFollowsEachRequest: after each request the proxy folded,
// through cut-through and store and forward alike, the conversation's
// idle work runs (its digests are ready before the next request needs
// them) and its memory is accounted.
func TestIdleWorkFollowsEachRequest(t *testing.T) {
	for _, store := range []bool{false, true} {
		t.Run(fmt.Sprintf("store and forward %v", store), func(t *testing.T) {
			up := newUpstream(t, "up", nil)
			folder := testFolder(t, 30_000, nil)
			s, _ := front(t, up, up, func(c *Config) { c.Folder = folder; c.StoreAndForward = store })
			conv := chatConv{"You are a test agent.", "Run the build.", "call", "ses_idle"}
			for n := 1; n <= 6; n++ {
				conv.post(t, s.URL, up, conv.body(n))
				folder.Idle()
				folder.mu.Lock()
				var c *conversation
				for _, cv := range folder.convs {
					c = cv
				}
				held, size := folder.held, int64(0)
				if c != nil {
					size = c.size
				}
				folder.mu.Unlock()
				if c == nil {
					t.Fatalf("turn %d: no conversation held", n)
				}
				c.mu.Lock()
				preparing, left := c.preparing, c.eng.Prepare(0)
				c.mu.Unlock()
				if preparing || left {
					t.Errorf("turn %d: idle work did not run (preparing %v, digests left %v)", n, preparing, left)
				}
				if size == 0 || held != size {
					t.Errorf("turn %d: the conversation holds %d bytes by the folder's count, of %d held", n, size, held)
				}
			}
		})
	}
}

// TestIdleWorkWithoutAnAnswer: a request folded but never answered (the
// upstream is down) settles all the same: the Folder does not
// wait for it forever (Idle, Close), and its memory is counted.
func TestIdleWorkWithoutAnAnswer(t *testing.T) {
	up := newUpstream(t, "up", nil)
	folder := testFolder(t, 30_000, nil)
	s, _ := front(t, up, up, func(c *Config) { c.Folder = folder })
	up.Close() // refused from now on
	conv := chatConv{"You are a test agent.", "Run the build.", "call", "ses_down"}
	for n := 1; n <= 3; n++ {
		req, _ := http.NewRequest("POST", s.URL+"/v1/chat/completions", strings.NewReader(conv.body(n)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-session-id", conv.session)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadGateway {
			t.Fatalf("turn %d: status %d, want 502", n, res.StatusCode)
		}
		idle := make(chan struct{})
		go func() { folder.Idle(); close(idle) }()
		select {
		case <-idle:
		case <-time.After(5 * time.Second):
			t.Fatalf("turn %d: the Folder still waits for a request that was never answered", n)
		}
	}
	folder.mu.Lock()
	held := folder.held
	folder.mu.Unlock()
	if held == 0 {
		t.Error("the unanswered requests' conversation holds no memory by the folder's count")
	}
}
