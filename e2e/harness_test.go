package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// Pi locates the Node binary and Pi's CLI entry point.
type Pi struct {
	// Node is a Node >= 22.19 binary.
	Node string
	// CLI is .../@earendil-works/pi-coding-agent/dist/bundle/cli.js.
	CLI string
}

// howToRun is the instruction shown when Pi is not configured.
const howToRun = `e2e: CONTEXTFOLD_NODE and CONTEXTFOLD_PI_CLI are not set; ` +
	`run: eval "$(.ci/setup-pi.sh)" && go test ./e2e`

// LocatePi returns the Pi installation named by CONTEXTFOLD_NODE and
// CONTEXTFOLD_PI_CLI. When they are unset it skips the test, or fails it when
// CONTEXTFOLD_E2E=1 (CI). Set but unusable paths always fail.
func LocatePi(t testing.TB) Pi {
	t.Helper()
	pi := Pi{Node: os.Getenv("CONTEXTFOLD_NODE"), CLI: os.Getenv("CONTEXTFOLD_PI_CLI")}
	required := os.Getenv("CONTEXTFOLD_E2E") == "1"
	if pi.Node == "" || pi.CLI == "" {
		if required {
			t.Fatal(howToRun + " (CONTEXTFOLD_E2E=1 requires them)")
		}
		t.Skip(howToRun)
	}
	if testing.Short() && !required {
		t.Skip("e2e: skipped in -short mode")
	}
	for _, p := range []string{pi.Node, pi.CLI} {
		if !filepath.IsAbs(p) {
			t.Fatalf("e2e: %q must be an absolute path", p)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("e2e: %v (re-run .ci/setup-pi.sh)", err)
		}
	}
	return pi
}

// Compaction is the "compaction" object of Pi's settings.json. Zero token
// fields are left out, so Pi's defaults (reserve 16384, keep 20000) apply.
type Compaction struct {
	Enabled          bool
	ReserveTokens    int
	KeepRecentTokens int
}

// Config describes one test sandbox: the fake model, Pi's agent dir and the
// command line. The zero value is usable.
type Config struct {
	// Script answers model requests. Nil means a LongSession with default
	// settings.
	Script fakellm.Script
	// Server configures the fake server.
	Server fakellm.Options
	// Model is the --model argument; "" means "fake/fake-model". The agent
	// dir also declares, each against the same fake server:
	// fakeanth/fake-claude, fakeanth/fake-claude-thinking and
	// fakeanth/fake-claude-haiku-4-5 and fakeanth/<fakellm.PreservedClaude>
	// (anthropic-messages: no thinking, thinking, last-turn-only thinking,
	// preserved thinking), fakeresp/fake-gpt,
	// fakeresp/fake-gpt-reasoning and fakeresp/fake-gpt-6.2-preserved
	// (openai-responses: no reasoning, reasoning, reasoning removed after a
	// prefix change), fakegem/gemini-3-fake and
	// fakegem/gemini-3-fake-thinking (google-generative-ai; Gemini 3 ids, so Pi
	// sends function-call ids back).
	Model string
	// ContextWindow is the models' contextWindow; 0 means 24000.
	ContextWindow int
	// MaxTokens is the models' maxTokens; 0 means 4096.
	MaxTokens int
	// Compaction is written to settings.json; nil leaves Pi's defaults
	// (automatic compaction on).
	Compaction *Compaction
	// Settings are extra top-level settings.json keys; they override the
	// harness's own keys.
	Settings map[string]any
	// GenLines is the number of filler lines gen.sh prints per step (about
	// 100 bytes each); 0 means 40, about 4 KB per step.
	GenLines int
	// Extension is loaded with -e when set (an absolute path).
	Extension string
	// Env holds extra environment variables for Pi (e.g. CONTEXTFOLD_*).
	Env map[string]string
	// SystemPrompt is passed as --system-prompt when set.
	SystemPrompt string
	// Args are extra CLI arguments, placed before the prompt.
	Args []string
	// Timeout bounds each Pi print run and each RPC wait; 0 means 3 minutes.
	Timeout time.Duration
}

