package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// foldEvents counts the fold entries the adapter persisted in a session file.
func foldEvents(s SessionFile) int {
	n := 0
	for _, e := range s.Custom("contextfold.fold") {
		var d struct {
			Kind  string            `json:"kind"`
			Folds []json.RawMessage `json:"folds"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.Kind == "fold" && len(d.Folds) > 0 {
			n++
		}
	}
	return n
}

// TestStatusAfterResume: `pi -c` into a session context-fold folded shows
// the replayed folds in /context-fold status and in the footer before any
// new request.
func TestStatusAfterResume(t *testing.T) {
	env := NewEnv(t, WithContextFold(t, Config{Script: &LongSession{Steps: 40, SkipRecall: true, SkipUnfold: true}, Compaction: noCompaction}))
	rpc := env.StartRPC(RPCOptions{})
	rpc.Prompt("Run gen.sh for every step.")
	res := rpc.Close()
	if len(res.Sessions) != 1 {
		t.Fatalf("%d session files", len(res.Sessions))
	}
	events := foldEvents(res.Sessions[0])
	if events == 0 {
		t.Fatal("the first run folded nothing")
	}
	n := env.Server.Len()
	rpc = env.StartRPC(RPCOptions{Args: []string{"-c"}})
	rpc.Prompt("/context-fold status")
	rpc.Close()
	if env.Server.Len() != n {
		t.Fatalf("the resumed session made %d model requests", env.Server.Len()-n)
	}
	var status, footer string
	for _, u := range rpc.UIRequests() {
		if u.Method == "notify" && strings.HasPrefix(u.Message, "context-fold: ") {
			status = u.Message
		}
		if u.Method == "setStatus" && u.StatusKey == "context-fold" {
			footer = u.StatusText
		}
	}
	if want := fmt.Sprintf("context-fold: %d fold events, ", events); !strings.HasPrefix(status, want) || strings.Contains(status, " 0 blocks folded") {
		t.Fatalf("status after resume, want %q:\n%s", want, status)
	}
	if want := fmt.Sprintf("×%d · ~", events); !strings.Contains(footer, want) {
		t.Fatalf("footer after resume %q, want %q", footer, want)
	}
}
