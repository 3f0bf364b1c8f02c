package trajectory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// Format names a session file format Load accepts.
type Format string

// The formats Load reads. Every one is JSON Lines, so Find picks them all up
// by their .jsonl name and Load tells them apart by content.
const (
	// FormatBench is the benchmark format: one Message per line.
	FormatBench Format = "bench"
	// FormatPi is a Pi coding-agent session file (see pisession.go).
	FormatPi Format = "pi-session"
	// FormatClaudeCode is a Claude Code session transcript (see claudecode.go).
	FormatClaudeCode Format = "claude-code"
	// FormatCodex is a Codex CLI rollout file (see codex.go).
	FormatCodex Format = "codex-rollout"
)

// accepted lists the formats for error messages.
const accepted = `bench JSONL (lines with "role", "text", "toolCalls"), ` +
	`Pi session (first line {"type":"session",…}), ` +
	`Claude Code session (lines {"type":"user"|"assistant","message":…,"uuid":…}), ` +
	`Codex rollout (lines {"type":"session_meta"|"response_item"|…,"payload":…})`

// sniffLines is how many non-blank lines Detect reads before giving up: a
// Claude Code file can open with summary and file-history-snapshot lines
// that say little on their own, so one line is not always enough.
const sniffLines = 64

// line is one JSON value of a session file and the 1-based line it is on.
type line struct {
	n   int
	raw []byte
}

