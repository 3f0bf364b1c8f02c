// Package block is the block model: it decodes Pi 1.6 AgentMessage JSON into
// typed blocks with durable, content-anchored ids.
//
// A block is one foldable-or-not slice of a message: a user message, one part
// of an assistant message (text, thinking or a tool call), a tool result, or a
// summary-like message. Ids are computed from content anchors, never from
// positions, so the same message has the same ids wherever it sits:
//
//	user            u:<timestamp>
//	assistant part  a:<responseId, or t+timestamp>:p<part index>
//	tool result     r:<toolCallId>
//	other known     s:<timestamp>   (custom, bashExecution, branchSummary, compactionSummary)
//
// Anything without its anchor, every system or unknown-role message, and any
// later message repeating an earlier message's id gets a positional m<i>:… id.
// Positional ids are never durable and never fold (docs/DESIGN.md §8.1); the
// durable-id gate (Durable) stays separate from the kind gate (Foldable).
//
// Decoding never rejects a message: malformed JSON, unknown roles, parts and
// fields are kept as raw bytes and pass through untouched.
package block

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

// Kind says what a block is.
type Kind uint8

// The block kinds.
const (
	User Kind = iota
	Text
	Thinking
	ToolCall
	ToolResult
	Summary // custom, bashExecution, branchSummary, compactionSummary
	System
	Other // unknown role or undecodable message
)

