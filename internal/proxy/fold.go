package proxy

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/tokens"
	"github.com/contextfold/contextfold/internal/core/wire"
	"github.com/contextfold/contextfold/internal/proxy/codec"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// foldRoutes are the requests a Folder rewrites, by path.
var foldRoutes = map[string]codec.API{
	"/v1/messages":         codec.Messages,
	"/v1/responses":        codec.Responses,
	"/v1/chat/completions": codec.Chat,
}

// maxConversations bounds the conversations held in memory; the least
// recently used is closed (its file stays, and is replayed if it returns).
const maxConversations = 256

// DefaultMaxHeld bounds the bytes of conversation held in memory, over all
// conversations (Folder.MaxHeld): a conversation holds its last body and
// the engine's copy of its messages, about three times the body.
const DefaultMaxHeld = 1 << 30

// Folder folds the conversations of the requests it is given, each with its
// own engine and its own file in the store.
//
// A request's conversation is named by its scope, the client's own session
// id (Claude Code's, Codex's, opencode's header, else Codex's
// prompt_cache_key), and within the scope by its first tool call: one
// session can carry several conversations (Claude Code's subagents share
// its session id; a client that compacts starts a new one), and each has
// its own. Without a session id, the first tool call and the assistant
// message that made it name the conversation. A request with no tool
// result yet has nothing to fold and passes through untouched.
type Folder struct {
	store  foldstore.Backend
	policy policy.Policy
	log    *slog.Logger
	// window is the context window folding plans for, in tokens (0: the
	// engine's default).
	window int
	// MaxHeld bounds the bytes held in memory (0: DefaultMaxHeld); set it
	// before the first request.
	MaxHeld int64
	// HoldThinking keeps the proxy from asking a Claude that binds thinking
	// to its prefix to drop the thinking a fold invalidates (drop_block):
	// folds then wait for a user turn, where no tool-use cycle holds
	// thinking. Set it before the first request.
	HoldThinking bool
	// Env reads the client settings the proxy keeps ahead of (such as
	// CLAUDE_CODE_AUTO_COMPACT_WINDOW), from the proxy's environment: the
	// shell that starts the client usually starts it too (nil: none).
	Env func(string) string

	mu    sync.Mutex
	convs map[string]*conversation // by file name
	// scopes lists each scope's held conversations, most recent first:
	// the candidates a request of that scope is decoded against.
	scopes map[string][]*conversation
	held   int64
	// opening serialises the opening of each file not held yet.
	opening map[string]*sync.Mutex
	// closed: Close ran; requests pass through and no idle work starts.
	closed bool
	// aliases map the file name of a conversation that continues from a
	// client's compaction to the file it is carried on in; compacted maps
	// a scope (Folder.scopes) to the file of its conversation whose
	// compaction request came last, for the conversation that continues
	// from it (compaction.go).
	aliases, compacted map[string]string
	// bg counts the idle work running (Prepare between requests), and
	// the requests folded but not settled yet (Settle), which may start
	// more, and the request and usage lines being noted.
	bg sync.WaitGroup
	// noteFailed: noting a request or its usage failed, and was logged
	// (once: the record is for the report, not the requests).
	noteFailed atomic.Bool
}

// NewFolder returns a Folder that folds by pol (the host's choice),
// records to store, and plans for a context window of window tokens (0: the
// engine's default).
func NewFolder(store foldstore.Backend, pol policy.Policy, window int, log *slog.Logger) *Folder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Folder{store: store, policy: pol, log: log, window: window, convs: map[string]*conversation{}, scopes: map[string][]*conversation{}, opening: map[string]*sync.Mutex{},
		aliases: map[string]string{}, compacted: map[string]string{}}
}

// Close stops idle work and closes every conversation file; requests that
// come after pass through unchanged.
func (f *Folder) Close() {
	f.mu.Lock()
	f.closed = true
	convs := f.convs
	f.convs, f.scopes, f.held = map[string]*conversation{}, map[string][]*conversation{}, 0
	f.mu.Unlock()
	for _, c := range convs {
		c.close()
	}
	f.bg.Wait()
}

// Idle waits until the work the Folder does between requests is done.
func (f *Folder) Idle() { f.bg.Wait() }

