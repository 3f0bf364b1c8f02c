package proxy

import (
	"net/http"
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

// modelWindow is the context window a client assumes for model.
func modelWindow(cl Client, model string) int {
	m := strings.ToLower(model)
	switch {
	case strings.HasSuffix(m, "[1m]"):
		return 1_000_000
	case strings.Contains(m, "claude") || strings.Contains(m, "opus") || strings.Contains(m, "sonnet") || strings.Contains(m, "haiku"):
		return 200_000
	case strings.HasPrefix(m, "gpt-5") || strings.HasPrefix(m, "gpt-6"):
		return 272_000
	}
	return DefaultWindow
}

// envInt is a positive integer setting, 0 when unset or not one.
func envInt(env func(string) string, name string) int {
	n, err := strconv.Atoi(strings.TrimSpace(env(name)))
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// Claude Code compacts once its count of the conversation reaches the
// effective window (the window less the reply's room, at most 20,000)
// less a 13,000-token buffer.
const (
	claudeReplyRoom = 20_000
	claudeBuffer    = 13_000
)

func claudePlan(p Plan, model string, env func(string) string) Plan {
	if w := envInt(env, "CLAUDE_CODE_AUTO_COMPACT_WINDOW"); w > 0 {
		p.Window, p.From = min(p.Window, w), "CLAUDE_CODE_AUTO_COMPACT_WINDOW"
	}
	effective := p.Window - claudeReplyRoom
	threshold := effective - claudeBuffer
	if pct := envInt(env, "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"); pct > 0 && pct <= 100 {
		threshold = min(threshold, effective*pct/100)
	}
	p.Reserve = p.Window - threshold
	return p
}

func codexPlan(p Plan, model string, env func(string) string) Plan {
	return p
}

func opencodePlan(p Plan, model string, env func(string) string) Plan {
	return p
}
