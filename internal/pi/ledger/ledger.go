// Package ledger reads Pi's append-only session files and re-locates folded
// blocks in them.
//
// A Pi session file is JSONL: a {"type":"session",…} header, then one entry a
// line. Pi only ever appends to it ("entries cannot be modified or deleted"),
// so the raw payload of every block that ever reached the model survives
// folding, compaction and resume there. That is the durability floor behind
// every fold (docs/DESIGN.md §5): the engine stores only a block's durable id and the
// sha256 of its text, and recall finds the text again here.
//
// Reading is tolerant, the way Pi 1.6 itself loads a session (docs/EDGES.md #26):
//
//   - blank lines are skipped;
//   - a complete line that is not a JSON object is skipped and counted
//     (Skipped), but for the whole entries in it: a write that failed
//     part way (a full disk) leaves a torn line, and the next entry Pi
//     appends is glued onto it; an entry written without its newline has
//     the next one glued onto it too (seen in a real session file). Each
//     whole entry is read (Pi itself skips the whole line);
//   - a final line without its newline that is not valid JSON is a write cut
//     off mid-line (a crash, or Pi still writing): it is skipped and flagged
//     (Truncated), not counted;
//   - a final line without its newline that is a valid object is accepted,
//     provisionally: the next Append or Refresh reads it again.
//
// The only hard error is input that is not a Pi session at all: the first
// JSON object in it must be a {"type":"session"} header. Both formats are
// read: the current one (version 3) where every entry has an 8-hex id and a
// parentId, and the early one (no version, no ids) that Pi migrates on load.
// Nothing is ever re-encoded: every field is kept as the bytes Pi wrote.
//
// The file grows while a session runs. Offset is the byte offset just past
// the last newline-terminated line read, so re-reading costs only the new
// tail: Refresh stats the file and reads from Offset (see Refresh).
//
// A Ledger is safe for concurrent use.
package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/parallel"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/store/jsonl"
)

// Errors. Each is returned wrapped with the path or the block id; test with
// errors.Is. Their texts reach users (the CLI, recall_folded's notes), so
// they name what users know, the session file, not this package.
var (
	// ErrNotSession: the input's first JSON object is not a session header.
	ErrNotSession = errors.New("not a Pi session file")
	// ErrNotFound: no message entry holds a block with that durable id.
	ErrNotFound = errors.New("not found in the session file")
	// ErrSHAMismatch: blocks with that id exist, but none has the fold-time
	// sha256.
	ErrSHAMismatch = errors.New("the session file's text failed the fold-time sha256 check")
	// ErrRewritten: the file no longer extends what was read (it shrank, or
	// the bytes at the read offset changed); read it again from scratch.
	ErrRewritten = errors.New("session file was rewritten since it was read")
)

// Entry is one session entry. Every []byte field aliases the line's bytes:
// raw JSON exactly as Pi wrote it, never re-encoded. String fields are
// decoded JSON strings ("" when absent, null or not a string).
type Entry struct {
	Line      int   // 1-based line number in the file
	Offset    int64 // byte offset of the line in the file
	Type      string
	ID        string // "" in the early format
	ParentID  string // "" for a root (null) and in the early format
	Timestamp string // as written (an ISO time in every known format)
	Raw       []byte // the whole line, without its newline

	// Version is a session header's format version; 0 when absent (the
	// early format).
	Version int

	// Message is the raw "message" object of a "message" entry.
	Message []byte

	// CustomType names a "custom" or "custom_message" entry; Data is a
	// "custom" entry's raw "data".
	CustomType string
	Data       []byte

	// TargetID is the entry a "context_edit" or "label" entry refers to.
	// Replacement is a context_edit's raw "replacement": an object holding
	// "content", or null when the edit omits its target.
	TargetID    string
	Replacement []byte

	// Summary is the text of a "compaction" or "branch_summary" entry;
	// FirstKeptEntryID is where a compaction keeps history from (the early
	// format had firstKeptEntryIndex instead, left in Raw). Details is the
	// raw "details" of a compaction, branch_summary or custom_message.
	Summary          string
	FirstKeptEntryID string
	Details          []byte
}

