package service

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// A tool result too large to send whole goes out as a bounded view on its
// first delivery, and recall_folded serves the original from the session
// file, verified against the fold-time sha256, sliced by lines= and grep=.
func TestRecallOfABoundedResult(t *testing.T) {
	c, ad := start(t)
	dir := t.TempDir()
	var lines []string
	for i := 1; i <= 4000; i++ {
		if i == 2500 {
			lines = append(lines, "panic: runtime error: index out of range [9] with length 2")
			continue
		}
		lines = append(lines, fmt.Sprintf("row %05d the quick brown fox jumps over the lazy dog", i))
	}
	huge := strings.Join(lines, "\n") // ~60k tokens: over half a 32k window's budget
	msgs := []json.RawMessage{
		json.RawMessage(`{"role":"user","content":[{"type":"text","text":"dump it"}],"timestamp":1}`),
		json.RawMessage(`{"role":"assistant","content":[{"type":"toolCall","id":"big","name":"bash","arguments":{"command":"dump"}}],"responseId":"r0","timestamp":2}`),
		json.RawMessage(`{"role":"toolResult","toolCallId":"big","toolName":"bash","content":[{"type":"text","text":` + rawjson.QuoteString(huge) + `}],"isError":false,"timestamp":3}`),
	}
	file := sessionFile(t, dir, msgs)
	if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: dir, SessionFile: file}, nil); err != nil {
		t.Fatal(err)
	}
	out := turn(t, c, 0, msgs, 32_000)
	if out.Event == nil || out.Event.Trigger != "oversize" || out.Event.Blocks != 1 || len(ad.entries) != 1 {
		t.Fatalf("want one committed oversize event: %+v", out)
	}
	code := digest.ScopedCode("s1", "r:big")
	var res ToolResult
	call(t, c, "recall", RecallParams{Codes: []string{code}, Lines: "2499-2501"}, &res)
	want := "2499: " + lines[2498] + "\n2500: " + lines[2499] + "\n2501: " + lines[2500]
	if !strings.Contains(res.Text, "sha256 verified") || !strings.Contains(res.Text, want) {
		t.Fatalf("lines recall:\n%s", res.Text)
	}
	call(t, c, "recall", RecallParams{Codes: []string{code}, Grep: "index out of range"}, &res)
	if !strings.Contains(res.Text, "2500: panic: runtime error") {
		t.Fatalf("grep recall:\n%s", res.Text)
	}
}
