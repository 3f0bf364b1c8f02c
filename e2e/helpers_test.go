package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// ---- Session JSONL --------------------------------------------------------

// SessionFile is one parsed Pi session file.
type SessionFile struct {
	Path string
	// Header is the first line ({"type":"session",...}).
	Header SessionEntry
	// Entries are the remaining lines in file order.
	Entries []SessionEntry
	// Torn counts the lines that are not JSON (see readSession).
	Torn int
}

// SessionEntry is one line of a session file. Raw keeps the whole line; the
// other fields are the ones tests commonly need.
type SessionEntry struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	ParentID   *string         `json:"parentId"`
	Timestamp  string          `json:"timestamp"`
	CustomType string          `json:"customType"`
	Data       json.RawMessage `json:"data"`
	Message    *SessionMessage `json:"message"`
	// Compaction entries.
	Summary          string `json:"summary"`
	FirstKeptEntryID string `json:"firstKeptEntryId"`
	TokensBefore     int    `json:"tokensBefore"`
	// Context-edit entries.
	TargetID string `json:"targetId"`
	// Header fields.
	Cwd string `json:"cwd"`
	// Raw is the line as written.
	Raw json.RawMessage `json:"-"`
}

// SessionMessage is the "message" of a message entry (a Pi AgentMessage).
type SessionMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	IsError    bool            `json:"isError"`
	StopReason string          `json:"stopReason"`
	Usage      json.RawMessage `json:"usage"`
	Details    json.RawMessage `json:"details"`
}

