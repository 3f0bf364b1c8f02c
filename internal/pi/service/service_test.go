package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/recall"
	"github.com/contextfold/contextfold/internal/pi/indexfile"
	"github.com/contextfold/contextfold/internal/pi/protocol"
	"github.com/contextfold/contextfold/internal/testsupport/pisession"
)

// adapter is a test stand-in for the Pi adapter: it answers persist.
type adapter struct {
	mu      sync.Mutex
	fail    bool
	entries []json.RawMessage
}

func (a *adapter) Handle(_ context.Context, method string, params json.RawMessage) (any, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if method != "persist" {
		return nil, fmt.Errorf("unexpected %s", method)
	}
	if a.fail {
		return false, nil
	}
	var p struct{ Data json.RawMessage }
	json.Unmarshal(params, &p)
	a.entries = append(a.entries, p.Data)
	return true, nil
}

// start connects a Service to a test adapter over pipes.
func start(t *testing.T) (*protocol.Conn, *adapter) {
	t.Helper()
	return startB(t)
}

func startB(t testing.TB) (*protocol.Conn, *adapter) {
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	server := protocol.NewConn(sw)
	client := protocol.NewConn(cw)
	ad := &adapter{}
	svc := New(server, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go server.Serve(ctx, sr, svc)
	go client.Serve(ctx, cr, ad)
	t.Cleanup(func() { cw.Close(); sw.Close(); cancel() })
	return client, ad
}

func call(t *testing.T, c *protocol.Conn, method string, params, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Call(ctx, method, params, out)
}

// messages is a session of n tool calls whose outputs hold an ERROR line.
func messages(n int, outputPath string) []json.RawMessage {
	out := []json.RawMessage{json.RawMessage(`{"role":"user","content":[{"type":"text","text":"go"}],"timestamp":1}`)}
	for i := 0; i < n; i++ {
		out = append(out, json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":[{"type":"toolCall","id":"c%d","name":"bash","arguments":{"command":"run %d"}}],"responseId":"r%d","timestamp":%d}`, i, i, i, 10+2*i)))
		var lines []string
		for k := 0; k < 150; k++ {
			if k == 75 {
				lines = append(lines, fmt.Sprintf("ERROR: step %d failed", i))
				continue
			}
			lines = append(lines, fmt.Sprintf("c%d line %d: the quick brown fox", i, k))
		}
		details := ""
		if outputPath != "" && i == 0 {
			details = `,"details":{"fullOutputPath":` + rawjson.QuoteString(outputPath) + `}`
		}
		out = append(out, json.RawMessage(fmt.Sprintf(`{"role":"toolResult","toolCallId":"c%d","toolName":"bash","content":[{"type":"text","text":%s}]%s,"isError":false,"timestamp":%d}`,
			i, rawjson.QuoteString(strings.Join(lines, "\n")), details, 11+2*i)))
	}
	return out
}

// sessionFile writes msgs as a Pi v3 session file.
func sessionFile(t *testing.T, dir string, msgs []json.RawMessage) string {
	t.Helper()
	f := pisession.New("s1")
	for _, m := range msgs {
		f.Message(m)
	}
	p := filepath.Join(dir, "session.jsonl")
	if err := f.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

type turnOut struct {
	Len        int
	Placements *[][4]int
	Event      *EventSummary
	Rejected   string
}

func turn(t *testing.T, c *protocol.Conn, keep int, msgs []json.RawMessage, window int) turnOut {
	t.Helper()
	var out turnOut
	if err := call(t, c, "turn", map[string]any{"keep": keep, "append": msgs, "window": window}, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPersistFailureRejectsTheWholeEvent(t *testing.T) {
	c, ad := start(t)
	dir := t.TempDir()
	if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: dir}, nil); err != nil {
		t.Fatal(err)
	}
	ad.fail = true
	out := turn(t, c, 0, messages(30, ""), 16_000)
	if out.Rejected == "" || out.Event != nil || (out.Placements != nil && len(*out.Placements) != 0) {
		t.Fatalf("want a rejected event and no placements: %+v", out)
	}
	rs, floor, _ := indexfile.Open(indexfile.Dir(dir, "s1")).Read()
	if len(rs) != 0 || floor != 1 {
		t.Fatalf("the rejected event's index record must be voided: %d records, floor %d", len(rs), floor)
	}
	if len(ad.entries) != 0 {
		t.Fatal("a rejected event left a session entry")
	}
	ad.fail = false
	out = turn(t, c, 31*2-1, nil, 16_000)
	if out.Event == nil || len(ad.entries) != 1 || out.Event.Seq != 2 {
		t.Fatalf("the next request should commit, with a fresh seq: %+v", out)
	}
}

func TestRecallVerifiesAgainstTheSessionFile(t *testing.T) {
	c, _ := start(t)
	dir := t.TempDir()
	full := filepath.Join(dir, "pi-bash-full.log")
	os.WriteFile(full, []byte("full line 1\nfull ERROR hidden in the full output\nfull line 3\n"), 0o600)
	msgs := messages(30, full)
	file := sessionFile(t, dir, msgs)
	if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: dir, SessionFile: file}, nil); err != nil {
		t.Fatal(err)
	}
	if out := turn(t, c, 0, msgs, 16_000); out.Event == nil {
		t.Fatal("no fold")
	}
	code := digest.ScopedCode("s1", "r:c0")
	var res ToolResult
	call(t, c, "recall", RecallParams{Codes: []string{"{#" + code + " FOLDED}"}}, &res)
	if !strings.Contains(res.Text, "✓ "+code+" — bash · session file · sha256 verified") || !strings.Contains(res.Text, "ERROR: step 0 failed\nc0 line 76") {
		t.Fatalf("verified recall:\n%.400s", res.Text)
	}
	// grep prefers the tool's full-output file...
	call(t, c, "recall", RecallParams{Codes: []string{code}, Grep: "hidden"}, &res)
	if !strings.Contains(res.Text, "2: full ERROR hidden in the full output") || !strings.Contains(res.Text, "full output") {
		t.Fatalf("grep over the full output:\n%s", res.Text)
	}
	// ...and falls back to the ledger, saying so, when it is gone.
	os.Remove(full)
	call(t, c, "recall", RecallParams{Codes: []string{code}, Grep: "ERROR"}, &res)
	if !strings.Contains(res.Text, "full output file unreadable") || !strings.Contains(res.Text, "76: ERROR: step 0 failed") {
		t.Fatalf("grep fallback:\n%s", res.Text)
	}
	// A malformed line range is an error answer naming the form wanted,
	// not a served block with an empty body.
	for _, spec := range []string{"abc", "5-2", "40"} {
		res = ToolResult{}
		call(t, c, "recall", RecallParams{Codes: []string{code}, Lines: spec}, &res)
		if !res.IsError || !strings.Contains(res.Text, `malformed lines="`+spec+`"`) || !strings.Contains(res.Text, `"start-end"`) || strings.Contains(res.Text, "✓") {
			t.Fatalf("lines=%s: error %v\n%s", spec, res.IsError, res.Text)
		}
	}
	res = ToolResult{}
	call(t, c, "recall", RecallParams{Codes: []string{code}, Lines: "76-76"}, &res)
	if res.IsError || !strings.Contains(res.Text, "76: ERROR: step 0 failed") {
		t.Fatalf("lines=76-76:\n%s", res.Text)
	}
	// code=, as every hint spells it, is taken as codes is.
	res = ToolResult{}
	call(t, c, "recall", RecallParams{Code: code, Lines: "76-76"}, &res)
	if res.IsError || !strings.Contains(res.Text, "76: ERROR: step 0 failed") {
		t.Fatalf("code= lines=76-76:\n%s", res.Text)
	}
	// Never-folded and unknown codes are not served (docs/EDGES.md #12).
	call(t, c, "recall", RecallParams{Codes: []string{digest.ScopedCode("s1", "r:c29"), "zzzzzz"}}, &res)
	if strings.Count(res.Text, "no folded block with that code") != 2 {
		t.Fatalf("never-folded codes:\n%s", res.Text)
	}
	// A tampered ledger: the live block is served with a warning.
	tampered := append([]json.RawMessage{}, msgs...)
	tampered[2] = json.RawMessage(strings.Replace(string(msgs[2]), "step 0 failed", "step 0 passed after all", 1))
	os.Remove(file)
	sessionFile(t, dir, tampered)
	call(t, c, "recall", RecallParams{Codes: []string{code}}, &res)
	if !strings.Contains(res.Text, "failed the fold-time sha256 check — served from live history") || !strings.Contains(res.Text, "ERROR: step 0 failed") {
		t.Fatalf("tampered ledger, live block:\n%.400s", res.Text)
	}
	// Once the block leaves live history too, recall reports the failure.
	turn(t, c, 0, msgs[3:], 16_000)
	call(t, c, "recall", RecallParams{Codes: []string{code}}, &res)
	if !strings.Contains(res.Text, "⚠ "+code+" — recall unavailable — the session file's text for #"+code+" failed the fold-time sha256 check") {
		t.Fatalf("tampered ledger, block gone:\n%s", res.Text)
	}
	// search sweeps every folded block and groups hits by code, each
	// labelled with its route; the block that fails its check is not
	// searched, and the answer says so rather than "no match".
	call(t, c, "recall", RecallParams{Search: "step 3 failed"}, &res)
	if !strings.Contains(res.Text, "=== "+digest.ScopedCode("s1", "r:c3")+" (bash · session file) — sha256 verified ===") {
		t.Fatalf("search:\n%s", res.Text)
	}
	call(t, c, "recall", RecallParams{Search: "step 0 "}, &res)
	if !strings.Contains(res.Text, "no matching lines in the folded blocks searched") || !strings.Contains(res.Text, "\n⚠ "+code+" — not searched: the session file's text for #"+code+" failed the fold-time sha256 check") {
		t.Fatalf("search, tampered block compacted out:\n%s", res.Text)
	}
	// Without a readable session file, compacted blocks cannot be searched.
	os.Remove(file)
	call(t, c, "recall", RecallParams{Search: "step 0 "}, &res)
	if !strings.Contains(res.Text, "\n⚠ "+code+" — not searched: no readable session file for #"+code+" (open ") {
		t.Fatalf("search, no session file:\n%s", res.Text)
	}
}

func TestRecallWithoutASessionFileUsesEntries(t *testing.T) {
	c, _ := start(t)
	msgs := messages(30, "")
	if err := call(t, c, "open", OpenParams{SessionID: "s1"}, nil); err != nil {
		t.Fatal(err)
	}
	turn(t, c, 0, msgs, 16_000)
	var lines []string
	for i, m := range msgs {
		lines = append(lines, fmt.Sprintf(`{"type":"message","id":"e%d","parentId":null,"timestamp":"t","message":%s}`, i, m))
	}
	var res ToolResult
	call(t, c, "recall", RecallParams{Codes: []string{digest.ScopedCode("s1", "r:c1")}, Entries: strings.Join(lines, "\n")}, &res)
	if !strings.Contains(res.Text, "sha256 verified") {
		t.Fatalf("no-session recall:\n%.300s", res.Text)
	}
}

func TestUnfoldAndResync(t *testing.T) {
	c, ad := start(t)
	msgs := messages(30, "")
	call(t, c, "open", OpenParams{SessionID: "s1"}, nil)
	out := turn(t, c, 0, msgs, 16_000)
	n := len(*out.Placements)
	code := digest.ScopedCode("s1", "r:c0")
	var res ToolResult
	call(t, c, "unfold", UnfoldParams{Codes: []string{code, code, "#" + digest.ScopedCode("s1", "r:c29")}}, &res)
	if !strings.Contains(res.Text, "✓ "+code) || !strings.Contains(res.Text, "• "+code+" — already unfolded") || !strings.Contains(res.Text, "✗ #") {
		t.Fatalf("unfold:\n%s", res.Text)
	}
	if len(ad.entries) != 2 || !strings.Contains(string(ad.entries[1]), `"kind":"unfold"`) {
		t.Fatalf("the unfold was not persisted: %s", ad.entries)
	}
	out = turn(t, c, len(msgs), nil, 16_000)
	if out.Placements == nil || len(*out.Placements) != n-1 {
		t.Fatalf("after unfold: %v placements, want %d", out.Placements, n-1)
	}
	// Divergence: the adapter resends from message 10; keep beyond the held
	// length is refused.
	if err := call(t, c, "turn", map[string]any{"keep": 999, "append": []int{}}, nil); err == nil {
		t.Fatal("keep beyond the held messages accepted")
	}
	out = turn(t, c, 10, msgs[10:], 16_000)
	if out.Len != len(msgs) {
		t.Fatalf("resync length %d", out.Len)
	}
}

func TestCompactionRecordsEveryLeavingBlockPerBlock(t *testing.T) {
	c, ad := start(t)
	dir := t.TempDir()
	call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: dir}, nil)
	msgs := messages(6, "")
	// Two results whose ids share a fold code in session s1 (r:call_109369 / r:call_1041042).
	for _, id := range []string{"call_109369", "call_1041042"} {
		msgs = append(msgs,
			json.RawMessage(`{"role":"assistant","content":[{"type":"toolCall","id":"`+id+`","name":"bash","arguments":{"command":"x"}}],"responseId":"r`+id+`","timestamp":900}`),
			json.RawMessage(`{"role":"toolResult","toolCallId":"`+id+`","toolName":"bash","content":[{"type":"text","text":"ERROR: in `+id+`\nsrc/app/main.go"}],"isError":true,"timestamp":901}`))
	}
	turn(t, c, 0, msgs, 1_000_000) // nothing folds at this window
	var res CompactResult
	if err := call(t, c, "compact", CompactParams{Messages: msgs}, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Skipped) != 1 || res.Skipped[0] != "r:call_1041042" || res.Recorded != 7 {
		t.Fatalf("recorded %d skipped %v", res.Recorded, res.Skipped)
	}
	if len(ad.entries) != 1 || !strings.Contains(string(ad.entries[0]), `"trigger":"compact"`) || strings.Contains(string(ad.entries[0]), `"digest"`) {
		t.Fatalf("compaction entry: %.300s", ad.entries)
	}
	for _, want := range []string{"ERROR: in call_109369", "ERROR: step 3 failed", digest.Tag(digest.ScopedCode("s1", "r:c2"))} {
		if !strings.Contains(res.Summary, want) {
			t.Fatalf("summary lacks %q:\n%s", want, res.Summary)
		}
	}
	// Recall covers the compacted span once the blocks leave live history.
	turn(t, c, 0, msgs[len(msgs)-1:], 1_000_000)
	var rr ToolResult
	call(t, c, "recall", RecallParams{Codes: []string{digest.ScopedCode("s1", "r:c2")}, Entries: entriesOf(msgs)}, &rr)
	if !strings.Contains(rr.Text, "sha256 verified") || !strings.Contains(rr.Text, "ERROR: step 2 failed") {
		t.Fatalf("recall after compaction:\n%.300s", rr.Text)
	}
	// Counted when it completes; the second completed one warns; a failed
	// one is retracted from the seed index.
	var done CompactResult
	call(t, c, "compacted", CompactedParams{OK: true}, &done)
	if done.Warning != "" {
		t.Fatal("first compaction warned")
	}
	call(t, c, "compact", CompactParams{Messages: msgs[:3]}, &res)
	call(t, c, "compacted", CompactedParams{OK: false}, &done)
	rs, _, _ := indexfile.Open(indexfile.Dir(dir, "s1")).Read()
	if len(rs) != 1 {
		t.Fatalf("a failed compaction's index record was not retracted: %d records", len(rs))
	}
	call(t, c, "compact", CompactParams{Messages: msgs[:3]}, &res)
	call(t, c, "compacted", CompactedParams{OK: true}, &done)
	if done.Warning == "" {
		t.Fatal("no warning after the second completed compaction")
	}
}

