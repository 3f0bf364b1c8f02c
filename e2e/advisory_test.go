package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// usageScript wraps a script and reports the usage pattern chosen by fn for
// each tool-declaring request (n counts them from 1).
type usageScript struct {
	fakellm.Script
	mu   sync.Mutex
	n    int
	last int // the previous request's body size in tokens
	fn   func(n, prompt, last int) fakellm.Usage
}

func (u *usageScript) Reply(r *fakellm.Request) fakellm.Reply {
	rep := u.Script.Reply(r)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.n++
	prompt := len(r.Body) / 4
	rep.Usage = u.fn(u.n, prompt, u.last)
	u.last = prompt
	return rep
}

func (u *usageScript) Summary(r *fakellm.Request) string { return "summary" }

func notified(rpc *RPC, sub string) int {
	n := 0
	for _, x := range rpc.Notifications() {
		if strings.Contains(x.Message, sub) {
			n++
		}
	}
	return n
}

// TestColdAdvisory: responses that read nothing from the cache while
// rebilling 25k tokens each raise one "session cold" notice.
func TestColdAdvisory(t *testing.T) {
	s := &usageScript{Script: &LongSession{Steps: 3, SkipRecall: true, SkipUnfold: true}, fn: func(n, prompt, _ int) fakellm.Usage {
		return fakellm.Usage{Prompt: 25_000 + n, Cached: 0, Completion: 20}
	}}
	env := NewEnv(t, WithContextFold(t, Config{Script: s, Compaction: noCompaction, ContextWindow: 200_000}))
	// The opt-in confirmation never stops RPC input, even into an expired cache.
	env.Config.Env["CONTEXTFOLD_CONFIRM_COLD_PROMPT"] = "on"
	env.Config.Env["CONTEXTFOLD_CACHE_IDLE_MINUTES"] = "0.001"
	rpc := env.StartRPC(RPCOptions{})
	rpc.Prompt("Run gen.sh for every step.")
	before := len(env.Server.Requests())
	time.Sleep(200 * time.Millisecond)
	rpc.Prompt("Run gen.sh for every step again.")
	rpc.Close()
	if len(env.Server.Requests()) == before {
		t.Fatal("an RPC prompt was held by the confirmation")
	}
	if n := notified(rpc, "session cold: rebilled ~25k tok as fresh input. Consider /fold-handoff"); n != 1 {
		t.Fatalf("%d cold notices, want 1 per cold streak: %+v", n, rpc.Notifications())
	}
}

// TestWireWatchdog: a fold that never reaches the wire (the provider reads
// the whole pre-fold prompt back from cache) warns once.
func TestWireWatchdog(t *testing.T) {
	s := &usageScript{Script: &LongSession{Steps: 30, SkipRecall: true, SkipUnfold: true}}
	s.fn = func(n, prompt, last int) fakellm.Usage {
		// A transport that ignores the rewrite: the cache always holds the
		// whole raw history, and the provider reads all of it.
		raw := 2_000 + 1_100*n
		return fakellm.Usage{Prompt: raw + 100, Cached: raw, CacheWrite: 100, Completion: 20}
	}
	env := NewEnv(t, WithContextFold(t, Config{Script: s, Compaction: noCompaction}))
	rpc := env.StartRPC(RPCOptions{})
	rpc.Prompt("Run gen.sh for every step.")
	rpc.Close()
	if n := notified(rpc, "not observed on the wire"); n != 1 {
		t.Fatalf("%d wire notices, want 1: %+v", n, rpc.Notifications())
	}
}

// TestBridgedTransportPausesFolding: a provider that books the whole prompt
// as a cache read with nothing sent is recognised after two responses, and
// the ladder pauses for the session.
func TestBridgedTransportPausesFolding(t *testing.T) {
	s := &usageScript{Script: &LongSession{Steps: 30, SkipRecall: true, SkipUnfold: true}, fn: func(n, prompt, _ int) fakellm.Usage {
		return fakellm.Usage{Prompt: prompt, Cached: prompt, Completion: 20}
	}}
	env := NewEnv(t, WithContextFold(t, Config{Script: s, Compaction: noCompaction}))
	rpc := env.StartRPC(RPCOptions{})
	rpc.Prompt("Run gen.sh for every step.")
	rpc.Close()
	if n := notified(rpc, "keeps its own conversation"); n != 1 {
		t.Fatalf("%d bridged notices: %+v", n, rpc.Notifications())
	}
	for _, r := range ToolRequests(env.Server.Requests()) {
		if len(foldedCalls(&r.Request)) > 0 {
			t.Fatal("folding was not paused for a bridged transport")
		}
	}
}

