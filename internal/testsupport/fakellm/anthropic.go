package fakellm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The strict Anthropic Messages rules. What the real API enforces, as its
// documentation states it (extended thinking, "Troubleshooting thinking",
// "Preserved thinking" and its "Prefix checks", prompt caching), and what
// this fake assumed where the documentation is silent:
//
//  1. Signatures. A thinking block's signature is minted over the model id
//     and the exact thinking text. A replayed block whose text or model does
//     not match its signature is a 400:
//     "messages.{i}.content.{j}: Invalid `signature` in `thinking` block".
//     A redacted_thinking block's data must be data this server minted.
//  2. The current tool-use cycle. With manual thinking ("enabled"), when the
//     request ends with tool results, the assistant message they answer must
//     start with a thinking (or redacted_thinking) block, else a 400
//     (adaptive thinking relaxes this). Its thinking is bound by rule 1 in
//     any mode. Assumed: thinking blocks of earlier assistant messages may
//     be omitted, or (once their signature is removed) sent as text; the
//     docs call passing them back within a tool-use turn "required", but the
//     errors they quote name only the latest assistant message.
//  3. Preserved thinking (PreservedClaude, or any model id containing
//     "fable-5"): "The checked prefix has three parts: the top-level system
//     prompt, the set of tools, every message before the block. Earlier
//     thinking blocks aren't in the prefix, but each thinking block records
//     which thinking block came before it." So a signature also binds the
//     block to that prefix (thinking blocks left out, cache_control and
//     output_config ignored, a string content equal to one text block; the
//     fake also binds the earlier non-thinking blocks of the block's own
//     message) and to the thinking block shown before it. A block fails its
//     check when its prefix changed, or when the thinking block shown before
//     it is not the one it recorded (a block removed from the middle, or put
//     back); removing blocks from the start is allowed. Without
//     thinking.block_binding.prefix_mismatch_behavior "drop_block" a failure
//     is a 400 naming the first failing block; with it (which needs the beta
//     "thinking-binding-controls-2026-08-01", else "Extra inputs are not
//     permitted") the block is dropped, not billed, and listed in the
//     response's input_transformations, on the message of message_start, as
//     {"type":"thinking_dropped","path":"messages.i.content.j","reason":"prefix_binding_mismatch"}.
//     Every later block then fails too (its prefix holds the same change, or
//     its predecessor was dropped); a block minted after the change records
//     the new prefix and the last block shown, and passes.
//     Assumed: the final-cycle rule (2) is judged on the request as sent.
//  3b. Last-turn-only models (ids containing haiku-4-5 or sonnet-4-5, as
//     "all Haiku models through Claude Haiku 4.5" and earlier Sonnets):
//     the thinking of assistant turns before the latest user message that
//     is not tool results is stripped: not shown, not billed.
//  4. Prompt caching. Tools, then system, then messages form the prefix.
//     At most four cache_control breakpoints (more is a 400). At each
//     breakpoint the longest prefix already written ending at that block or
//     at one of the 20 blocks before it is read; each breakpoint's prefix of
//     at least Options.MinCacheTokens tokens (default 1024) is written, for
//     five minutes from its last use. Usage: cache_read_input_tokens is the
//     read prefix, cache_creation_input_tokens the rest up to the last
//     breakpoint, input_tokens what follows it. A block costs len/4 tokens
//     of its canonical JSON.

// The Anthropic rule violations, as the real API words them.
const (
	antInvalidSignature = "messages.%d.content.%d: Invalid `signature` in `thinking` block"
	antInvalidRedacted  = "messages.%d.content.%d: Invalid `data` in `redacted_thinking` block"
	antFinalThinking    = "messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. " +
		"When `thinking` is enabled, a final `assistant` message must start with a thinking block " +
		"(preceeding the lastmost set of `tool_use` and `tool_result` blocks). " +
		"We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`."
	antPrefixMismatch = "messages.%d.content.%d: Invalid `signature` in `thinking` block. The block is bound to a different conversation. " +
		"Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\"."
	antNoBindingBeta      = "thinking.adaptive.block_binding: Extra inputs are not permitted"
	antTooManyBreakpoints = "A maximum of 4 blocks with cache_control may be provided. Found %d."
	antOrphanToolUse      = "messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. " +
		"Each `tool_use` block must have a corresponding `tool_result` block in the next message."
	antUnknownToolResult = "messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. " +
		"Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
)

