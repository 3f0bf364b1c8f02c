// Package wire knows what Pi's providers do with the thinking in a request,
// so the engine never folds a block the provider would reject or silently
// lose. It is pure: no I/O, no clock.
//
// The rules, per Pi 1.6's provider code (pi-ai/dist/api) and the providers'
// documentation:
//
//   - A thinking part reaches the provider only when it comes from the
//     request's own model (same provider, api and model id);
//     transformMessages drops the rest.
//   - Anthropic, Bedrock Claude and Gemini send a thinking part with its
//     signature as signed thinking, and without one as plain text (an
//     unsigned thought part for Gemini). A signature binds the exact text,
//     so a folded part is always sent unsigned (internal/core/apply).
//   - OpenAI Responses and chat-completions send signed reasoning as an
//     opaque item (reasoning item, reasoning_details) whose text never
//     reaches the model; such parts never fold (block.Foldable).
//   - Preserved-thinking Claude models (Preserved) also bind each thinking
//     block to its prefix: system, tools and every content block before it.
//     A fold anywhere before a block invalidates it; Pi marks these models
//     and sends block_binding drop_block, so the API drops the block instead
//     of rejecting the request.
package wire

import (
	"regexp"
	"strconv"
	"strings"
)

// Model is the model a request goes to, as the adapter reports it from
// Pi's ctx.model. The zero value means unknown (offline replays).
type Model struct {
	API      string `json:"api"`
	Provider string `json:"provider"`
	ID       string `json:"id"`
	// MidConvoEffort is compat.supportsMidConvoEffort: Pi's mark of an
	// Anthropic model with preserved thinking, for which it sends
	// thinking.block_binding.prefix_mismatch_behavior "drop_block".
	MidConvoEffort bool `json:"midConvoEffort,omitempty"`
}

// Known reports whether m names a model.
func (m Model) Known() bool { return m.ID != "" }

// CachesAtBreakpoints reports whether the provider serves its prompt cache
// only at the cache_control breakpoints a request marks, up to 20 blocks
// before one, rather than from any prefix a request shares with an earlier
// one (Anthropic's Messages API).
func (m Model) CachesAtBreakpoints() bool { return m.API == "anthropic-messages" }

// DropsInvalidThinking reports whether the provider drops reasoning that
// failed its prefix check instead of rejecting the request: Pi sends
// block_binding drop_block only for the Anthropic models it marks, and
// OpenAI removes such reasoning items. Anywhere else (an unmarked Claude,
// Bedrock, whose GovCloud regions Pi sends no block_binding to) a fold must
// leave no signed thinking after its change, or the request is a 400. An
// unknown model (an offline replay) sends nothing.
func DropsInvalidThinking(m Model) bool {
	switch m.API {
	case "anthropic-messages":
		return m.MidConvoEffort
	case "openai-responses", "azure-openai-responses", "openai-codex-responses", "":
		return true
	}
	return false
}

// preservedIDs are the model families Anthropic lists as running prefix
// checks on thinking blocks ("Prefix checks", supported models).
var preservedIDs = []string{"fable-5", "mythos-5", "opus-5-5", "sonnet-5-5", "haiku-5-5"}

// Preserved reports whether model binds thinking to its prefix: Pi's mark
// on an Anthropic model, or a Claude model id of a family that may run the
// prefix check (taken broadly: a false yes costs a fold that waits, a false
// no a rejected request); or an OpenAI model from GPT-6.2 on, which removes replayed reasoning items that
// follow an edit of earlier input (prefix_mismatch, as Pi's Responses
// provider notes).
func Preserved(m Model) bool {
	if m.API == "anthropic-messages" && m.MidConvoEffort {
		return true
	}
	switch m.API {
	case "anthropic-messages", "bedrock-converse-stream", "":
		return PreservedID(m.ID) || m.API == "" && preservedGPT(m.ID)
	case "openai-responses", "azure-openai-responses", "openai-codex-responses":
		return preservedGPT(m.ID)
	}
	return false
}

var gptRE = regexp.MustCompile(`gpt-(\d+)(?:\.(\d+))?`)

// preservedGPT reports whether id names GPT-6.2 or later.
func preservedGPT(id string) bool {
	sm := gptRE.FindStringSubmatch(strings.ToLower(id))
	if sm == nil {
		return false
	}
	ma, _ := strconv.Atoi(sm[1])
	mi, _ := strconv.Atoi(sm[2])
	return ma > 6 || ma == 6 && mi >= 2
}

// PreservedID reports whether a model id is of a preserved-thinking family.
func PreservedID(id string) bool {
	id = strings.ToLower(id)
	for _, f := range preservedIDs {
		if strings.Contains(id, f) {
			return true
		}
	}
	return false
}

// SameModel reports whether an assistant message of origin (api, provider,
// model) is from m, so that Pi sends its thinking to m at all.
func SameModel(m Model, api, provider, model string) bool {
	return m.API == api && m.Provider == provider && m.ID == model
}

var claudeRE = regexp.MustCompile(`(opus|sonnet|haiku)-(\d+)(?:[-.](\d+))?|claude-(\d+)(?:[-.](\d+))?-(opus|sonnet|haiku)`)

// StripsEarlierThinking reports whether model is a Claude that keeps only
// the last turn's thinking: "earlier Opus and Sonnet models, and all Haiku
// models through Claude Haiku 4.5" strip the thinking of turns before the
// latest user message that is not a tool result, which then costs nothing
// and is not shown to the model. Opus 4.5+, Sonnet 4.6+, Fable and Mythos
// keep every turn's thinking, billed as input. An unknown id is taken to
// keep it.
func StripsEarlierThinking(m Model) bool {
	switch m.API {
	case "anthropic-messages", "bedrock-converse-stream":
	default:
		return false
	}
	id := strings.ToLower(m.ID)
	if strings.Contains(id, "fable") || strings.Contains(id, "mythos") {
		return false
	}
	sm := claudeRE.FindStringSubmatch(id)
	if sm == nil {
		return false
	}
	family, major, minor := sm[1], sm[2], sm[3]
	if family == "" {
		family, major, minor = sm[6], sm[4], sm[5]
	}
	v := version(major, minor)
	switch family {
	case "opus":
		return v < 405
	case "sonnet":
		return v < 406
	case "haiku":
		return v < 500
	}
	return false
}

// version turns "4", "5" into 405; a minor part that is a date (claude-
// sonnet-4-20250514) counts as 0.
func version(major, minor string) int {
	ma, _ := strconv.Atoi(major)
	mi, _ := strconv.Atoi(minor)
	if len(minor) > 2 {
		mi = 0
	}
	return ma*100 + mi
}