// TestMenuOverRPC: /context-fold status reports the cache figures, and a
// settings edit made through the menu's dialogs is saved to the JSON file,
// keeping keys it does not manage.
func TestMenuOverRPC(t *testing.T) {
	env := NewEnv(t, WithContextFold(t, Config{Script: &LongSession{Steps: 3, SkipRecall: true, SkipUnfold: true}, Compaction: noCompaction}))
	cfgFile := filepath.Join(env.AgentDir, "context-fold.json")
	os.WriteFile(cfgFile, []byte(`{"_comment":"mine"}`), 0o644)
	var step int
	rpc := env.StartRPC(RPCOptions{OnDialog: func(r UIRequest) UIResponse {
		step++
		switch {
		case r.Method == "select" && r.Title == "context-fold" && step == 1:
			return UIValue("Settings")
		case r.Method == "select" && strings.HasPrefix(r.Title, "context-fold settings") && step == 2:
			for _, o := range r.Options {
				if strings.HasPrefix(o, "First fold at (foldAt):") {
					return UIValue(o)
				}
			}
		case r.Method == "input" && step == 3:
			return UIValue("0.3")
		case r.Method == "select" && strings.HasPrefix(r.Title, "context-fold settings"):
			return UIValue("Done")
		case r.Method == "select" && r.Title == "context-fold":
			return UIValue("Close")
		}
		return UICancel()
	}})
	rpc.Prompt("Run gen.sh for every step.")
	rpc.Prompt("/context-fold")
	rpc.Prompt("/context-fold status")
	rpc.Close()
	data, _ := os.ReadFile(cfgFile)
	var doc map[string]any
	if json.Unmarshal(data, &doc) != nil || doc["foldAt"] != 0.3 || doc["_comment"] != "mine" {
		t.Fatalf("settings file: %s", data)
	}
	if notified(rpc, "First fold at saved: 0.3") != 1 {
		t.Fatalf("no confirmation: %+v", rpc.Notifications())
	}
	var status string
	for _, n := range rpc.Notifications() {
		if strings.HasPrefix(n.Message, "context-fold: ") {
			status = n.Message
		}
	}
	for _, want := range []string{"cache: the newest response read ", "(Pi's CH); over the session ", "footer: ", "tune with /context-fold config"} {
		if !strings.Contains(status, want) {
			t.Fatalf("status lacks %q:\n%s", want, status)
		}
	}
}

// TestNoEngineOverRPC: interactively (RPC gives the extension a UI), a
// missing engine is one warning for the whole process, across a new
// session; the menu, the status, the handoff and the tools answer that
// context-fold is off, as info, and open no dialog.
func TestNoEngineOverRPC(t *testing.T) {
	cfg := WithContextFold(t, Config{Script: &LongSession{Steps: 8, SkipRecall: true, SkipUnfold: true}, Compaction: noCompaction})
	missing := filepath.Join(t.TempDir(), "contextfold")
	cfg.Env["CONTEXTFOLD_BIN"] = missing
	env := NewEnv(t, cfg)
	dialogs := 0
	rpc := env.StartRPC(RPCOptions{OnDialog: func(r UIRequest) UIResponse {
		dialogs++
		return UICancel()
	}})
	rpc.Prompt("Run gen.sh for every step.")
	for _, cmd := range []string{"/context-fold", "/context-fold status", "/fold-handoff ship it"} {
		rpc.Prompt(cmd)
	}
	rpc.MustCall(map[string]any{"type": "new_session"})
	rpc.Prompt("/context-fold")
	rpc.Close()

	want := "CONTEXTFOLD_BIN=" + missing + " (no such file)"
	var warnings, offs int
	for _, n := range rpc.Notifications() {
		switch {
		case !strings.Contains(n.Message, want):
			t.Errorf("notification that does not name the cause: %s %q", n.NotifyType, n.Message)
		case n.NotifyType == "warning" && strings.HasSuffix(n.Message, "— no folding this session"):
			warnings++
		case n.NotifyType == "info" && strings.Contains(n.Message, "off this session"):
			offs++
		default:
			t.Errorf("unexpected notification: %s %q", n.NotifyType, n.Message)
		}
	}
	if warnings != 1 || offs != 4 || dialogs != 0 {
		t.Fatalf("%d warnings (want 1), %d off answers (want 4), %d dialogs (want 0): %+v", warnings, offs, dialogs, rpc.Notifications())
	}
	for _, r := range ToolRequests(env.Server.Requests()) {
		if n := len(foldedCalls(&r.Request)); n > 0 {
			t.Fatalf("%d blocks folded without an engine", n)
		}
	}
}
