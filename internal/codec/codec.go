// Package codec translates a model provider's request body into the
// engine's message model and writes the engine's substitutions back into
// the body, for the proxy.
//
// The engine reads Pi's AgentMessage JSON (see package block). Decode builds
// that view of a body's conversation: one Pi message per conversation unit,
// in order, each tool result anchored by the provider's own tool-call id
// ("r:<id>"), the only durable id a provider request carries. Everything
// else gets a positional id, so it never folds: user and assistant text,
// system and developer messages, and all thinking (signed thinking and
// reasoning items are bound to their bytes; the proxy never alters them).
//
// Apply replaces the value of a folded tool result's output with the digest,
// as a JSON string, and copies every other byte of the body unchanged:
// cache_control markers, ids, fields this package does not know. A tool
// result whose output it cannot replace without losing something (images,
// tool references, a cache_control inside it, a duplicated key) is marked
// opaque and never folds.
//
// The three wire formats, as the real clients send them (see the samples
// under testdata/):
//
//   - Messages (Anthropic, Claude Code): messages[].content blocks; each
//     tool_result block of a user message becomes a toolResult, the rest of
//     the user message one user message after them. A role:"system" message
//     inside messages (Claude Code) is a system message.
//   - Responses (OpenAI, Codex): input[] items; consecutive model items
//     (reasoning, assistant message, function_call, custom_tool_call, …)
//     form one assistant message; function_call_output and
//     custom_tool_call_output items are tool results.
//   - Chat Completions (OpenAI-compatible, opencode): messages[] with
//     role tool for results and tool_calls on the assistant.
package codec

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/contextfold/contextfold/internal/apply"
	"github.com/contextfold/contextfold/internal/rawjson"
)

// API is a provider wire format, named as Pi names its apis.
type API string

// The wire formats the proxy reads.
const (
	Messages  API = "anthropic-messages"
	Responses API = "openai-responses"
	Chat      API = "openai-completions"
)

// Request is the engine's view of one request body.
type Request struct {
	API API
	// Model is the body's "model".
	Model string
	// Messages is the conversation as Pi AgentMessage JSON, in order.
	Messages [][]byte
	// Continued says the conversation continues one the provider holds
	// (Responses previous_response_id): the body carries only its tail.
	Continued bool

	body []byte
	// spans[i] is where message i's replaceable output sits in body:
	// [start, end) of the JSON value; start < 0 when there is none.
	spans [][2]int
}

// ErrNotConversation reports a body without the conversation array its API
// requires; the proxy forwards such a request unchanged.
var ErrNotConversation = errors.New("codec: body has no conversation")

// Decode reads body as a request of api. Bodies that are not JSON objects
// or lack their conversation array are errors; anything inside the array
// that it does not know is kept as an unknown message (it never folds).
func Decode(api API, body []byte) (*Request, error) {
	top, err := rawjson.Object(body)
	if err != nil {
		return nil, fmt.Errorf("codec: %s body: %w", api, err)
	}
	r := &Request{API: api, body: body}
	if m, ok := rawjson.Get(top, "model"); ok && rawjson.IsString(m) {
		r.Model, _ = rawjson.Unquote(m)
	}
	key := "messages"
	if api == Responses {
		key = "input"
		if p, ok := rawjson.Get(top, "previous_response_id"); ok && !rawjson.IsNull(p) {
			r.Continued = true
		}
	}
	conv, ok := only(top, key)
	if !ok {
		return nil, fmt.Errorf("%w: no single %q array", ErrNotConversation, key)
	}
	items, starts, err := rawjson.ArraySpans(conv.Value)
	if err != nil {
		if api == Responses && rawjson.IsString(conv.Value) {
			// A string input is one user message.
			s, _ := rawjson.Unquote(conv.Value)
			r.add(userMsg(s), -1, -1)
			return r, nil
		}
		return nil, fmt.Errorf("%w: %q is not an array", ErrNotConversation, key)
	}
	d := decoder{r: r, names: map[string]string{}}
	for i, it := range items {
		off := conv.Start + starts[i]
		switch api {
		case Messages:
			d.message(it, off)
		case Responses:
			d.item(it, off)
		case Chat:
			d.chat(it, off)
		default:
			return nil, fmt.Errorf("codec: unknown api %q", api)
		}
	}
	d.flush()
	return r, nil
}

// Apply returns the body with subs applied: each names a tool-result
// message (Part -1) and its digest. It fails, changing nothing, when a
// substitution names anything else.
func (r *Request) Apply(subs []apply.Subst) ([]byte, error) {
	type edit struct {
		start, end int
		val        []byte
	}
	edits := make([]edit, 0, len(subs))
	for _, s := range subs {
		if s.Msg < 0 || s.Msg >= len(r.spans) || s.Part != -1 || r.spans[s.Msg][0] < 0 {
			return nil, fmt.Errorf("codec: substitution %d/%d has no replaceable output", s.Msg, s.Part)
		}
		sp := r.spans[s.Msg]
		edits = append(edits, edit{sp[0], sp[1], rawjson.Quote(nil, s.Text)})
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].start < edits[j].start })
	size := len(r.body)
	for i, e := range edits {
		if i > 0 && e.start < edits[i-1].end {
			return nil, errors.New("codec: overlapping substitutions")
		}
		size += len(e.val) - (e.end - e.start)
	}
	out := make([]byte, 0, size)
	at := 0
	for _, e := range edits {
		out = append(out, r.body[at:e.start]...)
		out = append(out, e.val...)
		at = e.end
	}
	return append(out, r.body[at:]...), nil
}

