package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/testsupport/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// pgOutput is turn k's tool output: about 4.5 KB, whole in one recall.
func pgOutput(k int) string {
	var b strings.Builder
	for i := 1; i <= 120; i++ {
		fmt.Fprintf(&b, "INFO: turn %d step %d ok - module_%d.o\n", k, i, i)
	}
	return b.String()
}

// pgChat is a Chat Completions body at turn n: n tool calls and results.
func pgChat(n int) string {
	msgs := []any{map[string]any{"role": "user", "content": "Run the build."}}
	for k := 1; k <= n; k++ {
		id := fmt.Sprintf("call_%03d", k)
		args, _ := json.Marshal(map[string]any{"command": fmt.Sprintf("make step%d", k)})
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "bash", "arguments": string(args)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": pgOutput(k)})
	}
	b, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "stream": true, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}}})
	return string(b)
}

var pgCode = regexp.MustCompile(`\{#([0-9a-z]+) FOLDED\} bash[^"]*?INFO: turn (\d+) `)

// TestProxyAndMCPOnPostgres: `contextfold proxy -store postgres://…`
// folds and records to the database, notes the model's recall call there,
// and `contextfold mcp -store postgres://…`, another process, answers
// that call from the database with the folded output byte for byte.
func TestProxyAndMCPOnPostgres(t *testing.T) {
	// A password the proxy must never log (the test server trusts
	// loopback, so any password passes).
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw")
	dbURL := u.String()
	// The upstream answers each request whose body holds a folded block
	// with a call of recall_folded for it.
	var mu sync.Mutex
	var asked string
	turn := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		m := pgCode.FindStringSubmatch(string(body))
		if m == nil {
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
			return
		}
		args, _ := json.Marshal(map[string]any{"codes": []string{m[1]}})
		mu.Lock()
		asked = string(args)
		fmt.Sscan(m[2], &turn)
		mu.Unlock()
		quoted, _ := json.Marshal(string(args))
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_recall\",\"type\":\"function\",\"function\":{\"name\":\"contextfold_recall_folded\",\"arguments\":%s}}]},\"finish_reason\":null}]}\n\n", quoted)
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- runProxy(ctx, []string{"-listen", "127.0.0.1:0", "-anthropic", up.URL, "-openai", up.URL, "-window", "20000", "-store", dbURL}, pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address line: %v (stderr %q)", err, stderr.String())
	}
	base := strings.TrimPrefix(strings.TrimSpace(line), "contextfold proxy listening on ")
	go io.Copy(io.Discard, pr)
	for n := 1; n <= 30; n++ {
		res, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(pgChat(n)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("proxy exit %d, stderr %q", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the proxy did not stop")
	}
	if strings.Contains(stderr.String(), "s3cret-pw") || !strings.Contains(stderr.String(), "store=") {
		t.Fatalf("the proxy logged the database's password, or no store:\n%s", stderr.String())
	}
	mu.Lock()
	args, k := asked, turn
	mu.Unlock()
	if args == "" {
		t.Fatal("nothing folded")
	}

	// The client now calls the MCP server, with the model's arguments.
	mcpStdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recall_folded","arguments":` + args + `}}` + "\n")
	defer func() { mcpStdin = os.Stdin }()
	var out, errb bytes.Buffer
	if code := run([]string{"mcp", "-store", dbURL}, &out, &errb); code != 0 {
		t.Fatalf("mcp exit %d, stderr %q", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var res struct {
		Result struct {
			Content []struct{ Text string }
			IsError bool
		}
	}
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &res) != nil || res.Result.IsError || len(res.Result.Content) != 1 {
		t.Fatalf("mcp answered:\n%s", out.String())
	}
	text := res.Result.Content[0].Text
	if !strings.Contains(text, "sha256 verified") || !strings.Contains(text, strings.TrimSuffix(pgOutput(k), "\n")) {
		t.Fatalf("recall of turn %d's output from the database: %.400s", k, text)
	}
}

// TestProxyGCOnPostgres: gc against the database is not built yet, and
// says so rather than treat the URL as a directory.
func TestProxyGCOnPostgres(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"proxy", "gc", "-store", "postgres://nobody@127.0.0.1:1/none"}, &out, &errb)
	if code != 1 || out.Len() != 0 || !strings.Contains(errb.String(), "no gc yet") || strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}