func entriesOf(msgs []json.RawMessage) string {
	var lines []string
	for i, m := range msgs {
		lines = append(lines, fmt.Sprintf(`{"type":"message","id":"e%d","parentId":null,"timestamp":"t","message":%s}`, i, m))
	}
	return strings.Join(lines, "\n")
}

func TestDumpAndDebugLine(t *testing.T) {
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	server := protocol.NewConn(sw)
	client := protocol.NewConn(cw)
	var logs strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) }), &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc := New(server, log)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go server.Serve(ctx, sr, svc)
	go client.Serve(ctx, cr, &adapter{})
	dump := filepath.Join(t.TempDir(), "dump.jsonl")
	call(t, client, "open", OpenParams{SessionID: "s1", Env: map[string]string{"CONTEXTFOLD_DUMP": dump}}, nil)
	msgs := messages(30, "")
	turn(t, client, 0, msgs, 16_000)
	turn(t, client, len(msgs), nil, 16_000)
	data, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d dumped views, want one per request", len(lines))
	}
	var view struct {
		Turn     int
		Messages []json.RawMessage
	}
	if json.Unmarshal([]byte(lines[1]), &view) != nil || len(view.Messages) != len(msgs) || !strings.Contains(lines[1], "FOLDED}") {
		t.Fatalf("dumped view: %.200s", lines[1])
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "msg=turn"); n != 2 {
		t.Fatalf("%d debug lines, want one per request:\n%s", n, logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestCompactionCutInsideOpeningTurn (docs/EDGES.md #1): Pi can hand over an empty
// messagesToSummarize and only the opening turn's prefix; the summary must
// still carry the user's opening request.
func TestCompactionCutInsideOpeningTurn(t *testing.T) {
	c, _ := start(t)
	call(t, c, "open", OpenParams{SessionID: "s1"}, nil)
	opening := json.RawMessage(`{"role":"user","content":[{"type":"text","text":"opening task: port the parser to Go\nwith tests"}],"timestamp":1}`)
	var res CompactResult
	if err := call(t, c, "compact", CompactParams{Messages: []json.RawMessage{opening}}, &res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Summary, "[turn 1] opening task: port the parser to Go") {
		t.Fatalf("the opening request is lost:\n%s", res.Summary)
	}
	var res2 CompactResult
	call(t, c, "compact", CompactParams{Messages: []json.RawMessage{opening}}, &res2)
	if res.Summary == res2.Summary {
		t.Fatal("two compactions of one session rendered the same text")
	}
	// Numbered by compaction, not by fold event.
	if !strings.HasPrefix(res.Summary, "# Compaction summary #1 ") || !strings.HasPrefix(res2.Summary, "# Compaction summary #2 ") {
		t.Fatalf("headings: %.40q, %.40q", res.Summary, res2.Summary)
	}
}

// TestCacheColdTurnFoldsForFree: a batch the schedule would wait on folds at
// once when the provider's cache is known cold — after a real model change,
// or after an idle gap past cacheIdleMinutes — since the fold then costs no
// extra re-write.
func TestCacheColdTurnFoldsForFree(t *testing.T) {
	msgs := messages(30, "")
	for _, tc := range []struct {
		name string
		cool func(c *protocol.Conn)
	}{
		{"model change", func(c *protocol.Conn) {
			if err := call(t, c, "modelChanged", map[string]any{}, nil); err != nil {
				t.Fatal(err)
			}
		}},
		{"idle past the cache lifetime", func(c *protocol.Conn) {
			at := time.Now().Add(-31 * time.Minute).UnixMilli()
			if err := call(t, c, "usage", map[string]any{"input": 100, "cacheRead": 30_000, "output": 50, "provider": "anthropic", "model": "m", "at": at}, nil); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := start(t)
			// A 20k tail leaves a batch too small to pay for a warm re-write;
			// the envelope is opened (it holds every fold of a context this
			// small) so that only the cache decides.
			env := map[string]string{"CONTEXTFOLD_TAIL": "20000", "CONTEXTFOLD_FOLD_AT": "0.1", "CONTEXTFOLD_FOLD_STEP": "0.02"}
			if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: t.TempDir(), Env: env}, nil); err != nil {
				t.Fatal(err)
			}
			if out := turn(t, c, 0, msgs, 200_000); out.Event != nil {
				t.Fatalf("a warm cache waits for a larger batch: %+v", out.Event)
			}
			if err := call(t, c, "usage", map[string]any{"input": 100, "cacheRead": 30_000, "output": 50, "provider": "anthropic", "model": "m", "at": time.Now().UnixMilli()}, nil); err != nil {
				t.Fatal(err)
			}
			if out := turn(t, c, len(msgs), nil, 200_000); out.Event != nil {
				t.Fatalf("a fresh response keeps the cache warm: %+v", out.Event)
			}
			tc.cool(c)
			out := turn(t, c, len(msgs), nil, 200_000)
			if out.Event == nil || out.Event.Trigger != "free" || out.Event.Blocks == 0 {
				t.Fatalf("want a free fold event, got %+v", out)
			}
		})
	}
}

// TestLadderProfile: CONTEXTFOLD_POLICY=ladder selects the seed design's
// fixed thresholds, for comparison with the default schedule.
func TestLadderProfile(t *testing.T) {
	msgs := messages(30, "")
	for policy, want := range map[string]string{"ladder": "threshold", "economic": ""} {
		c, _ := start(t)
		env := map[string]string{"CONTEXTFOLD_POLICY": policy, "CONTEXTFOLD_TAIL": "20000"}
		if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: t.TempDir(), Env: env}, nil); err != nil {
			t.Fatal(err)
		}
		out := turn(t, c, 0, msgs, 60_000)
		got := ""
		if out.Event != nil {
			got = out.Event.Trigger
		}
		if got != want {
			t.Errorf("%s: event trigger %q, want %q", policy, got, want)
		}
	}
}