var kindNames = [...]string{"user", "text", "thinking", "tool_call", "tool_result", "summary", "system", "other"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText encodes a kind by name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Block is one typed slice of a message.
type Block struct {
	ID       string
	Kind     Kind
	Msg      int // index of the message in the transcript
	Part     int // index in the message's content array; -1 for the whole message
	Turn     int // user messages seen so far, this one included
	Order    int // position among all blocks
	Text     string
	Tokens   int
	ToolName string
	CallID   string
	IsError  bool
	// Opaque marks a tool result with non-text parts (an image): substituting
	// its content would drop them, so it never folds.
	Opaque bool
	// Args is the raw JSON arguments of a tool call.
	Args []byte
	// FullOutputPath is details.fullOutputPath of a truncated tool result.
	FullOutputPath string
	// Signed marks a thinking part that carries a thinkingSignature: an
	// Anthropic signature, an encrypted Responses reasoning item, a Gemini
	// thought signature. Redacted marks Pi's redacted thinking, whose text
	// is a placeholder for an opaque payload.
	Signed, Redacted bool
	// UnsignedReadable says that Pi sends this thinking part's text as
	// readable text once its signature is removed (see Foldable).
	UnsignedReadable bool
}

// unsignedReadableAPIs are the Pi apis whose providers send a thinking part
// without a signature as its plain text: Anthropic and Bedrock Claude as a
// text block, Gemini as an unsigned thought part. On the others a signed
// part is an opaque item whose text never reaches the model (Responses
// reasoning items, chat-completions reasoning_details: dropping the
// signature drops the item its tool calls are paired with), or, for
// chat-completions, its signature names the field the text travels in, so
// an unsigned part would not be sent at all.
var unsignedReadableAPIs = map[string]bool{
	"anthropic-messages":      true,
	"bedrock-converse-stream": true,
	"google-generative-ai":    true,
	"google-vertex":           true,
}

// Sent reports whether Pi sends this assistant message to the provider at
// all: it drops those that ended in an error or were aborted.
func (m *Message) Sent() bool { return m.StopReason != "error" && m.StopReason != "aborted" }

// Durable reports whether id is a content-anchored id that may fold.
func Durable(id string) bool {
	return len(id) > 2 && id[1] == ':' && (id[0] == 'u' || id[0] == 'a' || id[0] == 'r' || id[0] == 's')
}

// Foldable is the kind gate: only tool results without images and thinking
// parts ever fold. A folded thinking part loses its signature (a signature
// binds the exact text), so a signed part folds only where Pi then sends
// the digest as text; redacted thinking never folds. It says nothing about
// the id; see Durable.
func (b *Block) Foldable() bool {
	switch b.Kind {
	case ToolResult:
		return !b.Opaque
	case Thinking:
		return b.Text != "" && !b.Redacted && (!b.Signed || b.UnsignedReadable)
	}
	return false
}

// OwnTool reports whether a tool name is one of context-fold's own tools,
// recall_folded or unfold, as Pi names them or as a client names an MCP
// server's tools (mcp__contextfold__recall_folded, contextfold_unfold).
func OwnTool(name string) bool {
	for _, t := range [...]string{"recall_folded", "unfold"} {
		if name == t || strings.HasSuffix(name, "_"+t) || strings.HasSuffix(name, "."+t) {
			return true
		}
	}
	return false
}

// Message is one decoded message.
type Message struct {
	Raw  []byte // the message's JSON exactly as received
	Role string
	// API, Provider and Model are an assistant message's origin, as Pi
	// records it; Pi sends its signed thinking only to that same model.
	API, Provider, Model string
	// StopReason is an assistant message's stopReason; Pi never sends one
	// that ended in "error" or "aborted".
	StopReason string
	Blocks     []Block
	// Err is set when the JSON could not be decoded; the message then has one
	// positional Other block and passes through untouched.
	Err error
}

// anchor renders a JSON scalar as JavaScript's template literal would, for the
// id anchors (timestamp, responseId, toolCallId). ok is false for null,
// absent, or non-scalar values.
func anchor(ms []rawjson.Member, key string) (string, bool) {
	raw, ok := rawjson.Get(ms, key)
	if !ok {
		return "", false
	}
	switch {
	case rawjson.IsString(raw):
		s, err := rawjson.Unquote(raw)
		return s, err == nil
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		return rawjson.JSNumber(raw)
	case string(raw) == "true" || string(raw) == "false":
		return string(raw), true
	}
	return "", false
}

func str(ms []rawjson.Member, key string) string {
	raw, ok := rawjson.Get(ms, key)
	if !ok || !rawjson.IsString(raw) {
		return ""
	}
	s, _ := rawjson.Unquote(raw)
	return s
}

// textOf joins the text parts of a content value ("\n" between parts), or
// returns the string itself. raw is valid JSON: part of the message Decode
// validated.
func textOf(raw []byte) (text string, opaque bool) {
	if rawjson.IsString(raw) {
		s, _ := rawjson.Unquote(raw)
		return s, false
	}
	parts, err := rawjson.ArrayOfValid(raw)
	if err != nil {
		return "", false
	}
	// One text part, the usual case, is its text: built only for more.
	var first string
	var sb strings.Builder
	n := 0
	var buf []rawjson.Member
	for _, p := range parts {
		ms, err := rawjson.AppendObjectOfValid(buf[:0], p)
		buf = ms
		if err != nil {
			opaque = true
			continue
		}
		if str(ms, "type") != "text" {
			opaque = true
			continue
		}
		t, ok := rawjson.Get(ms, "text")
		if !ok || !rawjson.IsString(t) {
			continue
		}
		s, _ := rawjson.Unquote(t)
		switch n {
		case 0:
			first = s
		case 1:
			sb.WriteString(first)
			fallthrough
		default:
			sb.WriteByte('\n')
			sb.WriteString(s)
		}
		n++
	}
	if n == 1 {
		return first, opaque
	}
	return sb.String(), opaque
}

func positional(i int, suffix string) string {
	return "m" + strconv.Itoa(i) + ":" + suffix
}

// Decode decodes one message at transcript index i. The blocks' Turn and
// Order are left zero; Transcript assigns them.
func Decode(raw []byte, i int) Message {
	m := Message{Raw: raw}
	ms, err := rawjson.Object(raw)
	if err != nil {
		m.Err = err
		m.Role = ""
		m.Blocks = []Block{{ID: positional(i, "x"), Kind: Other, Msg: i, Part: -1, Tokens: tokens.Block(string(raw))}}
		return m
	}
	m.Role = str(ms, "role")
	content, _ := rawjson.Get(ms, "content")
	ts, hasTS := anchor(ms, "timestamp")
	add := func(b Block) {
		b.Msg = i
		b.Tokens = tokens.Block(b.Text)
		m.Blocks = append(m.Blocks, b)
	}
	switch m.Role {
	case "user":
		text, _ := textOf(content)
		id := positional(i, "u")
		if hasTS {
			id = "u:" + ts
		}
		add(Block{ID: id, Kind: User, Part: -1, Text: text})
	case "assistant":
		parts, err := rawjson.ArrayOfValid(content) // raw was valid as a whole
		if err != nil {
			break
		}
		a, ok := anchor(ms, "responseId")
		if !ok && hasTS {
			a, ok = "t"+ts, true
		}
		m.API, m.Provider, m.Model = str(ms, "api"), str(ms, "provider"), str(ms, "model")
		m.StopReason = str(ms, "stopReason")
		for j, p := range parts {
			pm, err := rawjson.ObjectOfValid(p)
			if err != nil {
				continue
			}
			id := positional(i, "p"+strconv.Itoa(j))
			if ok {
				id = "a:" + a + ":p" + strconv.Itoa(j)
			}
			switch str(pm, "type") {
			case "text":
				if t := str(pm, "text"); t != "" {
					add(Block{ID: id, Kind: Text, Part: j, Text: t})
				}
			case "thinking":
				// A signed or redacted part with no text (a Responses item
				// without a summary, omitted Anthropic thinking) never folds
				// but is kept, so its prefix binding is counted.
				t := str(pm, "thinking")
				signed := strings.TrimSpace(str(pm, "thinkingSignature")) != ""
				redacted := rawjson.Bool(mustGet(pm, "redacted"))
				if t != "" || signed || redacted {
					add(Block{ID: id, Kind: Thinking, Part: j, Text: t, Signed: signed, Redacted: redacted,
						UnsignedReadable: unsignedReadableAPIs[m.API]})
				}
			case "toolCall":
				name := str(pm, "name")
				args, ok := rawjson.Get(pm, "arguments")
				if !ok || rawjson.IsNull(args) {
					args = []byte("{}")
				}
				add(Block{ID: id, Kind: ToolCall, Part: j, Text: name + " " + compact(args),
					ToolName: name, CallID: str(pm, "id"), Args: args})
			}
		}
	case "toolResult":
		text, opaque := textOf(content)
		callID, ok := anchor(ms, "toolCallId")
		id := positional(i, "r")
		if ok {
			id = "r:" + callID
		}
		name := str(ms, "toolName")
		if name == "" {
			name = "tool"
		}
		b := Block{ID: id, Kind: ToolResult, Part: -1, Text: text, ToolName: name, CallID: callID,
			IsError: rawjson.Bool(mustGet(ms, "isError")), Opaque: opaque}
		if d, ok := rawjson.Get(ms, "details"); ok {
			if dm, err := rawjson.Object(d); err == nil {
				b.FullOutputPath = str(dm, "fullOutputPath")
			}
		}
		add(b)
	case "custom", "bashExecution", "branchSummary", "compactionSummary":
		var text string
		switch m.Role {
		case "custom":
			text, _ = textOf(content)
		case "bashExecution":
			text = "Ran `" + str(ms, "command") + "`\n" + str(ms, "output")
		default:
			text = str(ms, "summary")
		}
		id := positional(i, "s")
		if hasTS {
			id = "s:" + ts
		}
		add(Block{ID: id, Kind: Summary, Part: -1, Text: text})
	case "system":
		text, _ := textOf(content)
		if text == "" {
			// Pi stores the prompt in sections; count them for the estimate.
			if sec, ok := rawjson.Get(ms, "sections"); ok {
				text = string(sec)
			}
		}
		add(Block{ID: positional(i, "sys"), Kind: System, Part: -1, Text: text})
	default:
		text, _ := textOf(content)
		add(Block{ID: positional(i, "x"), Kind: Other, Part: -1, Text: text})
	}
	return m
}

func mustGet(ms []rawjson.Member, key string) []byte {
	v, _ := rawjson.Get(ms, key)
	return v
}

// compact returns raw JSON without insignificant whitespace, which is what
// JSON.stringify prints for the already-compact arguments Pi sends.
func compact(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}
