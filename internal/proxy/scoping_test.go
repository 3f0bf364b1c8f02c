package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/proxy/foldstore"
	"github.com/contextfold/contextfold/internal/proxy/mcp"
)

// TestRepeatedCallIDsAcrossConversations: two conversations of a local
// model server that numbers its calls alike (call_001, call_002, … in
// both, no session header) go through one proxy. Each folds under codes
// of its own, and each conversation's recall, placed by the proxy's note
// of the call (with the same call id in both), reads its own blocks.
// Before, both folded the same codes and the MCP server served the newest
// conversation's block to either.
func TestRepeatedCallIDsAcrossConversations(t *testing.T) {
	cl := clients[0] // Chat Completions: what local model servers speak
	up := newUpstream(t, "up", nil)
	dir := t.TempDir()
	base, stop := foldingFront(t, up, dir, 40_000)
	defer stop()
	body := func(conv string, n int) string {
		return strings.ReplaceAll(strings.ReplaceAll(cl.body(n), "Run the build.", "Run the build of "+conv+"."), "INFO: turn", conv+" INFO: turn")
	}
	codes := map[string][]string{}
	for _, conv := range []string{"alpha", "beta"} {
		for n := 1; n <= 30; n++ {
			send(t, base, cl.path, body(conv, n))
		}
		reqs := up.requests()
		for _, m := range codeRE.FindAllStringSubmatch(string(reqs[len(reqs)-1].body), -1) {
			codes[conv] = append(codes[conv], m[1])
		}
		if len(codes[conv]) < 10 {
			t.Fatalf("%s: %d codes", conv, len(codes[conv]))
		}
	}
	for _, c := range codes["alpha"] {
		for _, d := range codes["beta"] {
			if c == d {
				t.Fatalf("both conversations folded under code %s", c)
			}
		}
	}
	files, _ := foldstore.Files(dir)
	if len(files) != 2 {
		t.Fatalf("%d conversation files", len(files))
	}
	fileOf := map[string]string{}
	for _, f := range files {
		c, err := foldstore.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for code := range c.Records() {
			if code == codes["alpha"][0] {
				fileOf["alpha"] = f
			}
			if code == codes["beta"][0] {
				fileOf["beta"] = f
			}
		}
	}
	tools := mcp.Tools(dir)
	for i, conv := range []string{"alpha", "beta", "alpha"} {
		code := codes[conv][i]
		args := `{"codes":["` + code + `"],"grep":"turn"}`
		// Both conversations' models made their call call_031.
		if err := foldstore.NoteCall(fileOf[conv], foldstore.Call{ID: "call_031", Name: "viaproxy_recall_folded", Args: args, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		text, isErr := tools[0].Call(context.Background(), json.RawMessage(args), json.RawMessage(`{"callId":"call_031"}`))
		other := map[string]string{"alpha": "beta", "beta": "alpha"}[conv]
		if isErr || !strings.Contains(text, conv+" INFO: turn") || strings.Contains(text, other) || !strings.Contains(text, "sha256 verified") {
			t.Fatalf("%s's recall of %s:\n%.400s", conv, code, text)
		}
	}
	// The other conversation's code, asked from this one: not read.
	args := `{"codes":["` + codes["beta"][0] + `"]}`
	foldstore.NoteCall(fileOf["alpha"], foldstore.Call{ID: "call_032", Name: "viaproxy_recall_folded", Args: args, At: time.Now()})
	text, _ := tools[0].Call(context.Background(), json.RawMessage(args), json.RawMessage(`{"callId":"call_032"}`))
	if strings.Contains(text, "beta INFO") || !strings.Contains(text, fmt.Sprintf("✗ %s — no folded block with that code", codes["beta"][0])) {
		t.Fatalf("alpha read beta's block:\n%.400s", text)
	}
}
