package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
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

// TestStatusAfterResume: each fold event is said once; `pi -c` into a
// session context-fold folded shows the replayed folds, the cache figures
// and the recent events in /context-fold status and the folds in the footer
// before any new request.
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
	// Each fold event was said once, on the screen.
	if n := notified(rpc, "context-fold: folded "); n != events {
		t.Fatalf("%d fold notices for %d fold events: %+v", n, events, rpc.Notifications())
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
	noun := "fold events"
	if events == 1 {
		noun = "fold event"
	}
	if want := fmt.Sprintf("context-fold: %d %s, ", events, noun); !strings.HasPrefix(status, want) || strings.Contains(status, " 0 blocks folded") {
		t.Fatalf("status after resume, want %q:\n%s", want, status)
	}
	if want := fmt.Sprintf("×%d · ~", events); !strings.Contains(footer, want) {
		t.Fatalf("footer after resume %q, want %q", footer, want)
	}
	// The cache figures and the fold events are rebuilt from the session
	// file, as Pi's own footer totals are.
	if strings.Contains(status, "no usage reported yet") || !strings.Contains(status, "\ncache: the newest response read ") || !strings.Contains(status, fmt.Sprintf("\nrecent fold events (%d of %d):", min(events, 5), events)) {
		t.Fatalf("status after resume lost the session's usage or events:\n%s", status)
	}
}

