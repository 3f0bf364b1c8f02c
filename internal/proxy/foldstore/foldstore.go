// Package foldstore is the proxy's durable record of what it folded.
//
// A Pi session keeps every original in its own append-only session file;
// a proxied client (Claude Code, Codex, opencode) gives the proxy no such
// file. So each conversation gets its own append-only JSONL file in the
// store's directory, and a fold event is written there, before the request
// that carries it is sent: first the exact text of every block it folds,
// then the event's entry, then an fsync. Replaying a file's entries rebuilds
// the conversation's frozen layers, so a restarted proxy sends the same
// bytes; recall reads a block's text back and checks it against the sha256
// in its fold record.
//
// One process writes a store: Open takes an exclusive lock on it, released
// when the process ends, however it ends. Readers (the MCP server, the CLI)
// need no lock: the files are append-only. A line torn by a crash or a
// full disk never takes effect, and never costs the line after it (package
// jsonl): a fold event whose lines did not all land is rejected, so its
// digests are never sent, and voided, so it never replays. A reader asks
// for an unfold by appending one request line to the conversation's file
// (a single write, so lines never interleave); the writer takes it up on
// the conversation's next request.
//
// Lines are written as JSON.stringify writes them (rawjson) and strings are
// read back with lone surrogates kept (WTF-8), so a folded text is stored
// as the very bytes its sha256 was taken over, whatever it holds.
package foldstore

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/recall"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/store/jsonl"
)

// Version is the record format written in each file's first line.
const Version = 1

