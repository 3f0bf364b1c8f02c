// Package codec translates a model provider's request body into the
// engine's message model and writes the engine's substitutions back into
// the body, for the proxy.
//
// The engine reads Pi's AgentMessage JSON (see package block). Decode builds
// that view of a body's conversation: one Pi message per conversation unit,
// in order, each tool result anchored by the provider's own tool-call id
// ("r:<id>"), the only durable id a provider request carries besides an
// Anthropic assistant message's first tool_use id, which anchors its
// thinking blocks. Everything else gets a positional id, so it never
// folds: user and assistant text, system and developer messages, redacted
// thinking, and OpenAI reasoning items (opaque: their text never reaches
// the model, so folding them saves nothing and would break them).
//
// Apply replaces the value of a folded tool result's output with the digest,
// as a JSON string, and a folded Anthropic thinking block with a text block
// holding its digest (unsigned, as Pi sends folded thinking: a signature
// binds the exact text), and copies every other byte of the body unchanged:
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
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/contextfold/contextfold/internal/core/apply"
	"github.com/contextfold/contextfold/internal/core/rawjson"
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
	// Tools says the body declares at least one tool: a request without
	// (a title or summary request) is not one of the conversation's turns.
	Tools bool
	// CacheKey is the body's prompt_cache_key (Responses), if any.
	CacheKey string
	// DropBlock says the body asks the provider to drop thinking that fails
	// its prefix check instead of rejecting the request (Messages:
	// thinking.block_binding.prefix_mismatch_behavior "drop_block").
	DropBlock bool

	body []byte
	// spans[i] is where message i's replaceable output sits in body:
	// [start, end) of the JSON value; start < 0 when there is none.
	spans [][2]int
	// parts[i], when set, is where each content block of assistant
	// message i sits in body ([start, end) of the block object), for the
	// thinking blocks that may fold; start < 0 where a block may not.
	parts [][][2]int
	// built is the model the assistant messages were built with: they
	// carry it, so the engine knows whose thinking they hold.
	built string
	// conv is the offset of the conversation array in body; ends[k] is
	// where its item k ends, msgs[k] how many messages items 0..k made,
	// and open[k] whether an assistant message was still being gathered
	// after item k (Responses), so decoding cannot resume there.
	conv int
	ends []int
	msgs []int
	open []bool
	// noteAfter[k] is the decoder's noteAfterResults after item k.
	noteAfter []bool
	names     *callNames
	// named is one more than the index of the last item that named a tool
	// call (0: none).
	named int
	// large are the values of its members (not the conversation) of
	// largeValue bytes or more that are objects, arrays or strings.
	large []largeMember
	// shadow, while decoding, is how many messages of the previous request
	// the arrays hold (shared): see addParts.
	shadow int
	// room is Messages to its capacity; extended is set by the one later
	// request that appends to this one's arrays in place.
	room     [][]byte
	extended atomic.Bool
	// common is how many leading bytes body shares with the previous
	// request's, when the caller knew (else -1).
	common int
	// bps are the body's cache breakpoints (Messages), in order.
	bps []breakpoint
	// thinkingEnd is the offset of the closing brace of the body's
	// thinking object (Messages) when thinking is on and the client set
	// no block_binding of its own; 0 otherwise.
	thinkingEnd int
	// convLen is the length of the conversation array's value.
	convLen int
}

// breakpoint is where one cache_control member sits in a body: its name at
// key, its value at [vs, ve).
type breakpoint struct{ key, vs, ve int }

// SameMessages returns how many leading messages r has byte for byte the
// same as prev's. When r's decoding extended prev's arrays in place, or
// both extend the same request's, that is all they have in common, known
// without reading them: a position of such arrays is written once, and a
// request that differs from them below their end copies them first
// (addParts, own).
func (r *Request) SameMessages(prev *Request) int {
	n := min(len(r.Messages), len(prev.Messages))
	if n > 0 && &r.Messages[0] == &prev.Messages[0] {
		return n
	}
	k := 0
	for k < n && bytes.Equal(r.Messages[k], prev.Messages[k]) {
		k++
	}
	return k
}

// ErrNotConversation reports a body without the conversation array its API
// requires; the proxy forwards such a request unchanged.
var ErrNotConversation = errors.New("codec: body has no conversation")

// Decode reads body as a request of api. Bodies that are not JSON objects
// or lack their conversation array are errors; anything inside the array
// that it does not know is kept as an unknown message (it never folds).
func Decode(api API, body []byte) (*Request, error) { return DecodeAfter(api, body, nil) }

// DecodeAfter is Decode for the request that follows prev in the same
// conversation (prev may be nil): the items of its conversation array that
// are byte for byte prev's are not decoded again. A client resends its
// whole conversation every request, so this is most of the body.
func DecodeAfter(api API, body []byte, prev *Request) (*Request, error) {
	return DecodeAfterPrefix(api, body, prev, -1)
}