// pending says what the last line read was when it had no newline yet.
type pending uint8

const (
	settled       pending = iota
	pendingHeader         // the header came from an unterminated line
	pendingEntry          // the last entry came from an unterminated line
)

// Ledger is a parsed session file. Create one with ReadFile or Parse; grow
// it with Refresh or Append.
type Ledger struct {
	mu        sync.Mutex
	header    Entry
	hasHeader bool
	entries   []Entry
	byID      map[string]int // entry id → index of its latest entry
	hasIDs    bool
	skipped   int
	truncated bool
	lines     int   // newline-terminated lines consumed
	size      int64 // offset just past the last newline-terminated line
	seen      int64 // bytes of the file looked at, the unterminated tail included
	pend      pending

	// The locate index: durable id → every candidate block, in ledger order.
	// Built on first use and extended as entries are appended; indexed is how
	// many entries it covers.
	index   map[string][]candidate
	indexed int
}

// candidate is one place a durable id's text can be read back from.
type candidate struct {
	entry int // the message entry
	edit  int // the context_edit entry whose replacement applies; -1 for none
}

// ReadFile reads and parses a session file.
func ReadFile(path string) (*Ledger, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	l, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// Parse parses a whole session file. The Ledger keeps data (its entries
// alias it), so the caller must not modify data afterwards.
func Parse(data []byte) (*Ledger, error) {
	lines := bytes.Count(data, []byte{'\n'}) + 1
	l := &Ledger{byID: make(map[string]int, lines), entries: make([]Entry, 0, lines)}
	if err := l.feed(data, 0); err != nil {
		return nil, err
	}
	if !l.hasHeader {
		return nil, fmt.Errorf("no session header: %w", ErrNotSession)
	}
	return l, nil
}

// feed parses data, which starts at file offset base, line by line.
func (l *Ledger) feed(data []byte, base int64) error {
	var lines []span
	for start := 0; start < len(data); {
		end, next := len(data), len(data)
		nl := bytes.IndexByte(data[start:], '\n')
		if nl >= 0 {
			end = start + nl
			next = end + 1
		}
		lines = append(lines, span{start, end, nl >= 0})
		start = next
	}
	// Validating and splitting a line is pure and most of the work (a
	// resumed session file holds megabytes): done over the cores, then
	// applied in file order.
	parsed := make([]parsedLine, len(lines))
	parallel.For(len(lines), 256, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			parsed[i] = parseLine(data[lines[i].start:lines[i].end:lines[i].end])
		}
	})
	for i, sp := range lines {
		lineNo := l.lines + 1
		if sp.terminated {
			l.lines++
			l.size = base + int64(sp.end+1)
		}
		if err := l.add(parsed[i], data[sp.start:sp.end:sp.end], lineNo, base+int64(sp.start), sp.terminated); err != nil {
			return err
		}
	}
	l.seen = base + int64(len(data))
	return nil
}

// span is one line of data: [start, end), and whether a newline ends it.
type span struct {
	start, end int
	terminated bool
}

// parsedLine is what parseLine found: blank, not JSON, or an entry whose
// Line and Offset are still to be set.
type parsedLine struct {
	blank, bad bool
	e          Entry
	// glued are the whole values a bad line holds (see parseLine); torn
	// says some of it is lost.
	glued [][]byte
	torn  bool
}

func parseLine(line []byte) parsedLine {
	if len(rawjson.Trim(line)) == 0 {
		return parsedLine{blank: true}
	}
	ms, err := rawjson.Object(line)
	if err == nil {
		return parsedLine{e: parseEntry(ms, line, 0, 0)}
	}
	// Whole entries from the start, then whatever entry the damaged rest
	// ends with.
	p := parsedLine{bad: true}
	for i := 0; i < len(line); {
		end, err := rawjson.ValueEnd(line, i)
		if err != nil {
			p.torn = true
			if rec, ok := jsonl.Recover(line[i:], entryStart); ok {
				p.glued = append(p.glued, rec)
			}
			break
		}
		p.glued = append(p.glued, rawjson.Trim(line[i:end]))
		i = end
	}
	return p
}

