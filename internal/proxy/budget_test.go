package proxy

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPlan: the window and the client's compaction threshold, from the
// model, the client's settings and -window, as each client computes its
// threshold (Reserve = Window − threshold, plus a turn's room).
func TestPlan(t *testing.T) {
	codexHome := t.TempDir()
	os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte("model = \"gpt-5.5\"\nmodel_context_window = 400_000 # comment\nmodel_auto_compact_token_limit = 300000\n[mcp_servers.x]\nmodel_context_window = 1\n"), 0o600)
	ocConfig := filepath.Join(t.TempDir(), "opencode.json")
	os.WriteFile(ocConfig, []byte(`{"provider":{"fake":{"models":{"fake-model":{"limit":{"context":100000,"output":16000}},"no-limit":{}}}}}`), 0o600)
	for _, tc := range []struct {
		name   string
		client Client
		model  string
		env    map[string]string
		flag   int
		window int
		// threshold is where the client compacts (0: it does not).
		threshold int
		from      string
	}{
		{"claude code, its default model", ClaudeCode, "claude-opus-5-5", nil, 0, 1_000_000, 967_000, "model"},
		{"claude code, a fake preserved model", ClaudeCode, "claude-fable-5-1-fake", nil, 0, 1_000_000, 967_000, "model"},
		{"claude code, opus 4.1", ClaudeCode, "claude-opus-4-1-20250805", nil, 0, 200_000, 167_000, "model"},
		{"claude code, sonnet 4.0", ClaudeCode, "claude-sonnet-4-20250514", nil, 0, 200_000, 167_000, "model"},
		{"claude code, opus 4.7", ClaudeCode, "claude-opus-4-7", nil, 0, 1_000_000, 967_000, "model"},
		{"claude code, [1m]", ClaudeCode, "claude-sonnet-4-5[1m]", nil, 0, 1_000_000, 967_000, "model"},
		{"claude code, its window setting", ClaudeCode, "claude-opus-5-5", map[string]string{"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "200k"}, 0, 200_000, 167_000, "CLAUDE_CODE_AUTO_COMPACT_WINDOW"},
		{"claude code, a window setting under its floor", ClaudeCode, "claude-opus-5-5", map[string]string{"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "50000"}, 0, 100_000, 67_000, "CLAUDE_CODE_AUTO_COMPACT_WINDOW"},
		{"claude code, a percentage", ClaudeCode, "claude-opus-5-5", map[string]string{"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "200000", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"}, 0, 200_000, 90_000, "CLAUDE_CODE_AUTO_COMPACT_WINDOW"},
		{"claude code, 1M off", ClaudeCode, "claude-opus-5-5", map[string]string{"CLAUDE_CODE_DISABLE_1M_CONTEXT": "1"}, 0, 200_000, 167_000, "CLAUDE_CODE_DISABLE_1M_CONTEXT"},
		{"claude code, an unknown model's window", ClaudeCode, "my-model", map[string]string{"CLAUDE_CODE_MAX_CONTEXT_TOKENS": "50000"}, 0, 50_000, 17_000, "CLAUDE_CODE_MAX_CONTEXT_TOKENS"},
		{"claude code, no auto-compact", ClaudeCode, "claude-opus-5-5", map[string]string{"DISABLE_AUTO_COMPACT": "1"}, 0, 1_000_000, 0, "model"},
		{"claude code, -window", ClaudeCode, "claude-opus-5-5", map[string]string{"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "200000"}, 100_000, 100_000, 0, "flag"},
		{"claude code, -window over its threshold", ClaudeCode, "claude-opus-5-5", map[string]string{"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "200000"}, 180_000, 180_000, 167_000, "flag"},
		{"codex, its catalog", Codex, "gpt-5.5", map[string]string{"CODEX_HOME": t.TempDir()}, 0, 272_000, 244_800, "model"},
		{"codex, its config.toml", Codex, "gpt-5.5", map[string]string{"CODEX_HOME": codexHome}, 0, 400_000, 300_000, "model_context_window"},
		{"opencode", Opencode, "gpt-5.5", nil, 0, 272_000, 240_000, "model"},
		{"opencode, its config", Opencode, "fake-model", map[string]string{"OPENCODE_CONFIG": ocConfig}, 0, 100_000, 84_000, "OPENCODE_CONFIG"},
		{"opencode, a model without limits", Opencode, "no-limit", map[string]string{"OPENCODE_CONFIG": ocConfig}, 0, DefaultWindow, 0, "model"},
		{"another client", OtherClient, "some-model", nil, 0, DefaultWindow, 0, "model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &Folder{window: tc.flag, Env: func(k string) string { return tc.env[k] }}
			p := f.plan(tc.client, tc.model)
			threshold := 0
			if p.Reserve > 0 {
				threshold = p.Window - p.Reserve + clientTurnRoom
			}
			if p.Window != tc.window || threshold != tc.threshold || p.From != tc.from {
				t.Errorf("plan = window %d, threshold %d, from %q; want %d, %d, %q", p.Window, threshold, p.From, tc.window, tc.threshold, tc.from)
			}
		})
	}
}
