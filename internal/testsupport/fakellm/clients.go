package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ClientSession is a Script for sessions of real coding-agent CLIs (Claude
// Code on the Anthropic route, Codex on the Responses route, opencode on
// the Chat Completions route): a build-log session of Turns shell commands,
// then a final text.
//
// The turn is derived from the request, not counted: turn = 1 + the number
// of tool results already in the conversation (Role "tool" messages:
// Anthropic tool_result blocks, Responses function_call_output and
// custom_tool_call_output items, Chat "tool" messages). A retried request,
// or a side request that carries the same conversation, gets the same
// answer.
//
// For turns 1..Turns the model calls the client's shell tool, found by name
// among the request's declared tools (ShellToolNames), with the arguments
// built from that tool's JSON schema: ClientCommand(turn) in its command
// field ("command", as a string or an argv array, or "cmd"), plus a value
// for every other required field. After Turns the answer is FinalText. A
// request that declares no shell tool (opencode's title request, with no
// tools at all, or any request without one) gets SideText and no call.
type ClientSession struct {
	// Turns is the number of shell calls; 0 means 5.
	Turns int
	// FinalText is the last answer; "" means ClientFinal plus a sentence.
	FinalText string
	// SideText answers requests without a shell tool; "" means ClientSideText.
	SideText string
	// Lines is the number of build-log lines of each output (0: 120).
	Lines int
	// Recall, after the shell turns, calls two MCP tools of context-fold's
	// on the first {#code FOLDED} tag among the request's tool results:
	// recall_folded {"codes":[code]}, then unfold {"codes":[code]}, then
	// gives the final text. Without a tag, or without the tool, the final
	// text comes at once, starting with ClientNoFold.
	Recall bool
	// Thinking makes every scripted reply (the shell calls, the MCP calls
	// and the final text; not SideText) carry one reasoning block,
	// ClientThinking(turn), in Reply.Thinking: an Anthropic thinking block
	// with its signature, a Responses reasoning item with its encrypted
	// content, a Chat Completions reasoning_content. The server still drops
	// it where the model does not think (an Anthropic request without
	// thinking enabled, a Responses model that is no reasoning model).
	Thinking bool
	// TurnsPerPrompt, when > 0, makes the session answer several user
	// prompts (a client fed one prompt after another): each prompt gets
	// TurnsPerPrompt shell calls, then the final text, ClientPromptFinal.
	// The calls of a prompt are counted by PromptToolResults: the tool
	// results after the request's last user prompt. The shell command and
	// the thinking still follow ClientTurn, which counts every tool result
	// of the conversation, so no two calls of a session run the same
	// command. Turns and Recall are not used then.
	TurnsPerPrompt int
	// Search, in a Recall session, adds a call between the recall by code
	// and unfold: recall_folded {"search":Search}. Without the tool, the
	// final text comes at once, starting with ClientNoFold.
	Search string
}

// ClientThinking is the reasoning text of a ClientSession with Thinking on,
// for the reply to a request of that turn: short, and different per turn.
func ClientThinking(turn int) string {
	return fmt.Sprintf("Thinking for turn %d: look at the latest build output, then decide step %d.", turn, turn)
}

// ClientPromptThinking is the reasoning text of a ClientSession with
// Thinking and TurnsPerPrompt on, for the reply to a request of that
// prompt (1-based) and turn.
func ClientPromptThinking(prompt, turn int) string {
	return fmt.Sprintf("Thinking for prompt %d, turn %d: look at the latest build output, then decide step %d.", prompt, turn, turn)
}

// ClientNoFold starts the final text of a Recall session that found no
// folded block, or no recall tool, to call.
const ClientNoFold = "NO_FOLD_TO_RECALL"

// ClientFinal is the token every ClientSession final answer starts with.
const ClientFinal = "FINAL_ANSWER_OK"

// ClientSideText is the default answer to a request without a shell tool.
const ClientSideText = "Fake side reply"

// ShellToolNames are the shell tools ClientSession looks for, in order of
// preference: Claude Code's "Bash", Codex's "exec_command", opencode's (and
// Pi's) "bash", and two other names clients use for the same tool.
var ShellToolNames = []string{"Bash", "exec_command", "bash", "shell", "shell_command"}

// ClientErrorLines is how many "ERROR:" lines ClientCommand's output has.
const ClientErrorLines = 4

// ClientCommand is the shell command of a turn. Its output is 121 lines,
// about 10 KB (9,990 bytes for turns 1-9), different for every turn: 120 numbered build-log lines of
// which ClientErrorLines (every 30th) are "ERROR: turn N step I failed: ..."
// lines, then ClientMarker(turn). The marker's number is computed by the
// shell, so the marker text is not in the command: finding it in a later
// request proves the command's output came back. POSIX sh (seq, $((...))),
// so any of the clients' shells runs it.
func ClientCommand(turn int) string { return ClientCommandN(turn, 120) }

// ClientCommandN is ClientCommand with lines build-log lines.
func ClientCommandN(turn, lines int) string {
	return fmt.Sprintf(`for i in $(seq 1 %[3]d); do if [ $((i %% 30)) -eq 0 ]; then `+
		`echo "ERROR: turn %[1]d step $i failed: disk quota exceeded on /var/tmp/build-%[1]d-$i"; else `+
		`echo "INFO: turn %[1]d step $i ok - compiled pkg/mod_%[1]d/file_$i.o in 0.0${i}s (padding padding)"; fi; done; `+
		`echo "SUMMARY: turn %[1]d: $((7000 + 100 * %[1]d + 14)) ok, %[2]d errors"`, turn, lines/30, lines)
}

// ClientMarker is the last line ClientCommand(turn) prints, e.g.
// "SUMMARY: turn 3: 7314 ok, 4 errors".
func ClientMarker(turn int) string { return ClientMarkerN(turn, 120) }

// ClientMarkerN is the last line ClientCommandN(turn, lines) prints.
func ClientMarkerN(turn, lines int) string {
	return fmt.Sprintf("SUMMARY: turn %d: %d ok, %d errors", turn, 7000+100*turn+14, lines/30)
}

// ClientPromptFinal is the final text of a ClientSession with
// TurnsPerPrompt on, for prompt (1-based) after calls shell calls.
func ClientPromptFinal(prompt, calls int) string {
	return fmt.Sprintf("%s: prompt %d: %d build steps ran; each printed %d ERROR lines.", ClientFinal, prompt, calls, ClientErrorLines)
}

// UserPrompt reports whether message i of req is a user prompt: a Role
// "user" message that does not ride with tool results (on the Anthropic
// route, the text blocks of a message of tool_result blocks become a
// "user" Message right after their "tool" Messages: a note, not a prompt).
func UserPrompt(req *Request, i int) bool {
	m := &req.Messages[i]
	if m.Role != "user" {
		return false
	}
	if i > 0 && req.Messages[i-1].Role == "tool" {
		var w struct {
			Content []struct {
				Type string `json:"type"`
			} `json:"content"`
		}
		if json.Unmarshal(m.Raw, &w) == nil {
			for _, b := range w.Content {
				if b.Type == "tool_result" {
					return false
				}
			}
		}
	}
	return true
}

// ClientPrompt is the prompt of a request: the number of user prompts in
// it (UserPrompt), at least 1.
func ClientPrompt(req *Request) int {
	n := 0
	for i := range req.Messages {
		if UserPrompt(req, i) {
			n++
		}
	}
	return max(n, 1)
}

// PromptToolResults is the number of tool results after the request's
// last user prompt (UserPrompt); all of them when it has none.
func PromptToolResults(req *Request) int {
	n := 0
	for i, m := range req.Messages {
		switch {
		case UserPrompt(req, i):
			n = 0
		case m.Role == "tool":
			n++
		}
	}
	return n
}

// ClientTurn is the turn of a request: 1 + the tool results in it, plus
// the turns a client compaction's summary (ClientSummary) says were done
// before the conversation it opens.
func ClientTurn(req *Request) int {
	n := 1
	for _, m := range req.Messages {
		switch {
		case m.Role == "tool":
			n++
		case m.Role == "user" || m.Role == "assistant": // opencode's summary is an assistant message
			if sub := turnsDoneRE.FindStringSubmatch(m.Content); sub != nil {
				k, _ := strconv.Atoi(sub[1])
				n += k
			}
			// opencode's compaction request renders the history as text.
			n += strings.Count(m.Content, "\n[Tool result]:")
		}
	}
	return n
}

// CompactionPrompts are in the prompts the clients send to have their
// history summarized.
var CompactionPrompts = []string{
	"Your task is to create a detailed summary of the conversation so far", // Claude Code
	"You are performing a CONTEXT CHECKPOINT COMPACTION",                   // Codex
	"Create a new anchored summary from the conversation history",          // opencode
}

// CompactionRequest reports whether req asks for a summary of the
// conversation: a compaction prompt after its last tool result.
func CompactionRequest(req *Request) bool {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := &req.Messages[i]
		if m.Role == "tool" || m.Role == "assistant" {
			return false
		}
		for _, p := range CompactionPrompts {
			if strings.Contains(m.Content, p) || strings.Contains(string(m.Raw), p) {
				return true
			}
		}
	}
	return false
}

