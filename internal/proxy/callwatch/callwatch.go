// Package callwatch reports the tool calls a model makes by watching the
// provider's HTTP response body as a proxy forwards it.
//
// The proxy needs to know which conversation asked for a tool call: the model
// calls the MCP tool recall_folded, the client runs it, and the MCP server
// receives only the call id (in _meta) and must find the conversation. A
// Watcher sees the response body chunk by chunk, exactly as forwarded, and
// calls report with each wanted call as soon as the stream shows it complete.
// Asked to (OnUsage), it also reports the token usage the response carries,
// once, when the body ends (see Usage).
//
// A Watcher never touches the stream: Write only copies what it needs, so the
// proxy may call it before or after forwarding each chunk. It understands
// three wire formats, streamed (text/event-stream) or as one JSON object:
//
//   - Messages (Anthropic Messages): tool_use and mcp_tool_use content blocks.
//     Streamed, a block is content_block_start, input_json_delta pieces and
//     content_block_stop, reported at the stop.
//   - Responses (OpenAI Responses): function_call, custom_tool_call and
//     mcp_call output items, reported at response.output_item.done, or at
//     response.completed / response.incomplete for an item the stream did not
//     show done; each call once.
//   - Chat (OpenAI Chat Completions): choices[].delta.tool_calls pieces,
//     reported when their choice's finish_reason arrives or at data: [DONE].
//
// A call the stream leaves unfinished (the body ends early) is not reported.
// Memory is bounded whatever the body holds: a line over MaxLine bytes is
// skipped with the event it belongs to, a JSON body over MaxBody bytes is not
// parsed, and a call whose arguments exceed MaxArgs bytes on the wire is not
// reported. Arguments are kept only for calls of wanted tools.
//
// SSE is read as the specification frames it (LF, CRLF or CR line ends,
// data lines joined by LF, a blank line ending the event); only data lines
// matter, as every event's data names its own type in the three formats.
// The body must be the decoded one (no Content-Encoding): a compressed body
// reports nothing. A Watcher is not safe for concurrent use.
package callwatch

import (
	"bytes"
	"encoding/json"
)

// Limits on what a Watcher holds.
const (
	// MaxLine is the longest SSE line (and the most data one event may
	// gather) a Watcher reads; longer ones are skipped with their event.
	MaxLine = 8 << 20
	// MaxBody is the largest non-streaming body a Watcher parses.
	MaxBody = 16 << 20
	// MaxArgs is the most argument bytes, as they travel on the wire
	// (escaped), kept for one call; a call over it is not reported.
	MaxArgs = 1 << 20
	// maxPending bounds the calls one stream tracks at a time, maxHeld the
	// argument bytes they hold together and maxName the length of an id or
	// a name, so no stream can grow a Watcher without bound.
	maxPending = 1024
	maxHeld    = 4 * MaxArgs
	maxName    = 1024
)

// Call is one tool call the model made.
type Call struct {
	// ID is the id the client will answer with: tool_use id (Messages),
	// call_id (Responses; an mcp_call's id), tool_calls[].id (Chat).
	ID string
	// Name is the tool name as the model wrote it.
	Name string
	// Namespace qualifies Name where the wire carries it apart: a Responses
	// function_call's namespace (Codex puts MCP tools in "mcp__<server>"),
	// an mcp_call's server_label, an mcp_tool_use's server_name; else "".
	Namespace string
	// Args is the complete arguments text as the model produced it: the
	// JSON object text (a custom tool's free-form input for
	// custom_tool_call).
	Args string
}

// Format is a provider's response format.
type Format int

const (
	// Messages is the Anthropic Messages API.
	Messages Format = iota
	// Responses is the OpenAI Responses API.
	Responses
	// Chat is the OpenAI Chat Completions API.
	Chat
)

func (f Format) String() string {
	switch f {
	case Messages:
		return "messages"
	case Responses:
		return "responses"
	case Chat:
		return "chat"
	}
	return "format?"
}

