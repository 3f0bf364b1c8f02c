package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// tui drives Pi's interactive terminal UI in a private tmux server.
type tui struct {
	t    *testing.T
	sock string
}

func (u *tui) tmux(args ...string) string {
	u.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", u.sock}, args...)...).CombinedOutput()
	if err != nil {
		u.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// pane returns the screen as plain text.
func (u *tui) pane() string { return u.tmux("capture-pane", "-p", "-t", "pi") }

// wait polls the screen until want appears (or, with gone, disappears).
func (u *tui) wait(want string, gone bool, timeout time.Duration) {
	u.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if strings.Contains(u.pane(), want) != gone {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	u.t.Fatalf("timed out waiting for %q (gone=%v); screen:\n%s", want, gone, u.pane())
}

// keys sends key names; text sends literal text. Escape must go alone: a
// key after it in the same call reads as Alt+key.
func (u *tui) keys(k ...string) { u.tmux(append([]string{"send-keys", "-t", "pi"}, k...)...) }
func (u *tui) text(s string)    { u.tmux("send-keys", "-t", "pi", "-l", s) }

// startTUI launches interactive Pi for env in a cols×rows terminal.
func startTUI(t *testing.T, env *Env, cols, rows int) *tui {
	t.Helper()
	return startTUIArgs(t, env, cols, rows, env.Args("text")[3:]) // drop -p --mode text: interactive
}

// startTUIArgs launches interactive Pi with the arguments after cli.js.
func startTUIArgs(t *testing.T, env *Env, cols, rows int, args []string) *tui {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CONTEXTFOLD_E2E") == "1" {
			t.Fatal("tmux is required for the TUI test (apt-get install -y tmux)")
		}
		t.Skip("tmux not installed")
	}
	var quoted []string
	for _, a := range append([]string{env.Pi.Node, env.Pi.CLI}, args...) {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	envs := append(env.Environ(), "TERM=xterm-256color", "LANG=C.UTF-8")
	var qenv []string
	for _, e := range envs {
		qenv = append(qenv, "'"+strings.ReplaceAll(e, "'", `'\''`)+"'")
	}
	launch := filepath.Join(env.Root, "launch.sh")
	script := fmt.Sprintf("#!/bin/sh\nexec env -i %s %s\n", strings.Join(qenv, " "), strings.Join(quoted, " "))
	os.WriteFile(launch, []byte(script), 0o755)
	u := &tui{t: t, sock: filepath.Join(env.Root, "tmux.sock")}
	u.tmux("-f", "/dev/null", "new-session", "-d", "-s", "pi", "-x", fmt.Sprint(cols), "-y", fmt.Sprint(rows), "-c", env.WorkDir, "sh "+launch)
	u.tmux("set-option", "-t", "pi", "remain-on-exit", "on")
	t.Cleanup(func() { exec.Command("tmux", "-S", u.sock, "kill-server").Run() })
	return u
}

// TestTUIMenuSettingsAndFooter: in a 60-column terminal, the footer shows
// context-fold's one-line status; /context-fold opens the menu; a settings
// edit is saved to context-fold.json; after a folding session the footer
// reports the folds.
func TestTUIMenuSettingsAndFooter(t *testing.T) {
	env := NewEnv(t, WithContextFold(t, Config{Script: &LongSession{Steps: 30, SkipRecall: true, SkipUnfold: true}, Compaction: noCompaction}))
	u := startTUI(t, env, 60, 30)
	u.wait("⧉ context-fold", false, 30*time.Second)

	u.text("/context-fold")
	u.keys("Enter")
	u.wait("→ Status", false, 10*time.Second)
	u.wait("Folded blocks", false, 5*time.Second)
	u.wait("Discard retained images", false, 5*time.Second)
	u.keys("Down")
	u.keys("Enter")
	u.wait("pick one to change", false, 10*time.Second)
	u.wait("Fold policy (policy): economic", false, 5*time.Second)
	u.wait("First fold at (foldAt): 0.45", false, 5*time.Second)
	u.keys("Down")
	u.keys("Enter") // the second row: First fold at
	u.wait("clears the saved value", false, 10*time.Second)
	u.text("0.3")
	u.keys("Enter")
	u.wait("First fold at (foldAt): 0.3 (saved)", false, 10*time.Second)
	u.keys("Escape")
	u.wait("pick one to change", true, 10*time.Second)
	u.keys("Escape")
	u.wait("→ Status", true, 10*time.Second)
	data, _ := os.ReadFile(filepath.Join(env.AgentDir, "context-fold.json"))
	var doc map[string]any
	if json.Unmarshal(data, &doc) != nil || doc["foldAt"] != 0.3 {
		t.Fatalf("settings not saved: %s", data)
	}

	// A folding session: the footer line reports the folds, within 60 columns.
	u.text("Run gen.sh for every step.")
	u.keys("Enter")
	u.wait("FINAL: done after 30 steps", false, 90*time.Second)
	u.wait("⧉ context-fold ×", false, 10*time.Second)
	var footer string
	for _, line := range strings.Split(u.pane(), "\n") {
		if strings.HasPrefix(line, "⧉ context-fold ×") {
			footer = strings.TrimRight(line, " ")
		}
	}
	if footer == "" || utf8.RuneCountInString(footer) > 60 || !strings.Contains(footer, "masked") || strings.Contains(footer, "next 0/") {
		t.Fatalf("footer %q (%d columns)", footer, utf8.RuneCountInString(footer))
	}
	t.Logf("footer at 60 columns: %q", footer)
	// Ctrl-D on an empty editor exits.
	u.keys("C-d")
}

// TestTUICacheExpiryNotice: an idle interactive session carrying ≥ 20k
// tokens is told once that its cache may have expired.
func TestTUICacheExpiryNotice(t *testing.T) {
	env := NewEnv(t, WithContextFold(t, Config{Script: &LongSession{Steps: 25, SkipRecall: true, SkipUnfold: true}, Compaction: noCompaction, ContextWindow: 200_000}))
	env.Config.Env["CONTEXTFOLD_CACHE_IDLE_MINUTES"] = "0.05" // 3 seconds
	u := startTUI(t, env, 100, 30)
	u.wait("⧉ context-fold", false, 30*time.Second)
	u.text("Run gen.sh for every step.")
	u.keys("Enter")
	u.wait("FINAL: done after 25 steps", false, 90*time.Second)
	u.wait("cache may have expired", false, 15*time.Second)
	u.wait("Consider /fold-handoff", false, 2*time.Second)
	u.keys("C-d")
}

// TestTUIConfirmColdPrompt: with the opt-in confirmation, an interactive
// prompt into an expired cache asks first; "Keep draft" sends nothing and
// puts the text back in the editor, "Send anyway" sends it. RPC prompts are
// never asked.
func TestTUIConfirmColdPrompt(t *testing.T) {
	env := NewEnv(t, WithContextFold(t, Config{Script: &LongSession{Steps: 25, SkipRecall: true, SkipUnfold: true}, Compaction: noCompaction, ContextWindow: 200_000}))
	env.Config.Env["CONTEXTFOLD_CACHE_IDLE_MINUTES"] = "0.05"
	env.Config.Env["CONTEXTFOLD_CONFIRM_COLD_PROMPT"] = "on"
	u := startTUI(t, env, 100, 30)
	u.wait("⧉ context-fold", false, 30*time.Second)
	u.text("Run gen.sh for every step.")
	u.keys("Enter")
	u.wait("FINAL: done after 25 steps", false, 90*time.Second)
	time.Sleep(3500 * time.Millisecond)
	before := len(env.Server.Requests())
	u.text("ColdDraft please continue")
	u.keys("Enter")
	u.wait("Keep draft", false, 10*time.Second)
	u.keys("Enter") // Keep draft
	u.wait("Keep draft", true, 10*time.Second)
	u.wait("Draft kept; prompt not sent.", false, 5*time.Second)
	if n := len(env.Server.Requests()); n != before {
		t.Fatalf("a kept draft was sent (%d requests)", n-before)
	}
	if !strings.Contains(u.pane(), "ColdDraft please continue") {
		t.Fatalf("the draft is not back in the editor:\n%s", u.pane())
	}
	u.keys("Enter") // send the restored draft
	u.wait("Send anyway", false, 10*time.Second)
	u.keys("Down")
	u.keys("Enter")
	deadline := time.Now().Add(20 * time.Second)
	for len(env.Server.Requests()) == before && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if len(env.Server.Requests()) == before {
		t.Fatal("Send anyway did not send")
	}
	u.keys("C-d")
}
