// Package trajectory reads agent trajectories and converts them to Pi 1.6
// AgentMessage JSON, so real third-party sessions can be replayed through the
// same engine code Pi runs.
//
// The common form is the benchmark format: one JSON message per line with
// role, text, toolCalls, toolCallId, toolName and isError (Message). Load
// also reads the session files agents write themselves, telling them apart
// by content (Detect): Pi session files (pisession.go), Claude Code session
// transcripts (claudecode.go) and Codex CLI rollout files (codex.go). Each
// reader converts to the benchmark format the way the bench set was made:
// reasoning joined before visible text in an assistant's text, multi-part
// tool results joined with "\n", images replaced by a one-line placeholder.
package trajectory

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// Call is one tool call of an assistant message.
type Call struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Message is one line of a trajectory file.
type Message struct {
	Role       string  `json:"role"`
	Text       string  `json:"text"`
	ToolCalls  []Call  `json:"toolCalls"`
	ToolCallID *string `json:"toolCallId"`
	ToolName   *string `json:"toolName"`
	IsError    bool    `json:"isError"`
}

// Trajectory is one recorded session.
type Trajectory struct {
	Name     string
	Family   string
	Messages []Message
}

// Read parses a trajectory from r. A malformed line is an error naming it.
func Read(r io.Reader) ([]Message, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	var out []Message
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(rawjson.Trim(line)) == 0 {
			continue
		}
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Load reads a trajectory file in any format Parse accepts. Errors name the
// file, and the line where there is one.
func Load(path string) ([]Message, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ms, _, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ms, nil
}

// BaseTimestamp anchors the synthetic timestamps of converted messages.
const BaseTimestamp = 1_780_000_000_000

// Converted is a trajectory as Pi messages.
type Converted struct {
	// System is the trajectory's own system text, if it had one.
	System string
	// Messages are Pi AgentMessage JSON values, system messages excluded.
	Messages [][]byte
	// Assistant marks which messages are assistant responses.
	Assistant []bool
}

// ToPi converts messages to Pi AgentMessage JSON. Timestamps are synthetic
// (one second apart) and response ids are "resp-<n>", so durable ids are
// unique and stable. Calls left without a result get none: Pi itself sends a
// synthetic "No result provided" for them, which the engine never folds.
// Arguments that are a raw string (text actions) become {"command": …}.
func ToPi(ms []Message) Converted {
	var c Converted
	ts := int64(BaseTimestamp)
	for i, m := range ms {
		ts += 1000
		var b []byte
		switch m.Role {
		case "system":
			if c.System == "" {
				c.System = m.Text
			} else {
				c.System += "\n\n" + m.Text
			}
			continue
		case "user":
			b = append(b, `{"role":"user","content":[{"type":"text","text":`...)
			b = rawjson.Quote(b, m.Text)
			b = append(b, `}],"timestamp":`...)
			b = strconv.AppendInt(b, ts, 10)
			b = append(b, '}')
		case "assistant":
			b = append(b, `{"role":"assistant","content":[`...)
			n := 0
			if m.Text != "" {
				b = append(b, `{"type":"text","text":`...)
				b = rawjson.Quote(b, m.Text)
				b = append(b, '}')
				n++
			}
			for _, call := range m.ToolCalls {
				if n > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"type":"toolCall","id":`...)
				b = rawjson.Quote(b, call.ID)
				b = append(b, `,"name":`...)
				b = rawjson.Quote(b, call.Name)
				b = append(b, `,"arguments":`...)
				b = append(b, arguments(call.Arguments)...)
				b = append(b, '}')
				n++
			}
			stop := "stop"
			if len(m.ToolCalls) > 0 {
				stop = "toolUse"
			}
			b = append(b, `],"api":"bench","provider":"bench","model":"bench","usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"`...)
			b = append(b, stop...)
			b = append(b, `","timestamp":`...)
			b = strconv.AppendInt(b, ts, 10)
			b = append(b, `,"responseId":"resp-`...)
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, `"}`...)
		case "toolResult":
			id, name := "", "tool"
			if m.ToolCallID != nil {
				id = *m.ToolCallID
			}
			if m.ToolName != nil && *m.ToolName != "" {
				name = *m.ToolName
			}
			b = append(b, `{"role":"toolResult","toolCallId":`...)
			b = rawjson.Quote(b, id)
			b = append(b, `,"toolName":`...)
			b = rawjson.Quote(b, name)
			b = append(b, `,"content":[{"type":"text","text":`...)
			b = rawjson.Quote(b, m.Text)
			b = append(b, `}],"isError":`...)
			b = strconv.AppendBool(b, m.IsError)
			b = append(b, `,"timestamp":`...)
			b = strconv.AppendInt(b, ts, 10)
			b = append(b, '}')
		default:
			b = append(b, `{"role":`...)
			b = rawjson.Quote(b, m.Role)
			b = append(b, `,"content":`...)
			b = rawjson.Quote(b, m.Text)
			b = append(b, `,"timestamp":`...)
			b = strconv.AppendInt(b, ts, 10)
			b = append(b, '}')
		}
		c.Messages = append(c.Messages, b)
		c.Assistant = append(c.Assistant, m.Role == "assistant")
	}
	return c
}

func arguments(raw json.RawMessage) []byte {
	t := rawjson.Trim(raw)
	switch {
	case len(t) > 0 && t[0] == '{' && rawjson.Valid(t):
		return t
	case rawjson.IsString(t):
		if s, err := rawjson.Unquote(t); err == nil {
			return append(rawjson.Quote([]byte(`{"command":`), s), '}')
		}
	case len(t) > 0 && !rawjson.IsNull(t) && rawjson.Valid(t):
		return append(append([]byte(`{"value":`), t...), '}')
	}
	return []byte("{}")
}

// Find lists the trajectory files under root: root itself when it is a file,
// else every *.jsonl below it (any format Load reads), sorted. A directory
// named pi-sessions is skipped: in the bench set it holds the raw Pi files
// that trajectories/pi already has converted, and reading both would count
// those sessions twice. Name the directory itself to read it.
func Find(root string) ([]string, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{root}, nil
	}
	var out []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && d.Name() == "pi-sessions" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// Family returns the family of a trajectory file: its parent directory name.
func Family(path string) string { return filepath.Base(filepath.Dir(path)) }