// TestBudgetKeepsAheadOfPiCompaction: Pi compacts once a request and its
// reply pass window − reserveTokens, so the budget sits ReplyMargin under
// that threshold, with Pi's settings resolved per model as Pi does.
func TestBudgetKeepsAheadOfPiCompaction(t *testing.T) {
	msgs := messages(12, "") // ~16k tokens: past Pi's 15.6k threshold at 32k, under 0.75 × 32k
	model := map[string]any{"api": "openai-completions", "provider": "local", "id": "small"}
	for _, tc := range []struct {
		name       string
		compaction any // absent when nil
		budget     int
		urgent     bool
	}{
		{"Pi's defaults before any settings arrive", nil, 32_000 - 16_384 - engine.ReplyMargin, true},
		{"explicit defaults", map[string]any{"enabled": true, "reserveTokens": 16_384}, 32_000 - 16_384 - engine.ReplyMargin, true},
		{"compaction off", map[string]any{"enabled": false}, 24_000, false},
		{"small reserve", map[string]any{"reserveTokens": 2_000}, 24_000, false},
		{"model override", map[string]any{"reserveTokens": 2_000, "modelOverrides": map[string]any{"local/small": map[string]any{"reserveTokens": 16_000}}}, 32_000 - 16_000 - engine.ReplyMargin, true},
		{"invalid settings keep the defaults", map[string]any{"reserveTokens": -1}, 32_000 - 16_384 - engine.ReplyMargin, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := start(t)
			if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: t.TempDir()}, nil); err != nil {
				t.Fatal(err)
			}
			params := map[string]any{"keep": 0, "append": msgs, "window": 32_000, "model": model}
			if tc.compaction != nil {
				params["compaction"] = tc.compaction
			}
			var out struct {
				Event  *EventSummary
				Status policy.Status
			}
			if err := call(t, c, "turn", params, &out); err != nil {
				t.Fatal(err)
			}
			if out.Status.Budget != tc.budget {
				t.Errorf("budget %d, want %d", out.Status.Budget, tc.budget)
			}
			if urgent := out.Event != nil && out.Event.Trigger == "cap"; urgent != tc.urgent {
				t.Errorf("urgent event %v (%+v), want %v", urgent, out.Event, tc.urgent)
			}
			// Settings persist until changed: a later turn without them keeps them.
			params = map[string]any{"keep": len(msgs), "append": []int{}, "window": 32_000, "model": model}
			if err := call(t, c, "turn", params, &out); err != nil {
				t.Fatal(err)
			}
			if out.Status.Budget != tc.budget {
				t.Errorf("next turn: budget %d, want %d", out.Status.Budget, tc.budget)
			}
		})
	}
}