// Text returns the message's text: a string content, or the "text" fields
// of its content blocks concatenated.
func (m *SessionMessage) Text() string {
	if m == nil {
		return ""
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(m.Content, &blocks)
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

// ToolCalls returns the toolCall blocks of an assistant message.
func (m *SessionMessage) ToolCalls() []fakellm.ToolCall {
	if m == nil {
		return nil
	}
	var blocks []struct {
		Type      string          `json:"type"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	json.Unmarshal(m.Content, &blocks)
	var out []fakellm.ToolCall
	for _, b := range blocks {
		if b.Type == "toolCall" {
			out = append(out, fakellm.ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Arguments})
		}
	}
	return out
}

// ReadSession parses a session JSONL file; a line that is not JSON fails
// the test.
func ReadSession(t testing.TB, path string) SessionFile {
	t.Helper()
	return readSession(t, path, false)
}

// readSession is ReadSession that, when torn, skips lines that are not
// JSON and counts them (SessionFile.Torn), as Pi does with a file a failed
// write left a torn line in.
func readSession(t testing.TB, path string, torn bool) SessionFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sf := SessionFile{Path: path}
	r := bufio.NewReader(bytes.NewReader(data))
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			var e SessionEntry
			if jerr := json.Unmarshal(line, &e); jerr != nil {
				if !torn {
					t.Fatalf("%s:%d: %v", path, n, jerr)
				}
				sf.Torn++
				continue
			}
			e.Raw = append(json.RawMessage(nil), line...)
			if n == 1 && e.Type == "session" {
				sf.Header = e
			} else {
				sf.Entries = append(sf.Entries, e)
			}
		}
		if err != nil {
			break
		}
	}
	return sf
}

// ByType returns the entries of one type ("message", "custom",
// "compaction", "context_edit", ...).
func (s SessionFile) ByType(typ string) []SessionEntry {
	var out []SessionEntry
	for _, e := range s.Entries {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// Custom returns the custom entries with the given customType.
func (s SessionFile) Custom(customType string) []SessionEntry {
	var out []SessionEntry
	for _, e := range s.ByType("custom") {
		if e.CustomType == customType {
			out = append(out, e)
		}
	}
	return out
}

// Messages returns the messages of message entries with the given role, or
// of all message entries when role is "".
func (s SessionFile) Messages(role string) []*SessionMessage {
	var out []*SessionMessage
	for _, e := range s.ByType("message") {
		if e.Message != nil && (role == "" || e.Message.Role == role) {
			out = append(out, e.Message)
		}
	}
	return out
}

// ---- Model requests -------------------------------------------------------

// DecodeMessages parses the OpenAI "messages" array of a recorded request
// body. Recorded requests already carry the result in Messages; this is for
// bodies from elsewhere.
func DecodeMessages(body []byte) ([]fakellm.Message, error) {
	req, err := fakellm.ParseOpenAI(body)
	if err != nil {
		return nil, err
	}
	return req.Messages, nil
}

// ToolRequests returns the recorded requests that declare tools, dropping
// Pi's tool-less summary requests.
func ToolRequests(reqs []fakellm.Recorded) []fakellm.Recorded {
	var out []fakellm.Recorded
	for _, r := range reqs {
		if !r.ToolLess() {
			out = append(out, r)
		}
	}
	return out
}

// SummaryRequests returns the recorded tool-less requests (Pi's compaction
// and branch-summary calls).
func SummaryRequests(reqs []fakellm.Recorded) []fakellm.Recorded {
	var out []fakellm.Recorded
	for _, r := range reqs {
		if r.ToolLess() {
			out = append(out, r)
		}
	}
	return out
}

// Roles returns the roles of msgs in order.
func Roles(msgs []fakellm.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role
	}
	return out
}

// CountRole returns how many of msgs have the role.
func CountRole(msgs []fakellm.Message, role string) int {
	n := 0
	for _, m := range msgs {
		if m.Role == role {
			n++
		}
	}
	return n
}

// ---- Fold tags ------------------------------------------------------------

// FoldedTagRE matches a context-fold placeholder tag, capturing the code.
var FoldedTagRE = regexp.MustCompile(`\{#([0-9a-z]{6}) FOLDED\}`)

// FoldedCodes returns the distinct codes of {#code FOLDED} tags in text, in
// order of first appearance.
func FoldedCodes(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range FoldedTagRE.FindAllStringSubmatch(text, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}

// FoldedTag is one {#code FOLDED} occurrence in a request.
type FoldedTag struct {
	Code string
	// Msg is the index of the message in Request.Messages.
	Msg int
	// Role and ToolCallID are the message's; a tag in a tool result names
	// the call (e.g. GenCallID(7)) whose output was folded.
	Role, ToolCallID string
}

// FoldedTags returns every tag occurrence in the non-system messages of req.
func FoldedTags(req *fakellm.Request) []FoldedTag {
	var out []FoldedTag
	for i, m := range req.Messages {
		if m.Role == "system" {
			continue
		}
		for _, sm := range FoldedTagRE.FindAllStringSubmatch(m.Content, -1) {
			out = append(out, FoldedTag{Code: sm[1], Msg: i, Role: m.Role, ToolCallID: m.ToolCallID})
		}
	}
	return out
}

// ---- Prefix checks --------------------------------------------------------

// CheckBytePrefix reports whether the "messages" array of prev is a byte
// prefix of next's: prev's array without its closing bracket must start
// next's array. This is what a provider prompt cache needs. The error names
// the byte offset and the message where they diverge.
//
// It is meant for the OpenAI wire. On the Anthropic wire Pi moves the
// cache_control breakpoint to the newest message on every request, so even
// an append-only session breaks this check there.
func CheckBytePrefix(prev, next *fakellm.Request) error {
	a, b := prev.MessagesJSON, next.MessagesJSON
	if len(a) < 2 || a[len(a)-1] != ']' {
		return fmt.Errorf("request %d: messages array %q is malformed", prev.Seq, excerpt(a, 0, 40))
	}
	p := a[:len(a)-1]
	if bytes.HasPrefix(b, p) {
		return nil
	}
	off := commonPrefixLen(p, b)
	return fmt.Errorf("request %d is not a byte prefix of request %d: they diverge at byte %d (message %d)\n  prev: %q\n  next: %q",
		prev.Seq, next.Seq, off, messageAt(prev.Messages, prev.MessagesJSON, off), excerpt(a, off, 120), excerpt(b, off, 120))
}

// PrefixBreaks checks CheckBytePrefix between consecutive tool-declaring
// requests (summary requests are skipped) and returns one error per break.
func PrefixBreaks(reqs []fakellm.Recorded) []error {
	var errs []error
	tr := ToolRequests(reqs)
	for i := 1; i < len(tr); i++ {
		if err := CheckBytePrefix(&tr[i-1].Request, &tr[i].Request); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// FirstMessageDiff compares two message lists element by element on their
// exact bytes and returns the index of the first message of prev that is
// missing from or different in next, or -1 when prev is a message-wise
// prefix of next. Use it where Pi re-serializes messages and the byte-level
// check is too strict to localize a difference.
func FirstMessageDiff(prev, next []fakellm.Message) int {
	for i, m := range prev {
		if i >= len(next) || !bytes.Equal(m.Raw, next[i].Raw) {
			return i
		}
	}
	return -1
}

// SameMessage reports whether two messages are equal as JSON values,
// ignoring key order and insignificant whitespace.
func SameMessage(a, b fakellm.Message) bool {
	return bytes.Equal(Canonical(a.Raw), Canonical(b.Raw))
}

// Canonical re-encodes a JSON value with sorted object keys and no
// insignificant whitespace. Invalid JSON is returned unchanged.
func Canonical(raw []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return raw
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// Normalize replaces the sandbox paths in a request body (the system prompt
// names the cwd and Pi's install dir) with fixed placeholders, so bodies from
// different sandboxes can be compared byte for byte.
func (e *Env) Normalize(body []byte) []byte {
	piDir := e.Pi.CLI
	if i := strings.Index(piDir, "/node_modules/"); i >= 0 {
		piDir = piDir[:i]
	}
	r := strings.NewReplacer(e.Root, "<ROOT>", piDir, "<PI>")
	return []byte(r.Replace(string(body)))
}

func commonPrefixLen(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// messageAt returns the index of the message whose bytes contain offset off
// of the messages array, or -1.
func messageAt(msgs []fakellm.Message, array []byte, off int) int {
	pos := 0
	for i, m := range msgs {
		j := bytes.Index(array[pos:], m.Raw)
		if j < 0 {
			return -1
		}
		start := pos + j
		end := start + len(m.Raw)
		if off < end {
			return i
		}
		pos = end
	}
	return len(msgs)
}

// excerpt returns up to n bytes of b starting a little before off.
func excerpt(b []byte, off, n int) string {
	start := max(off-20, 0)
	end := min(start+n, len(b))
	if start > len(b) {
		return ""
	}
	return string(b[start:end])
}
