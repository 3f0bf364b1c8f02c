package trajectory

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Codex CLI writes each session to ~/.codex/sessions/YYYY/MM/DD/
// rollout-<time>-<uuid>.jsonl, one RolloutLine per line:
// {"timestamp","type","payload"} where type is the RolloutItem variant
// (codex-rs/protocol: session_meta, response_item, event_msg, turn_context,
// compacted, and in newer versions world_state and inter-agent items).
// The conversation is the response_item lines: the Responses API items the
// model was sent and produced. event_msg lines repeat them for the UI
// (user_message, agent_message, agent_reasoning, exec_command_end,
// token_count) and are skipped with the other state lines. Rollouts from
// before the envelope (mid-2025) hold the same items bare, after a first
// line {"id","timestamp","instructions"}, with {"record_type":"state"}
// lines between; fromCodex reads those too.
//
// Response items:
//   - message: role user → user; role assistant → assistant text
//     (output_text parts); role developer or system → system (see below);
//   - reasoning: its summary texts (and raw reasoning content, when a model
//     exposes it) join the assistant's text before the visible text;
//     encrypted reasoning carries nothing readable;
//   - function_call {name, arguments (a JSON string), call_id} → a tool call
//     whose arguments are that string parsed (an object; anything else is
//     kept under "value", and a string that is not JSON under "input");
//   - custom_tool_call {name, input (free text), call_id} (apply_patch) → a
//     tool call with arguments {"input": <text>};
//   - local_shell_call {call_id, action} → a "local_shell" call whose
//     arguments are the action object;
//   - function_call_output and custom_tool_call_output {call_id, output} →
//     a tool result; output is a string, or content items whose text is
//     joined with "\n" (images become a placeholder);
//   - web_search_call and other hosted tool items have no output item and
//     nothing the model reads back; they are skipped.
//
// Consecutive assistant items (reasoning, assistant text, calls) form one
// assistant message: a Responses API response is a list of output items,
// and a user message or a tool output is what starts the next request.
//
// Choices where the rule is unclear:
//   - developer and system messages (sandbox and approval rules, the
//     collaboration mode) and the session's base instructions become system
//     messages, which ToPi folds into the system text: they are what the
//     model was told, but no user turn. User messages that are harness
//     injections, not typed by the user — <environment_context>,
//     <user_instructions>, "# AGENTS.md instructions" and <turn_aborted>
//     blocks — are system messages too, for the same reason;
//   - compacted lines are skipped and the items before them kept, as for Pi:
//     the bench replays the whole session under its own compaction policy;
//   - a tool output counts as an error when it says so: success false, a
//     JSON {"metadata":{"exit_code":N}} with N ≠ 0 (older shell tool), or a
//     header line "Exit code: N" / "Process exited with code N" with N ≠ 0
//     in the output's first bytes (newer exec tools).
func fromCodex(ls []line) ([]Message, error) {
	type rolloutLine struct {
		Type       string          `json:"type"`
		Payload    json.RawMessage `json:"payload"`
		RecordType json.RawMessage `json:"record_type"`
	}
	var out []Message
	names := map[string]string{}
	// cur is the assistant message being assembled, -1 when there is none;
	// curText its text parts.
	cur := -1
	var curText []string
	flush := func() {
		if cur >= 0 {
			out[cur].Text = joinNonEmpty(curText, "\n\n")
			if out[cur].Text == "" && len(out[cur].ToolCalls) == 0 {
				out = out[:cur]
			}
		}
		cur, curText = -1, nil
	}
	assistant := func() *Message {
		if cur < 0 {
			cur = len(out)
			out = append(out, Message{Role: "assistant"})
		}
		return &out[cur]
	}
	for k, l := range ls {
		var rl rolloutLine
		if err := l.decode(&rl); err != nil {
			return nil, err
		}
		item := rl.Payload
		switch {
		case len(rl.RecordType) > 0:
			continue
		case len(rl.Payload) == 0 && codexItems[rl.Type]:
			// An early rollout: the line is the item.
			item = l.raw
		case len(rl.Payload) == 0 && k == 0 && rl.Type == "":
			// An early rollout's first line: session id and instructions.
			if s := codexInstructions(l.raw); s != "" {
				out = append(out, Message{Role: "system", Text: s})
			}
			continue
		case rl.Type == "session_meta":
			if s := codexInstructions(rl.Payload); s != "" {
				flush()
				out = append(out, Message{Role: "system", Text: s})
			}
			continue
		case rl.Type != "response_item":
			continue
		}
		var it struct {
			Type      string          `json:"type"`
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			Summary   json.RawMessage `json:"summary"`
			Name      string          `json:"name"`
			Arguments string          `json:"arguments"`
			Input     string          `json:"input"`
			CallID    string          `json:"call_id"`
			ID        string          `json:"id"`
			Action    json.RawMessage `json:"action"`
			Output    json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(item, &it); err != nil {
			return nil, fmt.Errorf("line %d: %s item: %w", l.n, rl.Type, err)
		}
		switch it.Type {
		case "message":
			text, err := codexText(it.Content)
			if err != nil {
				return nil, fmt.Errorf("line %d: message: %w", l.n, err)
			}
			switch it.Role {
			case "assistant":
				assistant()
				curText = append(curText, text)
			case "user":
				flush()
				role := "user"
				if codexInjected(text) {
					role = "system"
				}
				out = append(out, Message{Role: role, Text: text})
			default:
				flush()
				if text != "" {
					out = append(out, Message{Role: "system", Text: text})
				}
			}
		case "reasoning":
			var texts []string
			for _, raw := range []json.RawMessage{it.Summary, it.Content} {
				s, err := codexText(raw)
				if err != nil {
					return nil, fmt.Errorf("line %d: reasoning: %w", l.n, err)
				}
				texts = append(texts, s)
			}
			if s := joinNonEmpty(texts, "\n\n"); s != "" {
				assistant()
				curText = append(curText, s)
			}
		case "function_call", "custom_tool_call", "local_shell_call":
			id := it.CallID
			if id == "" {
				id = it.ID
			}
			var args json.RawMessage
			switch it.Type {
			case "function_call":
				args = codexArguments(it.Arguments)
			case "custom_tool_call":
				args, _ = json.Marshal(map[string]string{"input": it.Input})
			default:
				it.Name = "local_shell"
				args = object(it.Action)
			}
			a := assistant()
			a.ToolCalls = append(a.ToolCalls, Call{ID: id, Name: it.Name, Arguments: args})
			names[id] = it.Name
		case "function_call_output", "custom_tool_call_output":
			flush()
			text, isErr, err := codexOutput(it.Output)
			if err != nil {
				return nil, fmt.Errorf("line %d: %s %s: %w", l.n, it.Type, it.CallID, err)
			}
			r := Message{Role: "toolResult", Text: text, ToolCallID: str(it.CallID), IsError: isErr}
			if n, ok := names[it.CallID]; ok {
				r.ToolName = str(n)
			}
			out = append(out, r)
		}
	}
	flush()
	return out, nil
}

// codexInstructions is the system prompt a session_meta (or an early
// rollout's first line) records: instructions, or base_instructions.text.
func codexInstructions(raw json.RawMessage) string {
	var m struct {
		Instructions     *string         `json:"instructions"`
		BaseInstructions json.RawMessage `json:"base_instructions"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	if m.Instructions != nil && *m.Instructions != "" {
		return *m.Instructions
	}
	var b struct {
		Text string `json:"text"`
	}
	if len(m.BaseInstructions) > 0 && json.Unmarshal(m.BaseInstructions, &b) == nil {
		return b.Text
	}
	return ""
}

// codexInjected tells a user message Codex wrote from one the user typed.
func codexInjected(text string) bool {
	t := strings.TrimSpace(text)
	for _, p := range []string{"<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<turn_aborted>"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// codexText joins the text of content items (input_text, output_text,
// summary_text, reasoning_text, text), images as placeholders; a string is
// its own text.
func codexText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var items []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return "", err
	}
	var parts []string
	for _, c := range items {
		switch c.Type {
		case "input_image", "image":
			parts = append(parts, imagePlaceholder(""))
		default:
			parts = append(parts, c.Text)
		}
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return joinNonEmpty(parts, "\n"), nil
}

// codexArguments parses a function call's arguments string.
func codexArguments(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	if t == "" {
		return json.RawMessage(`{}`)
	}
	if !json.Valid([]byte(t)) {
		b, _ := json.Marshal(map[string]string{"input": s})
		return b
	}
	return object(json.RawMessage(t))
}

// exitLine finds the exit status newer exec tools put in the header lines
// of their output; only the first exitHead bytes are searched, so a
// command's own output saying the same is not read as the status.
var exitLine = regexp.MustCompile(`(?m)^(?:Exit code: |Process exited with code )(-?\d+)`)

const exitHead = 400

// codexOutput reads a tool output: a string, content items, or an object
// {content, success}.
func codexOutput(raw json.RawMessage) (text string, isErr bool, err error) {
	if len(raw) > 0 && raw[0] == '{' {
		var o struct {
			Content json.RawMessage `json:"content"`
			Success *bool           `json:"success"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			return "", false, err
		}
		text, err = codexText(o.Content)
		return text, o.Success != nil && !*o.Success, err
	}
	text, err = codexText(raw)
	if err != nil {
		return "", false, err
	}
	var legacy struct {
		Metadata struct {
			ExitCode *int `json:"exit_code"`
		} `json:"metadata"`
	}
	if strings.HasPrefix(text, "{") && json.Unmarshal([]byte(text), &legacy) == nil && legacy.Metadata.ExitCode != nil {
		return text, *legacy.Metadata.ExitCode != 0, nil
	}
	head := text
	if len(head) > exitHead {
		head = head[:exitHead]
	}
	if m := exitLine.FindStringSubmatch(head); m != nil {
		n, _ := strconv.Atoi(m[1])
		return text, n != 0, nil
	}
	return text, false, nil
}