// PreservedClaude is the model id the fake treats as a preserved-thinking
// Claude (thinking blocks bound to their prefix).
const PreservedClaude = "claude-fable-5-1-fake"

// BindingBeta is the beta Pi sends with block_binding.
const BindingBeta = "thinking-binding-controls-2026-08-01"

const (
	cacheLookback  = 20
	maxBreakpoints = 4
	cacheTTL       = 5 * time.Minute
	// DefaultMinCacheTokens is the minimum cacheable prompt length of
	// Claude's Sonnet and Opus models.
	DefaultMinCacheTokens = 1024
)

// stripsEarlierThinking reports whether model keeps only the last turn's
// thinking ("all Haiku models through Claude Haiku 4.5", earlier Opus and
// Sonnet): the fake's last-turn-only models are those ids.
func stripsEarlierThinking(model string) bool {
	return strings.Contains(model, "haiku-4-5") || strings.Contains(model, "sonnet-4-5")
}

// preservedModel reports whether model binds thinking to its prefix.
func preservedModel(model string) bool {
	return model == PreservedClaude || strings.Contains(model, "fable-5")
}

// antSeg is one cacheable unit of a request: a tool, a system block, a
// message's header (role and every field but content), or a content block.
type antSeg struct {
	canon      []byte
	tokens     int
	breakpoint bool
	msg, block int // message and content index; -1 for tools, system, headers
	dropped    bool
	thinking   bool     // a thinking or redacted_thinking block
	hash       [32]byte // the chained hash of every segment up to this one
}

// antState is what the strict rules derived from one request; minting and
// usage reuse it.
type antState struct {
	thinking  bool
	manual    bool // thinking.type "enabled"
	preserved bool
	dropBlock bool
	segs      []antSeg
	// bind is the binding hash after the request (every segment but
	// thinking blocks): the prefix a response's first block is bound to;
	// shown is the textMAC of the request's last thinking block shown.
	bind  [32]byte
	shown string
}

type antBody struct {
	Model    string            `json:"model"`
	System   json.RawMessage   `json:"system"`
	Tools    []json.RawMessage `json:"tools"`
	Messages []json.RawMessage `json:"messages"`
	Thinking *struct {
		Type         string `json:"type"`
		BlockBinding *struct {
			PrefixMismatchBehavior string `json:"prefix_mismatch_behavior"`
		} `json:"block_binding"`
	} `json:"thinking"`
	Betas []string `json:"betas"`
}

type antBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	Thinking     string          `json:"thinking"`
	Signature    string          `json:"signature"`
	Data         string          `json:"data"`
	ID           string          `json:"id"`
	ToolUseID    string          `json:"tool_use_id"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// canonical re-encodes JSON with sorted keys and without cache_control
// markers, so equal content hashes equal however it was spelled.
func canonical(raw []byte) []byte { return reencode(raw, stripCacheControl) }

func stripCacheControl(v any) any {
	switch t := v.(type) {
	case map[string]any:
		delete(t, "cache_control")
		for k, x := range t {
			t[k] = stripCacheControl(x)
		}
	case []any:
		for i, x := range t {
			t[i] = stripCacheControl(x)
		}
	}
	return v
}

func segTokens(canon []byte) int { return max(len(canon)/4, 1) }

// contentBlocks returns a message's content as blocks: a string content is
// one text block.
func contentBlocks(raw json.RawMessage) []json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		json.Unmarshal(raw, &s)
		b, _ := json.Marshal(map[string]any{"type": "text", "text": s})
		return []json.RawMessage{b}
	}
	var out []json.RawMessage
	json.Unmarshal(raw, &out)
	return out
}

// antThinkingSig mints a thinking signature: a MAC of model and text,
// followed (for a preserved model) by the MAC of the block shown before it
// and a MAC binding both to its prefix.
func antThinkingSig(model, text string, preserved bool, bind [32]byte, pred string) string {
	textMAC := antTextMAC(model, text)
	if !preserved {
		return "sig1." + textMAC
	}
	return "sig2." + textMAC + "." + pred + "." + sign([]byte("anthropic prefix"), []byte(textMAC), []byte(pred), bind[:])
}

func antTextMAC(model, text string) string {
	return sign([]byte("anthropic thinking"), []byte(model), []byte(text))
}

// antSig is a parsed signature.
type antSig struct {
	textOK  bool
	bound   bool   // a preserved model's signature
	pred    string // textMAC of the block shown before it at mint time
	bindMAC string
	textMAC string
	malform bool
}

func parseAntSig(sig, model, text string) antSig {
	out := antSig{textMAC: antTextMAC(model, text)}
	switch {
	case strings.HasPrefix(sig, "sig1."):
		out.textOK = strings.TrimPrefix(sig, "sig1.") == out.textMAC
	case strings.HasPrefix(sig, "sig2."):
		parts := strings.Split(strings.TrimPrefix(sig, "sig2."), ".")
		if len(parts) != 3 {
			return out
		}
		out.textOK, out.bound, out.pred, out.bindMAC = parts[0] == out.textMAC, true, parts[1], parts[2]
	}
	return out
}

// prefixOK checks a bound signature against the prefix and the block shown
// before it (shown is "" when none was).
func (g antSig) prefixOK(bind [32]byte, shown string) bool {
	if !g.bound {
		return true
	}
	if shown != "" && g.pred != shown {
		return false // a gap, or a block put back
	}
	return g.bindMAC == sign([]byte("anthropic prefix"), []byte(g.textMAC), []byte(g.pred), bind[:])
}

// antRedactedData mints the opaque payload of a redacted_thinking block.
func antRedactedData(model, text string) string {
	return base64.StdEncoding.EncodeToString([]byte(text)) + "." + sign([]byte("anthropic redacted"), []byte(model), []byte(text))
}

func antRedactedOK(model, data string) bool {
	enc, mac, ok := strings.Cut(data, ".")
	if !ok {
		return false
	}
	text, err := base64.StdEncoding.DecodeString(enc)
	return err == nil && mac == sign([]byte("anthropic redacted"), []byte(model), text)
}

// RedactedPrefix marks a Reply.Thinking entry the fake sends as a
// redacted_thinking block (its opaque data minted from the rest).
const RedactedPrefix = "REDACTED:"

func (s *Server) checkAnthropic(req *Request, rec *Recorded) *APIError {
	var b antBody
	if err := json.Unmarshal(req.Body, &b); err != nil {
		return &APIError{Status: http.StatusBadRequest, Message: "invalid JSON body: " + err.Error()}
	}
	st := &antState{preserved: preservedModel(b.Model)}
	if b.Thinking != nil && (b.Thinking.Type == "enabled" || b.Thinking.Type == "adaptive") {
		st.thinking = true
		st.manual = b.Thinking.Type == "enabled"
		if bb := b.Thinking.BlockBinding; bb != nil {
			betas := strings.Join(append(b.Betas, req.Header.Values("anthropic-beta")...), ",")
			if !strings.Contains(betas, BindingBeta) {
				return &APIError{Status: http.StatusBadRequest, Message: antNoBindingBeta}
			}
			st.dropBlock = bb.PrefixMismatchBehavior == "drop_block"
		}
	}
	var h, bind [32]byte
	shown := ""
	breakpoints := 0
	add := func(raw []byte, msg, blk int) *antSeg {
		var cc struct {
			CacheControl json.RawMessage `json:"cache_control"`
		}
		json.Unmarshal(raw, &cc)
		c := canonical(raw)
		h = chain(h, c)
		var t struct {
			Type string `json:"type"`
		}
		json.Unmarshal(raw, &t)
		isThinking := t.Type == "thinking" || t.Type == "redacted_thinking"
		if !isThinking {
			bind = chain(bind, canonical(withoutKey(raw, "output_config")))
		}
		seg := antSeg{canon: c, tokens: segTokens(c), msg: msg, block: blk, hash: h, thinking: isThinking,
			breakpoint: len(cc.CacheControl) > 0 && string(cc.CacheControl) != "null"}
		if seg.breakpoint {
			breakpoints++
		}
		st.segs = append(st.segs, seg)
		return &st.segs[len(st.segs)-1]
	}
	for _, t := range b.Tools {
		add(t, -1, -1)
	}
	for _, sb := range contentBlocks(b.System) {
		add(sb, -1, -1)
	}
	type pending struct{ ids []string }
	var open pending // tool_use ids of the previous assistant message
	lastAssistant := -1
	for i, raw := range b.Messages {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return &APIError{Status: http.StatusBadRequest, Message: fmt.Sprintf("messages.%d: invalid message", i)}
		}
		var role string
		json.Unmarshal(m["role"], &role)
		blocks := contentBlocks(m["content"])
		head := map[string]json.RawMessage{}
		for k, v := range m {
			if k != "content" {
				head[k] = v
			}
		}
		hb, _ := json.Marshal(head)
		add(hb, i, -1)
		answered := map[string]bool{}
		for j, raw := range blocks {
			var bl antBlock
			json.Unmarshal(raw, &bl)
			prefix := bind // the prefix this block is bound to
			seg := add(raw, i, j)
			switch bl.Type {
			case "thinking":
				if role != "assistant" {
					continue
				}
				g := parseAntSig(bl.Signature, b.Model, bl.Thinking)
				if !g.textOK {
					return &APIError{Status: http.StatusBadRequest, Message: fmt.Sprintf(antInvalidSignature, i, j)}
				}
				if st.preserved && st.thinking && !g.prefixOK(prefix, shown) {
					if !st.dropBlock {
						return &APIError{Status: http.StatusBadRequest, Message: fmt.Sprintf(antPrefixMismatch, i, j)}
					}
					seg.dropped = true
					rec.Dropped = append(rec.Dropped, Transformation{Type: "thinking_dropped",
						Path: fmt.Sprintf("messages.%d.content.%d", i, j), Reason: "prefix_binding_mismatch"})
					continue
				}
				shown = g.textMAC
			case "redacted_thinking":
				if role == "assistant" && !antRedactedOK(b.Model, bl.Data) {
					return &APIError{Status: http.StatusBadRequest, Message: fmt.Sprintf(antInvalidRedacted, i, j)}
				}
			case "tool_result":
				if role == "user" {
					found := false
					for _, id := range open.ids {
						found = found || id == bl.ToolUseID
					}
					if !found {
						return &APIError{Status: http.StatusBadRequest, Message: fmt.Sprintf(antUnknownToolResult, i, j, bl.ToolUseID)}
					}
					answered[bl.ToolUseID] = true
				}
			}
		}
		if len(open.ids) > 0 {
			var missing []string
			for _, id := range open.ids {
				if !answered[id] {
					missing = append(missing, id)
				}
			}
			if len(missing) > 0 {
				return &APIError{Status: http.StatusBadRequest, Message: fmt.Sprintf(antOrphanToolUse, i-1, strings.Join(missing, ", "))}
			}
		}
		open = pending{}
		if role == "assistant" {
			lastAssistant = i
			for _, raw := range blocks {
				var bl antBlock
				json.Unmarshal(raw, &bl)
				if bl.Type == "tool_use" {
					open.ids = append(open.ids, bl.ID)
				}
			}
		}
	}
	if breakpoints > maxBreakpoints {
		return &APIError{Status: http.StatusBadRequest, Message: fmt.Sprintf(antTooManyBreakpoints, breakpoints)}
	}
	// Rule 2: the current tool-use cycle keeps its thinking.
	if st.manual && lastAssistant >= 0 && lastAssistant == len(b.Messages)-2 {
		var lm struct {
			Content json.RawMessage `json:"content"`
		}
		json.Unmarshal(b.Messages[len(b.Messages)-1], &lm)
		last := contentBlocks(lm.Content)
		answersTools := false
		for _, raw := range last {
			var bl antBlock
			json.Unmarshal(raw, &bl)
			answersTools = answersTools || bl.Type == "tool_result"
		}
		var am struct {
			Content json.RawMessage `json:"content"`
		}
		json.Unmarshal(b.Messages[lastAssistant], &am)
		ab := contentBlocks(am.Content)
		if answersTools && len(ab) > 0 {
			var first antBlock
			json.Unmarshal(ab[0], &first)
			if first.Type != "thinking" && first.Type != "redacted_thinking" {
				return &APIError{Status: http.StatusBadRequest, Message: fmt.Sprintf(antFinalThinking, lastAssistant, first.Type)}
			}
		}
	}
	// A last-turn-only model strips the thinking of turns before the latest
	// user message that is not tool results: not shown, not billed.
	if stripsEarlierThinking(b.Model) {
		lastTurn := -1
		for i, raw := range b.Messages {
			var m struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			}
			json.Unmarshal(raw, &m)
			if m.Role != "user" {
				continue
			}
			results := false
			for _, bl := range contentBlocks(m.Content) {
				var x antBlock
				json.Unmarshal(bl, &x)
				results = results || x.Type == "tool_result"
			}
			if !results {
				lastTurn = i
			}
		}
		for k := range st.segs {
			if seg := &st.segs[k]; seg.thinking && seg.msg >= 0 && seg.msg < lastTurn {
				seg.dropped = true // stripped: costs nothing (not an input_transformation)
			}
		}
	}
	st.bind, st.shown = bind, shown
	rec.ant = st
	return nil
}

// mintAnthropic signs the reply's thinking blocks. A preserved model binds
// each to the request as sent plus the reply's earlier blocks, exactly as
// Pi will replay them: the assistant message header Pi sends is
// {"role":"assistant"}.
func (s *Server) mintAnthropic(req *Request, rec *Recorded) {
	st := rec.ant
	if st == nil {
		return
	}
	if !st.thinking {
		rec.Reply.Thinking = nil // a model without thinking enabled does not think
	}
	bind := chain(st.bind, canonical([]byte(`{"role":"assistant"}`)))
	shown := st.shown
	rec.Signatures = rec.Signatures[:0]
	for _, t := range rec.Reply.Thinking {
		var sig string
		if text, ok := strings.CutPrefix(t, RedactedPrefix); ok {
			sig = antRedactedData(req.Model, text)
		} else {
			sig = antThinkingSig(req.Model, t, st.preserved, bind, shown)
			shown = antTextMAC(req.Model, t)
		}
		rec.Signatures = append(rec.Signatures, sig)
	}
}

// withoutKey returns a JSON object without one top-level member.
func withoutKey(raw []byte, key string) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	if _, ok := m[key]; !ok {
		return raw
	}
	delete(m, key)
	out, _ := json.Marshal(m)
	return out
}

// cacheEntry is one written prefix.
type cacheEntry struct {
	tokens  int
	expires time.Time
}

// anthropicUsage runs the prompt-cache simulation of rule 4 for a request
// the rules accepted, and returns its usage.
func (s *Server) anthropicUsage(req *Request, rec *Recorded) Usage {
	st := rec.ant
	out := 0
	for _, t := range rec.Reply.Thinking {
		out += len(t)
	}
	out += len(rec.Reply.Text)
	for _, tc := range rec.Reply.ToolCalls {
		out += len(tc.Name) + len(tc.Arguments)
	}
	u := Usage{Completion: max(out/4, 1)}
	if st == nil {
		return u
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil {
		s.cache = map[[32]byte]cacheEntry{}
	}
	minTokens := s.opts.MinCacheTokens
	if minTokens <= 0 {
		minTokens = DefaultMinCacheTokens
	}
	cum := make([]int, len(st.segs)) // tokens up to and including segment k
	total := 0
	for k, seg := range st.segs {
		if !seg.dropped {
			total += seg.tokens
		}
		cum[k] = total
	}
	u.Prompt = total
	read, lastBP := 0, -1
	for k, seg := range st.segs {
		if !seg.breakpoint {
			continue
		}
		lastBP = k
		for back := k; back >= 0 && back >= k-cacheLookback; back-- {
			if e, ok := s.cache[st.segs[back].hash]; ok && now.Before(e.expires) {
				if cum[back] > read {
					read = cum[back]
				}
				e.expires = now.Add(cacheTTL)
				s.cache[st.segs[back].hash] = e
				break
			}
		}
	}
	written := 0
	for k, seg := range st.segs {
		if seg.breakpoint && cum[k] >= minTokens {
			s.cache[seg.hash] = cacheEntry{tokens: cum[k], expires: now.Add(cacheTTL)}
			written = cum[k]
		}
	}
	u.Cached = read
	if lastBP >= 0 && written > read {
		u.CacheWrite = written - read
	}
	return u
}

func (s *Server) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}