// Env is one isolated sandbox: a fake server, an agent dir, HOME, TMPDIR, a
// session dir and a work dir with gen.sh. Create it with NewEnv; everything
// is removed when the test ends.
type Env struct {
	T      testing.TB
	Pi     Pi
	Config Config
	// Server is the fake model server, closed when the test ends.
	Server *fakellm.Server
	// Root holds all the directories below.
	Root, AgentDir, HomeDir, TmpDir, SessionDir, WorkDir string
	// Torn lets session files hold torn lines (a full disk): they are
	// skipped and counted instead of failing the test.
	Torn bool
}

// NewEnv builds a sandbox for cfg. It skips or fails the test like LocatePi.
func NewEnv(t testing.TB, cfg Config) *Env {
	t.Helper()
	pi := LocatePi(t)
	if cfg.Script == nil {
		cfg.Script = &LongSession{}
	}
	if cfg.Model == "" {
		cfg.Model = "fake/fake-model"
	}
	if cfg.ContextWindow == 0 {
		cfg.ContextWindow = 24000
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = 4096
	}
	if cfg.GenLines == 0 {
		cfg.GenLines = 40
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Minute
	}
	root := t.TempDir()
	// t.TempDir may be a relative or symlinked path; Pi prints real paths.
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	e := &Env{T: t, Pi: pi, Config: cfg, Root: root,
		AgentDir:   filepath.Join(root, "agent"),
		HomeDir:    filepath.Join(root, "home"),
		TmpDir:     filepath.Join(root, "tmp"),
		SessionDir: filepath.Join(root, "sessions"),
		WorkDir:    filepath.Join(root, "work"),
	}
	for _, d := range []string{e.AgentDir, e.HomeDir, e.TmpDir, e.SessionDir, e.WorkDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := fakellm.Start(cfg.Script, cfg.Server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	e.Server = srv
	e.writeJSON(filepath.Join(e.AgentDir, "models.json"), e.modelsJSON())
	e.writeJSON(filepath.Join(e.AgentDir, "settings.json"), e.settingsJSON())
	e.writeFile(filepath.Join(e.WorkDir, "gen.sh"), GenScript(cfg.GenLines), 0o755)
	return e
}

func (e *Env) modelsJSON() any {
	model := func(id, name string, reasoning bool) map[string]any {
		return map[string]any{
			"id": id, "name": name, "reasoning": reasoning, "input": []string{"text"},
			"contextWindow": e.Config.ContextWindow, "maxTokens": e.Config.MaxTokens,
			"cost": map[string]any{"input": 1, "output": 2, "cacheRead": 0.1, "cacheWrite": 1.25},
		}
	}
	// The preserved-thinking Claude: Pi marks such models with
	// compat.supportsMidConvoEffort and then sends block_binding drop_block.
	preserved := model(fakellm.PreservedClaude, "Fake Claude Fable (preserved thinking)", true)
	preserved["compat"] = map[string]any{"supportsMidConvoEffort": true}
	return map[string]any{"providers": map[string]any{
		"fake": map[string]any{"baseUrl": e.Server.URL(), "api": "openai-completions", "apiKey": "dummy",
			"models": []any{model("fake-model", "Fake Model", false)}},
		"fakeanth": map[string]any{"baseUrl": e.Server.AnthropicURL(), "api": "anthropic-messages", "apiKey": "dummy",
			"models": []any{
				model("fake-claude", "Fake Claude", false),
				model("fake-claude-thinking", "Fake Claude (thinking)", true),
				model("fake-claude-haiku-4-5", "Fake Claude Haiku 4.5 (last-turn thinking)", true),
				preserved,
				// Checks prefixes, but unmarked: Pi sends no drop_block.
				model("claude-fable-5-2-fake-unmarked", "Fake Claude Fable 5.2 (unmarked)", true),
			}},
		"fakeresp": map[string]any{"baseUrl": e.Server.URL(), "api": "openai-responses", "apiKey": "dummy",
			"models": []any{
				model("fake-gpt", "Fake GPT", false),
				model("fake-gpt-reasoning", "Fake GPT (reasoning)", true),
				model("fake-gpt-6.2-preserved", "Fake GPT 6.2 (preserved reasoning)", true),
			}},
		"fakegem": map[string]any{"baseUrl": e.Server.URL() + "beta", "api": "google-generative-ai", "apiKey": "dummy",
			"models": []any{
				model("gemini-3-fake", "Fake Gemini 3", false),
				model("gemini-3-fake-thinking", "Fake Gemini 3 (thinking)", true),
			}},
	}}
}

func (e *Env) settingsJSON() map[string]any {
	provider, model, _ := strings.Cut(e.Config.Model, "/")
	s := map[string]any{
		"defaultProvider":        provider,
		"defaultModel":           model,
		"quietStartup":           true,
		"enableInstallTelemetry": false,
		"cacheWarming":           "off",
	}
	if c := e.Config.Compaction; c != nil {
		m := map[string]any{"enabled": c.Enabled}
		if c.ReserveTokens > 0 {
			m["reserveTokens"] = c.ReserveTokens
		}
		if c.KeepRecentTokens > 0 {
			m["keepRecentTokens"] = c.KeepRecentTokens
		}
		s["compaction"] = m
	}
	maps.Copy(s, e.Config.Settings)
	return s
}

func (e *Env) writeJSON(path string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		e.T.Fatal(err)
	}
	e.writeFile(path, string(b)+"\n", 0o644)
}

func (e *Env) writeFile(path, content string, mode os.FileMode) {
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		e.T.Fatal(err)
	}
}

