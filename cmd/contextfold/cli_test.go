package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/pi/protocol"
	"github.com/contextfold/contextfold/internal/pi/service"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
	"github.com/contextfold/contextfold/internal/testsupport/pisession"
)

// flagsOf names flags each command's -h must list.
var flagsOf = map[string][]string{
	"version": {"-json"},
	"demo":    {"-window", "-svg", "-every"},
	"bench":   {"-windows", "-window", "-out", "-json", "-half", "-quiet"},
	"inspect": {"-json", "-store"},
	"recall":  {"-grep", "-lines", "-chars", "-search", "-raw", "-store"},
	"handoff": {"-goal", "-print"},
	"lexicon": {"-samples"},
	"mcp":     {"-store"},
	"proxy":   {"-listen", "-anthropic", "-openai", "-max-body", "-fold", "-store", "-window", "-cut-through", "-max-memory"},
}

// TestHelpOnEveryCommand: -h, -help, --help and "help <cmd>" print the
// command's whole usage (every form with its arguments, its paragraph, its
// flags) to stdout and exit 0, all four the same; nothing on stderr.
func TestHelpOnEveryCommand(t *testing.T) {
	for _, c := range commands() {
		var first string
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "-help"}, {c.name, "--help"}, {"help", c.name}, {"--help", c.name}} {
			var out, errb bytes.Buffer
			if code := run(args, &out, &errb); code != 0 || errb.Len() != 0 {
				t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
				continue
			}
			got := out.String()
			if first == "" {
				first = got
			} else if got != first {
				t.Errorf("%v differs from %s -h:\n%s", args, c.name, got)
			}
		}
		for i, f := range c.forms {
			lead := "usage: "
			if i > 0 {
				lead = "       "
			}
			if want := strings.TrimRight(lead+"contextfold "+c.name+" "+f.args, " ") + "\n"; !strings.Contains(first, want) {
				t.Errorf("%s -h lacks %q:\n%s", c.name, want, first)
			}
		}
		if !strings.Contains(strings.Join(strings.Fields(first), " "), c.doc) {
			t.Errorf("%s -h lacks its paragraph:\n%s", c.name, first)
		}
		for _, f := range flagsOf[c.name] {
			if !strings.Contains(first, "\n  "+f+" ") && !strings.Contains(first, "\n  "+f+"\n") {
				t.Errorf("%s -h lacks flag %s:\n%s", c.name, f, first)
			}
		}
	}
}

