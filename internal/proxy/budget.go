package proxy

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The budget a conversation is folded for is the client's, not a guess:
// the proxy counts the whole request it forwards (system prompt and tool
// declarations with the messages, engine.Request.Overhead), learns the
// window from the model and the client's own settings, and keeps ahead of
// the client's compaction threshold (window − reserve) by the engine's
// margin, the way the Pi host keeps ahead of Pi's. -window overrides the
// window.

// Client is the coding agent a request came from, known by its headers.
type Client int

// The clients the proxy knows.
const (
	OtherClient Client = iota
	ClaudeCode
	Codex
	Opencode
)

func (c Client) String() string {
	switch c {
	case ClaudeCode:
		return "claude-code"
	case Codex:
		return "codex"
	case Opencode:
		return "opencode"
	}
	return ""
}

var (
	claudeSessionHeader = http.CanonicalHeaderKey("x-claude-code-session-id")
	codexWindowHeader   = http.CanonicalHeaderKey("x-codex-window-id")
	originatorHeader    = http.CanonicalHeaderKey("originator")
	affinityHeader      = http.CanonicalHeaderKey("x-session-affinity")
)

// clientOf names the client of a request by the headers only it sends.
func clientOf(h http.Header) Client {
	switch {
	case len(h[claudeSessionHeader]) > 0:
		return ClaudeCode
	case len(h[codexWindowHeader]) > 0 || strings.HasPrefix(first(h[originatorHeader]), "codex"):
		return Codex
	case len(h[affinityHeader]) > 0:
		return Opencode
	}
	return OtherClient
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// Plan is the room a request is folded for.
type Plan struct {
	// Window is the model's context window in tokens; Reserve the room
	// the client keeps free (it compacts once a request reaches Window −
	// Reserve; 0: it does not, or how is unknown).
	Window, Reserve int
	// From says where Window came from: "flag", the client's setting (its
	// name), or "model".
	From string
}

// DefaultWindow is the window of a model the proxy knows nothing of.
const DefaultWindow = 200_000

// plan is the room a request of client cl to model is folded for.
func (f *Folder) plan(cl Client, model string) Plan {
	p := Plan{Window: modelWindow(cl, model), From: "model"}
	env := f.Env
	if env == nil {
		env = func(string) string { return "" }
	}
	switch cl {
	case ClaudeCode:
		p = claudePlan(p, model, env)
	case Codex:
		p = codexPlan(p, model, env)
	case Opencode:
		p = opencodePlan(p, model, env)
	}
	if f.window > 0 {
		// The client still compacts where it would: at its threshold,
		// which the reserve keeps relative to the window planned for.
		threshold := p.Window - p.Reserve
		p.Window, p.From = f.window, "flag"
		p.Reserve = 0
		if threshold < p.Window {
			p.Reserve = p.Window - threshold
		}
	}
	if p.Reserve >= p.Window {
		p.Reserve = 0
	}
	return p
}

// modelWindow is the context window a client assumes for model, as its
// catalog has it: Claude Code gives Claude 4.7 and later (the 5.x
// families among them) and any model it does not know 1M, the earlier
// Claudes 200k; Codex gives the GPT-5 family and any unknown model 272k.
func modelWindow(cl Client, model string) int {
	m := strings.ToLower(model)
	switch {
	case strings.HasSuffix(m, "[1m]"):
		return 1_000_000
	case claude200k.MatchString(m):
		return 200_000
	case cl == ClaudeCode:
		return 1_000_000
	case cl == Codex || strings.HasPrefix(m, "gpt-5"):
		return 272_000
	}
	return DefaultWindow
}

// claude200k are the Claude models of 200k tokens: Claude 3, Opus 4.0
// to 4.5, Sonnet 4.0 to 4.6, Haiku 4.x.
var claude200k = regexp.MustCompile(`claude-3|(opus|sonnet|haiku)-4(-[0-6]($|[^0-9])|-\d{8}|$)`)

// envInt is a positive integer setting, 0 when unset or not one.
func envInt(env func(string) string, name string) int {
	n, err := strconv.Atoi(strings.TrimSpace(env(name)))
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// envTokens is a token count setting as Claude Code reads one: 200000,
// 200k or 1m; 0 when unset or not one.
func envTokens(env func(string) string, name string) int {
	v := strings.ToLower(strings.TrimSpace(env(name)))
	mult := 1.0
	switch {
	case strings.HasSuffix(v, "k"):
		v, mult = v[:len(v)-1], 1e3
	case strings.HasSuffix(v, "m"):
		v, mult = v[:len(v)-1], 1e6
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		return 0
	}
	return int(f * mult)
}

// Claude Code compacts once its count of the conversation reaches the
// effective window (the window less the reply's room, at most 20,000)
// less a 13,000-token buffer. It counts before it sends: the last
// response's usage plus the tool results since, so a request the proxy
// kept just under the threshold crosses it with the next turn's results.
// The proxy keeps clientTurnRoom more free: Bash output is cut at 30,000
// characters, about 7,500 tokens.
const (
	claudeReplyRoom = 20_000
	claudeBuffer    = 13_000
	clientTurnRoom  = 8_192
	// claudeMinWindow is the least CLAUDE_CODE_AUTO_COMPACT_WINDOW takes.
	claudeMinWindow = 100_000
)

func claudePlan(p Plan, model string, env func(string) string) Plan {
	if env("DISABLE_AUTO_COMPACT") != "" || env("DISABLE_COMPACT") != "" {
		return p // it never compacts on its own
	}
	unknown := !strings.Contains(strings.ToLower(model), "claude")
	switch {
	case unknown && envInt(env, "CLAUDE_CODE_MAX_CONTEXT_TOKENS") > 0:
		p.Window, p.From = envInt(env, "CLAUDE_CODE_MAX_CONTEXT_TOKENS"), "CLAUDE_CODE_MAX_CONTEXT_TOKENS"
	case p.Window == 1_000_000 && env("CLAUDE_CODE_DISABLE_1M_CONTEXT") != "":
		p.Window, p.From = 200_000, "CLAUDE_CODE_DISABLE_1M_CONTEXT"
	}
	if w := envTokens(env, "CLAUDE_CODE_AUTO_COMPACT_WINDOW"); w > 0 {
		p.Window, p.From = min(p.Window, max(w, claudeMinWindow)), "CLAUDE_CODE_AUTO_COMPACT_WINDOW"
	}
	room := claudeReplyRoom
	if out := envInt(env, "CLAUDE_CODE_MAX_OUTPUT_TOKENS"); out > 0 {
		room = min(out, room)
	}
	effective := p.Window - room
	threshold := effective - claudeBuffer
	if pct, err := strconv.ParseFloat(strings.TrimSpace(env("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE")), 64); err == nil && pct > 0 && pct <= 100 {
		threshold = min(threshold, int(float64(effective)*pct/100))
	}
	p.Reserve = p.Window - threshold + clientTurnRoom
	return p
}

// Codex compacts once its count (the last response's total tokens plus
// the outputs since) reaches model_auto_compact_token_limit, at most 90 %
// of model_context_window, both from its config.toml ($CODEX_HOME, else
// ~/.codex).
func codexPlan(p Plan, model string, env func(string) string) Plan {
	settings := codexSettings(env)
	if w := settings["model_context_window"]; w > 0 {
		p.Window, p.From = w, "model_context_window"
	}
	threshold := p.Window * 9 / 10
	if l := settings["model_auto_compact_token_limit"]; l > 0 {
		threshold = min(threshold, l)
	}
	p.Reserve = p.Window - threshold + clientTurnRoom
	return p
}

// codexSettings reads the top-level integer settings of Codex's
// config.toml that decide its compaction.
func codexSettings(env func(string) string) map[string]int {
	dir := env("CODEX_HOME")
	if dir == "" {
		home := env("HOME")
		if home == "" {
			return nil
		}
		dir = filepath.Join(home, ".codex")
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.toml"))
	if err != nil {
		return nil
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			break // a table: top-level keys come first
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if k != "model_context_window" && k != "model_auto_compact_token_limit" {
			continue
		}
		v, _, _ = strings.Cut(v, "#")
		if n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(v), "_", "")); err == nil && n > 0 {
			out[k] = n
		}
	}
	return out
}

// opencode compacts once the last step's total tokens reach the model's
// limit.context less its output room, min(limit.output, 32,000), or, when
// the model has limit.input, limit.input less compaction.reserved (else
// min(20,000, the output room)); a model without limits never compacts.
// The proxy reads the limits from the file OPENCODE_CONFIG names; without
// it, it keeps the output room free in the model's window.
const opencodeOutputRoom = 32_000

func opencodePlan(p Plan, model string, env func(string) string) Plan {
	p.Reserve = opencodeOutputRoom + clientTurnRoom
	path := env("OPENCODE_CONFIG")
	if path == "" {
		return p
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return p
	}
	var cfg struct {
		Compaction struct {
			Reserved *int  `json:"reserved"`
			Auto     *bool `json:"auto"`
		} `json:"compaction"`
		Provider map[string]struct {
			Models map[string]struct {
				Limit struct {
					Context, Input, Output int
				} `json:"limit"`
			} `json:"models"`
		} `json:"provider"`
	}
	if json.Unmarshal(b, &cfg) != nil {
		return p
	}
	for _, prov := range cfg.Provider {
		m, ok := prov.Models[model]
		if !ok {
			continue
		}
		l := m.Limit
		if l.Context <= 0 || cfg.Compaction.Auto != nil && !*cfg.Compaction.Auto {
			p.Reserve = 0 // it never compacts on its own
			return p
		}
		out := opencodeOutputRoom
		if l.Output > 0 {
			out = min(l.Output, out)
		}
		p.Window, p.From = l.Context, "OPENCODE_CONFIG"
		threshold := l.Context - out
		if l.Input > 0 {
			reserved := min(20_000, out)
			if cfg.Compaction.Reserved != nil {
				reserved = *cfg.Compaction.Reserved
			}
			threshold = l.Input - reserved
		}
		p.Reserve = max(0, p.Window-threshold+clientTurnRoom)
		return p
	}
	return p
}
