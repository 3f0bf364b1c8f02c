package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// TestProxyCommand: the command prints its address first, forwards to the
// upstream it was given, and exits 0 once told to stop.
func TestProxyCommand(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "upstream saw "+r.Method+" "+r.URL.RequestURI())
	}))
	defer up.Close()
	store := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- runProxy(ctx, []string{"-listen", "127.0.0.1:0", "-anthropic", up.URL, "-openai", up.URL, "-store", store}, pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address line: %v (stderr %q)", err, stderr.String())
	}
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "contextfold proxy listening on ")
	if !ok || !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("first line %q", line)
	}
	go io.Copy(io.Discard, pr)
	res, err := http.Post(base+"/v1/chat/completions?x=1", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "upstream saw POST /v1/chat/completions?x=1" {
		t.Fatalf("answer %q", b)
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the proxy did not stop")
	}
}

// TestProxyUsageErrors: bad flag values are one-line usage errors, exit 2,
// before anything listens.
func TestProxyUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-anthropic", "ftp://x"},
		{"-openai", "https://user:pw@host"},
		{"-openai", "host:80"},
		{"-max-body", "0"},
		{"-max-body", "abc"},
		{"-allow-host", "gw.example:8080"},
		{"-allow-host", "gw.example,http://lan.example"},
		{"extra"},
	} {
		var out, errb bytes.Buffer
		code := runProxy(context.Background(), args, &out, &errb)
		if code != 2 || out.Len() != 0 || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
		if strings.Contains(errb.String(), "pw@") {
			t.Errorf("%v: the error shows the password: %q", args, errb.String())
		}
	}
}

// startProxy runs the proxy command with args until the test ends, and
// returns its base URL.
func startProxy(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- runProxy(ctx, append([]string{"-listen", "127.0.0.1:0", "-fold=false"}, args...), pw, &stderr)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		<-exit
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address line: %v (stderr %q)", err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	return strings.TrimPrefix(strings.TrimSpace(line), "contextfold proxy listening on ")
}

// TestProxyAllowHost: the command serves loopback Host names, and others
// only as -allow-host lists them; with *, any Host, but still no page of an
// unlisted origin.
func TestProxyAllowHost(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	for _, c := range []struct {
		allow        string
		host, origin string
		want         int
	}{
		{"", "localhost:8719", "", 200},
		{"", "evil.example:8719", "", 403},
		{"", "gw.example", "", 403},
		{"", "localhost:8719", "https://evil.example", 403},
		{"gw.example, 10.0.0.7", "gw.example", "", 200},
		{"gw.example, 10.0.0.7", "10.0.0.7:8719", "", 200},
		{"gw.example, 10.0.0.7", "gw.example", "https://gw.example", 200},
		{"gw.example, 10.0.0.7", "evil.example", "", 403},
		{"*", "evil.example", "", 200},
		{"*", "evil.example", "https://evil.example", 403},
	} {
		base := startProxy(t, "-anthropic", up.URL, "-openai", up.URL, "-allow-host", c.allow)
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader("{}"))
		req.Host = c.host
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("-allow-host %q, Host %q, Origin %q: status %d, want %d: %s", c.allow, c.host, c.origin, res.StatusCode, c.want, b)
		}
	}
}

// TestProxyGC: gc removes idle conversation files, and refuses to run on a
// store a proxy is writing.
func TestProxyGC(t *testing.T) {
	dir := t.TempDir()
	st, err := foldstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	old, _, _ := st.Conversation("openai-responses", "", "old")
	old.Close()
	fresh, _, _ := st.Conversation("openai-responses", "", "fresh")
	fresh.Close()
	past := time.Now().Add(-2 * time.Hour)
	os.Chtimes(old.Path(), past, past)

	var out, errb bytes.Buffer
	if code := run([]string{"proxy", "gc", "-store", dir, "-older-than", "1h"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "in use by another process") {
		t.Fatalf("gc under a writer: exit %d, stderr %q", code, errb.String())
	}
	st.Close()
	out.Reset()
	errb.Reset()
	if code := run([]string{"proxy", "gc", "-store", dir, "-older-than", "1h"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "removed 1 conversation file ") {
		t.Fatalf("gc: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if _, err := os.Stat(old.Path()); !os.IsNotExist(err) {
		t.Error("the idle file is still there")
	}
	if _, err := os.Stat(fresh.Path()); err != nil {
		t.Error("the fresh file is gone")
	}
	if code := run([]string{"proxy", "gc", "-older-than", "-1h"}, &out, &errb); code != 2 {
		t.Errorf("negative age: exit %d", code)
	}
}

// TestMCPCommand: the command serves the tools over stdin and stdout.
func TestMCPCommand(t *testing.T) {
	mcpStdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recall_folded","arguments":{"codes":["abcdef"]}}}` + "\n")
	defer func() { mcpStdin = os.Stdin }()
	var out, errb bytes.Buffer
	if code := run([]string{"mcp", "-store", t.TempDir()}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// An empty store noted no call: the server cannot place the caller,
	// and says so rather than read any conversation.
	if len(lines) != 2 || !strings.Contains(lines[0], `"protocolVersion":"2025-06-18"`) || !strings.Contains(lines[1], "could not tell which conversation this call comes from") {
		t.Fatalf("stdout:\n%s", out.String())
	}
}
