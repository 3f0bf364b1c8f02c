package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// encoder writes one answer in a protocol's wire format.
type encoder struct {
	chunk   int
	model   string
	seq     int
	created int64
}

// OpenAI chunk shapes. Field order is the order of the JSON keys.
type (
	oaChunk struct {
		ID      string     `json:"id"`
		Object  string     `json:"object"`
		Created int64      `json:"created"`
		Model   string     `json:"model"`
		Choices []oaChoice `json:"choices"`
		Usage   *oaUsage   `json:"usage,omitempty"`
	}
	oaChoice struct {
		Index        int     `json:"index"`
		Delta        oaDelta `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	}
	oaDelta struct {
		Role             string            `json:"role,omitempty"`
		Content          *string           `json:"content,omitempty"`
		ReasoningContent *string           `json:"reasoning_content,omitempty"`
		ToolCalls        []oaToolCallDelta `json:"tool_calls,omitempty"`
		nullContent      bool
	}
	oaToolCallDelta struct {
		Index    int           `json:"index"`
		ID       string        `json:"id,omitempty"`
		Type     string        `json:"type,omitempty"`
		Function oaFunctionArg `json:"function"`
	}
	oaFunctionArg struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
	oaUsage struct {
		PromptTokens        int             `json:"prompt_tokens"`
		CompletionTokens    int             `json:"completion_tokens"`
		TotalTokens         int             `json:"total_tokens"`
		PromptTokensDetails oaPromptDetails `json:"prompt_tokens_details"`
	}
	oaPromptDetails struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"`
	}
)

// MarshalJSON writes "content":null for a role chunk that opens a tool call
// without text, as real servers do.
func (d oaDelta) MarshalJSON() ([]byte, error) {
	type plain oaDelta
	if !d.nullContent {
		return json.Marshal(plain(d))
	}
	return json.Marshal(struct {
		Role             string            `json:"role,omitempty"`
		Content          *string           `json:"content"`
		ReasoningContent *string           `json:"reasoning_content,omitempty"`
		ToolCalls        []oaToolCallDelta `json:"tool_calls,omitempty"`
	}{d.Role, nil, d.ReasoningContent, d.ToolCalls})
}

// chatReasoning is a reply's reasoning on the Chat Completions wire, which
// has no signatures and one reasoning_content string per message: the
// Thinking entries joined by a blank line, redacted ones left out.
func chatReasoning(r Reply) string {
	var parts []string
	for _, t := range r.Thinking {
		if t != "" && !strings.HasPrefix(t, RedactedPrefix) {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n\n")
}

func openAIUsage(u Usage) *oaUsage {
	return &oaUsage{
		PromptTokens:        u.Prompt,
		CompletionTokens:    u.Completion,
		TotalTokens:         u.Prompt + u.Completion,
		PromptTokensDetails: oaPromptDetails{CachedTokens: u.Cached, CacheWriteTokens: u.CacheWrite},
	}
}

// pieces splits s into pieces of at most n bytes without splitting a UTF-8
// sequence. An empty s gives no pieces.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && k > 0 && !utf8.RuneStart(s[k]) {
			k--
		}
		if k == 0 {
			_, k = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

// sseWriter writes server-sent events and flushes after each one.
type sseWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sseWriter{w: w, f: f}
}

// event writes "event: <name>\n" when name is set, then "data: <json>\n\n".
func (s *sseWriter) event(name string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fakellm: marshal event: %v", err)) // our own types; cannot fail
	}
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	if s.f != nil {
		s.f.Flush()
	}
}

func (s *sseWriter) raw(line string) {
	fmt.Fprint(s.w, line)
	if s.f != nil {
		s.f.Flush()
	}
}

// openAIStream writes a chat.completion.chunk stream (see package doc). A
// reply's Thinking comes first, as reasoning_content deltas (the DeepSeek
// field, which the AI SDK's openai-compatible provider reads), the first
// one carrying the role.
func (e encoder) openAIStream(w http.ResponseWriter, r Reply, u Usage) {
	out := newSSE(w)
	chunk := func(d oaDelta, finish *string) {
		out.event("", oaChunk{ID: e.id(), Object: "chat.completion.chunk", Created: e.created, Model: e.model,
			Choices: []oaChoice{{Index: 0, Delta: d, FinishReason: finish}}})
	}
	role := "assistant" // until a chunk has carried it
	for _, p := range pieces(chatReasoning(r), e.chunk) {
		chunk(oaDelta{Role: role, ReasoningContent: &p, nullContent: role != ""}, nil)
		role = ""
	}
	if r.Text != "" || len(r.ToolCalls) == 0 {
		empty := ""
		chunk(oaDelta{Role: role, Content: &empty}, nil)
		role = ""
		for _, p := range pieces(r.Text, e.chunk) {
			chunk(oaDelta{Content: &p}, nil)
		}
	}
	for i, tc := range r.ToolCalls {
		head := oaDelta{ToolCalls: []oaToolCallDelta{{Index: i, ID: tc.ID, Type: "function",
			Function: oaFunctionArg{Name: tc.Name}}}}
		if i == 0 && role != "" {
			head.Role, head.nullContent = role, true
		}
		chunk(head, nil)
		for _, p := range pieces(string(tc.Arguments), e.chunk) {
			chunk(oaDelta{ToolCalls: []oaToolCallDelta{{Index: i, Function: oaFunctionArg{Arguments: p}}}}, nil)
		}
	}
	finish := r.FinishReason
	chunk(oaDelta{}, &finish)
	out.event("", oaChunk{ID: e.id(), Object: "chat.completion.chunk", Created: e.created, Model: e.model,
		Choices: []oaChoice{}, Usage: openAIUsage(u)})
	out.raw("data: [DONE]\n\n")
}

