package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/contextfold/contextfold/internal/codec"
	"github.com/contextfold/contextfold/internal/engine"
	"github.com/contextfold/contextfold/internal/foldstore"
	"github.com/contextfold/contextfold/internal/wire"
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

// Folder folds the conversations of the requests it is given, each with its
// own engine and its own file in the store.
type Folder struct {
	store *foldstore.Store
	log   *slog.Logger
	// window is the context window folding plans for, in tokens (0: the
	// engine's default).
	window int
	mu     sync.Mutex
	convs  map[string]*conversation
}

// NewFolder returns a Folder recording to store, planning for a context
// window of window tokens (0: the engine's default).
func NewFolder(store *foldstore.Store, window int, log *slog.Logger) *Folder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Folder{store: store, log: log, window: window, convs: map[string]*conversation{}}
}

// Close closes every conversation file.
func (f *Folder) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, c := range f.convs {
		c.mu.Lock()
		c.file.Close()
		c.mu.Unlock()
		delete(f.convs, k)
	}
}

// conversation is one client conversation's fold state.
type conversation struct {
	mu   sync.Mutex
	eng  *engine.Engine
	file *foldstore.Conversation
	// prev is the previous request, to find what this one kept.
	prev *codec.Request
	used time.Time
}

// journal makes a conversation's fold decisions durable in its file.
type journal struct{ c *conversation }

func (j journal) Commit(ev *engine.Event) error {
	err := j.c.file.Commit(ev, func(id string) (string, bool) {
		b, ok := j.c.eng.Live(id)
		if !ok {
			return "", false
		}
		return b.Text, true
	})
	if err != nil {
		// Whatever reached the file must not replay as an event that took
		// effect.
		j.c.file.Record(engine.VoidEntry(ev.Seq))
	}
	return err
}

func (j journal) Unfold(ids []string) error {
	return j.c.file.Record(engine.UnfoldEntry(ids))
}

// headerKey names a request's conversation from the client's session
// header: Claude Code's, Codex's, opencode's.
func headerKey(r *http.Request) string {
	for _, h := range []string{"x-claude-code-session-id", "session-id", "x-session-id"} {
		if v := r.Header.Get(h); v != "" {
			return h + ":" + v
		}
	}
	return ""
}

// bodyKey names a conversation without a session header: by Codex's
// prompt_cache_key, else by its first two messages.
func bodyKey(req *codec.Request) string {
	if req.CacheKey != "" {
		return "prompt_cache_key:" + req.CacheKey
	}
	h := sha256.New()
	for i, m := range req.Messages {
		if i == 2 {
			break
		}
		h.Write(m)
		h.Write([]byte{0})
	}
	return "prefix:" + hex.EncodeToString(h.Sum(nil))
}

// conversation returns the state of key, opening (and replaying) its file
// when it is not held.
func (f *Folder) conversation(api codec.API, key string) (*conversation, error) {
	name := foldstore.FileName(string(api), key)
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.convs[name]; ok {
		c.used = time.Now()
		return c, nil
	}
	file, contents, err := f.store.Conversation(string(api), key)
	if err != nil {
		return nil, err
	}
	c := &conversation{eng: engine.New(engine.Config{}), file: file, used: time.Now()}
	if len(contents.Entries) > 0 {
		if skipped, err := c.eng.Replay(contents.Entries); err != nil {
			f.log.Warn("some fold records of a conversation could not be replayed; those blocks stay raw", "file", file.Path(), "skipped", skipped, "err", err)
		}
	}
	if len(f.convs) >= maxConversations {
		f.evict()
	}
	f.convs[name] = c
	return c, nil
}

// evict closes the least recently used conversation. f.mu is held.
func (f *Folder) evict() {
	var oldest string
	var at time.Time
	for k, c := range f.convs {
		if oldest == "" || c.used.Before(at) {
			oldest, at = k, c.used
		}
	}
	c := f.convs[oldest]
	delete(f.convs, oldest)
	go func() { // after its request in flight, if any
		c.mu.Lock()
		c.file.Close()
		c.mu.Unlock()
	}()
}

// Fold returns the body to send for a request of api, as segments to
// concatenate: the body with the conversation's folds applied, or body
// itself when nothing applies or anything fails (then why says so, for the
// log).
func (f *Folder) Fold(r *http.Request, api codec.API, body []byte) (out [][]byte, why string) {
	defer func() {
		// Fail open: a bug must cost this request its folds, nothing more.
		if p := recover(); p != nil {
			out, why = [][]byte{body}, fmt.Sprintf("internal error: %v", p)
		}
	}()
	unchanged := [][]byte{body}
	var req *codec.Request
	var err error
	key := headerKey(r)
	if key == "" {
		if req, err = codec.Decode(api, body); err != nil {
			return unchanged, err.Error()
		}
		key = bodyKey(req)
	}
	c, err := f.conversation(api, key)
	if err != nil {
		return unchanged, err.Error()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if req == nil {
		if req, err = codec.DecodeAfter(api, body, c.prev); err != nil {
			return unchanged, err.Error()
		}
	}
	switch {
	case !req.Tools:
		return unchanged, "declares no tools"
	case req.Continued:
		return unchanged, "continues a conversation the provider holds"
	}
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
		for keep < len(c.prev.Messages) && keep < len(req.Messages) && bytes.Equal(c.prev.Messages[keep], req.Messages[keep]) {
			keep++
		}
	}
	// The model decides what thinking may fold: on a Claude that binds
	// thinking to its prefix, the request's own drop_block says whether the
	// provider drops invalidated thinking or rejects the request.
	model := wire.Model{API: string(api), Provider: codec.Provider(api), ID: req.Model, MidConvoEffort: req.DropBlock}
	res := c.eng.Step(engine.Request{Keep: keep, Append: req.Messages[keep:], Window: f.window, Model: model}, j)
	c.prev = req
	if res.Rejected != nil {
		f.log.Warn("fold event rejected; this request goes out with earlier folds only", "err", res.Rejected)
	}
	segs, _, err := req.Segments(c.eng.Substs(res.Placements))
	if err != nil {
		return unchanged, err.Error()
	}
	if res.Event != nil {
		f.log.Info("fold event", "seq", res.Event.Seq, "trigger", string(res.Event.Trigger), "blocks", len(res.Event.Folds), "file", c.file.Path())
	}
	return segs, ""
}

// readBody reads a request body whole, within the proxy's limit.
func readBody(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	_, err := io.Copy(&buf, r.Body)
	r.Body.Close()
	return buf.Bytes(), err
}

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

// setBody replaces r's body with the concatenation of segs.
func setBody(r *http.Request, segs [][]byte) {
	n := 0
	for _, s := range segs {
		n += len(s)
	}
	r.GetBody = func() (io.ReadCloser, error) {
		bufs := append(net.Buffers(nil), segs...)
		return io.NopCloser(&bufs), nil
	}
	r.Body, _ = r.GetBody()
	r.ContentLength = int64(n)
	r.Header.Set("Content-Length", strconv.Itoa(n))
	r.TransferEncoding = nil
}