// TestThresholdCompactionGivesWayToFolding: Pi's estimate before a request
// (the last usage plus the new raw results) can cross its threshold while
// folding can still make the room; that compaction is cancelled, and the
// next request folds. Overflow and manual compactions always run.
func TestThresholdCompactionGivesWayToFolding(t *testing.T) {
	msgs := messages(8, "") // ~10.7k tokens of results, all still raw
	for _, tc := range []struct {
		name         string
		reason       string
		tokensBefore int
		cancel       bool
	}{
		{"threshold, folding makes the room", "threshold", 16_000, true},
		{"threshold, only folding the protected tail would make the room", "threshold", 16_000, false},
		{"threshold, not even folding makes the room", "threshold", 30_000, false},
		{"overflow always compacts", "overflow", 16_000, false},
		{"manual always compacts", "manual", 16_000, false},
		{"no reason (an older adapter)", "", 16_000, false},
		{"a reserve near the window: the budget does not keep to it", "threshold", 10_000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := start(t)
			// A small tail leaves the results outside it; the default's
			// (half the 13.6k budget) holds most of them, and urgent folds
			// never reach into it.
			env := map[string]string{"CONTEXTFOLD_TAIL": "2000"}
			if strings.HasPrefix(tc.name, "threshold, only") {
				env = nil
			}
			if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: t.TempDir(), Env: env}, nil); err != nil {
				t.Fatal(err)
			}
			params := map[string]any{"keep": 0, "append": msgs, "window": 32_000}
			if strings.HasPrefix(tc.name, "a reserve near") {
				params["compaction"] = map[string]any{"reserveTokens": 28_000}
			}
			var out turnOut
			if err := call(t, c, "turn", params, &out); err != nil || out.Event != nil {
				t.Fatalf("folded under the budget: %+v, %v", out.Event, err)
			}
			var res CompactResult
			if err := call(t, c, "compact", CompactParams{Messages: msgs[:5], Reason: tc.reason, TokensBefore: tc.tokensBefore}, &res); err != nil {
				t.Fatal(err)
			}
			if res.Cancel != tc.cancel {
				t.Fatalf("cancel %v (%s), want %v", res.Cancel, res.Why, tc.cancel)
			}
			if tc.cancel && (res.Summary != "" || res.Recorded != 0) {
				t.Fatalf("a cancelled compaction recorded %d blocks", res.Recorded)
			}
			if !tc.cancel && res.Summary == "" {
				t.Fatal("no summary")
			}
		})
	}
}