// TestTUINoticesStayOffTheScreen: in Pi's interactive screen, every cause
// is said once, as a notification, and nothing is written over the screen:
// a missing, a non-executable or a wrong engine binary, CONTEXTFOLD=0, and
// the engine's own diagnostics (CONTEXTFOLD_DEBUG=1), which go to a log
// file under the session's context-fold folder.
func TestTUINoticesStayOffTheScreen(t *testing.T) {
	noexec := filepath.Join(t.TempDir(), "contextfold")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	cases := []struct {
		name, key, value string
		once             string   // the one notification, in full-width screen text
		never            []string // raw stderr that must not reach the screen
		log              string   // a line the diagnostics log must hold
	}{
		{"missing", "CONTEXTFOLD_BIN", "/nonexistent/contextfold", "Warning: context-fold: no contextfold engine: CONTEXTFOLD_BIN=/nonexistent/contextfold (no such file). Fix: point CONTEXTFOLD_BIN at a contextfold", nil, ""},
		{"noexec", "CONTEXTFOLD_BIN", noexec, "(not executable). Fix: make it executable (chmod +x " + noexec + ")", []string{"EACCES", "restarts on the next request"}, ""},
		{"wrong", "CONTEXTFOLD_BIN", "/bin/cat", "Warning: context-fold: engine /bin/cat exited before its hello (code 1) (from CONTEXTFOLD_BIN); it printed: /bin/cat: serve: No such file or directory — no folding this session", []string{"\n/bin/cat: serve"}, ""},
		{"disabled", "CONTEXTFOLD", "0", "context-fold is disabled by CONTEXTFOLD=0: no folding", nil, ""},
		{"debug", "CONTEXTFOLD_DEBUG", "1", "context-fold: engine diagnostics are written to ", []string{"level=DEBUG"}, "level=DEBUG msg=turn"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := WithContextFold(t, Config{Script: &LongSession{Steps: 3, SkipRecall: true, SkipUnfold: true}, Compaction: noCompaction})
			cfg.Env[c.key] = c.value
			env := NewEnv(t, cfg)
			u := startTUI(t, env, 400, 60)
			// Pi redraws its screen, so there is no whole scrollback to count
			// in: every snapshot is checked while the session runs.
			bad := append(c.never, "Cache advisory unavailable", "[context-fold]")
			seen := 0
			watch := func(done func(string) bool) string {
				deadline := time.Now().Add(60 * time.Second)
				for {
					s := u.tmux("capture-pane", "-p", "-J", "-t", "pi")
					for _, b := range bad {
						if strings.Contains(s, b) {
							t.Fatalf("%q reached the screen:\n%s", b, s)
						}
					}
					seen = max(seen, strings.Count(s, c.once))
					if done(s) {
						return s
					}
					if time.Now().After(deadline) {
						t.Fatalf("timed out:\n%s", s)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			has := func(want string) func(string) bool { return func(s string) bool { return strings.Contains(s, want) } }
			watch(has("(fake) fake-model"))
			u.text("Run gen.sh for every step.")
			u.keys("Enter")
			watch(has("FINAL: done after 3 steps"))
			u.text("Run gen.sh for every step again.")
			u.keys("Enter")
			s := watch(func(s string) bool {
				i := strings.Index(s, "again.")
				return i >= 0 && strings.Contains(s[i:], "FINAL: done after 3 steps")
			})
			if seen != 1 {
				t.Fatalf("%q seen %d times in one screen, want once:\n%s", c.once, seen, s)
			}
			if strings.Contains(s[strings.Index(s, "again."):], c.once) {
				t.Fatalf("%q said again after the second prompt:\n%s", c.once, s)
			}
			if c.log != "" {
				logs, _ := filepath.Glob(filepath.Join(env.SessionDir, "context-fold", "*", "engine.log"))
				if len(logs) != 1 {
					t.Fatalf("diagnostics logs %v", logs)
				}
				data, _ := os.ReadFile(logs[0])
				if !strings.Contains(string(data), c.log) || !strings.Contains(s, logs[0]) {
					t.Fatalf("log %s (named on screen: %v) lacks %q:\n%.500s", logs[0], strings.Contains(s, logs[0]), c.log, data)
				}
			}
			u.keys("C-d")
		})
	}
}

// TestResumePreloadsInRealPi: on `pi -c -p`, the adapter hands the engine
// the context Pi rebuilt from its session file right after open, named by
// entry ids, so the first request sends only the messages added since (the
// engine's debug log shows the preload and a turn that keeps all of it),
// and that request starts with the bytes of the last request before the
// resume: every fold is where it was, and the prompt cache stays warm.
func TestResumePreloadsInRealPi(t *testing.T) {
	env := NewEnv(t, WithContextFold(t, Config{Script: &LongSession{Steps: 40, SkipRecall: true, SkipUnfold: true}, Compaction: noCompaction,
		Env: map[string]string{"CONTEXTFOLD_DEBUG": "1"}}))
	first := env.Print(PrintOptions{Prompt: "Run gen.sh for every step."})
	first.Require(t)
	if foldEvents(first.Session(t)) == 0 {
		t.Fatal("the first run folded nothing")
	}
	last := first.Requests[len(first.Requests)-1]
	res := env.Print(PrintOptions{Prompt: "Run gen.sh once more.", Continue: true})
	res.Require(t)
	if len(res.Requests) == 0 {
		t.Fatal("the resumed run made no model request")
	}
	pre := regexp.MustCompile(`msg=preload .*?messages=(\d+)`).FindStringSubmatch(res.Stderr)
	turn := regexp.MustCompile(`msg=turn .*?keep=(\d+) append=(\d+)`).FindStringSubmatch(res.Stderr)
	if pre == nil || turn == nil {
		t.Fatalf("no preload or turn in the engine's debug log:\n%s", tail(res.Stderr, 3000))
	}
	if pre[1] != turn[1] {
		t.Errorf("the first request kept %s messages of the %s preloaded", turn[1], pre[1])
	}
	if n, _ := strconv.Atoi(turn[2]); n == 0 || n > 3 {
		t.Errorf("the first request sent %s messages; want only those added since the session was written", turn[2])
	}
	if n, _ := strconv.Atoi(pre[1]); n < 80 {
		t.Errorf("preloaded %d messages of a 40-step session", n)
	}
	resumed := res.Requests[0]
	if len(FoldedTags(&resumed.Request)) == 0 || len(FoldedTags(&resumed.Request)) < len(FoldedTags(&last.Request)) {
		t.Errorf("the resumed request carries %d folds, the last before it %d", len(FoldedTags(&resumed.Request)), len(FoldedTags(&last.Request)))
	}
	if err := CheckBytePrefix(&last.Request, &resumed.Request); err != nil {
		t.Errorf("the resumed request does not start with the last request's bytes: %v", err)
	}
}

// TestDisabledCommandAnsweredLocally: with CONTEXTFOLD=0, typing
// /context-fold (or /fold-handoff) is answered by the extension itself, so
// it never reaches the model as a prompt: the fake model sees no request.
func TestDisabledCommandAnsweredLocally(t *testing.T) {
	cfg := WithContextFold(t, Config{Script: &LongSession{Steps: 2, SkipRecall: true, SkipUnfold: true}, Compaction: noCompaction})
	cfg.Env["CONTEXTFOLD"] = "0"
	env := NewEnv(t, cfg)
	rpc := env.StartRPC(RPCOptions{})
	rpc.Prompt("/context-fold")
	rpc.Prompt("/fold-handoff finish the parser")
	rpc.Close()
	if n := env.Server.Len(); n != 0 {
		t.Fatalf("the fake model saw %d request(s) for commands typed with CONTEXTFOLD=0", n)
	}
	for _, name := range []string{"context-fold", "fold-handoff"} {
		want := "context-fold is disabled by CONTEXTFOLD=0; /" + name + " does nothing and nothing was sent to the model."
		if n := notified(rpc, want); n != 1 {
			t.Errorf("%d notices containing %q, want 1: %+v", n, want, rpc.Notifications())
		}
	}
}
