package trajectory

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Pi session files (<agentDir>/sessions/--<cwd>--/<time>_<uuid>.jsonl) open
// with a header {"type":"session","id",…}; every later line is an entry.
// Entries of type "message" carry an AgentMessage; the others (model_change,
// thinking_level_change, compaction, branch_summary, custom, custom_message,
// context_edit, label, session_info, usage) record state and are skipped.
//
// Current files (version 2 and later) give each entry an id and a parentId,
// and a session is a tree: going back to an earlier entry and continuing
// starts a branch. fromPi follows the active branch, the path from the root
// to the last entry written, as Pi does when it resumes a session. Early
// files (version 1, like the two real ones in the bench set) have no ids and
// are one path in file order; so is a file where some entry lacks an id.
//
// Choices where Pi's own rules would make a different transcript:
//   - compaction entries are skipped and every message before them kept:
//     the bench replays the whole session and applies its own compaction
//     policy, which is what the bench set's Pi family did too;
//   - context_edit entries (folds written by an extension) are skipped, so
//     the transcript is the unedited one;
//   - assistant messages with neither text nor tool calls (aborted or failed
//     requests) are dropped, as in the bench set;
//   - a system message (current format) gives its content; its sections,
//     which Pi assembles into the prompt by rules of its own, are not
//     reassembled, so one with empty content is dropped;
//   - a user's own bash run (bashExecution) becomes the user message Pi
//     sends for it, and custom, branchSummary and compactionSummary messages
//     become user messages, as Pi sends them.
func fromPi(ls []line) ([]Message, error) {
	type entry struct {
		Type     string          `json:"type"`
		ID       *string         `json:"id"`
		ParentID *string         `json:"parentId"`
		Message  json.RawMessage `json:"message"`
	}
	es := make([]entry, 0, len(ls))
	for _, l := range ls {
		var e entry
		if err := l.decode(&e); err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	// The header is the first entry and is no part of the tree.
	path := piBranch(len(es), func(i int) (id, parent *string) { return es[i].ID, es[i].ParentID }, 1)
	var out []Message
	for _, i := range path {
		e := es[i]
		if e.Type != "message" {
			continue
		}
		m, ok, err := piMessage(e.Message)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", ls[i].n, err)
		}
		if ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// piBranch returns the indices of entries from..n-1 on the active branch, in
// order from the root. Entries are read through at, which gives an entry's id
// and parent id. With any id missing, it is every entry in file order. A
// parent that is missing ends the walk at that entry (it is then the root);
// a cycle, which Pi never writes, ends it where it closes.
func piBranch(n int, at func(int) (id, parent *string), from int) []int {
	byID := map[string]int{}
	for i := from; i < n; i++ {
		id, _ := at(i)
		if id == nil {
			all := make([]int, 0, n-from)
			for k := from; k < n; k++ {
				all = append(all, k)
			}
			return all
		}
		byID[*id] = i
	}
	var rev []int
	seen := map[int]bool{}
	for i := n - 1; i >= from && !seen[i]; {
		seen[i] = true
		rev = append(rev, i)
		_, parent := at(i)
		if parent == nil {
			break
		}
		p, ok := byID[*parent]
		if !ok {
			break
		}
		i = p
	}
	for a, b := 0, len(rev)-1; a < b; a, b = a+1, b-1 {
		rev[a], rev[b] = rev[b], rev[a]
	}
	return rev
}

// piPart is one content part of a Pi message.
type piPart struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	MimeType  string          `json:"mimeType"`
}

// piMessage converts one AgentMessage. ok is false for a message that makes
// no bench message (an empty assistant, a bash run kept out of context).
func piMessage(raw json.RawMessage) (m Message, ok bool, err error) {
	var pm struct {
		Role               string          `json:"role"`
		Content            json.RawMessage `json:"content"`
		ToolCallID         string          `json:"toolCallId"`
		ToolName           string          `json:"toolName"`
		IsError            bool            `json:"isError"`
		Command            string          `json:"command"`
		Output             string          `json:"output"`
		ExitCode           *int            `json:"exitCode"`
		Cancelled          bool            `json:"cancelled"`
		Truncated          bool            `json:"truncated"`
		FullOutputPath     string          `json:"fullOutputPath"`
		ExcludeFromContext bool            `json:"excludeFromContext"`
		Summary            string          `json:"summary"`
	}
	if err := json.Unmarshal(raw, &pm); err != nil {
		return m, false, fmt.Errorf("message: %w", err)
	}
	switch pm.Role {
	case "assistant":
		parts, err := piParts(pm.Content)
		if err != nil {
			return m, false, err
		}
		// Thinking and text join in order, as the bench set joined them.
		var texts []string
		m.Role = "assistant"
		for _, p := range parts {
			switch p.Type {
			case "text":
				texts = append(texts, p.Text)
			case "thinking":
				texts = append(texts, p.Thinking)
			case "toolCall":
				m.ToolCalls = append(m.ToolCalls, Call{ID: p.ID, Name: p.Name, Arguments: object(p.Arguments)})
			}
		}
		m.Text = joinNonEmpty(texts, "\n\n")
		return m, m.Text != "" || len(m.ToolCalls) > 0, nil
	case "toolResult":
		text, err := piText(pm.Content, "\n")
		if err != nil {
			return m, false, err
		}
		return Message{Role: "toolResult", Text: text, ToolCallID: str(pm.ToolCallID), ToolName: str(pm.ToolName), IsError: pm.IsError}, true, nil
	case "bashExecution":
		// A user's own "!command": Pi shows the model this text.
		if pm.ExcludeFromContext {
			return m, false, nil
		}
		return Message{Role: "user", Text: bashExecutionText(pm.Command, pm.Output, pm.ExitCode, pm.Cancelled, pm.Truncated, pm.FullOutputPath)}, true, nil
	case "branchSummary", "compactionSummary":
		return Message{Role: "user", Text: pm.Summary}, pm.Summary != "", nil
	case "system":
		text, err := piText(pm.Content, "\n")
		if err != nil {
			return m, false, err
		}
		return Message{Role: "system", Text: text}, text != "", nil
	default:
		// user, and custom messages, which Pi sends as user messages.
		text, err := piText(pm.Content, "\n")
		if err != nil {
			return m, false, err
		}
		return Message{Role: "user", Text: text}, true, nil
	}
}

// piParts reads content that is either a string or an array of parts.
func piParts(raw json.RawMessage) ([]piPart, error) {
	return stringOrArray(raw, func(s string) piPart { return piPart{Type: "text", Text: s} })
}

// stringOrArray reads message content that is a string (one text part, as
// text makes it) or an array of parts.
func stringOrArray[T any](raw json.RawMessage, text func(string) T) ([]T, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("content: %w", err)
		}
		return []T{text(s)}, nil
	}
	var ps []T
	if err := json.Unmarshal(raw, &ps); err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	return ps, nil
}

// piText joins the text of content, images as placeholders.
func piText(raw json.RawMessage, sep string) (string, error) {
	ps, err := piParts(raw)
	if err != nil {
		return "", err
	}
	var texts []string
	for _, p := range ps {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
		case "image":
			texts = append(texts, imagePlaceholder(p.MimeType))
		}
	}
	if len(texts) == 1 {
		return texts[0], nil
	}
	return joinNonEmpty(texts, sep), nil
}

// bashExecutionText renders a user's bash run as Pi's bashExecutionToText
// does, so the replay sends the bytes Pi sent.
func bashExecutionText(command, output string, exitCode *int, cancelled, truncated bool, fullOutputPath string) string {
	s := "Ran `" + command + "`\n"
	if output != "" {
		s += "```\n" + output + "\n```"
	} else {
		s += "(no output)"
	}
	if cancelled {
		s += "\n\n(command cancelled)"
	} else if exitCode != nil && *exitCode != 0 {
		s += "\n\nCommand exited with code " + strconv.Itoa(*exitCode)
	}
	if truncated && fullOutputPath != "" {
		s += "\n\n[Output truncated. Full output: " + fullOutputPath + "]"
	}
	return s
}