// conversation is one client conversation's fold state.
type conversation struct {
	name, scope string
	// waiting counts the requests waiting for mu: idle work yields to them.
	waiting atomic.Int32

	mu   sync.Mutex
	eng  *engine.Engine
	file foldstore.Log
	// prev is the previous request, to find what this one kept; prevBuf
	// holds its body (nil: not pooled). Written under mu and pm, read
	// under either: pm lets an arriving body find them without waiting
	// for a request or the idle work that holds mu.
	pm      sync.Mutex
	prev    *codec.Request
	prevBuf *buffer
	// prevSpans are the edits the previous request went out with, in its
	// body: what a body that repeats its prefix is predicted to get
	// (cut-through).
	prevSpans []codec.Span
	// placed: prevSpans place every placement of the engine's placement
	// version placedAt (under mu only). A request that only appends to
	// prev, at that version, goes out with the same spans if its body
	// repeats prev's through the last of them: Step skips the placements
	// and step their encoding and placing.
	placed   bool
	placedAt int
	// markedAt is the message prevSpans put the breakpoint at the end of
	// the frozen region on (mark), -1 for none: they may be repeated only
	// while the mark belongs there.
	markedAt int
	// prevFolds are prevSpans without the binding (codec.BindSpan), which
	// sits after the conversation and so moves as it grows: what a request
	// that only appends may repeat.
	prevFolds []codec.Span
	// status is what the conversation's last request showed (Status).
	status ConversationStatus
	// index is what the client's last compaction left recallable, as
	// text: the conversation that continues from its summary gets it
	// appended to that summary (compaction.go). compactedAt is how many
	// messages the compaction request had (0: none seen yet).
	index       string
	compactions int // the client's compactions indexed so far (the index's number)
	// requests is the number of the conversation's last request, saved
	// what the folds in effect save, as of the engine's version savedAt
	// (see request).
	requests       int
	saved, savedAt int
	compactedAt    int
	// indexAt is the message the index was last appended to (-1: none
	// yet), and indexMsg that message, to find it again without a scan.
	indexAt  int
	indexMsg []byte
	// plan is the room the conversation is folded for, for planned.
	plan    Plan
	planned planKey
	// values are the encoded digests sent, by layer entry and kind (tool
	// output or thinking block): frozen, so encoded once.
	values    map[valueKey][]byte
	closed    bool // evicted: its file is closed, a request must look again
	preparing bool // idle work is running
	// used and size are the Folder's, under Folder.mu.
	used time.Time
	size int64
}

// setPrev makes req, in buf, the previous request, sent with spans. c.mu
// is held.
func (c *conversation) setPrev(req *codec.Request, buf *buffer, spans []codec.Span) {
	if buf != nil {
		buf.hold()
	}
	c.pm.Lock()
	old := c.prevBuf
	c.prev, c.prevBuf, c.prevSpans = req, buf, spans
	c.pm.Unlock()
	if old != nil {
		old.release()
	}
}

// planKey is what a conversation's plan depends on.
type planKey struct {
	client Client
	model  string
}

type valueKey struct {
	seq, index int
	part       bool
}

func (c *conversation) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.file.Close()
		c.setPrev(nil, nil, nil)
		c.prevFolds = nil
		c.eng, c.values, c.placed = nil, nil, false
	}
}

// journal makes a conversation's fold decisions durable in its file.
type journal struct{ c *conversation }

func (j journal) Commit(ev *engine.Event) error {
	// A failed commit voids itself: nothing of it replays.
	return j.c.file.Commit(ev, func(id string) (string, bool) {
		b, ok := j.c.eng.Live(id)
		if !ok {
			return "", false
		}
		return b.Text, true
	})
}

func (j journal) Unfold(ids []string) error {
	return j.c.file.Record(engine.UnfoldEntry(ids))
}

// scopeOf names the session a request belongs to by the client's own id:
// Claude Code's, Codex's and opencode's session header, else Codex's
// prompt_cache_key (read from the body, when decoded); "" for none.
func scopeOf(r *http.Request) string {
	for _, h := range scopeHeaders {
		if v := r.Header[h.canonical]; len(v) > 0 && v[0] != "" {
			return h.name + ":" + v[0]
		}
	}
	return ""
}