// entryStart is how Pi writes every entry: JSON.stringify of an object
// whose first key is "type".
var entryStart = []byte(`{"type":"`)

// add applies one parsed line.
func (l *Ledger) add(p parsedLine, line []byte, lineNo int, off int64, terminated bool) error {
	if p.blank {
		return nil
	}
	if p.bad {
		if !terminated {
			l.truncated = true
			return nil
		}
		whole := !p.torn
		for _, raw := range p.glued {
			if !l.hasHeader {
				whole = false // a session file starts with a header line of its own
				break
			}
			ms, err := rawjson.Object(raw)
			if err != nil {
				whole = false // a value that is not an entry
				continue
			}
			at := off + int64(cap(line)-cap(raw)) // raw aliases line
			if err := l.add(parsedLine{e: parseEntry(ms, raw, 0, 0)}, raw, lineNo, at, true); err != nil {
				return err
			}
		}
		if !whole || len(p.glued) == 0 {
			l.skipped++
		}
		return nil
	}
	e := p.e
	e.Line, e.Offset = lineNo, off
	if !l.hasHeader {
		if e.Type != "session" {
			return fmt.Errorf("line %d: first entry has type %q, want \"session\": %w", lineNo, e.Type, ErrNotSession)
		}
		l.header, l.hasHeader = e, true
		if !terminated {
			l.pend = pendingHeader
		}
		return nil
	}
	l.entries = append(l.entries, e)
	if e.ID != "" {
		l.byID[e.ID] = len(l.entries) - 1
		l.hasIDs = true
	}
	if !terminated {
		l.pend = pendingEntry
	}
	return nil
}

func parseEntry(ms []rawjson.Member, line []byte, lineNo int, off int64) Entry {
	e := Entry{
		Line: lineNo, Offset: off, Raw: line,
		Type:      str(ms, "type"),
		ID:        str(ms, "id"),
		ParentID:  str(ms, "parentId"),
		Timestamp: scalar(ms, "timestamp"),
	}
	switch e.Type {
	case "session":
		if v, ok := rawjson.Get(ms, "version"); ok {
			e.Version, _ = strconv.Atoi(string(v))
		}
	case "message":
		e.Message = get(ms, "message")
	case "custom":
		e.CustomType = str(ms, "customType")
		e.Data = get(ms, "data")
	case "custom_message":
		e.CustomType = str(ms, "customType")
		e.Details = get(ms, "details")
	case "context_edit":
		e.TargetID = str(ms, "targetId")
		e.Replacement = get(ms, "replacement")
	case "label":
		e.TargetID = str(ms, "targetId")
	case "compaction":
		e.Summary = str(ms, "summary")
		e.FirstKeptEntryID = str(ms, "firstKeptEntryId")
		e.Details = get(ms, "details")
	case "branch_summary":
		e.Summary = str(ms, "summary")
		e.Details = get(ms, "details")
	}
	return e
}

func get(ms []rawjson.Member, key string) []byte {
	v, _ := rawjson.Get(ms, key)
	return v
}

func str(ms []rawjson.Member, key string) string {
	v, ok := rawjson.Get(ms, key)
	if !ok || !rawjson.IsString(v) {
		return ""
	}
	s, _ := rawjson.Unquote(v)
	return s
}

// scalar is str that also renders a number as JavaScript would print it.
func scalar(ms []rawjson.Member, key string) string {
	v, ok := rawjson.Get(ms, key)
	if !ok {
		return ""
	}
	if rawjson.IsString(v) {
		s, _ := rawjson.Unquote(v)
		return s
	}
	s, _ := rawjson.JSNumber(v)
	return s
}

