package trajectory

import (
	"encoding/json"
	"fmt"
)

// Claude Code keeps one transcript per session in
// ~/.claude/projects/<project>/<session-id>.jsonl. Anthropic publishes no
// schema; what fromClaudeCode relies on was checked against published tools
// that read these files (ccusage, claude-code-log, simonw's
// claude-code-transcripts) and real transcripts:
//
//   - lines of type "user" and "assistant" carry message, an Anthropic
//     Messages API message: content is a string or blocks of type text,
//     thinking, redacted_thinking, tool_use {id, name, input}, tool_result
//     {tool_use_id, content (string or blocks), is_error}, image;
//   - every other line type (summary, system, file-history-snapshot,
//     queue-operation, attachment, progress, custom-title, …) records the
//     client's state, not the conversation, and is skipped;
//   - an assistant response is streamed to the file as several lines, one
//     per content block, that share message.id; they merge into one
//     assistant message at the place of the first, even when a tool result
//     line comes between them (parallel calls);
//   - a user line whose content holds tool_result blocks becomes one
//     toolResult message per block, in order, named after the matching
//     tool_use; any text or image blocks beside them follow as one user
//     message.
//
// Choices where the rule is unclear:
//   - lines with isSidechain true are a subagent's (Task/Agent tool)
//     conversation, which the main model never saw; they are skipped, and
//     the subagent's answer reaches the transcript as the tool result of
//     the main conversation's Task call;
//   - assistant lines with model "<synthetic>" are messages Claude Code
//     wrote itself (API errors, "No response requested.") that no model
//     produced; they are skipped;
//   - a line whose uuid was already read (a resumed session can repeat
//     lines) is skipped;
//   - lines are taken in file order: a rewind that starts a new parentUuid
//     branch is not resolved, since Claude Code keeps writing one file and
//     both branches were sent to the model at the time;
//   - thinking joins the assistant's text before the visible text, as the
//     bench set does; redacted_thinking, and server-side tool blocks
//     (server_tool_use, web_search_tool_result), carry nothing readable and
//     are skipped; user-side images and documents become a placeholder.
func fromClaudeCode(ls []line) ([]Message, error) {
	type entry struct {
		Type        string          `json:"type"`
		UUID        string          `json:"uuid"`
		IsSidechain bool            `json:"isSidechain"`
		Message     json.RawMessage `json:"message"`
	}
	type message struct {
		ID      string          `json:"id"`
		Role    string          `json:"role"`
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
	}
	var out []Message
	// texts[i] are the text and thinking blocks of out[i], an assistant,
	// kept apart until the end so streamed lines can add to them.
	texts := map[int][]string{}
	byMsgID := map[string]int{}
	callName := map[string]string{}
	seen := map[string]bool{}
	for _, l := range ls {
		var e entry
		if err := l.decode(&e); err != nil {
			return nil, err
		}
		if (e.Type != "user" && e.Type != "assistant") || e.IsSidechain || len(e.Message) == 0 {
			continue
		}
		if e.UUID != "" {
			if seen[e.UUID] {
				continue
			}
			seen[e.UUID] = true
		}
		var m message
		if err := json.Unmarshal(e.Message, &m); err != nil {
			return nil, fmt.Errorf("line %d: message: %w", l.n, err)
		}
		blocks, err := ccBlocks(m.Content)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", l.n, err)
		}
		if e.Type == "assistant" {
			if m.Model == "<synthetic>" {
				continue
			}
			i, ok := byMsgID[m.ID]
			if !ok || m.ID == "" {
				i = len(out)
				out = append(out, Message{Role: "assistant"})
				if m.ID != "" {
					byMsgID[m.ID] = i
				}
			}
			a := &out[i]
			for _, b := range blocks {
				switch b.Type {
				case "text", "thinking":
					s := b.Text
					if b.Type == "thinking" {
						s = b.Thinking
					}
					if !contains(texts[i], s) {
						texts[i] = append(texts[i], s)
					}
				case "tool_use":
					if hasCall(a.ToolCalls, b.ID) {
						continue
					}
					a.ToolCalls = append(a.ToolCalls, Call{ID: b.ID, Name: b.Name, Arguments: object(b.Input)})
					callName[b.ID] = b.Name
				}
			}
			continue
		}
		var rest []string
		for _, b := range blocks {
			switch b.Type {
			case "tool_result":
				text, err := ccResultText(b.Content)
				if err != nil {
					return nil, fmt.Errorf("line %d: tool_result %s: %w", l.n, b.ToolUseID, err)
				}
				r := Message{Role: "toolResult", Text: text, ToolCallID: str(b.ToolUseID), IsError: b.IsError}
				if n, ok := callName[b.ToolUseID]; ok {
					r.ToolName = str(n)
				}
				out = append(out, r)
			case "text":
				rest = append(rest, b.Text)
			case "image", "document":
				rest = append(rest, imagePlaceholder(b.Source.MediaType))
			}
		}
		if len(rest) > 0 {
			out = append(out, Message{Role: "user", Text: joinNonEmpty(rest, "\n")})
		}
	}
	// Assemble assistant texts, and drop assistants that stayed empty (a
	// response of only redacted thinking, say).
	kept := out[:0]
	for i, m := range out {
		if m.Role == "assistant" {
			m.Text = joinNonEmpty(texts[i], "\n\n")
			if m.Text == "" && len(m.ToolCalls) == 0 {
				continue
			}
		}
		kept = append(kept, m)
	}
	return kept, nil
}

// ccBlock is one content block of an Anthropic message.
type ccBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Source    struct {
		MediaType string `json:"media_type"`
	} `json:"source"`
}

// ccBlocks reads content that is a string or an array of blocks.
func ccBlocks(raw json.RawMessage) ([]ccBlock, error) {
	return stringOrArray(raw, func(s string) ccBlock { return ccBlock{Type: "text", Text: s} })
}

// ccResultText is a tool result's text: its string, or its text blocks
// joined with "\n" and images as placeholders.
func ccResultText(raw json.RawMessage) (string, error) {
	bs, err := ccBlocks(raw)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, b := range bs {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "image", "document":
			parts = append(parts, imagePlaceholder(b.Source.MediaType))
		}
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return joinNonEmpty(parts, "\n"), nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func hasCall(cs []Call, id string) bool {
	for _, c := range cs {
		if c.ID == id {
			return true
		}
	}
	return false
}