var turnsDoneRE = regexp.MustCompile(`CLIENT_TURNS_DONE=(\d+)`)

// ClientSummary is a ClientSession's answer to a compaction request of
// turn turn: it says how many turns were done, so that the conversation
// that starts from it goes on with the next (ClientTurn). It is about
// 2,000 tokens long (8 KB), as a model's detailed summary of a long
// session is, so that a compaction is priced with a realistic output.
func ClientSummary(turn int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Summary: %d build steps ran, each printing %d ERROR lines. CLIENT_TURNS_DONE=%d\n", turn-1, ClientErrorLines, turn-1)
	for i := 1; b.Len() < 8000; i++ {
		fmt.Fprintf(&b, "- Note %d: the build log of a step was read; its ERROR lines name /var/tmp paths.\n", i)
	}
	return b.String()
}

// ToolDecl is one tool a request declares, with its parameter schema.
type ToolDecl struct {
	// Name is the tool's name.
	Name string
	// Type is the declared type: "" or "custom" on the Anthropic route for
	// plain tools (server tools have their own), "function" on the OpenAI
	// routes, or e.g. "custom", "namespace", "tool_search" on Responses.
	Type string
	// Schema is the JSON schema of the arguments (Anthropic input_schema,
	// Chat function.parameters, Responses parameters); nil when none.
	Schema json.RawMessage
}