// Environ returns Pi's complete environment: a minimal base plus
// Config.Env. No variable of the calling process leaks in.
func (e *Env) Environ() []string {
	env := map[string]string{
		"PATH":                  "/usr/bin:/bin",
		"HOME":                  e.HomeDir,
		"TMPDIR":                e.TmpDir,
		"PI_CODING_AGENT_DIR":   e.AgentDir,
		"PI_OFFLINE":            "1",
		"PI_SKIP_VERSION_CHECK": "1",
		"PI_TELEMETRY":          "0",
		// Pi turns on Node's compile cache, which Node writes into TMPDIR
		// as it exits: a Pi still exiting when a test ends (the TUI tests
		// kill its terminal) made the sandbox's removal fail with
		// "directory not empty". Every sandbox is new, so it is never read.
		"NODE_DISABLE_COMPILE_CACHE": "1",
	}
	maps.Copy(env, e.Config.Env)
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// Args returns the CLI arguments (after the cli.js path) for a mode:
// "text" gives -p --mode text, "rpc" gives --mode rpc.
func (e *Env) Args(mode string, extra ...string) []string {
	var args []string
	if mode == "rpc" {
		args = []string{"--mode", "rpc"}
	} else {
		args = []string{"-p", "--mode", mode}
	}
	args = append(args, "--model", e.Config.Model, "--session-dir", e.SessionDir, "--no-extensions")
	if e.Config.Extension != "" {
		args = append(args, "-e", e.Config.Extension)
	}
	args = append(args, "--no-skills", "--no-prompt-templates", "--no-context-files", "--no-themes", "--no-mcp")
	if e.Config.SystemPrompt != "" {
		args = append(args, "--system-prompt", e.Config.SystemPrompt)
	}
	args = append(args, e.Config.Args...)
	return append(args, extra...)
}

// command builds the Pi process for args, in its own process group.
func (e *Env) command(ctx context.Context, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, e.Pi.Node, append([]string{e.Pi.CLI}, args...)...)
	cmd.Dir = e.WorkDir
	cmd.Env = e.Environ()
	ownProcessGroup(cmd)
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// PrintOptions describe one print-mode run.
type PrintOptions struct {
	// Prompt is the user prompt (the last argument).
	Prompt string
	// Continue adds -c, resuming the newest session in the session dir.
	Continue bool
	// Args are extra arguments for this run only.
	Args []string
	// Timeout overrides Config.Timeout.
	Timeout time.Duration
}

// Result is the outcome of one Pi run.
type Result struct {
	Env *Env
	// Args is the command line after the cli.js path.
	Args           []string
	Stdout, Stderr string
	// ExitCode is the exit status; -1 when Pi was killed.
	ExitCode int
	TimedOut bool
	Duration time.Duration
	// Requests are the model requests recorded during this run.
	Requests []fakellm.Recorded
	// Sessions are all session files in the session dir after the run,
	// oldest first.
	Sessions []SessionFile
}

// Print runs Pi once in print mode (-p --mode text) and waits for it.
func (e *Env) Print(opts PrintOptions) Result {
	e.T.Helper()
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = e.Config.Timeout
	}
	var extra []string
	if opts.Continue {
		extra = append(extra, "-c")
	}
	extra = append(extra, opts.Args...)
	args := e.Args("text", append(extra, opts.Prompt)...)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := e.command(ctx, args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	before := e.Server.Len()
	began := time.Now()
	err := cmd.Run()
	if cmd.ProcessState == nil {
		e.T.Fatalf("e2e: start pi: %v", err)
	}
	res := Result{Env: e, Args: args, Duration: time.Since(began), ExitCode: cmd.ProcessState.ExitCode(),
		Stdout: stdout.String(), Stderr: stderr.String(), TimedOut: ctx.Err() != nil}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && !res.TimedOut {
		e.T.Fatalf("e2e: run pi: %v", err)
	}
	res.Requests = e.Server.Requests()[before:]
	res.Sessions = e.Sessions()
	return res
}

// RunPrint creates a sandbox for cfg and runs prompt once in print mode.
// Result.Env gives access to the sandbox for further runs.
func RunPrint(t testing.TB, cfg Config, prompt string) Result {
	t.Helper()
	return NewEnv(t, cfg).Print(PrintOptions{Prompt: prompt})
}

// Require fails the test unless the run exited 0, showing its output.
func (r Result) Require(t testing.TB) {
	t.Helper()
	if r.ExitCode != 0 || r.TimedOut {
		t.Fatalf("pi exited %d (timed out: %v) after %s, %d requests\nargs: %q\n--- stdout\n%s\n--- stderr\n%s",
			r.ExitCode, r.TimedOut, r.Duration, len(r.Requests), r.Args, tail(r.Stdout, 3000), tail(r.Stderr, 3000))
	}
}

// Session returns the newest session file; it fails the test if there is
// none.
func (r Result) Session(t testing.TB) SessionFile {
	t.Helper()
	if len(r.Sessions) == 0 {
		t.Fatalf("no session file in %s", r.Env.SessionDir)
	}
	return r.Sessions[len(r.Sessions)-1]
}

// Sessions reads every *.jsonl file under the session dir, oldest first
// (session file names start with a timestamp).
func (e *Env) Sessions() []SessionFile {
	e.T.Helper()
	var paths []string
	err := filepath.WalkDir(e.SessionDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "context-fold" {
			return filepath.SkipDir // context-fold's own files (the seed index), not Pi sessions
		}
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		e.T.Fatal(err)
	}
	slices.SortFunc(paths, func(a, b string) int { return strings.Compare(filepath.Base(a), filepath.Base(b)) })
	out := make([]SessionFile, 0, len(paths))
	for _, p := range paths {
		out = append(out, readSession(e.T, p, e.Torn))
	}
	return out
}

// GenOutput runs gen.sh for step in the work dir, as Pi's bash tool would,
// and returns its stdout.
func (e *Env) GenOutput(step int) string {
	e.T.Helper()
	cmd := exec.Command("/bin/bash", "gen.sh", fmt.Sprint(step))
	cmd.Dir = e.WorkDir
	cmd.Env = e.Environ()
	out, err := cmd.Output()
	if err != nil {
		e.T.Fatalf("gen.sh %d: %v", step, err)
	}
	return string(out)
}

// GenScript returns the text of gen.sh. "bash gen.sh STEP" prints lines+1
// deterministic lines of about 100 bytes, looking like a build log; the line
// "ERROR: step STEP failed" is buried in the middle (before filler line
// lines/2). The filler differs per step and per line.
func GenScript(lines int) string {
	return fmt.Sprintf(`#!/bin/bash
# gen.sh STEP: deterministic multi-KB build-log output for the context-fold e2e
# tests, with one buried "ERROR: step STEP failed" line in the middle.
set -eu
step=${1:?usage: gen.sh STEP}
lines=%d
mid=$(( lines / 2 ))
seed=$(( step * 7919 + 17 ))
for (( n = 1; n <= lines; n++ )); do
  seed=$(( (seed * 1103515245 + 12345) %% 2147483648 ))
  if (( n == mid )); then
    printf 'ERROR: step %%d failed\n' "$step"
  fi
  printf '[step %%02d] line %%03d module=pkg/mod%%02d/file_%%04d.go checksum=%%08x elapsed=%%04dms status=ok\n' \
    "$step" "$n" $(( seed %% 37 )) $(( seed %% 9973 )) "$seed" $(( seed %% 5000 ))
done
`, lines)
}

// tail returns at most the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