// Watcher watches one response body. Create it with New.
type Watcher struct {
	format  Format
	stream  bool
	want    func(name string) bool
	report  func(Call)
	closed  bool // no more writes
	done    bool // closed and everything dropped
	parsing bool // Close is parsing the JSON body

	// SSE framing.
	line    []byte // a line split across writes
	skip    bool   // inside an over-long line, dropped up to its end
	cr      bool   // the last line ended in CR: a LF right after belongs to it
	started bool   // past the first line (where a BOM is dropped)
	data    []byte // the data lines of the event being read, joined by LF
	hasData bool   // the event has a data line (possibly empty)
	bad     bool   // the event lost a line to MaxLine: it is dropped

	// A non-streaming body.
	body   []byte
	tooBig bool

	held int // argument bytes the calls in progress hold

	msg  msgState
	resp respState
	chat chatState

	onUsage func(Usage)
	usage   usageState
}

// New returns a Watcher for a body in format f. stream says the body is
// text/event-stream; otherwise it is one JSON object, parsed at Close. Only
// calls for which want(name) is true are reported (nil wants every call);
// report is called from Write or Close, with each call once; it may call
// Close.
func New(f Format, stream bool, want func(name string) bool, report func(Call)) *Watcher {
	if want == nil {
		want = func(string) bool { return true }
	}
	if report == nil {
		report = func(Call) {}
	}
	return &Watcher{format: f, stream: stream, want: want, report: report}
}

// Write reads the next chunk of the body. It never fails and never keeps p.
func (w *Watcher) Write(p []byte) (int, error) {
	n := len(p)
	if w.closed {
		return n, nil
	}
	if !w.stream {
		w.collect(p)
		return n, nil
	}
	for len(p) > 0 && !w.closed { // report may have closed w
		if w.cr {
			w.cr = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := lineEnd(p)
		if i < 0 {
			w.partial(p)
			break
		}
		w.cr = p[i] == '\r'
		seg := p[:i]
		p = p[i+1:]
		switch {
		case w.skip:
			w.skip = false
		case len(w.line) > 0:
			if len(w.line)+len(seg) > MaxLine {
				w.overlong()
				w.skip = false
				continue
			}
			w.line = append(w.line, seg...)
			w.onLine(w.line)
			if cap(w.line) > 1<<20 {
				w.line = nil // do not hold one long line's buffer for the whole stream
			} else {
				w.line = w.line[:0]
			}
		case len(seg) > MaxLine:
			w.overlong()
			w.skip = false
		default:
			w.onLine(seg)
		}
	}
	return n, nil
}

// Close ends the body: a non-streaming body is parsed now; the calls a
// stream left unfinished are dropped. Later writes are ignored.
func (w *Watcher) Close() {
	if w.done {
		return
	}
	w.closed = true
	if !w.stream && !w.tooBig && !w.parsing {
		w.parsing = true // report may call Close while the body is parsed
		w.parseBody(w.body)
	}
	if on, u := w.onUsage, w.usage; on != nil && u.seen {
		w.onUsage = nil // once, if on closes w again
		on(u.u)
	}
	// Drop everything held. report may be running (and closing w) in the
	// middle of a batch of calls, so it is replaced, not cleared.
	*w = Watcher{format: w.format, stream: w.stream, closed: true, done: true,
		want: func(string) bool { return false }, report: func(Call) {}}
}

// lineEnd returns the index of the first CR or LF in p, or -1.
func lineEnd(p []byte) int {
	i := bytes.IndexByte(p, '\n')
	head := p
	if i >= 0 {
		head = p[:i]
	}
	if j := bytes.IndexByte(head, '\r'); j >= 0 {
		return j
	}
	return i
}

// partial keeps the start of a line the next write will finish.
func (w *Watcher) partial(p []byte) {
	if w.skip {
		return
	}
	if len(w.line)+len(p) > MaxLine {
		w.overlong()
		return
	}
	w.line = append(w.line, p...)
}

// overlong drops the line being read (and its event) and skips to its end.
func (w *Watcher) overlong() {
	w.skip, w.bad = true, true
	w.line = nil // let a huge buffer go
}

// onLine handles one SSE line (without its end).
func (w *Watcher) onLine(l []byte) {
	if !w.started {
		w.started = true
		l = bytes.TrimPrefix(l, []byte("\xEF\xBB\xBF"))
	}
	switch {
	case len(l) == 0:
		w.dispatch()
	case len(l) >= 5 && string(l[:5]) == "data:":
		v := l[5:]
		if len(v) > 0 && v[0] == ' ' {
			v = v[1:]
		}
		w.appendData(v)
	case string(l) == "data":
		w.appendData(nil)
	}
	// Comments, event:, id: and retry: lines do not matter.
}

func (w *Watcher) appendData(v []byte) {
	if w.bad {
		return
	}
	if w.hasData {
		w.data = append(w.data, '\n')
	}
	w.hasData = true
	if len(w.data)+len(v) > MaxLine {
		w.bad = true
		w.data = nil
		return
	}
	w.data = append(w.data, v...)
}

// dispatch ends the event at a blank line.
func (w *Watcher) dispatch() {
	if w.hasData && !w.bad {
		w.event(w.data)
	}
	w.hasData, w.bad = false, false
	if cap(w.data) > 1<<20 {
		w.data = nil // do not hold one big event's buffer for the whole stream
	} else {
		w.data = w.data[:0]
	}
}

func (w *Watcher) event(data []byte) {
	switch w.format {
	case Messages:
		w.msgEvent(data)
	case Responses:
		w.respEvent(data)
	case Chat:
		w.chatEvent(data)
	}
}

// collect gathers a non-streaming body up to MaxBody.
func (w *Watcher) collect(p []byte) {
	if w.tooBig {
		return
	}
	if len(w.body)+len(p) > MaxBody {
		w.tooBig, w.body = true, nil
		return
	}
	w.body = append(w.body, p...)
}

func (w *Watcher) parseBody(b []byte) {
	w.usageData(b)
	switch w.format {
	case Messages:
		w.msgBody(b)
	case Responses:
		w.respBody(b)
	case Chat:
		w.chatBody(b)
	}
}

// addArgs appends piece to the escaped arguments *args of a call in
// progress; over the limits the call is dropped (*over set, *args freed).
func (w *Watcher) addArgs(args *[]byte, over *bool, piece []byte) {
	if *over {
		return
	}
	if len(*args)-1+len(piece) > MaxArgs || w.held+len(piece) > maxHeld {
		w.release(*args)
		*args, *over = nil, true
		return
	}
	*args = append(*args, piece...)
	w.held += len(piece)
}

// release returns the bytes of a call's arguments to the budget.
func (w *Watcher) release(args []byte) {
	if len(args) > 0 {
		w.held -= len(args) - 1 // the opening quote was never counted
	}
}

// argsText returns the arguments text of raw: the contents of a JSON string,
// or raw itself for any other JSON value (Anthropic's input object). ok is
// false when that is over MaxArgs bytes on the wire.
func argsText(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return string(raw), len(raw) <= MaxArgs
	}
	if len(raw)-2 > MaxArgs {
		return "", false
	}
	return unquote(raw)
}