// splitLines cuts data into JSON values, one or more per non-blank line.
// Pi and Claude Code append with one write per entry, and an interrupted
// write can leave two entries on one line (the real Pi file in the bench
// set has one), so a line is read as a stream of values rather than as
// exactly one. A last line without a newline that does not parse is a
// session still being written (or cut off mid-write) and is dropped; any
// other malformed line is an error naming it.
func splitLines(data []byte) ([]line, error) {
	var out []line
	for n, rest := 1, data; len(rest) > 0; n++ {
		i := bytes.IndexByte(rest, '\n')
		var l []byte
		last := i < 0
		if last {
			l, rest = rest, nil
		} else {
			l, rest = rest[:i], rest[i+1:]
		}
		l = rawjson.Trim(l)
		if len(l) == 0 {
			continue
		}
		vals, err := values(l)
		if err != nil {
			if last && len(out) > 0 {
				break
			}
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		for _, v := range vals {
			out = append(out, line{n: n, raw: v})
		}
	}
	return out, nil
}

// values splits one line into its JSON values.
func values(l []byte) ([][]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(l))
	var out [][]byte
	for {
		var v json.RawMessage
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

// probe is the part of a line that tells the formats apart.
type probe struct {
	Type       *string         `json:"type"`
	Role       json.RawMessage `json:"role"`
	Payload    json.RawMessage `json:"payload"`
	Message    json.RawMessage `json:"message"`
	UUID       json.RawMessage `json:"uuid"`
	SessionID  json.RawMessage `json:"sessionId"`
	ParentUUID json.RawMessage `json:"parentUuid"`
	RecordType json.RawMessage `json:"record_type"`
}

var (
	codexTypes = map[string]bool{"session_meta": true, "response_item": true, "event_msg": true, "turn_context": true, "compacted": true}
	// claudeHints are Claude Code line types that carry no message; a file
	// of only these (a session with a title and nothing else) is still a
	// Claude Code file.
	claudeHints = map[string]bool{"summary": true, "file-history-snapshot": true, "queue-operation": true, "custom-title": true, "progress": true}
	// codexItems are the response items an early (mid-2025) Codex rollout
	// wrote bare, without the type/payload envelope.
	codexItems = map[string]bool{"message": true, "reasoning": true, "function_call": true, "function_call_output": true, "local_shell_call": true, "custom_tool_call": true, "custom_tool_call_output": true}
)

// Detect tells which format data is in from its first non-blank lines. An
// empty file is the bench format with no messages.
func Detect(data []byte) (Format, error) {
	ls, err := splitLines(data)
	if err != nil {
		return "", err
	}
	return detect(ls)
}

func detect(ls []line) (Format, error) {
	if len(ls) == 0 {
		return FormatBench, nil
	}
	hint := false
	for k, l := range ls {
		if k == sniffLines {
			break
		}
		var p probe
		if len(l.raw) == 0 || l.raw[0] != '{' || json.Unmarshal(l.raw, &p) != nil {
			return "", fmt.Errorf("line %d: not a JSON object; accepted formats: %s", l.n, accepted)
		}
		typ := ""
		if p.Type != nil {
			typ = *p.Type
		}
		switch {
		case p.Type == nil && rawjson.IsString(rawjson.Trim(p.Role)):
			return FormatBench, nil
		case k == 0 && typ == "session":
			return FormatPi, nil
		case codexTypes[typ] && len(p.Payload) > 0:
			return FormatCodex, nil
		case (typ == "user" || typ == "assistant") && len(p.Message) > 0 &&
			(len(p.UUID) > 0 || len(p.SessionID) > 0 || len(p.ParentUUID) > 0):
			return FormatClaudeCode, nil
		case claudeHints[typ] || (typ == "system" && (len(p.UUID) > 0 || len(p.SessionID) > 0)):
			hint = true
		case len(p.RecordType) > 0 || (codexItems[typ] && len(p.Message) == 0 && len(p.Payload) == 0):
			return FormatCodex, nil
		}
	}
	if hint {
		return FormatClaudeCode, nil
	}
	return "", fmt.Errorf("unknown session format; accepted formats: %s", accepted)
}

// Parse converts the content of a session file in any accepted format to
// messages, and says which format it was.
func Parse(data []byte) ([]Message, Format, error) {
	ls, err := splitLines(data)
	if err != nil {
		return nil, "", err
	}
	f, err := detect(ls)
	if err != nil {
		return nil, "", err
	}
	var ms []Message
	switch f {
	case FormatBench:
		// The bench format is taken as written, as it always was.
		ms, err := fromBench(ls)
		return ms, f, err
	case FormatPi:
		ms, err = fromPi(ls)
	case FormatClaudeCode:
		ms, err = fromClaudeCode(ls)
	case FormatCodex:
		ms, err = fromCodex(ls)
	}
	if err != nil {
		return nil, f, fmt.Errorf("%s: %w", f, err)
	}
	return pairResults(ms), f, nil
}

// decode unmarshals the line into v, naming the line on error.
func (l line) decode(v any) error {
	if err := json.Unmarshal(l.raw, v); err != nil {
		return fmt.Errorf("line %d: %w", l.n, err)
	}
	return nil
}

// fromBench reads bench-format lines.
func fromBench(ls []line) ([]Message, error) {
	out := make([]Message, 0, len(ls))
	for _, l := range ls {
		var m Message
		if err := l.decode(&m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// pairResults turns a tool result that answers no earlier call, or answers
// a call already answered, into a user message carrying its text. The bench
// set's own converter does the same ("orphan_results_as_user" in its
// manifest), and it keeps the replay well-formed: a provider rejects a
// tool result without its call, and the engine keys results by call id.
// Session readers meet such results when a log starts mid-session (Claude
// Code resumes, Codex forks) or a call's line was lost. Calls left without a
// result need nothing here: ToPi leaves them unanswered, as Pi does.
func pairResults(ms []Message) []Message {
	open := map[string]bool{}
	for i := range ms {
		m := &ms[i]
		for _, c := range m.ToolCalls {
			if m.Role == "assistant" {
				open[c.ID] = true
			}
		}
		if m.Role != "toolResult" {
			continue
		}
		id := ""
		if m.ToolCallID != nil {
			id = *m.ToolCallID
		}
		if open[id] {
			delete(open, id)
			continue
		}
		*m = Message{Role: "user", Text: m.Text}
	}
	return ms
}

// str returns a pointer to s, for the optional fields of Message.
func str(s string) *string { return &s }

// joinNonEmpty joins the non-empty parts with sep.
func joinNonEmpty(parts []string, sep string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(sep)
		}
		b.WriteString(p)
	}
	return b.String()
}

// imagePlaceholder is the one line an image becomes, as in the bench set.
func imagePlaceholder(mime string) string {
	if mime == "" {
		return "[image]"
	}
	return "[image: " + mime + "]"
}

// object returns raw if it is a JSON object, else {} — tool call arguments
// must be an object for Pi; a non-object is kept under "value" so no bytes
// of it are lost.
func object(raw json.RawMessage) json.RawMessage {
	t := rawjson.Trim(raw)
	switch {
	case len(t) > 0 && t[0] == '{' && rawjson.Valid(t):
		return json.RawMessage(t)
	case len(t) == 0 || rawjson.IsNull(t) || !rawjson.Valid(t):
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(append(append([]byte(`{"value":`), t...), '}'))
}