// Line is one line of a conversation file; T says which fields are set.
type Line struct {
	T string `json:"t"`
	// "conversation": the file's first line. Session is SessionTag of
	// the client session the conversation belongs to, if any.
	V       int    `json:"v,omitempty"`
	API     string `json:"api,omitempty"`
	Created string `json:"created,omitempty"`
	Session string `json:"session,omitempty"`
	// "text": a folded block's exact text, with its sha256.
	ID     string `json:"id,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Text   string `json:"text,omitempty"`
	// "entry": an engine decision (fold event, unfold, void).
	Entry *engine.Entry `json:"entry,omitempty"`
	// "unfold-request": codes a reader asked to unfold.
	Codes []string `json:"codes,omitempty"`
	// "call": a call of context-fold's own tools the model made in a
	// response of this conversation (ID, and Name, Namespace, Args, At),
	// so the MCP server can tell which conversation a call comes from.
	Name      string `json:"name,omitempty"`
	Namespace string `json:"ns,omitempty"`
	Args      string `json:"args,omitempty"`
	At        string `json:"at,omitempty"`
	// "request": one request the proxy folded (N, At, and Raw to
	// Compactions, see Request); "usage": the usage the provider reported
	// for request N (In to CacheWrite, see Usage).
	N           int `json:"n,omitempty"`
	Raw         int `json:"raw,omitempty"`
	Sent        int `json:"sent,omitempty"`
	Window      int `json:"window,omitempty"`
	Budget      int `json:"budget,omitempty"`
	Reserve     int `json:"reserve,omitempty"`
	Seq         int `json:"seq,omitempty"`
	Compactions int `json:"compactions,omitempty"`
	In          int `json:"in,omitempty"`
	Out         int `json:"out,omitempty"`
	CacheRead   int `json:"cacheRead,omitempty"`
	CacheWrite  int `json:"cacheWrite,omitempty"`
}

// Line types.
const (
	TConversation  = "conversation"
	TText          = "text"
	TEntry         = "entry"
	TUnfoldRequest = "unfold-request"
	TCall          = "call"
	// TIndex: the index of what a client's compaction left recallable
	// (Text), appended to the summary the conversation continues from.
	TIndex = "index"
	// TRequest: one request of the conversation (Request); TUsage: the
	// usage its response reported, which comes later (Usage).
	TRequest = "request"
	TUsage   = "usage"
)

// DefaultDir is where the proxy keeps its store: the XDG state directory
// on Linux and the BSDs, the platform's per-user application data
// elsewhere.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "contextfold", "proxy"), nil
	}
	switch runtime.GOOS {
	case "windows", "darwin", "ios":
		d, err := os.UserConfigDir() // %AppData%, ~/Library/Application Support
		if err != nil {
			return "", err
		}
		if runtime.GOOS == "windows" {
			if l := os.Getenv("LocalAppData"); l != "" {
				d = l // state is per machine, not roaming
			}
		}
		return filepath.Join(d, "contextfold", "proxy"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "contextfold", "proxy"), nil
}

// Store is a directory of conversation files, locked for one writer.
type Store struct {
	dir    string
	unlock func()
	now    func() time.Time
}

// ErrLocked reports a store another process writes.
var ErrLocked = errors.New("foldstore: the store is in use by another process")

// Open opens (creating) the store at dir for writing. The directory is
// made private to its owner (see private).
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("foldstore: %w", err)
	}
	if err := private(dir); err != nil {
		return nil, err
	}
	unlock, err := lock(filepath.Join(dir, "writer.lock"))
	if err != nil {
		return nil, err
	}
	return &Store{dir: dir, unlock: unlock, now: time.Now}, nil
}

// Close releases the store's lock.
func (s *Store) Close() error {
	if s.unlock != nil {
		s.unlock()
		s.unlock = nil
	}
	return nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// FileName is the file of the conversation key of api: a hash, so that no
// client id or path appears in a name.
func FileName(api, key string) string {
	h := sha256.Sum256([]byte(api + "\x00" + key))
	return hex.EncodeToString(h[:16]) + ".jsonl"
}

// SessionTag names a client session in the store without naming it: a
// hash of the API and the session's scope ("" for none). Conversations of
// one session (Claude Code's subagents share their parent's session id)
// carry the same tag; recall reads a code one of them folded from another
// of them, never from another session.
func SessionTag(api, session string) string {
	if session == "" {
		return ""
	}
	h := sha256.Sum256([]byte(api + "\x00" + session))
	return hex.EncodeToString(h[:16])
}

// Conversation is one conversation's file, open for appending.
type Conversation struct {
	path string
	f    *os.File
	// size is the file's length after this process's last read or write:
	// more means a reader appended a request. scanned is how far requests
	// were looked for.
	size, scanned int64
	// voids are the fold events whose commit failed and whose void line
	// is not written yet: it goes first in the next append (see Commit).
	voids []int
}

// Conversation opens the file of api's conversation key, creating it, and
// returns what it holds. session is the client session the conversation
// belongs to ("" for none), recorded as its SessionTag when the file is
// created.
func (s *Store) Conversation(api, session, key string) (*Conversation, *Contents, error) {
	return s.ConversationFile(api, session, FileName(api, key))
}

// ConversationFile is Conversation for the file named name in the store
// (FileName, or an alias's target).
func (s *Store) ConversationFile(api, session, name string) (*Conversation, *Contents, error) {
	if name != filepath.Base(name) || !strings.HasSuffix(name, ".jsonl") {
		return nil, nil, fmt.Errorf("foldstore: %q is no conversation file name", name)
	}
	path := filepath.Join(s.dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("foldstore: %w", err)
	}
	c := &Conversation{path: path, f: f}
	contents, n, err := read(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("foldstore: %s: %w", path, err)
	}
	// A torn last line is ended by the next append (jsonl.Append).
	c.size = n
	if st, err := f.Stat(); err == nil {
		c.size = st.Size()
	}
	c.scanned = c.size
	if n == 0 {
		tag := SessionTag(api, session)
		if err := c.append([]Line{{T: TConversation, V: Version, API: api, Created: s.now().UTC().Format(time.RFC3339), Session: tag}}); err != nil {
			f.Close()
			return nil, nil, err
		}
		contents.API, contents.Session = api, tag
	} else if contents.API != api {
		f.Close()
		return nil, nil, fmt.Errorf("foldstore: %s belongs to api %q, not %q", path, contents.API, api)
	}
	return c, contents, nil
}

// aliasFile is where the alias of conversation file name is kept: beside
// it, not a .jsonl file, so that only Alias reads it.
func (s *Store) aliasFile(name string) string {
	return filepath.Join(s.dir, strings.TrimSuffix(name, ".jsonl")+".alias")
}

// Alias returns the file the conversation file name continues in, if an
// alias says so: a client that compacts its history goes on in a new
// conversation, which the proxy carries on in the old one's file.
func (s *Store) Alias(name string) (target string, ok bool) {
	b, err := os.ReadFile(s.aliasFile(name))
	if err != nil {
		return "", false
	}
	target = strings.TrimSpace(string(b))
	if target == "" || target != filepath.Base(target) || !strings.HasSuffix(target, ".jsonl") {
		return "", false
	}
	return target, true
}

// SetAlias durably records that the conversation file name continues in
// target (Alias).
func (s *Store) SetAlias(name, target string) error {
	path := s.aliasFile(name)
	tmp, err := os.CreateTemp(s.dir, ".alias-*")
	if err != nil {
		return fmt.Errorf("foldstore: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(target + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("foldstore: %w", err)
	}
	// The rename is durable once the directory is; where a directory
	// cannot be synced (Windows), the rename is as durable as it gets.
	if d, err := os.Open(s.dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// RecordIndex durably appends the index of what a client's compaction
// left recallable (Contents.Index), which the conversation that continues
// from its summary gets once, appended to that summary.
func (c *Conversation) RecordIndex(text string) error {
	return c.append([]Line{{T: TIndex, Text: text}})
}

// Path is the conversation's file.
func (c *Conversation) Path() string { return c.path }

// Close closes the file.
func (c *Conversation) Close() error { return c.f.Close() }

// Commit durably records a fold event: the text of each block it folds
// (text(id) gives it), then its entry, in one write, then an fsync.
// Nothing of it takes effect until Commit returns nil. When it fails, the
// event is voided: a line that landed whole before the failure (an fsync
// that failed after the write) must not replay as an event that was never
// sent. The void is written at once, or, if the disk refuses that too,
// before the next line this Conversation writes.
func (c *Conversation) Commit(ev *engine.Event, text func(id string) (string, bool)) error {
	lines := make([]Line, 0, len(ev.Folds)+1)
	for _, rec := range ev.Folds {
		t, ok := text(rec.ID)
		if !ok {
			return fmt.Errorf("foldstore: no text for folded block %s", rec.ID)
		}
		if rec.SHA256 != "" && registry.Sum(t) != rec.SHA256 {
			return fmt.Errorf("foldstore: text of %s does not match its fold record", rec.ID)
		}
		lines = append(lines, Line{T: TText, ID: rec.ID, SHA256: registry.Sum(t), Text: t})
	}
	en := ev.Entry()
	lines = append(lines, Line{T: TEntry, Entry: &en})
	if err := c.append(lines); err != nil {
		c.voids = append(c.voids, ev.Seq)
		c.append(nil) // the void alone; kept pending if it fails too
		return err
	}
	return nil
}

// Record durably appends an entry (an unfold, a void).
func (c *Conversation) Record(en engine.Entry) error {
	return c.append([]Line{{T: TEntry, Entry: &en}})
}

// append writes the pending voids and lines in one write and syncs them
// to disk.
func (c *Conversation) append(lines []Line) error {
	var buf []byte
	for _, seq := range c.voids {
		en := engine.VoidEntry(seq)
		buf = appendLine(buf, Line{T: TEntry, Entry: &en})
	}
	for _, l := range lines {
		buf = appendLine(buf, l)
	}
	if len(buf) == 0 {
		return nil
	}
	size, err := jsonl.Append(c.f, buf)
	if err == nil {
		err = c.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("foldstore: append to %s: %w", c.path, err)
	}
	c.voids = nil
	c.size = size
	return nil
}

// appendLine appends l, encoded, and its newline to buf.
func appendLine(buf []byte, l Line) []byte {
	b, err := rawjson.Marshal(l)
	if err != nil {
		panic(err) // a Line always encodes: strings, ints and an Entry
	}
	return append(append(buf, b...), '\n')
}

// Requests returns the unfold requests readers appended since the last
// call (or since the file was opened).
func (c *Conversation) Requests() ([][]string, error) {
	st, err := c.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("foldstore: %w", err)
	}
	if st.Size() == c.size {
		c.scanned = c.size // all of it this process's own, or scanned
		return nil, nil
	}
	// The writer's own lines since are read too; they are not requests.
	tail := make([]byte, st.Size()-c.scanned)
	if _, err := c.f.ReadAt(tail, c.scanned); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("foldstore: %w", err)
	}
	// Only whole lines: a request being written is taken next time.
	end := bytes.LastIndexByte(tail, '\n') + 1
	c.scanned += int64(end)
	if end == len(tail) {
		c.size = st.Size()
	}
	var out [][]string
	jsonl.Scan(tail[:end], lineStart, func(raw jsonl.Line) {
		if l, ok := decodeLine(raw.Bytes); ok && l.T == TUnfoldRequest && len(l.Codes) > 0 {
			out = append(out, l.Codes)
		}
	})
	return out, nil
}

// Contents is what a conversation file holds.
type Contents struct {
	API     string
	Created string
	// Session is the SessionTag of the client session ("" for none).
	Session string
	// Entries are the engine entries, in order, to replay.
	Entries []engine.Entry
	// Texts are the folded blocks' texts by id.
	Texts map[string]Text
	// Calls are the tool calls noted (NoteCall), in order.
	Calls []Call
	// Index is the last index recorded (RecordIndex), "" for none;
	// Indexes counts them: the client's compactions so far.
	Index   string
	Indexes int
	// Requests are the requests noted (NoteRequest), by number, each
	// with the usage noted for it (NoteUsage), if any.
	Requests []Request
	// Bad counts lines that could not be read (a torn last line among them).
	Bad int
}

// Call is a call of context-fold's own tools the model made in a response
// of the conversation.
type Call struct {
	ID, Name, Namespace, Args string
	At                        time.Time
}

// Request is one request of the conversation the proxy folded, as it
// estimated it: Raw is the whole request as the client sent it, Sent as
// it went upstream (system, tools and messages, in tokens). Window,
// Budget and Reserve are what the proxy planned it against (Reserve: the
// room the client keeps free before it compacts, 0 unknown); Seq is the
// fold event this request committed (0: none), Compactions the client's
// compactions recorded by then. N numbers the conversation's requests
// from 1, across restarts.
type Request struct {
	N, Raw, Sent, Window, Budget, Reserve, Seq, Compactions int
	At                                                      time.Time
	// Usage is what the provider reported for it; nil when it reported
	// none the proxy could read.
	Usage *Usage
}

// Usage is a response's token usage as the provider reported it, in one
// shape for every API: Input is the prompt tokens neither read from nor
// written to the cache, so that Input + CacheRead + CacheWrite is the
// whole prompt.
type Usage struct {
	Input, CacheRead, CacheWrite, Output int
}

// Text is a folded block's stored text.
type Text struct {
	SHA256, Text string
}

// Verified reports whether the text matches the sha256 it was stored with
// and the one in its fold record (rec may be nil).
func (t Text) Verified(rec *registry.Record) bool {
	sum := registry.Sum(t.Text)
	return sum == t.SHA256 && (rec == nil || rec.SHA256 == "" || rec.SHA256 == sum)
}

// Records returns every fold record of the file's fold events, by code,
// without voided events. Unfolded blocks are among them: recall reads them
// still (see Unfolded).
func (c *Contents) Records() map[string]registry.Record {
	void := map[int]bool{}
	for _, en := range c.Entries {
		if en.Kind == engine.KindVoid {
			void[en.Seq] = true
		}
	}
	out := map[string]registry.Record{}
	for _, en := range c.Entries {
		if en.Kind != engine.KindFold || void[en.Seq] {
			continue
		}
		for _, r := range en.Folds {
			r.Seq = en.Seq
			out[r.Code] = r
		}
	}
	return out
}

// Unfolded returns the ids an unfold released.
func (c *Contents) Unfolded() map[string]bool {
	out := map[string]bool{}
	for _, en := range c.Entries {
		if en.Kind == engine.KindUnfold {
			for _, id := range en.IDs {
				out[id] = true
			}
		}
	}
	return out
}

// ReadFile reads a conversation file.
func ReadFile(path string) (*Contents, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("foldstore: %w", err)
	}
	defer f.Close()
	c, _, err := read(f)
	if err != nil {
		return nil, fmt.Errorf("foldstore: %s: %w", path, err)
	}
	return c, nil
}

// maxLine bounds one line: a folded block's text.
const maxLine = 256 << 20

// read reads a file from its start; n is the length of its whole lines.
func read(f *os.File) (*Contents, int64, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	c := &Contents{Texts: map[string]Text{}}
	br := bufio.NewReaderSize(f, 1<<16)
	var n int64
	first := true
	usage := map[int]Usage{}
	for {
		raw, err := br.ReadBytes('\n')
		if len(raw) > maxLine {
			return nil, 0, fmt.Errorf("a line of %d bytes", len(raw))
		}
		if err != nil {
			if len(raw) > 0 {
				c.Bad++ // a torn last line: never completed, never in effect
			}
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, 0, err
		}
		n += int64(len(raw))
		line := bytes.TrimSuffix(raw, []byte("\n"))
		if len(rawjson.Trim(line)) == 0 {
			continue
		}
		l, ok := decodeLine(line)
		if !ok {
			// A torn line, or one another line was glued onto: the
			// record it ends with, if any, is whole.
			c.Bad++
			rec, found := jsonl.Recover(line, lineStart)
			if !found {
				continue
			}
			if l, ok = decodeLine(rec); !ok {
				continue
			}
		}
		if first {
			first = false
			if l.T != TConversation {
				return nil, 0, errors.New("not a context-fold conversation file")
			}
			if l.V > Version {
				return nil, 0, fmt.Errorf("written by a newer context-fold (format %d, this one reads %d)", l.V, Version)
			}
			c.API, c.Created, c.Session = l.API, l.Created, l.Session
			continue
		}
		switch l.T {
		case TText:
			c.Texts[l.ID] = Text{SHA256: l.SHA256, Text: l.Text}
		case TEntry:
			if l.Entry != nil {
				c.Entries = append(c.Entries, *l.Entry)
			}
		case TUnfoldRequest:
		case TCall:
			c.Calls = append(c.Calls, l.call())
		case TIndex:
			c.Index = l.Text
			c.Indexes++
		case TRequest:
			at, _ := time.Parse(time.RFC3339Nano, l.At)
			c.Requests = append(c.Requests, Request{N: l.N, Raw: l.Raw, Sent: l.Sent, Window: l.Window, Budget: l.Budget, Reserve: l.Reserve, Seq: l.Seq, Compactions: l.Compactions, At: at})
		case TUsage:
			usage[l.N] = Usage{Input: l.In, CacheRead: l.CacheRead, CacheWrite: l.CacheWrite, Output: l.Out}
		default:
			c.Bad++
		}
	}
	if n > 0 && first {
		return nil, 0, errors.New("not a context-fold conversation file")
	}
	PairUsage(c.Requests, usage)
	return c, n, nil
}

// PairUsage puts requests in order and gives each the usage noted for its
// number. Noted apart, off the requests' path, requests and usage may be
// recorded out of order; every store reads them back through this.
func PairUsage(reqs []Request, usage map[int]Usage) {
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].N < reqs[j].N })
	for i := range reqs {
		if u, ok := usage[reqs[i].N]; ok {
			reqs[i].Usage = &u
		}
	}
}

// Files lists the store's conversation files, newest first.
func Files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("foldstore: %w", err)
	}
	type file struct {
		path string
		mod  time.Time
	}
	var fs []file
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		fs = append(fs, file{filepath.Join(dir, e.Name()), info.ModTime()})
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].mod.After(fs[j].mod) })
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.path
	}
	return out, nil
}

// RecentCalls returns the calls noted in the last tail bytes of the
// conversation file at path (whole lines only), oldest first: a call is
// noted as the response that makes it streams, so the newest are at the
// end, and a reader looking for the one just made need not read the file.
func RecentCalls(path string, tail int64) ([]Call, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("foldstore: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("foldstore: %w", err)
	}
	from := max(st.Size()-tail, 0)
	buf := make([]byte, st.Size()-from)
	if _, err := f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("foldstore: %w", err)
	}
	if from > 0 {
		buf = buf[bytes.IndexByte(buf, '\n')+1:] // a partial first line
	}
	var out []Call
	jsonl.Scan(buf, lineStart, func(raw jsonl.Line) {
		if !raw.Ended || !bytes.Contains(raw.Bytes, []byte(`"t":"call"`)) {
			return
		}
		if l, ok := decodeLine(raw.Bytes); ok && l.T == TCall {
			out = append(out, l.call())
		}
	})
	return out, nil
}

// RequestUnfold appends an unfold request for codes to a conversation file.
// The writer applies it on the conversation's next request.
func RequestUnfold(path string, codes []string) error {
	return appendTo(path, Line{T: TUnfoldRequest, Codes: codes})
}

// call is the Call a "call" line notes.
func (l *Line) call() Call {
	at, _ := time.Parse(time.RFC3339Nano, l.At)
	return Call{ID: l.ID, Name: l.Name, Namespace: l.Namespace, Args: l.Args, At: at}
}

// NoteCall appends a call the model made to a conversation file. It is not
// synced: it only tells the MCP server, about to be called, whose call it is.
func NoteCall(path string, c Call) error {
	return appendTo(path, Line{T: TCall, ID: c.ID, Name: c.Name, Namespace: c.Namespace, Args: c.Args, At: c.At.UTC().Format(time.RFC3339Nano)})
}

// NoteRequest appends a request of the conversation (Contents.Requests)
// to a conversation file. Like NoteCall it is not synced: the record is
// for the report, and a request must not wait on it.
func NoteRequest(path string, r Request) error {
	return appendTo(path, Line{T: TRequest, N: r.N, At: r.At.UTC().Format(time.RFC3339Nano), Raw: r.Raw, Sent: r.Sent, Window: r.Window, Budget: r.Budget, Reserve: r.Reserve, Seq: r.Seq, Compactions: r.Compactions})
}

// NoteUsage appends the usage the provider reported for request n
// (NoteRequest) to a conversation file, unsynced.
func NoteUsage(path string, n int, u Usage) error {
	return appendTo(path, Line{T: TUsage, N: n, In: u.Input, Out: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite})
}

// appendTo appends l to the file at path in one write, so that lines
// appended by several processes never interleave.
func appendTo(path string, l Line) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("foldstore: %w", err)
	}
	_, werr := jsonl.Append(f, appendLine(nil, l))
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("foldstore: %w", werr)
	}
	return nil
}

// GC removes the conversation files not written for longer than age and
// returns their paths. It runs on an open Store, so never under a running
// proxy's feet.
func (s *Store) GC(age time.Duration) ([]string, error) {
	files, err := Files(s.dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, p := range files {
		info, err := os.Stat(p)
		if err != nil || s.now().Sub(info.ModTime()) <= age {
			continue
		}
		if err := os.Remove(p); err != nil {
			return removed, fmt.Errorf("foldstore: %w", err)
		}
		removed = append(removed, p)
	}
	// An alias whose conversation is gone names nothing.
	aliases, _ := filepath.Glob(filepath.Join(s.dir, "*.alias"))
	for _, a := range aliases {
		target, ok := s.Alias(strings.TrimSuffix(filepath.Base(a), ".alias") + ".jsonl")
		if _, err := os.Stat(filepath.Join(s.dir, target)); !ok || err != nil {
			os.Remove(a)
		}
	}
	return removed, nil
}

// lineStart is how every line begins: rawjson.Marshal writes a Line's
// fields in order, "t" first. A damaged line is read from the last place
// a line begins (jsonl.Recover).
var lineStart = []byte(`{"t":"`)

var lineNames = []string{"t", "v", "api", "created", "id", "sha256", "text", "entry", "codes", "name", "ns", "args", "at", "session",
	"n", "raw", "sent", "window", "budget", "reserve", "seq", "compactions", "in", "out", "cacheRead", "cacheWrite"}

// decodeLine decodes one line. Strings keep lone surrogates (WTF-8), so
// a text reads back as the bytes its sha256 was taken over. ok is false
// for anything that is not a Line.
func decodeLine(raw []byte) (l Line, ok bool) {
	if !rawjson.Valid(raw) {
		return l, false
	}
	ok = rawjson.Members(raw, lineNames, func(k int, v []byte) (ok bool) {
		switch k {
		case 0:
			l.T, ok = rawjson.String(v)
		case 1:
			l.V, ok = rawjson.PlainInt(v)
		case 2:
			l.API, ok = rawjson.String(v)
		case 3:
			l.Created, ok = rawjson.String(v)
		case 4:
			l.ID, ok = rawjson.String(v)
		case 5:
			l.SHA256, ok = rawjson.String(v)
		case 6:
			l.Text, ok = rawjson.String(v)
		case 7:
			en, err := engine.DecodeEntry(v)
			l.Entry, ok = &en, err == nil
		case 8:
			l.Codes, ok = rawjson.Strings(v)
		case 9:
			l.Name, ok = rawjson.String(v)
		case 10:
			l.Namespace, ok = rawjson.String(v)
		case 11:
			l.Args, ok = rawjson.String(v)
		case 12:
			l.At, ok = rawjson.String(v)
		case 13:
			l.Session, ok = rawjson.String(v)
		default:
			// The counts of a request or usage line, 14 on, in
			// lineNames' order.
			counts := [...]*int{&l.N, &l.Raw, &l.Sent, &l.Window, &l.Budget, &l.Reserve, &l.Seq, &l.Compactions, &l.In, &l.Out, &l.CacheRead, &l.CacheWrite}
			*counts[k-14], ok = rawjson.PlainInt(v)
		}
		return ok
	})
	return l, ok && l.T != ""
}

// RecallStore is a conversation file's folded blocks for recall: its fold
// records, read back from the texts the file holds, each checked against
// the sha256 it was stored with and the one in its record.
type RecallStore struct {
	c        *Contents
	recs     map[string]registry.Record
	unfolded map[string]bool
}

// RecallStore returns what the file holds as a recall.Store.
func (c *Contents) RecallStore() *RecallStore {
	return &RecallStore{c: c, recs: c.Records(), unfolded: c.Unfolded()}
}

// Lookup implements recall.Store.
func (s *RecallStore) Lookup(code string) (registry.Record, bool) {
	rec, ok := s.recs[code]
	return rec, ok
}

// Folded implements recall.Store: the records of blocks not unfolded, by
// code (a fixed order: the file's is the events').
func (s *RecallStore) Folded() []registry.Record {
	var out []registry.Record
	for _, rec := range s.recs {
		if !s.unfolded[rec.ID] {
			out = append(out, rec)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// Unfolded reports whether an unfold released block id.
func (s *RecallStore) Unfolded(id string) bool { return s.unfolded[id] }

// Read implements recall.Store.
func (s *RecallStore) Read(rec registry.Record) recall.Original {
	t, ok := s.c.Texts[rec.ID]
	switch {
	case !ok:
		return recall.Original{Why: "the fold record holds no text for #" + rec.Code}
	case !t.Verified(&rec):
		return recall.Original{Why: recall.WhyStoreMismatch(rec.Code)}
	}
	tool := rec.Tool
	if tool == "" {
		tool = rec.Kind
	}
	return recall.Original{Text: t.Text, Label: recall.StoreLabel(tool), Note: recall.Verified, Source: recall.SourceStore}
}

// ReadFile implements recall.Store: a proxied tool has no full-output
// file; the store holds the whole output.
func (s *RecallStore) ReadFile(string) (string, bool) { return "", false }