func isObject(raw []byte) bool { return len(raw) > 0 && raw[0] == '{' }

// Append parses data as the continuation of the file: the bytes from Offset
// on. An unterminated final line read earlier (accepted provisionally or
// flagged Truncated) is forgotten first, because data reads it again. data is
// kept, as in Parse. The only error is ErrNotSession, when the header itself
// was the provisional line and its completed form is not a header.
func (l *Ledger) Append(data []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(data)
}

func (l *Ledger) appendLocked(data []byte) error {
	switch l.pend {
	case pendingHeader:
		l.header, l.hasHeader = Entry{}, false
	case pendingEntry:
		l.dropLast()
	}
	l.pend = settled
	l.truncated = false
	if err := l.feed(data, l.size); err != nil {
		return err
	}
	if !l.hasHeader {
		return fmt.Errorf("no session header: %w", ErrNotSession)
	}
	return nil
}

// dropLast removes the provisional last entry. The slice is copied, not
// shortened in place, so slices handed out by Entries never see the
// replacement written over it.
func (l *Ledger) dropLast() {
	n := len(l.entries) - 1
	last := l.entries[n]
	l.entries = append([]Entry(nil), l.entries[:n]...)
	if last.ID != "" && l.byID[last.ID] == n {
		delete(l.byID, last.ID)
		for k := n - 1; k >= 0; k-- {
			if l.entries[k].ID == last.ID {
				l.byID[last.ID] = k
				break
			}
		}
	}
	if l.indexed > n {
		l.index, l.indexed = nil, 0 // rare: rebuild on next use
	}
}

// Refresh reads what was appended to the session file at path since the
// ledger last read it, and reports whether there was anything. It costs one
// stat when the file has not grown. Otherwise it reads only from Offset on
// (one byte earlier, to check that the byte there is still the newline it
// read: a file that shrank or whose bytes moved is ErrRewritten, and the
// caller should ReadFile it again).
func (l *Ledger) Refresh(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	size := st.Size()
	switch {
	case size == l.seen:
		return false, nil
	case size < l.seen:
		return false, fmt.Errorf("%s: shrank from %d to %d bytes: %w", path, l.seen, size, ErrRewritten)
	}
	from := l.size
	if from > 0 {
		from--
	}
	buf := make([]byte, size-from)
	n, err := f.ReadAt(buf, from)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	buf = buf[:n]
	if l.size > 0 {
		if len(buf) == 0 || buf[0] != '\n' {
			return false, fmt.Errorf("%s: no line end at offset %d: %w", path, from, ErrRewritten)
		}
		buf = buf[1:]
	}
	if err := l.appendLocked(buf); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

// Header returns the session header.
func (l *Ledger) Header() Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.header
}

// Version returns the header's format version: 0 for the early format.
func (l *Ledger) Version() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.header.Version
}

// Entries returns every entry after the header, in file order. The slice
// must not be modified.
func (l *Ledger) Entries() []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entries[:len(l.entries):len(l.entries)]
}

// Len returns the number of entries after the header.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// Skipped returns how many complete lines were not JSON objects.
func (l *Ledger) Skipped() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.skipped
}

// Truncated reports whether the final line was cut off mid-write: no
// newline and not valid JSON. It was skipped.
func (l *Ledger) Truncated() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.truncated
}

// Offset returns the byte offset just past the last newline-terminated line:
// where Append's data must start.
func (l *Ledger) Offset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Entry returns the latest entry with an id.
func (l *Ledger) Entry(id string) (Entry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.byID[id]
	if !ok {
		return Entry{}, false
	}
	return l.entries[i], true
}

// Custom returns the "custom" entries of one custom type, in file order.
func (l *Ledger) Custom(customType string) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Entry
	for _, e := range l.entries {
		if e.Type == "custom" && e.CustomType == customType {
			out = append(out, e)
		}
	}
	return out
}