// TestStatusAfterResume: a session reopened from its fold entries reports
// the replayed folds in status and footer, before its first request (priced
// from recorded sizes, and saying so) and after it (exactly), and an unfold
// takes its block out of both.
func TestStatusAfterResume(t *testing.T) {
	c, ad := start(t)
	msgs := messages(30, "")
	call(t, c, "open", OpenParams{SessionID: "s1"}, nil)
	if out := turn(t, c, 0, msgs, 16_000); out.Event == nil {
		t.Fatal("no fold")
	}
	var before Status
	call(t, c, "status", map[string]any{}, &before)
	if before.EventCount != 1 || before.Blocks == 0 || before.Masked == 0 {
		t.Fatalf("live status: %+v", before)
	}

	c2, _ := start(t)
	if err := call(t, c2, "open", OpenParams{SessionID: "s1", Entries: ad.entries}, nil); err != nil {
		t.Fatal(err)
	}
	var st Status
	call(t, c2, "status", map[string]any{}, &st)
	if st.EventCount != before.EventCount || st.Blocks != before.Blocks || st.Masked == 0 {
		t.Fatalf("resumed status before the first request: %+v, want %d events, %d blocks", st, before.EventCount, before.Blocks)
	}
	if !strings.Contains(st.Lines[0], recall.Count(before.EventCount, "fold event", "fold events")+", "+recall.Count(before.Blocks, "block", "blocks")+" folded") || !strings.Contains(st.Lines[0], "from recorded sizes") {
		t.Fatalf("status line: %q", st.Lines[0])
	}
	if before.EventCount == 1 && !strings.Contains(st.Lines[0], "context-fold: 1 fold event, ") {
		t.Fatalf("one event said in the plural: %q", st.Lines[0])
	}
	if !strings.Contains(st.Footer, fmt.Sprintf("×%d", before.EventCount)) {
		t.Fatalf("footer %q has no fold count", st.Footer)
	}
	turn(t, c2, 0, msgs, 16_000)
	call(t, c2, "status", map[string]any{}, &st)
	if st.Masked != before.Masked || strings.Contains(st.Lines[0], "recorded sizes") {
		t.Fatalf("after the first request: masked %d, want %d exactly; %q", st.Masked, before.Masked, st.Lines[0])
	}
	var res ToolResult
	call(t, c2, "unfold", UnfoldParams{Codes: []string{digest.ScopedCode("s1", "r:c0")}}, &res)
	var after Status
	call(t, c2, "status", map[string]any{}, &after)
	if after.Blocks != before.Blocks-1 || after.Masked >= before.Masked {
		t.Fatalf("after unfold: %d blocks, ~%d masked; before %d, ~%d", after.Blocks, after.Masked, before.Blocks, before.Masked)
	}
}