// DeclaredTools returns the tools a request declares, in order, with their
// schemas, read from the raw body of its route.
func DeclaredTools(req *Request) ([]ToolDecl, error) {
	var w struct {
		Tools []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
			Parameters  json.RawMessage `json:"parameters"`
			Function    *struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(req.Body, &w); err != nil {
		return nil, fmt.Errorf("fakellm: tools: %w", err)
	}
	out := make([]ToolDecl, 0, len(w.Tools))
	for _, t := range w.Tools {
		d := ToolDecl{Name: t.Name, Type: t.Type}
		switch {
		case req.API == Anthropic:
			d.Schema = t.InputSchema
		case t.Function != nil:
			d.Name, d.Schema = t.Function.Name, t.Function.Parameters
		default:
			d.Schema = t.Parameters
		}
		out = append(out, d)
	}
	return out, nil
}

// ShellTool returns the request's shell tool: the first of ShellToolNames
// it declares as a plain function tool.
func ShellTool(req *Request) (ToolDecl, bool) {
	tools, err := DeclaredTools(req)
	if err != nil {
		return ToolDecl{}, false
	}
	for _, name := range ShellToolNames {
		for _, t := range tools {
			if t.Name != name {
				continue
			}
			switch t.Type {
			case "", "function", "custom":
				if req.API == Responses && t.Type == "custom" {
					continue // a freeform tool: its input is no JSON object
				}
				return t, true
			}
		}
	}
	return ToolDecl{}, false
}

// ShellArgs builds the arguments of a call of tool running command, from
// the tool's schema: the command goes into "command" (a string, or
// ["bash","-lc",command] when the schema says array) or, when the schema has
// no "command" but has "cmd", into "cmd"; every other required property
// gets a plain value of its type (a short text for strings such as Codex's
// "justification" or a "description").
func ShellArgs(tool ToolDecl, command string) json.RawMessage {
	var schema struct {
		Properties map[string]struct {
			Type    any      `json:"type"`
			Minimum *float64 `json:"minimum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	json.Unmarshal(tool.Schema, &schema)
	args := map[string]any{}
	cmd, hasCommand := schema.Properties["command"]
	_, hasCmd := schema.Properties["cmd"]
	switch {
	case hasCommand && schemaType(cmd.Type) == "array":
		args["command"] = []string{"bash", "-lc", command}
	case !hasCommand && hasCmd:
		args["cmd"] = command
	default:
		args["command"] = command
	}
	for _, r := range schema.Required {
		if _, ok := args[r]; ok {
			continue
		}
		p := schema.Properties[r]
		switch schemaType(p.Type) {
		case "number", "integer":
			v := 1.0
			if p.Minimum != nil && *p.Minimum > v {
				v = *p.Minimum
			}
			args[r] = v
		case "boolean":
			args[r] = false
		case "array":
			args[r] = []any{}
		case "object":
			args[r] = map[string]any{}
		default:
			args[r] = "Run the scripted build step"
		}
	}
	b, _ := json.Marshal(args) // sorted keys: deterministic
	return b
}

// schemaType returns a schema "type": the string, or the first non-"null"
// entry of a type list.
func schemaType(t any) string {
	switch v := t.(type) {
	case string:
		return v
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok && s != "null" {
				return s
			}
		}
	}
	return ""
}

// Reply implements Script.
func (s *ClientSession) Reply(req *Request) Reply {
	if CompactionRequest(req) {
		return Reply{Text: ClientSummary(ClientTurn(req))}
	}
	shell, ok := ShellTool(req)
	if !ok {
		return Reply{Text: s.side()}
	}
	r := s.reply(req, shell)
	switch {
	case !s.Thinking:
	case s.TurnsPerPrompt > 0:
		r.Thinking = []string{ClientPromptThinking(ClientPrompt(req), ClientTurn(req))}
	default:
		r.Thinking = []string{ClientThinking(ClientTurn(req))}
	}
	return r
}

// reply is the scripted answer to a request with a shell tool, without
// thinking.
func (s *ClientSession) reply(req *Request, shell ToolDecl) Reply {
	turn := ClientTurn(req)
	if s.TurnsPerPrompt > 0 {
		if PromptToolResults(req) < s.TurnsPerPrompt {
			return Reply{ToolCalls: []ToolCall{{Name: shell.Name, Arguments: ShellArgs(shell, ClientCommandN(turn, s.lines()))}}}
		}
		if s.FinalText != "" {
			return Reply{Text: s.FinalText}
		}
		return Reply{Text: ClientPromptFinal(ClientPrompt(req), s.TurnsPerPrompt)}
	}
	if turn <= s.turns() {
		return Reply{ToolCalls: []ToolCall{{Name: shell.Name, Arguments: ShellArgs(shell, ClientCommandN(turn, s.lines()))}}}
	}
	if s.Recall {
		// MCP tools deferred behind Claude Code's ToolSearch: search for
		// them first, then go on as if they were declared.
		searched := 0
		for _, tc := range req.ToolCallsSeen() {
			if tc.Name == toolSearchName {
				searched++
			}
		}
		if bytes.Contains(req.Body, []byte(`"tool_search_output"`)) {
			searched = -1 // Codex's: no tool result, no turn; searched once
		}
		if _, ok := MCPTool(req, "recall_folded"); !ok && searched == 0 {
			if tc, ok := deferredSearch(req); ok {
				return Reply{ToolCalls: []ToolCall{tc}}
			}
		}
		step := turn - s.turns() - max(searched, 0)
		if s.Search != "" && step == 2 {
			tc, ok := MCPTool(req, "recall_folded")
			if !ok {
				return Reply{Text: fmt.Sprintf("%s: no recall_folded tool", ClientNoFold)}
			}
			tc.Arguments, _ = json.Marshal(map[string]string{"search": s.Search})
			return Reply{ToolCalls: []ToolCall{tc}}
		}
		if s.Search != "" && step > 2 {
			step-- // the search call came between
		}
		switch step {
		case 1, 2:
			name := "recall_folded"
			code := FirstFoldCode(req)
			if step == 2 {
				name, code = "unfold", s.recalled(req)
			}
			tc, ok := MCPTool(req, name)
			if !ok || code == "" {
				return Reply{Text: fmt.Sprintf("%s: no %s tool or no folded block", ClientNoFold, name)}
			}
			tc.Arguments = json.RawMessage(`{"codes":["` + code + `"]}`)
			return Reply{ToolCalls: []ToolCall{tc}}
		}
	}
	return Reply{Text: s.final()}
}

func (s *ClientSession) lines() int {
	if s.Lines <= 0 {
		return 120
	}
	return s.Lines
}

var foldTagRE = regexp.MustCompile(`\{#([0-9a-z]+) FOLDED\}`)

// FirstFoldCode returns the code of the first {#code FOLDED} tag among the
// request's tool results, else among its user messages (the index a
// client's compaction left appended to its summary), or "".
func FirstFoldCode(req *Request) string {
	for _, role := range []string{"tool", "user"} {
		for _, m := range req.Messages {
			if m.Role != role {
				continue
			}
			if sub := foldTagRE.FindStringSubmatch(m.Content); sub != nil {
				return sub[1]
			}
		}
	}
	return ""
}

// recalled returns the code the session's recall_folded call by code asked
// for (a search call names none).
func (s *ClientSession) recalled(req *Request) string {
	for _, tc := range req.ToolCallsSeen() {
		if strings.HasSuffix(tc.Name, "recall_folded") {
			var a struct{ Codes []string }
			if json.Unmarshal(tc.Arguments, &a) == nil && len(a.Codes) == 1 {
				return a.Codes[0]
			}
		}
	}
	return ""
}

// toolSearchName is Claude Code's tool that loads deferred tools.
const toolSearchName = "ToolSearch"

// deferredRE finds the names of context-fold's deferred MCP tools in the
// message that lists them (Claude Code names them mcp__<server>__<tool>).
var deferredRE = regexp.MustCompile(`mcp__[A-Za-z0-9_-]+?__(recall_folded|unfold)`)

// deferredSearch is the ToolSearch call that loads context-fold's MCP
// tools when the request declares ToolSearch and lists them as deferred:
// {"query":"select:<names>"}, as a model selects tools it knows by name.
func deferredSearch(req *Request) (ToolCall, bool) {
	found := false
	for _, d := range mustTools(req) {
		if d.Type == "tool_search" {
			// Codex's: by keyword, over the deferred tools' metadata.
			args, _ := json.Marshal(map[string]any{"query": "recall_folded", "limit": 8})
			return ToolCall{Name: ToolSearchCall, Arguments: args}, true
		}
		found = found || d.Name == toolSearchName
	}
	if !found {
		return ToolCall{}, false
	}
	var names []string
	seen := map[string]bool{}
	for _, n := range deferredRE.FindAllString(string(req.Body), -1) {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ToolCall{}, false
	}
	args, _ := json.Marshal(map[string]string{"query": "select:" + strings.Join(names, ",")})
	return ToolCall{Name: toolSearchName, Arguments: args}, true
}

// mustTools is DeclaredTools, nil when the tools cannot be read.
func mustTools(req *Request) []ToolDecl {
	ts, _ := DeclaredTools(req)
	return ts
}

// MCPTool finds the request's declaration of MCP tool name, as each client
// names it: Claude Code "mcp__<server>__<name>", opencode
// "<server>_<name>", Codex a tool <name> inside a namespace tool
// "mcp__<server>".
func MCPTool(req *Request, name string) (ToolCall, bool) {
	var w struct {
		Tools []struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"tools"`
	}
	if json.Unmarshal(req.Body, &w) != nil {
		return ToolCall{}, false
	}
	// Codex's tool search answers with the tools it found, in
	// tool_search_output items of the input.
	var in struct {
		Input []struct {
			Type  string `json:"type"`
			Tools []struct {
				Name  string `json:"name"`
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			} `json:"tools"`
		} `json:"input"`
	}
	if json.Unmarshal(req.Body, &in) == nil {
		for _, it := range in.Input {
			if it.Type != "tool_search_output" {
				continue
			}
			for _, t := range it.Tools {
				for _, s := range t.Tools {
					if s.Name == name {
						return ToolCall{Name: name, Namespace: t.Name}, true
					}
				}
			}
		}
	}
	for _, t := range w.Tools {
		n := t.Name
		if t.Function != nil {
			n = t.Function.Name
		}
		if t.Type == "namespace" {
			for _, in := range t.Tools {
				if in.Name == name {
					return ToolCall{Name: name, Namespace: t.Name}, true
				}
			}
			continue
		}
		if n != name && (strings.HasSuffix(n, "__"+name) || strings.HasSuffix(n, "_"+name)) {
			return ToolCall{Name: n}, true
		}
	}
	return ToolCall{}, false
}

// Summary implements Summarizer: a request without tools gets SideText.
func (s *ClientSession) Summary(req *Request) string {
	if CompactionRequest(req) {
		return ClientSummary(ClientTurn(req))
	}
	return s.side()
}

func (s *ClientSession) turns() int {
	if s.Turns <= 0 {
		return 5
	}
	return s.Turns
}

func (s *ClientSession) final() string {
	if s.FinalText != "" {
		return s.FinalText
	}
	return fmt.Sprintf("%s: %d build steps ran; each printed %d ERROR lines.", ClientFinal, s.turns(), ClientErrorLines)
}

func (s *ClientSession) side() string {
	if s.SideText != "" {
		return s.SideText
	}
	return ClientSideText
}

// ClientMarkers reports, for each turn 1..turns, the Seq of the first
// request after the one that asked for that turn's command whose tool
// results hold ClientMarker(turn), or 0 when none does. A request "asked
// for" turn t when its ClientTurn is t and the script answered with a
// call; requests that failed (status not 200) are skipped.
func ClientMarkers(reqs []Recorded, turns int) []int {
	out := make([]int, turns)
	for t := 1; t <= turns; t++ {
		asked := 0
		for i := range reqs {
			r := &reqs[i]
			if r.Status == 200 && len(r.Reply.ToolCalls) > 0 && ClientTurn(&r.Request) == t {
				asked = r.Seq
				break
			}
		}
		if asked == 0 {
			continue
		}
		marker := ClientMarker(t)
		for i := range reqs {
			r := &reqs[i]
			if r.Seq <= asked {
				continue
			}
			found := false
			for _, m := range r.Messages {
				found = found || (m.Role == "tool" && strings.Contains(m.Content, marker))
			}
			if found {
				out[t-1] = r.Seq
				break
			}
		}
	}
	return out
}