// scopeHeaders are the clients' session headers, with their keys in
// r.Header (Header.Get would canonicalize each name on every request).
var scopeHeaders = func() []struct{ name, canonical string } {
	var hs []struct{ name, canonical string }
	for _, h := range []string{"x-claude-code-session-id", "session-id", "x-session-id"} {
		hs = append(hs, struct{ name, canonical string }{h, http.CanonicalHeaderKey(h)})
	}
	return hs
}()

// threadOf names a request's conversation within its scope: its first tool
// call's id, and without a scope also the user messages before it and the
// assistant message that made the call: ids from a local model server
// repeat across conversations (call_1, call_2, …), and so may a first
// command. ok is false before the first tool result: nothing can fold yet.
func threadOf(req *codec.Request, scoped bool) (string, bool) {
	i, id := req.FirstResult()
	if i < 0 {
		return "", false
	}
	if scoped {
		return "call:" + id, true
	}
	h := sha256.New()
	for j := range i {
		if codec.IsUser(req.Messages[j]) {
			h.Write(req.Messages[j])
			h.Write([]byte{0})
		}
	}
	for j := i - 1; j >= 0; j-- {
		if codec.IsAssistant(req.Messages[j]) {
			h.Write(req.Messages[j])
			break
		}
	}
	return "call:" + id + "/" + hex.EncodeToString(h.Sum(nil)[:12]), true
}

// maxCandidates bounds the previous requests a body is compared with.
const maxCandidates = 16

// Incoming follows a request body as it arrives: it compares each chunk
// with the previous requests of the body's scope, so that once the body is
// in, the longest prefix it shares with one of them is known without
// reading it again. The comparison, linear in the body, then overlaps the
// body's transfer instead of delaying the request after it.
type Incoming struct {
	api codec.API
	// buf holds the body (nil: not pooled).
	buf *buffer
	// path is the file of the conversation the request was folded in, once
	// Fold knows it: the response's tool calls are noted there, and its
	// usage, for request number request.
	path    string
	request int
	// applied are the spans the decided body applies to the body, once
	// Fold knows them (nil otherwise).
	applied []codec.Span
	scope   string
	// client is the agent the request came from, by its headers.
	client Client
	cands  []*codec.Request
	spans  [][]codec.Span // per candidate: the edits it went out with
	held   []*buffer      // the candidates' bodies, held until done
	common []int          // per candidate: how many leading bytes are equal
	equal  []bool
	n      int // bytes seen
	// after is the conversation's bookkeeping and idle work that follow
	// the request, once Fold folded it, for Settle to start.
	after *afterFold
}

// afterFold is what follows a folded request in its conversation: its
// memory recorded (size) and, with idle, the idle work started.
type afterFold struct {
	c    *conversation
	size int64
	idle bool
	// counted: Folder.bg counts it until settled, so that Idle and Close
	// wait for it as for the idle work it starts.
	counted bool
	// note is the request's line for the conversation's file, noted once
	// the request is on its way (nil: none).
	note *foldstore.Request
}

// Begin returns the Incoming of a request of api, for its body's bytes to
// be written to as they arrive; Fold takes it.
func (f *Folder) Begin(r *http.Request, api codec.API) *Incoming {
	in := &Incoming{api: api, scope: string(api) + "\x00" + scopeOf(r), client: clientOf(r.Header)}
	f.mu.Lock()
	list := f.scopes[in.scope]
	list = append([]*conversation(nil), list[:min(len(list), maxCandidates)]...)
	f.mu.Unlock()
	for _, c := range list {
		c.pm.Lock()
		if c.prev != nil {
			in.cands = append(in.cands, c.prev)
			in.spans = append(in.spans, c.prevSpans)
			if c.prevBuf != nil {
				c.prevBuf.hold() // not reused while compared
				in.held = append(in.held, c.prevBuf)
			}
		}
		c.pm.Unlock()
	}
	in.common = make([]int, len(in.cands))
	in.equal = make([]bool, len(in.cands))
	for i := range in.equal {
		in.equal[i] = true
	}
	return in
}