// TestAnchorForBreakpointCaches: for an Anthropic model the turn names the
// tool call whose result ends the frozen region, for the adapter to mark
// with a cache breakpoint; for a provider that caches any shared prefix it
// names none.
func TestAnchorForBreakpointCaches(t *testing.T) {
	for _, tc := range []struct {
		api  string
		want bool
	}{{"anthropic-messages", true}, {"openai-responses", false}, {"openai-completions", false}} {
		t.Run(tc.api, func(t *testing.T) {
			c, _ := start(t)
			if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: t.TempDir()}, nil); err != nil {
				t.Fatal(err)
			}
			model := map[string]any{"api": tc.api, "provider": "p", "id": "m"}
			msgs := messages(30, "")
			var first, second struct {
				Event  *EventSummary
				Anchor string
			}
			if err := call(t, c, "turn", map[string]any{"keep": 0, "append": msgs, "window": 16_000, "model": model}, &first); err != nil {
				t.Fatal(err)
			}
			if first.Event == nil || first.Anchor != "" {
				t.Fatalf("first turn: event %+v, anchor %q; want an event and no anchor (nothing was folded before it)", first.Event, first.Anchor)
			}
			more := []json.RawMessage{json.RawMessage(`{"role":"assistant","content":[{"type":"toolCall","id":"c99","name":"bash","arguments":{"command":"ls"}}],"responseId":"r99","timestamp":99}`)}
			if err := call(t, c, "turn", map[string]any{"keep": len(msgs), "append": more, "window": 16_000, "model": model}, &second); err != nil {
				t.Fatal(err)
			}
			if got := second.Anchor != ""; got != tc.want {
				t.Fatalf("second turn: anchor %q, want one: %v", second.Anchor, tc.want)
			}
			if tc.want && !regexp.MustCompile(`^c\d+$`).MatchString(second.Anchor) {
				t.Fatalf("anchor %q is not a tool call id of the session", second.Anchor)
			}
		})
	}
}

// TestOneLabelPerBlock: recall and search name a block alike, and a
// header names the block's source once.
func TestOneLabelPerBlock(t *testing.T) {
	c, _ := start(t)
	call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: t.TempDir()}, nil)
	msgs := messages(30, "")
	turn(t, c, 0, msgs, 16_000)
	code := digest.ScopedCode("s1", "r:c0")
	header := func(text string) string {
		_, h, _ := strings.Cut(text, "=== "+code+" ")
		h, _, _ = strings.Cut(h, " ===")
		return h
	}
	var rec, srch ToolResult
	call(t, c, "recall", RecallParams{Code: code, Grep: "ERROR", Entries: entriesOf(msgs)}, &rec)
	call(t, c, "recall", RecallParams{Search: "step 0 failed", Entries: entriesOf(msgs)}, &srch)
	r, s := header(rec.Text), header(srch.Text)
	label := func(h string) string { l, _, _ := strings.Cut(h, ") — "); return l }
	if r == "" || label(r) != label(s) {
		t.Fatalf("recall labels %q, search %q", r, s)
	}
	if strings.Count(r, "session file") != 1 {
		t.Fatalf("the header names the session file %d times: %q", strings.Count(r, "session file"), r)
	}
}
