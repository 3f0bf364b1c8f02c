package fakellm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// API names the wire protocol of a request.
type API string

// The protocols the server speaks.
const (
	// OpenAI is POST /v1/chat/completions (Pi's "openai-completions" api).
	OpenAI API = "openai"
	// Anthropic is POST /v1/messages (Pi's "anthropic-messages" api).
	Anthropic API = "anthropic"
	// Responses is POST /v1/responses (Pi's "openai-responses" api).
	Responses API = "responses"
	// Gemini is POST /v1beta/models/{model}:streamGenerateContent (Pi's
	// "google-generative-ai" api).
	Gemini API = "gemini"
)

// ToolCall is one function call, either requested by the model (in a Reply)
// or replayed by the client (in a Request's assistant message).
type ToolCall struct {
	// ID is the call id ("call_…"). In a Reply an empty ID is filled in as
	// "call_<seq>_<index>".
	ID string
	// Name is the tool name, e.g. "bash".
	Name string
	// Arguments is the JSON object text of the arguments, e.g.
	// {"command":"ls"}. On the OpenAI wire it travels as a JSON string; here
	// it is the text inside that string. In a Reply, empty means {}.
	Arguments json.RawMessage
	// Namespace is the namespace of a Responses tool declared inside a
	// namespace tool (Codex's MCP tools: "mcp__<server>"); "" for others.
	Namespace string
}

// Message is the parsed, protocol-neutral view of one request message.
//
// For OpenAI requests there is one Message per element of "messages", and Raw
// holds that element's exact bytes. Anthropic requests are mapped onto the
// OpenAI shape: the top-level "system" becomes a leading Message with Role
// "system" (Raw is the system value), each "tool_result" block becomes its own
// Message with Role "tool" (Raw is the block), the remaining text of a user
// message becomes a Role "user" Message, and "tool_use" blocks become
// ToolCalls of the assistant Message.
type Message struct {
	// Role is "system", "user", "assistant" or "tool".
	Role string
	// Content is the text of the message: a string content as is, the "text"
	// parts of an array content concatenated, "" for null.
	Content string
	// ToolCallID is set on Role "tool" messages.
	ToolCallID string
	// ToolCalls is set on assistant messages that call tools.
	ToolCalls []ToolCall
	// Raw is the message's JSON exactly as it appeared in the body.
	Raw json.RawMessage
}

// Request is the parsed view of one model request.
type Request struct {
	// Seq is the 1-based arrival order among model requests.
	Seq int
	// API is the protocol the request used.
	API API
	// Method, Path and Query describe the HTTP request; Path has no query.
	Method, Path, Query string
	// Header is the request header.
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Model is the "model" field.
	Model string
	// Stream reports "stream": true.
	Stream bool
	// MaxTokens is max_completion_tokens, max_tokens (OpenAI) or max_tokens
	// (Anthropic).
	MaxTokens int
	// Messages is the parsed message list.
	Messages []Message
	// MessagesJSON is the exact bytes of the "messages" array in Body.
	MessagesJSON json.RawMessage
	// Tools lists the declared tool names in order. It is empty for requests
	// that declare no tools, such as Pi's compaction and branch-summary
	// requests.
	Tools []string

	// cacheKey is the byte string whose common prefixes count as cached
	// (see the package doc).
	cacheKey []byte
}

// ToolLess reports whether the request declares no tools, which is how Pi's
// own summarization requests (compaction, branch summary) look.
func (r *Request) ToolLess() bool { return len(r.Tools) == 0 }

// HasTool reports whether the request declares a tool with the given name.
func (r *Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		if t == name {
			return true
		}
	}
	return false
}

// Text returns the concatenated Content of all messages except the system
// ones, separated by newlines. It is convenient for searching the context.
func (r *Request) Text() string {
	var b strings.Builder
	for _, m := range r.Messages {
		if m.Role == "system" {
			continue
		}
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	return b.String()
}

// ToolCallsSeen returns every tool call replayed in the request's assistant
// messages, in order.
func (r *Request) ToolCallsSeen() []ToolCall {
	var out []ToolCall
	for _, m := range r.Messages {
		out = append(out, m.ToolCalls...)
	}
	return out
}

// ToolResult returns the content of the tool message answering callID.
func (r *Request) ToolResult(callID string) (string, bool) {
	for _, m := range r.Messages {
		if m.Role == "tool" && m.ToolCallID == callID {
			return m.Content, true
		}
	}
	return "", false
}

// ParseOpenAI parses a chat-completions request body. The returned Request
// has only the body-derived fields set.
func ParseOpenAI(body []byte) (*Request, error) {
	var w struct {
		Model               string            `json:"model"`
		Stream              bool              `json:"stream"`
		MaxCompletionTokens int               `json:"max_completion_tokens"`
		MaxTokens           int               `json:"max_tokens"`
		Messages            json.RawMessage   `json:"messages"`
		Tools               []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("fakellm: parse openai request: %w", err)
	}
	req := &Request{API: OpenAI, Body: body, Model: w.Model, Stream: w.Stream,
		MaxTokens: w.MaxCompletionTokens, MessagesJSON: w.Messages, cacheKey: w.Messages}
	if req.MaxTokens == 0 {
		req.MaxTokens = w.MaxTokens
	}
	msgs, err := ParseOpenAIMessages(w.Messages)
	if err != nil {
		return nil, err
	}
	req.Messages = msgs
	for _, raw := range w.Tools {
		var t struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("fakellm: parse tool: %w", err)
		}
		name := t.Function.Name
		if name == "" {
			name = t.Name
		}
		req.Tools = append(req.Tools, name)
	}
	return req, nil
}