// Messages returns the "message" entries whose message is an object, in
// file order.
func (l *Ledger) Messages() []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Entry
	for _, e := range l.entries {
		if e.Type == "message" && isObject(e.Message) {
			out = append(out, e)
		}
	}
	return out
}

// Leaf returns the id of the last entry that has one: where Pi resumes.
// It is "" for the early format.
func (l *Ledger) Leaf() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leaf()
}

func (l *Ledger) leaf() string {
	for i := len(l.entries) - 1; i >= 0; i-- {
		if l.entries[i].ID != "" {
			return l.entries[i].ID
		}
	}
	return ""
}

// Branch returns the path from the root to leafID (Leaf when leafID is "")
// by parentId links, root first, as Pi's getBranch does. The early format
// has no links and is one branch: every entry, in file order. An unknown
// leaf gives nil; a broken or cyclic chain ends the path where it breaks.
func (l *Ledger) Branch(leafID string) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.hasIDs {
		return append([]Entry(nil), l.entries...)
	}
	if leafID == "" {
		leafID = l.leaf()
	}
	i, ok := l.byID[leafID]
	if !ok {
		return nil
	}
	path := make([]Entry, 0, len(l.entries))
	visited := make([]bool, len(l.entries))
	for !visited[i] {
		visited[i] = true
		path = append(path, l.entries[i])
		p := l.entries[i].ParentID
		if p == "" {
			break
		}
		if i, ok = l.byID[p]; !ok {
			break
		}
	}
	for a, b := 0, len(path)-1; a < b; a, b = a+1, b-1 {
		path[a], path[b] = path[b], path[a]
	}
	return path
}

// Found is a block located in the ledger.
type Found struct {
	ID       string
	Text     string // the block text as block.Decode linearizes it
	SHA256   string // registry.Sum(Text)
	Verified bool   // SHA256 is the fold-time sha256 that was asked for
	Kind     block.Kind
	ToolName string
	IsError  bool
	// FullOutputPath is details.fullOutputPath of a tool result: the tool's
	// own file holding the output the message truncated. An edit replaces
	// only content, so an edited candidate still names the original's file.
	FullOutputPath string
	// EntryID and Line name the message entry ("" id in the early format).
	EntryID string
	Line    int
	// Edited marks text read from the message as a context_edit replaced its
	// content; EditID and EditLine name that edit entry.
	Edited   bool
	EditID   string
	EditLine int
}

// Locate finds the text of the block with durable id whose sha256 is sha.
//
// Every message entry in the file, on every branch, is decoded alone with
// block.Decode: durable ids are content-anchored, so a message's position is
// irrelevant (positional m… ids are never durable and never found). A
// message that a context_edit replaced is a candidate twice: as written and
// as edited (the edit's replacement content substituted for the message's
// content, everything else kept, which is what Pi's context projection
// does). Each candidate with the id is checked against sha, the newest
// first, so a block folded before an edit and one folded after it each find
// their own bytes (docs/EDGES.md #6).
//
// sha "" is a legacy record without a fold-time hash: the newest candidate as
// written is served unverified. The edited forms are skipped there, because
// a replacement is another extension's stand-in (often a placeholder), not
// the content the record names; they serve only when nothing else exists.
//
// Errors: ErrNotFound when no candidate has the id, ErrSHAMismatch when none
// has the hash; both wrapped with the id.
func (l *Ledger) Locate(id, sha string) (Found, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buildIndex()
	cs := l.index[id]
	if base, prefix, ok := block.BaseID(id); ok && len(cs) == 0 && strings.HasPrefix(sha, prefix) {
		// A block whose anchor another block took first (block.DupID):
		// decoded alone, each message gives the anchor; the sha256 tells
		// which candidate is this block.
		cs = l.index[base]
	}
	if len(cs) == 0 {
		return Found{}, fmt.Errorf("block %s: %w", id, ErrNotFound)
	}
	if sha == "" {
		pick := cs[len(cs)-1]
		for k := len(cs) - 1; k >= 0; k-- {
			if cs[k].edit < 0 {
				pick = cs[k]
				break
			}
		}
		if f, ok := l.found(id, pick); ok {
			return f, nil
		}
		return Found{}, fmt.Errorf("block %s: %w", id, ErrNotFound)
	}
	for k := len(cs) - 1; k >= 0; k-- {
		f, ok := l.found(id, cs[k])
		if ok && strings.EqualFold(f.SHA256, sha) {
			f.Verified = true
			return f, nil
		}
	}
	return Found{}, fmt.Errorf("block %s (candidates: %d): %w", id, len(cs), ErrSHAMismatch)
}

