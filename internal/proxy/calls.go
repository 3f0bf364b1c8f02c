package proxy

import (
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/contextfold/contextfold/internal/proxy/callwatch"
	"github.com/contextfold/contextfold/internal/proxy/codec"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// OwnTool reports whether a tool name is one of context-fold's MCP tools as
// a client names it: Claude Code mcp__<server>__recall_folded, opencode
// <server>_recall_folded, Codex recall_folded (its server in a namespace).
func OwnTool(name string) bool {
	return strings.HasSuffix(name, "recall_folded") || strings.HasSuffix(name, "unfold")
}

var watchFormats = map[codec.API]callwatch.Format{
	codec.Messages:  callwatch.Messages,
	codec.Responses: callwatch.Responses,
	codec.Chat:      callwatch.Chat,
}

// watchCalls returns res's body, unchanged, read through a watcher that
// notes each call of context-fold's own tools in the conversation (note),
// before the bytes that complete the call reach the client: the
// MCP server, which the client calls next, then knows whose call it is. A
// gzip body is watched through a decompressor beside the stream; any other
// encoding is not watched (the MCP server then falls back, see package
// mcp). usage, if not nil, is given the token usage the response reports,
// once its body has ended.
func watchCalls(res *http.Response, api codec.API, note func(foldstore.Call) error, usage func(foldstore.Usage), log *slog.Logger) io.ReadCloser {
	f, ok := watchFormats[api]
	if !ok {
		return res.Body
	}
	ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	w := callwatch.New(f, ct == "text/event-stream", OwnTool, func(c callwatch.Call) {
		err := note(foldstore.Call{ID: c.ID, Name: c.Name, Namespace: c.Namespace, Args: c.Args, At: time.Now()})
		if err != nil {
			log.Warn("could not note a recall call; the MCP server may not tell whose it is", "err", err)
		}
	})
	if usage != nil {
		w.OnUsage(func(u callwatch.Usage) {
			usage(foldstore.Usage{Input: u.Input, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, Output: u.Output})
		})
	}
	switch enc := strings.ToLower(strings.TrimSpace(res.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return &teeBody{r: res.Body, w: w, done: w.Close, log: log}
	case "gzip":
		pr, pw := io.Pipe()
		go func() {
			defer func() {
				if p := recover(); p != nil {
					log.Warn("watching a response for recall calls failed", "err", fmt.Sprint(p))
				}
				// However this side ends, the stream must never wait for it.
				pr.CloseWithError(io.ErrClosedPipe)
			}()
			defer w.Close()
			if gz, err := gzip.NewReader(pr); err == nil {
				io.Copy(w, gz)
			}
		}()
		return &teeBody{r: res.Body, w: pw, done: func() { pw.Close() }, log: log}
	default:
		log.Debug("response not watched for recall calls", "content_encoding", enc)
		return res.Body
	}
}

// teeBody gives each piece read from r to w before returning it; w's
// errors, and its panics, are contained: the stream never depends on the
// watching, which stops at its first failure.
type teeBody struct {
	r      io.ReadCloser
	w      io.Writer
	done   func()
	log    *slog.Logger
	shut   bool
	failed bool
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 && !t.failed {
		t.watch(func() { t.w.Write(p[:n]) })
	}
	if err == io.EOF {
		t.finish()
	}
	return n, err
}

// watch runs f, containing a panic.
func (t *teeBody) watch(f func()) {
	defer func() {
		if p := recover(); p != nil {
			t.failed = true
			t.log.Warn("watching a response for recall calls failed", "err", fmt.Sprint(p))
		}
	}()
	f()
}

func (t *teeBody) Close() error {
	t.finish()
	return t.r.Close()
}

func (t *teeBody) finish() {
	if !t.shut {
		t.shut = true
		t.watch(t.done)
	}
}