// TestServeHelpNeitherWritesAFrameNorReadsStdin: serve -h printed a hello
// frame and then waited on stdin until Ctrl+C.
func TestServeHelpNeitherWritesAFrameNorReadsStdin(t *testing.T) {
	r, w, err := os.Pipe() // never written, never closed until the end
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	stdin := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = stdin }()
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run([]string{"serve", "-h"}, &out, &errb)
		done <- result{code, out.String(), errb.String()}
	}()
	select {
	case res := <-done:
		if res.code != 0 || !strings.HasPrefix(res.out, "usage: contextfold serve\n") || strings.Contains(res.out, "hello") || res.err != "" {
			t.Fatalf("serve -h: exit %d\n%q\n%q", res.code, res.out, res.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve -h is waiting on stdin")
	}
}

// TestTopLevelUsage: help, -h and --help print the command list to
// stdout, every form of every command (recall's -search among them) with
// its summary in one column; no arguments is a usage error: the same list
// on stderr, exit 2.
func TestTopLevelUsage(t *testing.T) {
	var first string
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || errb.Len() != 0 {
			t.Fatalf("%v: exit %d %q", args, code, errb.String())
		}
		if first == "" {
			first = out.String()
		} else if out.String() != first {
			t.Errorf("%v differs from help's usage", args)
		}
	}
	var out, errb bytes.Buffer
	if code := run(nil, &out, &errb); code != 2 || out.Len() != 0 || errb.String() != first {
		t.Errorf("no arguments: exit %d, stdout %q, stderr the usage %v; want 2, nothing, the usage", code, out.String(), errb.String() == first)
	}
	column := -1
	for _, c := range commands() {
		for _, f := range c.forms {
			left := strings.TrimSpace(c.name + " " + f.args)
			var line string
			for _, l := range strings.Split(first, "\n") {
				if strings.HasPrefix(l, "  "+left+" ") && strings.HasSuffix(l, " "+f.summary) {
					line = l
				}
			}
			if line == "" {
				t.Errorf("usage lacks %q with %q:\n%s", left, f.summary, first)
				continue
			}
			col := len([]rune(line)) - len([]rune(f.summary))
			if column < 0 {
				column = col
			} else if col != column {
				t.Errorf("%q: summary at column %d, others at %d", left, col, column)
			}
		}
	}
	for _, want := range []string{"recall [session] -search T", "contextfold --version"} {
		if !strings.Contains(first, want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}

// TestUsageErrorsAreOneLine: an unknown command or flag, a bad flag value
// and a wrong argument count each print exactly one line on stderr, naming
// the command and how to get its usage, and exit 2 before doing anything.
func TestUsageErrorsAreOneLine(t *testing.T) {
	cases := [][]string{
		{"nope"}, {"-x"}, {"help", "nope"}, {"help", "a", "b"},
		{"version", "x"}, {"serve", "x"}, {"demo", "x"}, {"demo", "-window", "0"}, {"demo", "-window", "abc"}, {"demo", "-every", "-1"},
		{"bench", "-windows", "abc"}, {"bench", "-window", "-5"}, {"bench", "-half", "middle"}, {"bench", "-trace-policies", "x"},
		{"inspect", "a", "b"},
		{"recall"}, {"recall", "f"}, {"recall", "-grep"},
		{"recall", "-lines", "abc", "f", "c"}, {"recall", "f", "c", "-lines", "5-2"}, {"recall", "f", "c", "-lines=40"},
		{"recall", "f", "c", "-chars", "9-2"}, {"recall", "-chars=x", "f", "c"}, {"recall", "f", "c", "-chars"},
		{"recall", "f", "c", "-raw", "-grep", "x"}, {"recall", "f", "a", "b", "-raw"}, {"recall", "f", "-raw", "-search", "x"},
		{"handoff", "a", "b"}, {"lexicon"}, {"lexicon", "-samples", "-1", "x"},
		{"proxy", "-max-memory", "0"}, {"proxy", "-window", "-1"},
	}
	for _, c := range commands() {
		cases = append(cases, []string{c.name, "-no-such-flag"})
	}
	for _, args := range cases {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		msg := errb.String()
		name := "contextfold"
		if _, ok := lookup(args[0]); ok {
			name += " " + args[0]
		}
		if code != 2 || out.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") ||
			!strings.HasPrefix(msg, name+": ") || !strings.Contains(msg, "(run '") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), msg)
		}
	}
}