// buildIndex indexes the entries appended since the last call.
func (l *Ledger) buildIndex() {
	if l.index == nil {
		l.index = make(map[string][]candidate)
		l.indexed = 0
	}
	for i := l.indexed; i < len(l.entries); i++ {
		e := &l.entries[i]
		switch e.Type {
		case "message":
			if isObject(e.Message) {
				l.indexMessage(e.Message, candidate{entry: i, edit: -1})
			}
		case "context_edit":
			t, ok := l.byID[e.TargetID]
			if !ok || t >= i || l.entries[t].Type != "message" || !isObject(l.entries[t].Message) {
				continue // Pi edits only an entry that precedes the edit
			}
			if msg, ok := edited(l.entries[t].Message, e.Replacement); ok {
				l.indexMessage(msg, candidate{entry: t, edit: i})
			}
		}
	}
	l.indexed = len(l.entries)
}

func (l *Ledger) indexMessage(raw []byte, c candidate) {
	m := block.Decode(raw, 0)
	for _, b := range m.Blocks {
		if block.Durable(b.ID) {
			l.index[b.ID] = append(l.index[b.ID], c)
		}
	}
}

// found decodes one candidate and returns its block with the id.
func (l *Ledger) found(id string, c candidate) (Found, bool) {
	e := &l.entries[c.entry]
	raw := e.Message
	f := Found{ID: id, EntryID: e.ID, Line: e.Line}
	if c.edit >= 0 {
		ed := &l.entries[c.edit]
		msg, ok := edited(raw, ed.Replacement)
		if !ok {
			return Found{}, false
		}
		raw = msg
		f.Edited, f.EditID, f.EditLine = true, ed.ID, ed.Line
	}
	m := block.Decode(raw, 0)
	base, _, dup := block.BaseID(id)
	for _, b := range m.Blocks {
		if b.ID == id || dup && b.ID == base {
			f.Text = b.Text
			f.SHA256 = registry.Sum(b.Text)
			f.Kind = b.Kind
			f.ToolName = b.ToolName
			f.IsError = b.IsError
			f.FullOutputPath = b.FullOutputPath
			return f, true
		}
	}
	return Found{}, false
}

// edited returns msg with its "content" replaced by the replacement's
// "content", splicing raw bytes so every other byte stays as Pi wrote it. A
// message without content gets it appended. ok is false for a null
// replacement (the edit omits the message: there is no edited text) and for
// one without content.
func edited(msg, replacement []byte) ([]byte, bool) {
	rm, err := rawjson.Object(replacement)
	if err != nil {
		return nil, false
	}
	content, ok := rawjson.Get(rm, "content")
	if !ok {
		return nil, false
	}
	ms, err := rawjson.Object(msg)
	if err != nil {
		return nil, false
	}
	for k := len(ms) - 1; k >= 0; k-- {
		if ms[k].Key == "content" {
			out := make([]byte, 0, len(msg)-(ms[k].End-ms[k].Start)+len(content))
			out = append(out, msg[:ms[k].Start]...)
			out = append(out, content...)
			return append(out, msg[ms[k].End:]...), true
		}
	}
	t := rawjson.Trim(msg)
	out := append([]byte(nil), t[:len(t)-1]...)
	if len(ms) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"content":`...)
	out = append(out, content...)
	return append(out, '}'), true
}
