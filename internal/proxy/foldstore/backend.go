package foldstore

import (
	"os"
	"path/filepath"
	"time"

	"github.com/contextfold/contextfold/internal/core/engine"
)

// Backend is what the proxy needs of a store: the conversations it folds,
// named as FileName names them, and the aliases that carry a conversation
// on after a client's compaction. *Store is the local one (a directory of
// files); package pgstore keeps the same records in PostgreSQL.
type Backend interface {
	// OpenConversation opens conversation name of api, creating it with
	// the SessionTag of session, and returns what it holds.
	OpenConversation(api, session, name string) (Log, *Contents, error)
	// Alias returns the conversation name continues in, if any.
	Alias(name string) (target string, ok bool)
	// SetAlias durably records that name continues in target.
	SetAlias(name, target string) error
	// NoteCall notes a call of context-fold's own tools the model made
	// in the conversation a Log's Path names, for the MCP server. Not
	// synced: it only tells the server, about to be called, whose call
	// it is.
	NoteCall(path string, c Call) error
	// NoteRequest and NoteUsage note a request of the conversation and
	// the usage its response reported (Contents.Requests), for the report
	// page. Not synced: the record of what folded never depends on them.
	NoteRequest(path string, r Request) error
	NoteUsage(path string, n int, u Usage) error
}

// Log is one open conversation of a Backend: the writer's side.
type Log interface {
	// Commit durably records a fold event: the text of each block it
	// folds, then its entry. Nothing of it takes effect unless it returns
	// nil.
	Commit(ev *engine.Event, text func(id string) (string, bool)) error
	// Record durably records an entry (an unfold).
	Record(en engine.Entry) error
	// RecordIndex durably records the index a client's compaction left.
	RecordIndex(text string) error
	// Requests returns the unfold requests readers made since the last
	// call (or since the conversation was opened).
	Requests() ([][]string, error)
	// Path names the conversation in logs, for Backend.NoteCall and for
	// a Reader of the same store.
	Path() string
	Close() error
}

// Reader is what the MCP server and the CLI need of a store: they read
// conversations, see which calls of context-fold's tools were made in
// them, and ask the writer to unfold. Names are as Conversations gives
// them.
type Reader interface {
	// Conversations lists the store's conversations, the latest written
	// first.
	Conversations() ([]Listing, error)
	// Read returns what conversation name holds.
	Read(name string) (*Contents, error)
	// RecentCalls returns the calls noted lately in name, oldest first;
	// tail bounds how far back a store need look (bytes of a file).
	RecentCalls(name string, tail int64) ([]Call, error)
	// NoteCall notes a call the model made in conversation name.
	NoteCall(name string, c Call) error
	// RequestUnfold asks the writer of name to unfold codes.
	RequestUnfold(name string, codes []string) error
}

// Listing is a conversation as Reader.Conversations lists it.
type Listing struct {
	Name string
	// Written is when it was last written (a file's modification time).
	Written time.Time
}

// OpenConversation implements Backend.
func (s *Store) OpenConversation(api, session, name string) (Log, *Contents, error) {
	c, contents, err := s.ConversationFile(api, session, name)
	if err != nil {
		return nil, nil, err
	}
	return c, contents, nil
}

// NoteCall implements Backend: path is the conversation's file.
func (s *Store) NoteCall(path string, c Call) error { return NoteCall(path, c) }

// NoteRequest implements Backend.
func (s *Store) NoteRequest(path string, r Request) error { return NoteRequest(path, r) }

// NoteUsage implements Backend.
func (s *Store) NoteUsage(path string, n int, u Usage) error { return NoteUsage(path, n, u) }

// DirReader reads the store in directory Dir without locking it: the
// files are append-only. Names are the files' paths.
type DirReader struct{ Dir string }

// Conversations implements Reader.
func (r DirReader) Conversations() ([]Listing, error) {
	paths, err := Files(r.Dir)
	if err != nil {
		return nil, err
	}
	out := make([]Listing, 0, len(paths))
	for _, p := range paths {
		if info, err := os.Stat(p); err == nil {
			out = append(out, Listing{Name: p, Written: info.ModTime()})
		}
	}
	return out, nil
}

// Read implements Reader.
func (r DirReader) Read(name string) (*Contents, error) { return ReadFile(r.path(name)) }

// RecentCalls implements Reader.
func (r DirReader) RecentCalls(name string, tail int64) ([]Call, error) {
	return RecentCalls(r.path(name), tail)
}

// NoteCall implements Reader.
func (r DirReader) NoteCall(name string, c Call) error { return NoteCall(r.path(name), c) }

// RequestUnfold implements Reader.
func (r DirReader) RequestUnfold(name string, codes []string) error {
	return RequestUnfold(r.path(name), codes)
}

// path is the file of name: a path as Files gives it, or a bare file name
// in Dir.
func (r DirReader) path(name string) string {
	if name == filepath.Base(name) {
		return filepath.Join(r.Dir, name)
	}
	return name
}

var (
	_ Backend = (*Store)(nil)
	_ Log     = (*Conversation)(nil)
	_ Reader  = DirReader{}
)