// Body is the body Decode read.
func (r *Request) Body() []byte { return r.body }

func (r *Request) add(msg []byte, start, end int) {
	r.Messages = append(r.Messages, msg)
	r.spans = append(r.spans, [2]int{start, end})
}

// decoder carries what one body's decoding needs across items.
type decoder struct {
	r *Request
	// names maps tool-call ids to tool names, for the results.
	names map[string]string
	// parts is the pending assistant message of Responses items.
	parts [][]byte
}

// only returns the member key when it occurs exactly once: with duplicates,
// parsers disagree on which one counts, so nothing in it is replaced.
func only(ms []rawjson.Member, key string) (rawjson.Member, bool) {
	var found rawjson.Member
	n := 0
	for _, m := range ms {
		if m.Key == key {
			found = m
			n++
		}
	}
	return found, n == 1
}

func str(ms []rawjson.Member, key string) string {
	v, ok := rawjson.Get(ms, key)
	if !ok || !rawjson.IsString(v) {
		return ""
	}
	s, _ := rawjson.Unquote(v)
	return s
}

// textParts joins the text of a content value: a string, or an array of
// parts whose text types are in textTypes. opaque is set when a part is of
// another type or carries cache_control (replacing the value would drop it).
func textParts(raw []byte, textTypes ...string) (text string, opaque bool) {
	if rawjson.IsString(raw) {
		s, _ := rawjson.Unquote(raw)
		return s, false
	}
	if rawjson.IsNull(raw) {
		return "", false
	}
	parts, err := rawjson.Array(raw)
	if err != nil {
		return "", true
	}
	var b strings.Builder
	for i, p := range parts {
		pm, err := rawjson.Object(p)
		if err != nil {
			opaque = true
			continue
		}
		if _, ok := rawjson.Get(pm, "cache_control"); ok {
			opaque = true
		}
		typ := str(pm, "type")
		known := false
		for _, t := range textTypes {
			known = known || typ == t
		}
		if !known {
			opaque = true
			continue
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(str(pm, "text"))
	}
	return b.String(), opaque
}

// The Pi messages Decode builds. Only tool results carry an anchor.

func closeObj(b []byte) []byte { return append(b, '}') }

func userMsg(text string) []byte {
	return closeObj(rawjson.Quote([]byte(`{"role":"user","content":`), text))
}

func systemMsg(text string) []byte {
	return closeObj(rawjson.Quote([]byte(`{"role":"system","content":`), text))
}

func textPart(text string) []byte {
	return closeObj(rawjson.Quote([]byte(`{"type":"text","text":`), text))
}

// thinkingPart is kept for its size; redacted, it never folds.
func thinkingPart(text string) []byte {
	return append(rawjson.Quote([]byte(`{"type":"thinking","thinking":`), text), `,"redacted":true}`...)
}

// toolCallPart: args is a JSON value (an object, or the raw string when the
// provider's argument string is not JSON).
func toolCallPart(id, name string, args []byte) []byte {
	b := rawjson.Quote([]byte(`{"type":"toolCall","id":`), id)
	b = rawjson.Quote(append(b, `,"name":`...), name)
	b = append(append(b, `,"arguments":`...), args...)
	return append(b, '}')
}

func assistantMsg(api API, parts [][]byte) []byte {
	b := []byte(`{"role":"assistant","content":[`)
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, p...)
	}
	b = rawjson.Quote(append(b, `],"api":`...), string(api))
	return append(b, `,"stopReason":"toolUse"}`...)
}

func toolResultMsg(callID, name, text string, isError, opaque bool) []byte {
	if name == "" {
		name = "tool"
	}
	b := rawjson.Quote([]byte(`{"role":"toolResult","toolCallId":`), callID)
	b = rawjson.Quote(append(b, `,"toolName":`...), name)
	b = rawjson.Quote(append(b, `,"content":[{"type":"text","text":`...), text)
	b = append(b, '}')
	if opaque {
		b = append(b, `,{"type":"opaque"}`...)
	}
	b = append(b, `],"isError":`...)
	if isError {
		b = append(b, "true}"...)
	} else {
		b = append(b, "false}"...)
	}
	return b
}

func unknownMsg(raw []byte) []byte {
	return closeObj(rawjson.Quote([]byte(`{"role":"unknown","content":`), string(raw)))
}

// argsValue is a provider's arguments string as a JSON value: the object it
// encodes, or the string itself.
func argsValue(s string) []byte {
	if b := []byte(s); rawjson.Valid(b) {
		if _, err := rawjson.Object(b); err == nil {
			return rawjson.Trim(b)
		}
	}
	return rawjson.Quote(nil, s)
}