// ParseOpenAIMessages parses an OpenAI "messages" array. Each Message's Raw
// aliases the element's bytes in raw.
func ParseOpenAIMessages(raw json.RawMessage) ([]Message, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, fmt.Errorf("fakellm: parse messages: %w", err)
	}
	msgs := make([]Message, 0, len(elems))
	for i, e := range elems {
		var w struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		}
		if err := json.Unmarshal(e, &w); err != nil {
			return nil, fmt.Errorf("fakellm: parse message %d: %w", i, err)
		}
		text, err := contentText(w.Content)
		if err != nil {
			return nil, fmt.Errorf("fakellm: message %d: %w", i, err)
		}
		m := Message{Role: w.Role, Content: text, ToolCallID: w.ToolCallID, Raw: e}
		for _, tc := range w.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name,
				Arguments: json.RawMessage(tc.Function.Arguments)})
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// contentText flattens a content value: a string, null, or an array of parts
// whose "text" (or nested "content") fields are concatenated.
func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case '[':
		var parts []struct {
			Text    string          `json:"text"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", err
		}
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
			if len(p.Content) > 0 {
				s, err := contentText(p.Content)
				if err != nil {
					return "", err
				}
				b.WriteString(s)
			}
		}
		return b.String(), nil
	}
	return "", errors.New("content is neither string, array nor null")
}

// cacheControlRE matches an Anthropic cache_control marker and its comma.
var cacheControlRE = regexp.MustCompile(`,?"cache_control":\{[^{}]*\}`)

// ParseAnthropic parses a Messages API request body. See Message for how
// the Anthropic shape is mapped.
func ParseAnthropic(body []byte) (*Request, error) {
	var w struct {
		Model     string            `json:"model"`
		Stream    bool              `json:"stream"`
		MaxTokens int               `json:"max_tokens"`
		System    json.RawMessage   `json:"system"`
		Messages  json.RawMessage   `json:"messages"`
		Tools     []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("fakellm: parse anthropic request: %w", err)
	}
	req := &Request{API: Anthropic, Body: body, Model: w.Model, Stream: w.Stream,
		MaxTokens: w.MaxTokens, MessagesJSON: w.Messages}
	// Anthropic caches tools, then system, then messages; the cache_control
	// breakpoints Pi moves to the newest message are not part of the content.
	var key []byte
	for _, t := range w.Tools {
		key = append(key, t...)
	}
	key = append(append(key, w.System...), w.Messages...)
	req.cacheKey = cacheControlRE.ReplaceAll(key, nil)
	if s := bytes.TrimSpace(w.System); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
		text, err := contentText(s)
		if err != nil {
			return nil, fmt.Errorf("fakellm: system: %w", err)
		}
		req.Messages = append(req.Messages, Message{Role: "system", Content: text, Raw: w.System})
	}
	var elems []json.RawMessage
	if len(w.Messages) > 0 {
		if err := json.Unmarshal(w.Messages, &elems); err != nil {
			return nil, fmt.Errorf("fakellm: parse messages: %w", err)
		}
	}
	for i, e := range elems {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(e, &m); err != nil {
			return nil, fmt.Errorf("fakellm: parse message %d: %w", i, err)
		}
		c := bytes.TrimSpace(m.Content)
		if len(c) == 0 || c[0] != '[' {
			text, err := contentText(c)
			if err != nil {
				return nil, fmt.Errorf("fakellm: message %d: %w", i, err)
			}
			req.Messages = append(req.Messages, Message{Role: m.Role, Content: text, Raw: e})
			continue
		}
		var blocks []json.RawMessage
		if err := json.Unmarshal(c, &blocks); err != nil {
			return nil, fmt.Errorf("fakellm: message %d: %w", i, err)
		}
		main := Message{Role: m.Role, Raw: e}
		keep := false
		for _, bl := range blocks {
			var b struct {
				Type      string          `json:"type"`
				Text      string          `json:"text"`
				ID        string          `json:"id"`
				Name      string          `json:"name"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
			}
			if err := json.Unmarshal(bl, &b); err != nil {
				return nil, fmt.Errorf("fakellm: message %d block: %w", i, err)
			}
			switch b.Type {
			case "text":
				main.Content += b.Text
				keep = true
			case "tool_use":
				args := b.Input
				if len(args) == 0 {
					args = json.RawMessage("{}")
				}
				main.ToolCalls = append(main.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
				keep = true
			case "tool_result":
				text, err := contentText(b.Content)
				if err != nil {
					return nil, fmt.Errorf("fakellm: message %d tool_result: %w", i, err)
				}
				req.Messages = append(req.Messages, Message{Role: "tool", Content: text, ToolCallID: b.ToolUseID, Raw: bl})
			}
		}
		if keep || m.Role == "assistant" {
			req.Messages = append(req.Messages, main)
		}
	}
	for _, raw := range w.Tools {
		var t struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("fakellm: parse tool: %w", err)
		}
		req.Tools = append(req.Tools, t.Name)
	}
	return req, nil
}