// TestVersionFlags: --version and -version are the version command, flags
// and all.
func TestVersionFlags(t *testing.T) {
	for _, args := range [][]string{{"-version"}, {"--version", "-json"}, {"-version", "--json"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || errb.Len() != 0 || out.Len() == 0 {
			t.Errorf("%v: exit %d %q %q", args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--version", "extra"}, &out, &errb); code != 2 {
		t.Errorf("--version extra: exit %d", code)
	}
}

func TestReorder(t *testing.T) {
	v := map[string]bool{"grep": true, "lines": true, "json": false}
	for _, tc := range []struct{ in, want string }{
		{"f c -grep x", "-grep x f c"},
		{"-grep x f c", "-grep x f c"},
		{"f -json c --lines=1-2", "-json --lines=1-2 f c"},
		{"f c -h", "-h f c"},
		{"f -- -c -grep", "-- f -c -grep"},
		{"f c -grep", "-grep f c"},
	} {
		if got := strings.Join(reorder(strings.Fields(tc.in), v), " "); got != tc.want {
			t.Errorf("reorder(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// persister answers the engine's persist calls as the adapter does.
type persister struct {
	mu      sync.Mutex
	entries []json.RawMessage
}

func (p *persister) Handle(_ context.Context, method string, params json.RawMessage) (any, error) {
	if method != "persist" {
		return nil, fmt.Errorf("unexpected %s", method)
	}
	var q struct{ Data json.RawMessage }
	json.Unmarshal(params, &q)
	p.mu.Lock()
	p.entries = append(p.entries, q.Data)
	p.mu.Unlock()
	return true, nil
}

// foldedSession writes a Pi session file of 30 bash calls, each output 150
// lines ending in a newline with an ERROR line at line 76, folded by the
// engine as Pi would have run it. edit may change the messages written
// (after the fold: a tampered file).
func foldedSession(t *testing.T, edit func([]json.RawMessage)) string {
	t.Helper()
	return foldedSessionWith(t, "", edit)
}

// foldedSessionWith is foldedSession with first, when not empty, as the
// first call's output.
func foldedSessionWith(t *testing.T, first string, edit func([]json.RawMessage)) string {
	t.Helper()
	msgs := []json.RawMessage{json.RawMessage(`{"role":"user","content":[{"type":"text","text":"go"}],"timestamp":1}`)}
	for i := 0; i < 30; i++ {
		msgs = append(msgs, json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":[{"type":"toolCall","id":"c%d","name":"bash","arguments":{"command":"run %d"}}],"responseId":"r%d","timestamp":%d}`, i, i, i, 10+2*i)))
		var b strings.Builder
		for k := 1; k <= 150; k++ {
			if k == 76 {
				fmt.Fprintf(&b, "ERROR: step %d failed\n", i)
				continue
			}
			fmt.Fprintf(&b, "c%d line %d: the quick brown fox\n", i, k)
		}
		if i == 0 && first != "" {
			b.Reset()
			b.WriteString(first)
		}
		msgs = append(msgs, json.RawMessage(fmt.Sprintf(`{"role":"toolResult","toolCallId":"c%d","toolName":"bash","content":[{"type":"text","text":%s}],"isError":false,"timestamp":%d}`, i, rawjson.QuoteString(b.String()), 11+2*i)))
	}
	dir := t.TempDir()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	server, client := protocol.NewConn(sw), protocol.NewConn(cw)
	ad := &persister{}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cw.Close(); sw.Close(); cancel() }()
	go server.Serve(ctx, sr, service.New(server, nil))
	go client.Serve(ctx, cr, ad)
	callCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := client.Call(callCtx, "open", service.OpenParams{SessionID: "s1", SessionDir: dir}, nil); err != nil {
		t.Fatal(err)
	}
	var out struct{ Event *service.EventSummary }
	if err := client.Call(callCtx, "turn", map[string]any{"keep": 0, "append": msgs, "window": 16_000}, &out); err != nil || out.Event == nil {
		t.Fatalf("no fold: %v", err)
	}
	if edit != nil {
		edit(msgs)
	}
	f := pisession.New("s1")
	for _, m := range msgs {
		f.Message(m)
	}
	ad.mu.Lock()
	for _, e := range ad.entries {
		f.Custom(service.CustomType, e)
	}
	ad.mu.Unlock()
	file := filepath.Join(dir, "session.jsonl")
	if err := f.WriteFile(file); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestRecallOnASessionFile: the digest's line count is the one recall
// reads by, labels name the session file, a malformed -lines is a usage
// error, and a search over a tampered block warns.
func TestRecallOnASessionFile(t *testing.T) {
	file := foldedSession(t, nil)
	code := digest.ScopedCode("s1", "r:c0")
	data, _ := os.ReadFile(file)
	if !strings.Contains(string(data), "{#"+code+" FOLDED} bash → 150 lines, ") {
		t.Fatal("the fold entry lacks the digest's 150 lines")
	}
	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		c := run(args, &out, &errb)
		return c, out.String(), errb.String()
	}
	if c, out, _ := cli("recall", file, code, "-lines", "150-150"); c != 0 || !strings.Contains(out, "sha256 verified · lines 150-150 of 150 ===\n") || !strings.Contains(out, "\n150: c0 line 150: the quick brown fox") {
		t.Errorf("-lines 150-150: %d\n%s", c, out)
	}
	if c, out, _ := cli("recall", file, code, "-lines", "151-151"); c != 0 || !strings.Contains(out, "empty range 151-150 (session file has 150 lines)") {
		t.Errorf("-lines 151-151: %d\n%s", c, out)
	}
	if c, out, _ := cli("recall", file, code); c != 0 || !strings.Contains(out, "✓ "+code+" — bash · session file · sha256 verified") || strings.Contains(out, "ledger") {
		t.Errorf("recall: %d\n%.300s", c, out)
	}
	for _, bad := range []string{"abc", "5-2"} {
		if c, out, errs := cli("recall", file, code, "-lines", bad); c != 2 || out != "" || errs != `contextfold recall: malformed -lines "`+bad+`": want a-b, two line numbers with a ≤ b, e.g. -lines 40-80 (run 'contextfold recall -h' for usage)`+"\n" {
			t.Errorf("-lines %s: %d %q %q", bad, c, out, errs)
		}
	}

	tampered := foldedSession(t, func(m []json.RawMessage) {
		m[2] = json.RawMessage(strings.Replace(string(m[2]), "step 0 failed", "step 0 passed after all", 1))
	})
	// Its text is not the folded bytes: the search does not read it, and
	// says so.
	c, out, _ := cli("recall", tampered, "-search", "passed after all")
	if c != 0 || strings.Contains(out, "76: ") || !strings.Contains(out, "⚠ "+code+" — not searched: the session file's text for #"+code+" failed the fold-time sha256 check") {
		t.Errorf("search over a tampered block: %d\n%s", c, out)
	}
	if c, out, _ := cli("inspect", tampered); c != 0 || !strings.Contains(out, "sha mismatch  r:c0") {
		t.Errorf("inspect: %d\n%s", c, out)
	}
}

// TestHandoffOfAnEmptySession: a session file with only its header is an
// answer, not a failure: the command says there is nothing to hand off yet
// and writes no file.
func TestHandoffOfAnEmptySession(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(file, []byte(`{"type":"session","version":3,"id":"s1","timestamp":"2026-12-02T00:00:00.000Z","cwd":"/w"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"handoff", file}, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if got := strings.TrimSpace(out.String()); !strings.HasPrefix(got, "nothing to hand off yet") {
		t.Errorf("stdout %q, want the nothing-to-hand-off answer", got)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.md")); len(m) != 0 {
		t.Errorf("wrote %v", m)
	}
}

// TestRecallCharsOnASessionFile: -chars pages through a folded line too
// long for any line read, byte for byte; the notes name the flag (-chars
// a-b), never the tool's argument; a malformed -chars is a usage error.
func TestRecallCharsOnASessionFile(t *testing.T) {
	long := "head " + strings.Repeat("0123456789😀", 2500) + " tail" // 30,010 units
	file := foldedSessionWith(t, long, nil)
	code := digest.ScopedCode("s1", "r:c0")
	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		c := run(args, &out, &errb)
		return c, out.String(), errb.String()
	}
	c, out, _ := cli("recall", file, code)
	if c != 0 || !strings.Contains(out, "LONG LINE CLIPPED: line 1 is chars 1-30010; read it with -chars 1-7200, then on, or -grep <term> inside it") ||
		!strings.Contains(out, "— read on with -chars 7201-14400]") || strings.Contains(out, "chars=") {
		t.Fatalf("whole read: %d\n%.600s", c, out)
	}
	var got strings.Builder
	next, pages := "1-7200", 0
	for next != "" {
		c, out, errs := cli("recall", file, code, "-chars", next)
		header, body, ok := strings.Cut(out, " ===\n")
		first, _, _ := strings.Cut(header, "\n")
		if c != 0 || errs != "" || !ok || !strings.HasPrefix(first, "✓ "+code+" — bash · session file · sha256 verified · chars ") || strings.Contains(first, "chars=") {
			t.Fatalf("-chars %s: %d %q\n%.300s", next, c, errs, out)
		}
		got.WriteString(strings.TrimSuffix(body, "\n")) // Println's newline
		_, next, _ = strings.Cut(first, " — next: -chars ")
		if pages++; pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if got.String() != long || pages != 5 {
		t.Fatalf("%d pages give %d bytes, want the %d folded bytes", pages, got.Len(), len(long))
	}
	for _, bad := range []string{"abc", "5-2"} {
		if c, out, errs := cli("recall", file, code, "-chars", bad); c != 2 || out != "" || errs != `contextfold recall: malformed -chars "`+bad+`": want a-b, two character positions with a ≤ b, e.g. -chars 1-7200 (run 'contextfold recall -h' for usage)`+"\n" {
			t.Errorf("-chars %s: %d %q %q", bad, c, out, errs)
		}
	}
}

// TestOfflineTargets: recall and inspect read a Pi session named by its
// file, by the id Pi prints (or a unique prefix), or, named by nothing, the
// latest session of the current directory; and a proxy conversation named
// by its file or id, byte-exact and sha256-verified.
func TestOfflineTargets(t *testing.T) {
	file := foldedSession(t, nil)
	code := digest.ScopedCode("s1", "r:c0")
	agent := t.TempDir()
	t.Setenv("PI_CODING_AGENT_DIR", agent)
	wd := t.TempDir()
	t.Chdir(wd)
	safe := "--" + strings.ReplaceAll(strings.TrimPrefix(wd, "/"), "/", "-") + "--"
	sessions := filepath.Join(agent, "sessions", safe)
	os.MkdirAll(sessions, 0o755)
	data, _ := os.ReadFile(file)
	named := filepath.Join(sessions, "2026-12-02T00-00-00-000Z_01a24f41-8fbd-77d3-b8fe-4186b7050dbf.jsonl")
	os.WriteFile(named, data, 0o644)
	store := t.TempDir()
	proxyCode, proxyText := proxyConversation(t, store)

	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		c := run(args, &out, &errb)
		return c, out.String(), errb.String()
	}
	for _, args := range [][]string{
		{"recall", file, code, "-store", store},
		{"recall", "01a24f41-8fbd-77d3-b8fe-4186b7050dbf", code, "-store", store},
		{"recall", "01a24f41", code, "-store", store},
		{"recall", code, "-store", t.TempDir()}, // the latest session: this directory's
	} {
		c, out, errs := cli(args...)
		if c != 0 || !strings.Contains(out, "✓ "+code+" — bash · session file · sha256 verified") {
			t.Errorf("%v: exit %d\n%.300s\n%s", args, c, out, errs)
		}
	}
	files, _ := foldstore.Files(store)
	id := strings.TrimSuffix(filepath.Base(files[0]), ".jsonl")
	for _, spec := range []string{files[0], id, id[:10]} {
		c, out, errs := cli("recall", spec, proxyCode, "-store", store)
		if c != 0 || !strings.Contains(out, "✓ "+proxyCode+" — Bash · context-fold record · sha256 verified") || !strings.HasSuffix(out, "===\n"+proxyText+"\n") {
			t.Errorf("recall %s: exit %d\n%.300s\n%s", spec, c, out, errs)
		}
		c, out, errs = cli("inspect", spec, "-store", store)
		if c != 0 || !strings.Contains(out, "proxy conversation (anthropic-messages)") || !strings.Contains(out, "{#"+proxyCode+" FOLDED}") || !strings.Contains(out, "verified") {
			t.Errorf("inspect %s: exit %d\n%.300s\n%s", spec, c, out, errs)
		}
	}
	if c, _, errs := cli("recall", "zzzzzzzzz", code, "-store", store); c != 1 || !strings.Contains(errs, "no session file, Pi session id or proxy conversation id") {
		t.Errorf("an unknown id: exit %d, %s", c, errs)
	}
}

// proxyConversation writes a proxy conversation that folded one block to
// the store at dir and returns the block's code and text.
func proxyConversation(t *testing.T, dir string) (code, text string) {
	t.Helper()
	st, err := foldstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, _, err := st.Conversation("anthropic-messages", "", "k")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	text = "line one\nhalf an emoji \xed\xa0\xbd\nERROR: disk full"
	code = digest.ScopedCode(foldstore.FileName("anthropic-messages", "k"), "r:toolu_1")
	b, l := registry.Extent(text)
	ev := &engine.Event{Seq: 1, Trigger: "budget", Folds: []registry.Record{{ID: "r:toolu_1", Code: code, Bytes: b, Lines: l, SHA256: registry.Sum(text), Tool: "Bash", Kind: "tool_result", Digest: "d"}}}
	if err := c.Commit(ev, func(string) (string, bool) { return text, true }); err != nil {
		t.Fatal(err)
	}
	return code, text
}

// bigOutput is a tool output well past a whole read's cap: 600 lines, an
// ERROR among them.
func bigOutput() string {
	var b strings.Builder
	for k := 1; k <= 600; k++ {
		if k == 300 {
			b.WriteString("ERROR: the middle failed\n")
			continue
		}
		fmt.Fprintf(&b, "line %d of the big output: the quick brown fox jumps\n", k)
	}
	return b.String()
}

// TestRecallRaw: -raw writes one block's exact original to stdout, nothing
// else, past the whole read's cap (whose note now names it); a block whose
// text fails the fold-time sha256 writes nothing and exits 1. Before it,
// a whole read stopped at the cap with no way past it.
func TestRecallRaw(t *testing.T) {
	big := bigOutput()
	file := foldedSessionWith(t, big, nil)
	code := digest.ScopedCode("s1", "r:c0")
	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		c := run(args, &out, &errb)
		return c, out.String(), errb.String()
	}
	if c, out, errs := cli("recall", file, code); c != 0 || !strings.Contains(out, "(~2000 tok cap) — use -lines <a-b> or -grep <term> for the rest; -raw writes all of it") {
		t.Fatalf("a capped whole read: %d %q\n%.400s", c, errs, out)
	}
	for _, args := range [][]string{
		{"recall", file, code, "-raw"},
		{"recall", "-raw", file, "{#" + code + " FOLDED}"},
	} {
		if c, out, errs := cli(args...); c != 0 || errs != "" || out != big {
			t.Errorf("%v: exit %d, stderr %q, %d bytes out, want the %d original bytes", args, c, errs, len(out), len(big))
		}
	}
	tampered := foldedSessionWith(t, big, func(m []json.RawMessage) {
		m[2] = json.RawMessage(strings.Replace(string(m[2]), "the middle failed", "the middle passed", 1))
	})
	if c, out, errs := cli("recall", tampered, code, "-raw"); c != 1 || out != "" || !strings.HasPrefix(errs, "contextfold recall: "+code+": ") || strings.Count(errs, "\n") != 1 {
		t.Errorf("a tampered block: exit %d, stdout %q, stderr %q", c, out, errs)
	}
	if c, out, errs := cli("recall", file, "zzzzzz", "-raw"); c != 1 || out != "" || errs != "contextfold recall: zzzzzz: no folded block with that code\n" {
		t.Errorf("an unknown code: exit %d, stdout %q, stderr %q", c, out, errs)
	}
	// A proxy conversation's block, invalid UTF-8 and all.
	store := t.TempDir()
	proxyCode, proxyText := proxyConversation(t, store)
	files, _ := foldstore.Files(store)
	if c, out, errs := cli("recall", files[0], proxyCode, "-raw"); c != 0 || errs != "" || out != proxyText {
		t.Errorf("a proxy block: exit %d, stderr %q, %q", c, errs, out)
	}
}

// TestRecallHintsAreFlags: whatever contextfold recall prints names the
// command's flags (-lines 1-5), never recall_folded's arguments (lines=1-5).
func TestRecallHintsAreFlags(t *testing.T) {
	long := "head " + strings.Repeat("0123456789", 3000) + " tail\n" + bigOutput()
	file := foldedSessionWith(t, long, nil)
	code := digest.ScopedCode("s1", "r:c0")
	for _, args := range [][]string{
		{code}, {code, "-lines", "1-3"}, {code, "-lines", "2-700"}, {code, "-grep", "ERROR"}, {code, "-grep", "tail"},
		{code, "-chars", "1-7200"}, {code, "-chars", "7201-30000"}, {"-search", "ERROR"}, {"-search", "0123456789"}, {code, "-search", "ERROR"},
	} {
		var out, errb bytes.Buffer
		c := run(append([]string{"recall", file}, args...), &out, &errb)
		if c != 0 {
			t.Errorf("%v: exit %d %s", args, c, errb.String())
		}
		for _, tool := range []string{"lines=", "chars=", "grep=", "search=", "code=", "codes="} {
			if strings.Contains(out.String()+errb.String(), tool) {
				t.Errorf("%v prints the tool's %s:\n%.600s", args, tool, out.String())
			}
		}
	}
}

// TestPiCwdFolder: the folder Pi names after a working directory, as its
// session manager encodes it (the first separator dropped, separators and
// colons dashes).
func TestPiCwdFolder(t *testing.T) {
	for _, tc := range []struct{ wd, want string }{
		{"/home/me/project", "--home-me-project--"},
		{"/", "----"},
		{"//srv/x", "---srv-x--"},
		{`C:\Users\me`, "--C--Users-me--"},
		{`\\host\share`, "---host-share--"},
	} {
		if got := piCwdFolder(tc.wd); got != tc.want {
			t.Errorf("piCwdFolder(%q) = %q, want %q", tc.wd, got, tc.want)
		}
	}
}

// TestOfflineLatestAndIDs: inspect and handoff, like recall, take the id
// Pi prints or nothing (the latest session of the current directory, named
// on stderr); with PI_CODING_AGENT_SESSION_DIR, Pi keeps every directory's
// sessions in that one folder and the latest is the newest whose header
// names the current directory.
func TestOfflineLatestAndIDs(t *testing.T) {
	file := foldedSession(t, nil)
	data, _ := os.ReadFile(file)
	wd := t.TempDir()
	t.Chdir(wd)
	wd, _ = os.Getwd()
	id := "01a24f41-8fbd-77d3-b8fe-4186b7050dbf"
	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		c := run(args, &out, &errb)
		return c, out.String(), errb.String()
	}

	agent := t.TempDir()
	t.Setenv("PI_CODING_AGENT_DIR", agent)
	named := filepath.Join(agent, "sessions", piCwdFolder(wd), "2026-12-02T00-00-00-000Z_"+id+".jsonl")
	os.MkdirAll(filepath.Dir(named), 0o755)
	os.WriteFile(named, data, 0o644)
	store := t.TempDir() // no proxy conversations
	if c, out, errs := cli("inspect", "-store", store); c != 0 || errs != "contextfold inspect: reading the latest session, Pi session "+named+"\n" || !strings.Contains(out, "1 fold event, ") {
		t.Errorf("inspect: exit %d, stderr %q\n%.300s", c, errs, out)
	}
	for _, args := range [][]string{{"handoff", id[:8], "-goal", "go on"}, {"handoff", "-goal", "go on"}} {
		c, out, errs := cli(args...)
		if c != 0 || !strings.HasSuffix(strings.TrimSpace(out), ".md") {
			t.Errorf("%v: exit %d, stderr %q\n%s", args, c, errs, out)
		}
		if latest := len(args) == 3; latest != strings.Contains(errs, "reading the latest session, Pi session "+named) {
			t.Errorf("%v: stderr %q", args, errs)
		}
	}

	// Sessions moved into one folder: the newest of this directory wins
	// over a newer one of another.
	flat := t.TempDir()
	t.Setenv("PI_CODING_AGENT_SESSION_DIR", flat)
	mine := filepath.Join(flat, "2026-12-02T00-00-00-000Z_"+id+".jsonl")
	os.WriteFile(mine, []byte(strings.Replace(string(data), `"cwd":"/w"`, `"cwd":`+strconv.Quote(wd), 1)), 0o644)
	other := filepath.Join(flat, "2026-12-03T00-00-00-000Z_99999999-8fbd-77d3-b8fe-4186b7050dbf.jsonl")
	os.WriteFile(other, data, 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(mine, old, old)
	code := digest.ScopedCode("s1", "r:c0")
	if c, out, errs := cli("recall", code, "-store", store); c != 0 || errs != "contextfold recall: reading the latest session, Pi session "+mine+"\n" || !strings.Contains(out, "✓ "+code) {
		t.Errorf("latest with PI_CODING_AGENT_SESSION_DIR: exit %d, stderr %q\n%.300s", c, errs, out)
	}
	if c, _, errs := cli("inspect", "99999999", "-store", store); c != 0 || errs != "" {
		t.Errorf("an id with PI_CODING_AGENT_SESSION_DIR: exit %d, stderr %q", c, errs)
	}
}