// Write compares the next bytes of the body; it never fails.
func (in *Incoming) Write(p []byte) (int, error) {
	for i, prev := range in.cands {
		if !in.equal[i] {
			continue
		}
		old := prev.Body()
		if in.n >= len(old) {
			in.equal[i] = false
			continue
		}
		q := old[in.n:min(len(old), in.n+len(p))]
		k := codec.CommonLen(q, p)
		in.common[i] += k
		in.equal[i] = k == len(p)
	}
	in.n += len(p)
	return len(p), nil
}

// done lets go of the candidates' bodies.
func (in *Incoming) done() {
	for _, b := range in.held {
		b.release()
	}
	in.held, in.cands, in.spans = nil, nil, nil
}

// best is the previous request sharing the longest prefix with the body
// written, and that length.
func (in *Incoming) best() (*codec.Request, int) {
	var best *codec.Request
	n := -1
	for i, c := range in.cands {
		if in.common[i] > n {
			best, n = c, in.common[i]
		}
	}
	return best, n
}

// conversation returns the held state of the conversation in file name
// of the client session session (scope is its list key, see
// Folder.scopes), opening (and replaying) its file when it is not held.
// The file is read without f.mu, so that one conversation's replay does
// not hold up the requests of the others.
func (f *Folder) conversation(api codec.API, session, scope, name string) (*conversation, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, errFolderClosed
	}
	if c, ok := f.convs[name]; ok {
		c.used = time.Now()
		f.touch(c)
		f.mu.Unlock()
		return c, nil
	}
	opening := f.opening[name]
	if opening == nil {
		opening = &sync.Mutex{}
		f.opening[name] = opening
	}
	f.mu.Unlock()
	// One opener per file: a second request for it waits, then finds it.
	opening.Lock()
	defer opening.Unlock()
	f.mu.Lock()
	c, ok := f.convs[name]
	f.mu.Unlock()
	if ok {
		return f.conversation(api, session, scope, name)
	}
	file, contents, err := f.store.OpenConversation(string(api), session, name)
	if err != nil {
		return nil, err
	}
	// Codes are the conversation's own: clients whose model server numbers
	// its calls alike (call_1, call_2, …) fold under different codes.
	eng := engine.New(engine.Config{Policy: f.policy, Scope: name})
	c = &conversation{name: name, scope: scope, eng: eng, file: file, used: time.Now(), values: map[valueKey][]byte{}, markedAt: -1, index: contents.Index, compactions: contents.Indexes, indexAt: -1, savedAt: -1}
	for _, r := range contents.Requests {
		c.requests = max(c.requests, r.N)
	}
	if len(contents.Entries) > 0 {
		if skipped, err := c.eng.Replay(contents.Entries); err != nil {
			f.log.Warn("some fold records of a conversation could not be replayed; those blocks stay raw", "file", file.Path(), "skipped", skipped, "err", err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.opening, name)
	if f.closed {
		file.Close()
		return nil, errFolderClosed
	}
	for len(f.convs) >= maxConversations {
		f.evict()
	}
	f.convs[name] = c
	f.touch(c)
	return c, nil
}

var errFolderClosed = errors.New("the folder is closed")

// touch puts c first in its scope's list. f.mu is held.
func (f *Folder) touch(c *conversation) {
	list := f.scopes[c.scope]
	for i, o := range list {
		if o == c {
			copy(list[1:i+1], list[:i])
			list[0] = c
			return
		}
	}
	f.scopes[c.scope] = append([]*conversation{c}, list...)
}

// resize records what c holds now and evicts least recently used
// conversations while the held bytes are over the bound, c last. With
// idle, it reports whether idle work may start for c (c is still held),
// and counts it, so that Close waits for it.
func (f *Folder) resize(c *conversation, size int64, idle bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.convs[c.name] != c {
		return false // evicted meanwhile
	}
	f.held += size - c.size
	c.size = size
	max := f.MaxHeld
	if max <= 0 {
		max = DefaultMaxHeld
	}
	for f.held > max && len(f.convs) > 1 {
		f.evict()
	}
	if !idle || f.convs[c.name] != c {
		return false
	}
	f.bg.Add(1)
	return true
}

// evict closes the least recently used conversation. f.mu is held.
func (f *Folder) evict() {
	var oldest *conversation
	for _, c := range f.convs {
		if oldest == nil || c.used.Before(oldest.used) {
			oldest = c
		}
	}
	delete(f.convs, oldest.name)
	f.held -= oldest.size
	list := f.scopes[oldest.scope]
	for i, o := range list {
		if o == oldest {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(f.scopes, oldest.scope)
	} else {
		f.scopes[oldest.scope] = list
	}
	f.log.Debug("conversation evicted from memory", "file", oldest.file.Path())
	// Closed after the request in flight on it, if any; a request that
	// finds it closed looks it up again.
	go oldest.close()
}

// Fold returns the body to send for a request of api, as segments to
// concatenate: the body with the conversation's folds applied, or body
// itself when nothing applies or anything fails (then why says so, for the
// log).
//
// in, when not nil, is the Incoming that saw body arrive (Begin); without
// it, Fold compares body with the previous requests itself. The caller
// then calls Settle(in) once it has handed the body on: the work that
// follows a request (starting a goroutine, which wakes a thread) would
// otherwise delay its departure. Without in, Fold settles itself.
func (f *Folder) Fold(r *http.Request, api codec.API, body []byte, in *Incoming) (out [][]byte, why string) {
	defer func() {
		// Fail open: a bug must cost this request its folds, nothing more.
		if p := recover(); p != nil {
			out, why = [][]byte{body}, fmt.Sprintf("internal error: %v", p)
		}
	}()
	unchanged := [][]byte{body}
	scope := scopeOf(r)
	// Decoding against another conversation's request is correct, only
	// slower (codec.DecodeAfter reuses nothing that differs).
	switch {
	case in == nil:
		in = f.Begin(r, api)
		defer f.Settle(in)
		in.Write(body)
	case in.n != len(body):
		in.done()
		fresh := f.Begin(r, api)
		fresh.Write(body)
		in.cands, in.spans, in.held, in.common, in.equal, in.n, in.client = fresh.cands, fresh.spans, fresh.held, fresh.common, fresh.equal, fresh.n, fresh.client
	}
	defer in.done() // also if decoding panics
	prev, common := in.best()
	req, err := codec.DecodeAfterPrefix(api, body, prev, common)
	in.done() // the decoded request no longer refers to prev's body
	if err != nil {
		return unchanged, err.Error()
	}
	switch {
	case !req.Tools && !compactionRequest(req):
		return unchanged, "declares no tools"
	case req.Continued:
		return unchanged, "continues a conversation the provider holds"
	}
	if scope == "" && req.CacheKey != "" {
		scope = "prompt_cache_key:" + req.CacheKey
	}
	if !req.Tools {
		// A client's compaction request: it goes out as sent, and what
		// its history held is recorded (compaction.go).
		f.toollessCompaction(api, scope, req)
		return unchanged, "declares no tools"
	}
	thread, ok := threadOf(req, scope != "")
	if !ok {
		if out, ok := f.firstAfterCompaction(api, scope, req); ok {
			return out, ""
		}
		return unchanged, "no tool result yet"
	}
	name := f.resolve(api, scope, scope+"\x00"+thread, req)
	for range 2 {
		c, err := f.conversation(api, scope, string(api)+"\x00"+scope, name)
		if err != nil {
			return unchanged, err.Error()
		}
		out, why, applied, after := f.fold(c, api, in.client, req, in.buf, prefix{prev, common})
		if after != nil {
			in.path, in.applied, in.after = c.file.Path(), applied, after
			if after.note != nil {
				in.request = after.note.N
			}
			return out, why
		}
		// Evicted while this request waited for it: open it again.
	}
	return unchanged, "conversation evicted twice while waiting"
}

// fold folds req in c, unless c was evicted (after nil), and returns what
// follows the request in c, for Settle.
func (f *Folder) fold(c *conversation, api codec.API, cl Client, req *codec.Request, buf *buffer, pre prefix) (out [][]byte, why string, applied []codec.Span, after *afterFold) {
	c.waiting.Add(1)
	c.mu.Lock()
	c.waiting.Add(-1)
	if c.closed {
		c.mu.Unlock()
		return nil, "", nil, nil
	}
	after = &afterFold{c: c}
	defer c.mu.Unlock() // also when step panics (Fold recovers)
	out, why, applied, after.size, after.note = f.step(c, api, cl, req, buf, pre)
	after.idle = !c.preparing
	c.preparing = true
	f.mu.Lock()
	if !f.closed { // Close waits for what bg counts: nothing after it
		f.bg.Add(1)
		after.counted = true
	}
	f.mu.Unlock()
	return out, why, applied, after
}

// Settle records what in's conversation holds now and starts its idle
// work, once the request Fold folded has been handed on (see Fold). It
// does nothing for a request Fold did not fold, or a second time.
func (f *Folder) Settle(in *Incoming) {
	a := in.after
	if a == nil {
		return
	}
	in.after = nil
	var note func()
	if a.counted {
		defer f.bg.Done()
		if a.note != nil {
			path, r := a.c.file.Path(), *a.note
			note = func() { f.noted(f.store.NoteRequest(path, r)) }
		}
	}
	if f.resize(a.c, a.size, a.idle) {
		// The request's line goes first on the idle work's goroutine:
		// one goroutine woken, not two.
		go func() {
			if note != nil {
				note()
			}
			f.prepare(a.c)
		}()
		return
	}
	if a.idle {
		a.c.mu.Lock()
		a.c.preparing = false
		a.c.mu.Unlock()
	}
	if note != nil {
		f.bg.Add(1) // while Settle's own count holds: Close has not begun waiting
		go func() {
			defer f.bg.Done()
			note()
		}()
	}
}

// prefix says how many leading bytes a request's body shares with the
// body of prev (an earlier request; nil: none known).
type prefix struct {
	prev   *codec.Request
	common int
}

// step folds req in c; pre is what its body shares with an earlier one.
// out is the body with applied's spans applied. c.mu is held.
func (f *Folder) step(c *conversation, api codec.API, cl Client, req *codec.Request, buf *buffer, pre prefix) (out [][]byte, why string, applied []codec.Span, size int64, note *foldstore.Request) {
	unchanged := [][]byte{req.Body()}
	j := journal{c}
	if reqs, err := c.file.Requests(); err != nil {
		f.log.Warn("could not read unfold requests", "file", c.file.Path(), "err", err)
	} else {
		for _, codes := range reqs {
			if _, err := c.eng.Unfold(codes, j); err != nil {
				f.log.Warn("an unfold request could not be recorded", "err", err)
			}
		}
	}
	keep := 0
	if c.prev != nil {
		keep = req.SameMessages(c.prev)
	}
	// The model decides what thinking may fold: on a Claude that binds
	// thinking to its prefix, drop_block says whether the provider drops
	// invalidated thinking or rejects the request. Clients send it only to
	// the first-party API, so the proxy asks for it itself (unless told
	// to hold folds instead): an event then costs only the current
	// tool-use cycle's thinking, instead of waiting for a user turn that a
	// long agentic turn never sends.
	model := wire.Model{API: string(api), Provider: codec.Provider(api), ID: req.Model, MidConvoEffort: req.DropBlock}
	bind, bindable := req.BindSpan()
	bindable = bindable && !f.HoldThinking && wire.Preserved(model)
	model.MidConvoEffort = model.MidConvoEffort || bindable
	appends := c.placed && keep == len(c.prev.Messages)
	// Anthropic reads its cache only at breakpoints: where the client
	// leaves one of the four free, the end of the frozen region gets one,
	// so that an event re-writes only what follows it, and the schedule
	// prices events that way (docs/DESIGN.md §4). No breakpoints at all
	// means the client has caching off.
	bps, bp := req.Breakpoints()
	anchored := model.CachesAtBreakpoints() && bps > 0 && bps < codec.MaxBreakpoints
	// The whole request counts against the window, and the client's own
	// compaction threshold bounds the budget (budget.go).
	if c.planned != (planKey{cl, req.Model}) {
		// Read once per conversation and model: Codex's comes from a file.
		c.plan, c.planned = f.plan(cl, req.Model), planKey{cl, req.Model}
	}
	plan := c.plan
	overhead := tokens.EstimateUnits(req.Overhead())
	if c.index != "" {
		overhead += tokens.Estimate(c.index)
	}
	compacting := compactionRequest(req) && c.compactedAt != len(req.Messages)
	res := c.eng.Step(engine.Request{Keep: keep, Append: req.Messages[keep:], Window: plan.Window, Reserve: plan.Reserve, Overhead: overhead,
		Model: model, KnownVersion: c.placedAt, HaveVersion: appends, Anchored: anchored}, j)
	kept := appends && res.Version == c.placedAt // Step left the placements out
	var spans []codec.Span
	var err error
	wantAt := -1
	if anchored && res.Anchor != nil {
		wantAt = res.Anchor.Msg
	}
	reused := kept && c.markedAt == wantAt && c.repeats(req, pre)
	switch {
	case reused:
		// The same placements and mark, at the same bytes.
		spans = c.prevFolds
	case kept:
		spans, err = req.Spans(c.edits(c.eng.Placements()))
	default:
		spans, err = req.Spans(c.edits(res.Placements))
	}
	if err == nil && !reused {
		spans, c.markedAt = mark(req, spans, wantAt, bp)
		spans = c.withIndex(req, spans)
	}
	c.placed, c.placedAt = err == nil, res.Version
	// Bound from the first fold event on, and so in every later request,
	// restarts included (the events replay): before it nothing is
	// invalidated, and the request goes out as the client sent it.
	binds := bindable && c.eng.LastSeq() > 0
	folds := spans
	if err == nil && binds {
		spans = bound(spans, bind)
	}
	c.setPrev(req, buf, spans) // nil on error: it went out unchanged
	c.prevFolds = folds
	if compacting {
		// After this request's own spans: what it sends is decided.
		f.compaction(c, c.eng.Transcript(), len(req.Messages), promptAt(req))
	}
	// Its body's buffer, and the engine's copy of its messages (about the
	// body's size again, and as much in block texts).
	size = 2 * int64(len(req.Body()))
	if buf != nil {
		size += int64(cap(buf.b))
	} else {
		size += int64(len(req.Body()))
	}
	if res.Rejected != nil {
		f.log.Warn("fold event rejected; this request goes out with earlier folds only", "err", res.Rejected)
	}
	note = c.request(res, overhead, plan, err == nil)
	if err != nil {
		return unchanged, err.Error(), nil, size, note
	}
	segs, _ := codec.Splice(req.Body(), spans)
	f.note(c, req, res, model, binds)
	c.status.Window, c.status.Reserve, c.status.WindowFrom, c.status.Client = plan.Window, plan.Reserve, plan.From, cl.String()
	c.status.Tokens = res.Status.LiveTokens + overhead
	return segs, "", spans, size, note
}

// request numbers the request Step took as res and returns its line for
// the conversation's file: its size raw and as sent (folded: its spans
// went out), estimated, and what it was planned against. c.mu is held.
//
// The policy's status measures the request as sent, after the event it
// committed, if any; raw is that with every folded block whole. What the
// folds save is counted again only when the placements may have changed
// (the engine's version), so a request that only appends pays nothing
// for it.
func (c *conversation) request(res engine.Result, overhead int, plan Plan, folded bool) *foldstore.Request {
	if v := c.eng.Version(); v != c.savedAt {
		_, c.saved, _ = c.eng.Folded()
		c.savedAt = v
	}
	sent := res.Status.LiveTokens + overhead
	raw := sent + c.saved
	if !folded {
		sent = raw // it went out as the client sent it
	}
	c.requests++
	r := &foldstore.Request{N: c.requests, Raw: raw, Sent: sent, Window: plan.Window, Budget: res.Status.Budget, Reserve: plan.Reserve, Compactions: c.compactions, At: time.Now()}
	if res.Event != nil {
		r.Seq = res.Event.Seq
	}
	return r
}

// noted logs, once, that noting a request or its usage failed.
func (f *Folder) noted(err error) {
	if err != nil && !f.noteFailed.Swap(true) {
		f.log.Warn("could not note a request in its conversation's file; the report will miss it (logged once)", "err", err)
	}
}

// usageNote returns what notes the usage a response reports for request
// n of the conversation in the file at path, beside the response.
func (f *Folder) usageNote(path string, n int) func(foldstore.Usage) {
	return func(u foldstore.Usage) {
		f.mu.Lock()
		if f.closed { // Close waits for what bg counts: nothing after it
			f.mu.Unlock()
			return
		}
		f.bg.Add(1)
		f.mu.Unlock()
		go func() {
			defer f.bg.Done()
			f.noted(f.store.NoteUsage(path, n, u))
		}()
	}
}

// bound is spans with the binding inserted in order (it follows the
// conversation, so it is usually last).
func bound(spans []codec.Span, bind codec.Span) []codec.Span {
	i := len(spans)
	for i > 0 && spans[i-1].Start > bind.Start {
		i--
	}
	return slices.Insert(slices.Clip(spans), i, bind)
}

// mark adds to spans, unless at is -1, the breakpoint at the end of the
// frozen region, on message at's tool result (the engine's Result.Anchor),
// with the value of the client's own last breakpoint (so its ttl too), and
// returns where it put it: -1 where the body does not let one be placed,
// and spans go out as they are.
func mark(req *codec.Request, spans []codec.Span, at int, bp []byte) ([]codec.Span, int) {
	if at < 0 {
		return spans, -1
	}
	sp, err := req.MarkSpan(at, bp)
	if err != nil {
		return spans, -1
	}
	i, _ := slices.BinarySearchFunc(spans, sp.Start, func(s codec.Span, at int) int { return cmp.Compare(s.Start, at) })
	if i > 0 && spans[i-1].End > sp.Start {
		return spans, -1 // inside another edit: not a place for a mark
	}
	return slices.Insert(slices.Clip(spans), i, sp), at
}

// repeats reports whether req's body repeats prev's through the end of
// the spans prev went out with (pre: what is known of its prefix). c.mu
// is held.
func (c *conversation) repeats(req *codec.Request, pre prefix) bool {
	if len(c.prevFolds) == 0 {
		return true
	}
	end := c.prevFolds[len(c.prevFolds)-1].End
	if pre.prev == c.prev {
		return pre.common >= end
	}
	a, b := req.Body(), c.prev.Body()
	return len(a) >= end && len(b) >= end && bytes.Equal(a[:end], b[:end])
}

// edits are the placements as encoded edits, each digest encoded once.
func (c *conversation) edits(ps []engine.Placement) []codec.Edit {
	out := make([]codec.Edit, 0, len(ps))
	for _, p := range ps {
		k := valueKey{p.Seq, p.Index, p.Part >= 0}
		v, ok := c.values[k]
		if !ok {
			l, ok := c.eng.Layer(p.Seq)
			if !ok || p.Index >= len(l.Entries) {
				continue
			}
			v = codec.EditValue(p.Part, l.Entries[p.Index].Text)
			c.values[k] = v
		}
		out = append(out, codec.Edit{Msg: p.Msg, Part: p.Part, Value: v})
	}
	return out
}

// prepare computes, between requests, the digests the next requests will
// need (Engine.Prepare), a few at a time, giving the conversation up to
// any request that waits for it and the processor to any other goroutine
// after each few. On a single P (GOMAXPROCS=1, a one-CPU container) a
// goroutine that only yields keeps the scheduler from polling the network,
// so a request that arrived would wait for the runtime's 10 ms poll: there
// it sleeps as long as it worked after each millisecond of work, which
// lets the P idle and poll.
func (f *Folder) prepare(c *conversation) {
	defer f.bg.Done()
	hookEvent("idle")
	single := runtime.GOMAXPROCS(0) == 1
	start := time.Now()
	for {
		c.mu.Lock()
		if c.closed || c.waiting.Load() > 0 || !c.eng.Prepare(4) {
			c.preparing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if single && time.Since(start) >= singlePSlice {
			time.Sleep(singlePSlice)
			start = time.Now()
			continue
		}
		runtime.Gosched()
	}
}

// singlePSlice is how long idle work runs on a single P before it sleeps
// as long.
const singlePSlice = time.Millisecond

// foldable reports whether the proxy may rewrite r's body: a JSON POST to
// a route it knows, not content-encoded.
func foldable(r *http.Request) (codec.API, bool) {
	api, ok := foldRoutes[r.URL.Path]
	if !ok || r.Method != http.MethodPost {
		return "", false
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
		return "", false
	}
	return api, true
}