// DecodeAfterPrefix is DecodeAfter for a caller that already knows how many
// leading bytes body shares with prev's body (CommonPrefix); common < 0:
// not known.
func DecodeAfterPrefix(api API, body []byte, prev *Request, common int) (*Request, error) {
	switch api {
	case Messages, Responses, Chat:
	default:
		return nil, fmt.Errorf("codec: unknown api %q", api)
	}
	r := &Request{API: api, body: body, conv: -1, common: common}
	key := "messages"
	if api == Responses {
		key = "input"
	}
	i := skip(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, fmt.Errorf("codec: %s body: not a JSON object", api)
	}
	i = skip(body, i+1)
	convs := 0
	for first := true; ; first = false {
		if i < len(body) && body[i] == '}' {
			i++
			break
		}
		if !first {
			if i >= len(body) || body[i] != ',' {
				return nil, fmt.Errorf("codec: %s body: want , or } at offset %d", api, i)
			}
			i = skip(body, i+1)
		}
		if i >= len(body) || body[i] != '"' {
			return nil, fmt.Errorf("codec: %s body: want a member name at offset %d", api, i)
		}
		ke, err := rawjson.ValueEnd(body, i)
		if err != nil {
			return nil, fmt.Errorf("codec: %s body: %w", api, err)
		}
		name, _ := rawjson.Unquote(body[i:ke])
		i = skip(body, ke)
		if i >= len(body) || body[i] != ':' {
			return nil, fmt.Errorf("codec: %s body: want : at offset %d", api, i)
		}
		vs := skip(body, i+1)
		var ve int
		if name == key {
			convs++
			if convs > 1 {
				return nil, fmt.Errorf("%w: %q appears twice", ErrNotConversation, key)
			}
			ve, err = r.conversation(body, vs, prev)
			r.convLen = ve - vs
		} else {
			ve, err = r.valueEnd(body, vs, name, prev)
			if err == nil {
				r.member(name, body[vs:ve], vs)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("codec: %s body: %w", api, err)
		}
		i = skip(body, ve)
	}
	if skip(body, i) != len(body) {
		return nil, fmt.Errorf("codec: %s body: data after the object", api)
	}
	if convs == 0 {
		return nil, fmt.Errorf("%w: no %q", ErrNotConversation, key)
	}
	if r.built != r.Model {
		// "model" came after the conversation, naming another model than
		// the one its assistant messages were built for: build them again.
		return decodeFor(api, body, r.Model)
	}
	if api == Messages {
		r.findBreakpoints(prev)
	}
	return r, nil
}

// largeValue is the size from which a member's value is remembered: the
// next request most likely repeats it (a client's tools and system prompt
// come after the conversation, 10 to 40 KB of them), and then finds its
// end by comparing bytes instead of parsing them.
const largeValue = 512

// largeMember is a member's value in a request's body.
type largeMember struct {
	name  string
	value []byte
}

// valueEnd returns where the value at vs of member name ends. A value prev
// had for that member, repeated here byte for byte, ends where it ends: an
// object, array or string ends at its own closing byte, whatever follows
// (a number or literal might go on, so those are not remembered).
func (r *Request) valueEnd(body []byte, vs int, name string, prev *Request) (int, error) {
	if prev != nil {
		for _, m := range prev.large {
			if m.name == name && bytes.HasPrefix(body[vs:], m.value) {
				ve := vs + len(m.value)
				r.large = append(r.large, largeMember{name, body[vs:ve]})
				return ve, nil
			}
		}
	}
	ve, err := rawjson.ValueEnd(body, vs)
	if err == nil && ve-vs >= largeValue && (body[vs] == '{' || body[vs] == '[' || body[vs] == '"') {
		r.large = append(r.large, largeMember{name, body[vs:ve]})
	}
	return ve, err
}

// decodeFor decodes body whole, building its assistant messages for model.
func decodeFor(api API, body []byte, model string) (*Request, error) {
	r, err := DecodeAfter(api, body, &Request{built: model})
	if err == nil && r.built != r.Model {
		return nil, fmt.Errorf("codec: %s body: the model changed while decoding", api)
	}
	return r, err
}

// skip returns the offset of the first non-space byte at or after i.
func skip(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// member notes a top-level member other than the conversation, whose
// value v starts at vs in the body.
func (r *Request) member(name string, v []byte, vs int) {
	switch name {
	case "model":
		if rawjson.IsString(v) {
			r.Model, _ = rawjson.Unquote(v)
		}
	case "previous_response_id":
		r.Continued = r.API == Responses && !rawjson.IsNull(v)
	case "tools":
		r.Tools = len(v) > 1 && v[0] == '[' && v[skip(v, 1)] != ']'
	case "prompt_cache_key":
		if rawjson.IsString(v) {
			r.CacheKey, _ = rawjson.Unquote(v)
		}
	case "thinking":
		if r.API == Messages {
			tm, err := rawjson.Object(v)
			bind := getRaw(tm, "block_binding")
			bm, _ := rawjson.Object(bind)
			r.DropBlock = str(bm, "prefix_mismatch_behavior") == "drop_block"
			r.thinkingEnd = 0
			if t := str(tm, "type"); err == nil && bind == nil && unique(tm) && (t == "enabled" || t == "adaptive") {
				r.thinkingEnd = vs + len(v) - 1 // its closing brace
			}
		}
	}
}

// conversation decodes the conversation value at vs and returns its end.
// Items before the first byte that differs from prev's body are taken
// from prev.
func (r *Request) conversation(body []byte, vs int, prev *Request) (int, error) {
	if vs < len(body) && body[vs] == '"' && r.API == Responses {
		// A string input is one user message.
		ve, err := rawjson.ValueEnd(body, vs)
		if err != nil {
			return 0, err
		}
		s, _ := rawjson.Unquote(body[vs:ve])
		r.add(userMsg(s), -1, -1)
		return ve, nil
	}
	if vs >= len(body) || body[vs] != '[' {
		return 0, fmt.Errorf("%w: not an array", ErrNotConversation)
	}
	r.conv = vs
	r.built = r.Model // known here when "model" comes first, as the clients send it
	if r.built == "" && prev != nil {
		r.built = prev.built
	}
	d := decoder{r: r, names: &callNames{}}
	i := vs + 1
	k := r.reusable(body, vs, prev, r.built)
	if k > 0 {
		n := prev.msgs[k-1]
		if prev.extended.CompareAndSwap(false, true) {
			// This request appends to prev's arrays in place. Only the one
			// request that set extended writes past prev's end, and no
			// request reads its arrays past its own end. The messages of
			// prev's items it decodes again, or repeats (Claude Code moves
			// its cache breakpoint off the last one every request: see
			// breakpointLeft), are taken as they are where they are the
			// same (addParts); at the first that is not, the arrays become
			// this request's own.
			r.Messages, r.spans, r.parts = prev.room[:n], prev.spans[:n], prev.parts[:n]
			r.shadow = len(prev.room)
			if k == len(prev.ends) {
				r.ends, r.msgs, r.open, r.noteAfter = prev.ends, prev.msgs, prev.open, prev.noteAfter
			}
		} else {
			// Copied: another request extends prev.
			r.Messages = append(make([][]byte, 0, n+8), prev.room[:n]...)
			r.spans = append(make([][2]int, 0, n+8), prev.spans[:n]...)
			r.parts = append(make([][][2]int, 0, n+8), prev.parts[:n]...)
		}
		if r.ends == nil {
			// Prev's items after k end elsewhere in this body.
			r.ends = append(make([]int, 0, k+8), prev.ends[:k]...)
			r.msgs = append(make([]int, 0, k+8), prev.msgs[:k]...)
			r.open = append(make([]bool, 0, k+8), prev.open[:k]...)
			r.noteAfter = append(make([]bool, 0, k+8), prev.noteAfter[:k]...)
		}
		d.names = prev.names.over()
		r.named = prev.named
		d.noteAfterResults = prev.noteAfter[k-1]
		i = r.ends[k-1]
	}
	for {
		i = skip(body, i)
		if i >= len(body) {
			return 0, errors.New("unexpected end of input in the conversation")
		}
		if body[i] == ']' {
			break
		}
		if len(r.ends) > 0 {
			if body[i] != ',' {
				return 0, fmt.Errorf("want , or ] at offset %d", i)
			}
			i = skip(body, i+1)
		}
		end, err := rawjson.ValueEnd(body, i)
		if err != nil {
			return 0, err
		}
		switch j := len(r.ends); {
		case r.API == Messages && k > 0 && j == k && j == len(prev.ends)-1 && breakpointLeft(prev, j, body, i, end):
			// Only the item right after those reused: one decoded after it
			// may depend on items decoded again (the tool names they give).
			r.repeat(prev, j)
			d.noteAfterResults = prev.noteAfter[j]
		case r.API == Messages:
			d.message(body[i:end], i)
		case r.API == Responses:
			d.item(body[i:end], i)
		case r.API == Chat:
			d.chat(body[i:end], i)
		}
		if d.named {
			r.named, d.named = len(r.ends)+1, false
		}
		r.ends = append(r.ends, end)
		r.msgs = append(r.msgs, len(r.Messages))
		r.open = append(r.open, len(d.parts) > 0)
		r.noteAfter = append(r.noteAfter, d.noteAfterResults)
		i = end
	}
	d.flush()
	if len(r.Messages) < r.shadow {
		// Fewer messages than prev: what follows them is prev's, where a
		// request extending this one would write.
		r.own()
	}
	r.shadow = 0
	r.names = d.names
	// Messages is capped at its length, so that an append to it by a
	// caller copies instead of writing where a later request may extend
	// these arrays.
	r.room = r.Messages
	r.Messages = r.Messages[:len(r.Messages):len(r.Messages)]
	return i + 1, nil
}

// breakpointLeft reports whether body[s:e], item k of this body's
// conversation, is prev's item k with only its cache breakpoint taken off:
// Claude Code moves its last breakpoint to the newest block every request,
// so the previous request's last item comes back without it. Called for
// the item right after the k items reused from prev (so it is decoded
// after the same items), such an item decodes to prev's messages and need
// not be decoded again (a long tool output is most of a request's
// decoding): it is a user message, the breakpoint was the last member of
// one of its tool result blocks (the decoder never reads a tool result's
// cache_control), and all that the item's messages place in the body lies
// before it.
func breakpointLeft(prev *Request, k int, body []byte, s, e int) bool {
	const key = `,"cache_control":`
	if prev.API != Messages || k == 0 || k >= len(prev.ends) || prev.open[k] {
		return false
	}
	if i := skip(prev.body, prev.ends[k-1]); i >= len(prev.body) || prev.body[i] != ',' || skip(prev.body, i+1) != s {
		return false // prev's item k does not start where this one does
	}
	p, n := prev.body[s:prev.ends[k]], body[s:e]
	d := len(p) - len(n)
	if d <= len(key) {
		return false
	}
	c := CommonLen(p, n)
	if !bytes.HasPrefix(p[c:], []byte(key)) || !bytes.Equal(p[c+d:], n[c:]) {
		return false
	}
	for m := prev.msgs[k-1]; m < prev.msgs[k]; m++ {
		if prev.spans[m][1] > s+c {
			return false
		}
		for _, sp := range prev.parts[m] {
			if sp[1] > s+c {
				return false
			}
		}
	}
	ms, err := rawjson.ObjectOfValid(p)
	if err != nil || str(ms, "role") != "user" {
		return false
	}
	cm, ok := only(ms, "content")
	if !ok {
		return false
	}
	blocks, starts, err := rawjson.ArraySpansOfValid(cm.Value)
	if err != nil {
		return false
	}
	for j, b := range blocks {
		bs := cm.Start + starts[j]
		if c < bs || c >= bs+len(b) {
			continue
		}
		bm, err := rawjson.ObjectOfValid(b)
		if err != nil || len(bm) == 0 || str(bm, "type") != "tool_result" {
			return false
		}
		last := bm[len(bm)-1]
		return last.Key == "cache_control" && bs+last.Start == c+len(key) && bs+last.End == c+d
	}
	return false
}

// repeat adds the messages prev's item k made, as breakpointLeft found
// this request's item k would make them again.
func (r *Request) repeat(prev *Request, k int) {
	for m := prev.msgs[k-1]; m < prev.msgs[k]; m++ {
		r.addParts(prev.Messages[m], prev.spans[m][0], prev.spans[m][1], prev.parts[m])
	}
	breakpointsLeft.Add(1)
}

// breakpointsLeft counts the items breakpointLeft spared decoding, for
// tests.
var breakpointsLeft atomic.Int64

// reusable returns how many leading conversation items of prev body's
// shares byte for byte, and at the same offset: those decode the same,
// when their assistant messages are built for the same model.
func (r *Request) reusable(body []byte, vs int, prev *Request, model string) int {
	if prev == nil || prev.conv != vs || len(prev.ends) == 0 || prev.built != model {
		return 0
	}
	p := r.common
	if p < 0 || p > len(body) || p > len(prev.body) {
		p = CommonLen(body, prev.body)
	}
	k := sort.SearchInts(prev.ends, p+1) // items ending at or before p
	for k > 0 && prev.open[k-1] {
		k--
	}
	if prev.named > k {
		// An item decoded again named a call: prev's tool names include
		// it, and a result after it may cite the call under its old name.
		return 0
	}
	return k
}

// CommonLen is the length of the longest common prefix of a and b.
func CommonLen(a, b []byte) int {
	n := min(len(a), len(b))
	p := 0
	// Compared in large blocks first.
	for p+4096 <= n && bytes.Equal(a[p:p+4096], b[p:p+4096]) {
		p += 4096
	}
	for p < n && a[p] == b[p] {
		p++
	}
	return p
}

// Body is the body r was decoded from.
func (r *Request) Body() []byte { return r.body }

// FirstResult returns the index and the tool-call id of the conversation's
// first tool result with an id, or -1.
func (r *Request) FirstResult() (int, string) {
	for i, m := range r.Messages {
		if !bytes.HasPrefix(m, toolResultPrefix) {
			continue
		}
		if end, err := rawjson.ValueEnd(m, len(toolResultPrefix)); err == nil {
			if id, _ := rawjson.Unquote(m[len(toolResultPrefix):end]); id != "" {
				return i, id
			}
		}
	}
	return -1, ""
}

// IsAssistant reports whether msg, one of Request.Messages, is an
// assistant message.
func IsAssistant(msg []byte) bool { return bytes.HasPrefix(msg, assistantPrefix) }

// IsUser reports whether msg, one of Request.Messages, is a user message.
func IsUser(msg []byte) bool { return bytes.HasPrefix(msg, userPrefix) }

var (
	toolResultPrefix = []byte(`{"role":"toolResult","toolCallId":`)
	assistantPrefix  = []byte(`{"role":"assistant",`)
	userPrefix       = []byte(`{"role":"user",`)
)

// Apply returns the body with subs applied: each names a tool-result
// message (Part -1) or an assistant message's thinking block (Part ≥ 0) and
// its digest. It fails, changing nothing, when a substitution names
// anything else.
func (r *Request) Apply(subs []apply.Subst) ([]byte, error) {
	segs, n, err := r.Segments(subs)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, n)
	for _, s := range segs {
		out = append(out, s...)
	}
	return out, nil
}

// Segments is Apply without the copy: the new body is the concatenation of
// segs (n bytes), which alias the body Decode read.
func (r *Request) Segments(subs []apply.Subst) (segs [][]byte, n int, err error) {
	edits := make([]Edit, len(subs))
	for i, s := range subs {
		edits[i] = Edit{Msg: s.Msg, Part: s.Part, Value: EditValue(s.Part, s.Text)}
	}
	return r.Edits(edits)
}

// Edit puts Value in place of message Msg's tool output (Part -1) or of its
// content block Part (a thinking block).
type Edit struct {
	Msg, Part int
	Value     []byte
}

// EditValue is the JSON that carries a digest in place of a tool output
// (part -1: the output's value becomes a string) or of a thinking block
// (a text block: a signature binds the exact thinking, so folded thinking
// goes out unsigned, as text, as Pi sends it).
func EditValue(part int, digest string) []byte {
	if part < 0 {
		return rawjson.Quote(nil, digest)
	}
	return closeObj(rawjson.Quote([]byte(`{"type":"text","text":`), digest))
}

// Edits is Segments for values already encoded (EditValue): a caller that
// sends the same digests on every request encodes each once.
func (r *Request) Edits(edits []Edit) (segs [][]byte, n int, err error) {
	spans, err := r.Spans(edits)
	if err != nil {
		return nil, 0, err
	}
	segs, n = Splice(r.body, spans)
	return segs, n, nil
}

// Span is an edit placed in a body: Value replaces body[Start:End].
type Span struct {
	Start, End int
	Value      []byte
}

// Spans places edits in r's body, sorted by position; it fails for an edit
// with no replaceable value and for overlapping edits.
func (r *Request) Spans(edits []Edit) ([]Span, error) {
	spans := make([]Span, 0, len(edits))
	for _, e := range edits {
		sp, ok := r.span(e.Msg, e.Part)
		if !ok {
			return nil, fmt.Errorf("codec: substitution %d/%d has no replaceable value", e.Msg, e.Part)
		}
		spans = append(spans, Span{sp[0], sp[1], e.Value})
	}
	if !sort.SliceIsSorted(spans, func(i, j int) bool { return spans[i].Start < spans[j].Start }) {
		sort.Slice(spans, func(i, j int) bool { return spans[i].Start < spans[j].Start })
	}
	for i := 1; i < len(spans); i++ {
		if spans[i].Start < spans[i-1].End {
			return nil, errors.New("codec: overlapping substitutions")
		}
	}
	return spans, nil
}

// Splice is body with sorted, disjoint spans applied, as segments to
// concatenate (aliasing body and the spans' values), and their length.
func Splice(body []byte, spans []Span) (segs [][]byte, n int) {
	segs = make([][]byte, 0, 2*len(spans)+1)
	at := 0
	for _, e := range spans {
		segs = append(segs, body[at:e.Start], e.Value)
		n += e.Start - at + len(e.Value)
		at = e.End
	}
	segs = append(segs, body[at:])
	return segs, n + len(body) - at
}

// span is where the value an edit of message msg, part part replaces sits.
func (r *Request) span(msg, part int) ([2]int, bool) {
	if msg < 0 || msg >= len(r.spans) {
		return [2]int{}, false
	}
	if part == -1 {
		return r.spans[msg], r.spans[msg][0] >= 0
	}
	if part < 0 || part >= len(r.parts[msg]) {
		return [2]int{}, false
	}
	sp := r.parts[msg][part]
	return sp, sp[0] >= 0
}

func (r *Request) add(msg []byte, start, end int) { r.addParts(msg, start, end, nil) }

// addParts appends a message whose output is at [start, end) in the body
// and whose thinking blocks are at parts. Below shadow, the arrays are the
// previous request's: its message there is taken as it is when this one
// is the same, else the arrays become this request's own first.
func (r *Request) addParts(msg []byte, start, end int, parts [][2]int) {
	if i := len(r.Messages); i < r.shadow {
		m, sp, ps := r.Messages[:i+1], r.spans[:i+1], r.parts[:i+1]
		if bytes.Equal(m[i], msg) && sp[i] == [2]int{start, end} && slices.Equal(ps[i], parts) {
			r.Messages, r.spans, r.parts = m, sp, ps
			return
		}
		r.own()
	}
	r.Messages = append(r.Messages, msg)
	r.spans = append(r.spans, [2]int{start, end})
	r.parts = append(r.parts, parts)
}

// own gives the request arrays of its own, copies of the previous
// request's it shared.
func (r *Request) own() {
	n := len(r.Messages)
	r.Messages = append(make([][]byte, 0, n+8), r.Messages...)
	r.spans = append(make([][2]int, 0, n+8), r.spans...)
	r.parts = append(make([][][2]int, 0, n+8), r.parts...)
	r.shadow = 0
}

// decoder carries what one body's decoding needs across items.
type decoder struct {
	r *Request
	// names maps tool-call ids to tool names, for the results.
	names *callNames
	// parts is the pending assistant message of Responses items.
	parts [][]byte
	// named says the item being decoded named a tool call (setName).
	named bool
	// noteAfterResults says the last message was a user message carrying
	// tool results (Messages): text sent after it, in it or in a user
	// message of its own, is a note within the tool-use cycle, not a new
	// user turn (the provider still takes the assistant message before
	// the results as the one being answered).
	noteAfterResults bool
}

// setName notes that call id is to tool name.
func (d *decoder) setName(id, name string) {
	d.names.set(id, name)
	d.named = true
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

// textParts joins the text of a content value (valid JSON): a string, or an array of
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
	parts, err := rawjson.ArrayOfValid(raw)
	if err != nil {
		return "", true
	}
	var b strings.Builder
	for i, p := range parts {
		pm, err := rawjson.ObjectOfValid(p)
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

// noteMsg is user text inside a tool-use cycle (see
// decoder.noteAfterResults): a message of its own that is not a user turn.
func noteMsg(text string) []byte {
	return closeObj(rawjson.Quote([]byte(`{"role":"custom","customType":"note","content":`), text))
}

func systemMsg(text string) []byte {
	return closeObj(rawjson.Quote([]byte(`{"role":"system","content":`), text))
}

func textPart(text string) []byte {
	return closeObj(rawjson.Quote([]byte(`{"type":"text","text":`), text))
}

// signedThinkingPart is an Anthropic thinking block: with its signature
// marked (not copied: the engine needs to know only that it is signed).
func signedThinkingPart(text string, signed bool) []byte {
	b := rawjson.Quote([]byte(`{"type":"thinking","thinking":`), text)
	if signed {
		b = append(b, `,"thinkingSignature":"signed"`...)
	}
	return closeObj(b)
}

// redactedThinkingPart is an Anthropic redacted_thinking block: signed
// (bound like any thinking) and never folded.
func redactedThinkingPart() []byte {
	return []byte(`{"type":"thinking","thinking":"","thinkingSignature":"redacted","redacted":true}`)
}

// opaqueThinkingPart is reasoning the model never reads back as text (a
// Responses reasoning item, chat reasoning_content): kept for its size;
// redacted, it never folds.
func opaqueThinkingPart(text string, signed bool) []byte {
	b := rawjson.Quote([]byte(`{"type":"thinking","thinking":`), text)
	if signed {
		b = append(b, `,"thinkingSignature":"opaque"`...)
	}
	return append(b, `,"redacted":true}`...)
}

// toolCallPart: args is a JSON value (an object, or the raw string when the
// provider's argument string is not JSON).
func toolCallPart(id, name string, args []byte) []byte {
	b := rawjson.Quote([]byte(`{"type":"toolCall","id":`), id)
	b = rawjson.Quote(append(b, `,"name":`...), name)
	b = append(append(b, `,"arguments":`...), args...)
	return append(b, '}')
}

// assistantMsg is an assistant message of api's provider and model, its
// parts anchored to anchor when it has one (block ids a:<anchor>:p<j>).
func assistantMsg(api API, parts [][]byte, model, anchor string) []byte {
	b := []byte(`{"role":"assistant","content":[`)
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, p...)
	}
	b = rawjson.Quote(append(b, `],"api":`...), string(api))
	b = rawjson.Quote(append(b, `,"provider":`...), Provider(api))
	b = rawjson.Quote(append(b, `,"model":`...), model)
	if anchor != "" {
		b = rawjson.Quote(append(b, `,"responseId":`...), anchor)
	}
	return append(b, `,"stopReason":"toolUse"}`...)
}

// Provider names the provider of api's requests, as the engine's model
// (wire.Model) names it.
func Provider(api API) string {
	if api == Messages {
		return "anthropic"
	}
	return "openai"
}

func toolResultMsg(callID, name, text string, isError, opaque bool) []byte {
	// Sized for the text quoted: growing the message while quoting a long
	// output allocated and cleared it several times over.
	b := toolResultHead(callID, name, rawjson.QuotedLen(text))
	return toolResultTail(rawjson.Quote(b, text), isError, opaque)
}

// toolResultLit is toolResultMsg for an output that is the JSON string
// literal lit, valid UTF-8: lit goes in as it is, unquoted and quoted
// again by nobody. The engine reads the same text from it (rawjson.Unquote)
// as from the literal Quote would make of that text.
func toolResultLit(callID, name string, lit []byte, isError, opaque bool) []byte {
	return toolResultTail(append(toolResultHead(callID, name, len(lit)), lit...), isError, opaque)
}

// toolResultHead is a tool result message up to its text, with room for
// textRoom bytes more and the tail.
func toolResultHead(callID, name string, textRoom int) []byte {
	if name == "" {
		name = "tool"
	}
	// 122 bytes of the message are its fixed parts, the opaque part and
	// the quotes of the id and the name included.
	b := make([]byte, 0, 128+len(callID)+len(name)+textRoom)
	b = rawjson.Quote(append(b, `{"role":"toolResult","toolCallId":`...), callID)
	b = rawjson.Quote(append(b, `,"toolName":`...), name)
	return append(b, `,"content":[{"type":"text","text":`...)
}

// toolResultTail ends a tool result message after its text.
func toolResultTail(b []byte, isError, opaque bool) []byte {
	b = append(b, '}')
	if opaque {
		b = append(b, `,{"type":"opaque"}`...)
	}
	b = append(b, `],"isError":`...)
	if isError {
		return append(b, "true}"...)
	}
	return append(b, "false}"...)
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

// callNames maps tool-call ids to tool names: the calls one request's
// decoding added, over those of the request it was decoded after. A
// request's names are never written once it is decoded, so the next
// request adds its own on top instead of copying them all.
type callNames struct {
	own   map[string]string
	base  *callNames
	depth int
}

// maxNamesDepth bounds the chain a lookup walks (a request looks up only
// the calls of its new tool results).
const maxNamesDepth = 16

// over returns a new, empty layer over n (nil: none). A chain that
// reached maxNamesDepth is shortened the way a log-structured merge tree
// is: its newest half is merged into one layer, together with each older
// layer no more than twice the size merged so far. Layers then grow
// toward the base, each more than twice the size of all above it when
// formed, so a name is copied a logarithmic number of times, and the whole
// map is copied only when it has about doubled since the last time, not
// every maxNamesDepth requests (about 0.1 ms at 1,000 calls). Nothing is
// written to an existing layer: an earlier request's names stay its own.
func (n *callNames) over() *callNames {
	if n == nil {
		return &callNames{}
	}
	if n.depth < maxNamesDepth {
		return &callNames{base: n, depth: n.depth + 1}
	}
	var merged []*callNames // newest first
	size := 0
	m := n
	for m != nil && (len(merged) < maxNamesDepth/2 || len(m.own) <= 2*size) {
		merged = append(merged, m)
		size += len(m.own)
		m = m.base
	}
	flat := make(map[string]string, size)
	for _, l := range slices.Backward(merged) { // oldest first: a newer name wins
		maps.Copy(flat, l.own)
	}
	layer := &callNames{own: flat, base: m}
	if m != nil {
		layer.depth = m.depth + 1
	}
	return &callNames{base: layer, depth: layer.depth + 1}
}

func (n *callNames) get(id string) string {
	for m := n; m != nil; m = m.base {
		if name, ok := m.own[id]; ok {
			return name
		}
	}
	return ""
}

func (n *callNames) set(id, name string) {
	if n.own == nil {
		n.own = map[string]string{}
	}
	n.own[id] = name
}

// cacheControlKey starts a cache breakpoint's member. Inside a JSON string
// its quotes would be escaped, so in a valid body the bytes occur only as
// a member name.
var cacheControlKey = []byte(`"cache_control":`)

// MaxBreakpoints is how many cache_control breakpoints Anthropic accepts in
// one request.
const MaxBreakpoints = 4

// Breakpoints returns how many cache_control breakpoints an Anthropic
// Messages body carries, and the value of its last one (nil when none).
func (r *Request) Breakpoints() (n int, last []byte) {
	if len(r.bps) == 0 {
		return 0, nil
	}
	b := r.bps[len(r.bps)-1]
	return len(r.bps), r.body[b.vs:b.ve]
}

// findBreakpoints notes the body's breakpoints. Those prev's body has
// where the two bodies are the same are taken as they are: a client
// resends its conversation with a little more each request, so only the
// new end is scanned.
func (r *Request) findBreakpoints(prev *Request) {
	b := r.body
	from := 0
	if prev != nil && prev.API == Messages {
		common := r.common
		if common < 0 || common > min(len(b), len(prev.body)) {
			common = CommonLen(b, prev.body)
		}
		// A name that ends before common is at the same offset in prev's
		// body; one that ends after it starts at most a name's length back.
		from = max(0, common-len(cacheControlKey)+1)
		for _, p := range prev.bps {
			if p.ve <= common {
				r.bps = append(r.bps, p)
				continue
			}
			if p.key+len(cacheControlKey) <= common {
				from = min(from, p.key) // its name is here, its value may not be
			}
			break // values do not overlap: every later one ends after common too
		}
		if n := len(r.bps); n > 0 {
			from = max(from, r.bps[n-1].ve)
		}
	}
	for from < len(b) {
		i := bytes.Index(b[from:], cacheControlKey)
		if i < 0 {
			return
		}
		k := from + i
		vs := skip(b, k+len(cacheControlKey))
		ve, err := rawjson.ValueEnd(b, vs)
		if err != nil {
			return
		}
		r.bps = append(r.bps, breakpoint{k, vs, ve})
		from = ve
	}
}

// BindingBeta is the beta an Anthropic request needs to carry
// thinking.block_binding.
const BindingBeta = "thinking-binding-controls-2026-08-01"

// bindValue is what BindSpan inserts into the thinking object.
var bindValue = []byte(`,"block_binding":{"prefix_mismatch_behavior":"drop_block"}`)

// BindSpan asks the provider to drop, not reject, thinking whose prefix
// changed: an insertion of block_binding {"prefix_mismatch_behavior":
// "drop_block"} into the body's thinking object, which then needs the
// BindingBeta header. ok is false where the body has no thinking on, or
// already says what it wants (a block_binding of its own).
func (r *Request) BindSpan() (sp Span, ok bool) {
	if r.API != Messages || r.thinkingEnd <= 0 {
		return Span{}, false
	}
	return Span{Start: r.thinkingEnd, End: r.thinkingEnd, Value: bindValue}, true
}

// Binds reports whether spans hold a BindSpan: the body they make needs
// the BindingBeta header.
func Binds(spans []Span) bool {
	for i := len(spans) - 1; i >= 0; i-- {
		if s := spans[i]; s.Start == s.End && bytes.Equal(s.Value, bindValue) {
			return true
		}
	}
	return false
}

// Overhead is how many bytes of the body are not its conversation: the
// system prompt, the tool declarations and the request's settings, which
// count against the context window as much as the messages do.
func (r *Request) Overhead() int { return len(r.body) - r.convLen }

// MarkSpan places a cache breakpoint with value v on message msg's tool
// result block (an Anthropic tool_result, whose output Spans replaces):
// an insertion before the block's closing brace. It fails for any other
// message, and for a block that already carries a breakpoint after its
// output.
func (r *Request) MarkSpan(msg int, v []byte) (Span, error) {
	sp, ok := r.span(msg, -1)
	if r.API != Messages || !ok {
		return Span{}, fmt.Errorf("codec: message %d has no tool result to mark", msg)
	}
	b := r.body
	i := skip(b, sp[1])
	for i < len(b) && b[i] == ',' {
		ks := skip(b, i+1)
		ke, err := rawjson.ValueEnd(b, ks)
		if err != nil || !rawjson.IsString(b[ks:ke]) {
			return Span{}, fmt.Errorf("codec: message %d: its tool result does not end where expected", msg)
		}
		if string(b[ks:ke]) == `"cache_control"` {
			return Span{}, fmt.Errorf("codec: message %d: its tool result already carries a breakpoint", msg)
		}
		c := skip(b, ke)
		if c >= len(b) || b[c] != ':' {
			return Span{}, fmt.Errorf("codec: message %d: its tool result does not end where expected", msg)
		}
		ve, err := rawjson.ValueEnd(b, skip(b, c+1))
		if err != nil {
			return Span{}, fmt.Errorf("codec: message %d: its tool result does not end where expected", msg)
		}
		i = skip(b, ve)
	}
	if i >= len(b) || b[i] != '}' {
		return Span{}, fmt.Errorf("codec: message %d: its tool result does not end where expected", msg)
	}
	return Span{Start: i, End: i, Value: append(append([]byte{','}, cacheControlKey...), v...)}, nil
}