// openAIJSON writes a non-streaming chat.completion object.
func (e encoder) openAIJSON(w http.ResponseWriter, r Reply, u Usage) {
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	type message struct {
		Role             string  `json:"role"`
		Content          *string `json:"content"`
		ReasoningContent string  `json:"reasoning_content,omitempty"`
		ToolCalls        []call  `json:"tool_calls,omitempty"`
	}
	type choice struct {
		Index        int     `json:"index"`
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	}
	m := message{Role: "assistant", ReasoningContent: chatReasoning(r)}
	if r.Text != "" || len(r.ToolCalls) == 0 {
		text := r.Text
		m.Content = &text
	}
	for _, tc := range r.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, call{ID: tc.ID, Type: "function", Function: fn{tc.Name, string(tc.Arguments)}})
	}
	body := struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   *oaUsage `json:"usage"`
	}{e.id(), "chat.completion", e.created, e.model, []choice{{0, m, r.FinishReason}}, openAIUsage(u)}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(body)
}

func (e encoder) id() string { return fmt.Sprintf("chatcmpl-%d", e.seq) }

// anthropicStopReason maps an OpenAI finish reason to an Anthropic one.
func anthropicStopReason(finish string) string {
	switch finish {
	case "tool_calls":
		return "tool_use"
	case "length":
		return "max_tokens"
	case "stop":
		return "end_turn"
	}
	return finish
}

type antUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

func anthropicUsage(u Usage) antUsage {
	return antUsage{
		InputTokens:              max(u.Prompt-u.Cached-u.CacheWrite, 0),
		OutputTokens:             u.Completion,
		CacheReadInputTokens:     u.Cached,
		CacheCreationInputTokens: u.CacheWrite,
	}
}

// anthropicStream writes a Messages API event stream: message_start (with
// input_transformations when the rules dropped blocks), content blocks
// (thinking with its signature, text, then tool_use), message_delta with the
// stop reason and usage, message_stop.
func (e encoder) anthropicStream(w http.ResponseWriter, rec *Recorded) {
	r, u := rec.Reply, rec.Usage
	out := newSSE(w)
	ev := func(typ string, fields map[string]any) {
		fields["type"] = typ
		out.event(typ, fields)
	}
	start := anthropicUsage(u)
	start.OutputTokens = 1
	msg := map[string]any{
		"id": fmt.Sprintf("msg_%d", e.seq), "type": "message", "role": "assistant", "model": e.model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start}
	if len(rec.Dropped) > 0 {
		msg["input_transformations"] = rec.Dropped
	}
	ev("message_start", map[string]any{"message": msg})
	idx := 0
	for i, t := range r.Thinking {
		sig := ""
		if i < len(rec.Signatures) {
			sig = rec.Signatures[i]
		}
		if _, ok := strings.CutPrefix(t, RedactedPrefix); ok {
			ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "redacted_thinking", "data": sig}})
			ev("content_block_stop", map[string]any{"index": idx})
			idx++
			continue
		}
		ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
		for _, p := range pieces(t, e.chunk) {
			ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "thinking_delta", "thinking": p}})
		}
		ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "signature_delta", "signature": sig}})
		ev("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	if r.Text != "" {
		ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, p := range pieces(r.Text, e.chunk) {
			ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": p}})
		}
		ev("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	for _, tc := range r.ToolCalls {
		ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{
			"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": map[string]any{}}})
		for _, p := range pieces(string(tc.Arguments), e.chunk) {
			ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}})
		}
		ev("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	end := anthropicUsage(u)
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": anthropicStopReason(r.FinishReason), "stop_sequence": nil},
		"usage": end})
	ev("message_stop", map[string]any{})
}

// anthropicJSON writes a non-streaming Messages API response.
func (e encoder) anthropicJSON(w http.ResponseWriter, rec *Recorded) {
	r, u := rec.Reply, rec.Usage
	content := []any{}
	for i, t := range r.Thinking {
		sig := ""
		if i < len(rec.Signatures) {
			sig = rec.Signatures[i]
		}
		if _, ok := strings.CutPrefix(t, RedactedPrefix); ok {
			content = append(content, map[string]any{"type": "redacted_thinking", "data": sig})
		} else {
			content = append(content, map[string]any{"type": "thinking", "thinking": t, "signature": sig})
		}
	}
	if r.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": r.Text})
	}
	for _, tc := range r.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": tc.Arguments})
	}
	body := map[string]any{
		"id": fmt.Sprintf("msg_%d", e.seq), "type": "message", "role": "assistant", "model": e.model,
		"content": content, "stop_reason": anthropicStopReason(r.FinishReason), "stop_sequence": nil,
		"usage": anthropicUsage(u)}
	if len(rec.Dropped) > 0 {
		body["input_transformations"] = rec.Dropped
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(body)
}