// unquote decodes the JSON string literal q. Pieces of a streamed string are
// joined still escaped and decoded once here, so a surrogate pair split
// across two pieces (\ud83d + \ude00) still makes one character.
func unquote(q []byte) (string, bool) {
	var s string
	if json.Unmarshal(q, &s) != nil {
		return "", false
	}
	return s, true
}

// strContents returns the bytes between the quotes of the JSON string raw,
// still escaped, and whether raw is a string.
func strContents(raw json.RawMessage) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	return raw[1 : len(raw)-1], true
}

// A needle is a JSON string token, quotes included, that an event must hold
// to matter. Inside text it could only appear escaped (\"), so prose that
// merely mentions it does not match. Every needle has an underscore, a byte
// rare in prose: hasAny looks for underscores at IndexByte speed and checks
// the needles around each one, instead of scanning for their first byte, a
// quote, which JSON is full of.
type needle struct {
	s  []byte
	at int // index of the first '_' in s
}

func newNeedle(s string) needle {
	at := bytes.IndexByte([]byte(s), '_')
	if at < 0 {
		panic("callwatch: needle without underscore: " + s)
	}
	return needle{[]byte(s), at}
}

// hasAny reports whether b contains any of the needles.
func hasAny(b []byte, ns []needle) bool { return which(b, ns) >= 0 }

// which returns the index in ns of the first needle found in b (the one
// whose underscore comes first), or -1: one scan looks for needles of
// different meanings at once.
func which(b []byte, ns []needle) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '_')
		if j < 0 {
			return -1
		}
		j += i
		for x, n := range ns {
			if k := j - n.at; k >= 0 && k+len(n.s) <= len(b) && bytes.Equal(b[k:k+len(n.s)], n.s) {
				return x
			}
		}
		i = j + 1
	}
}
