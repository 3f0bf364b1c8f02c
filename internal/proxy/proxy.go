// Package proxy is context-fold's HTTP front door for coding agents that
// talk to their model provider over HTTP (Claude Code, Codex, opencode): a
// reverse proxy that forwards each request to the configured upstream of its
// API.
//
// This file is the transport: routing, limits, streaming and errors. The
// guarantees it gives every request, folded or not:
//
//   - It serves only requests addressed to it: their Host names a loopback
//     host (localhost, *.localhost, 127.0.0.0/8, ::1), the listen address
//     or a host of Config.AllowedHosts (AnyHost there: any Host). A
//     browser's request from a page of another host (an Origin naming
//     none of those hosts, whatever AnyHost, or "null") or site
//     (Sec-Fetch-Site: cross-site), a CORS preflight included, is refused
//     too. Refused: 403, with no CORS headers, before the body is read or
//     the Folder sees it; so a web page cannot reach the proxy by DNS
//     rebinding or a cross-site request (origin.go). A client that sends
//     no Origin, as coding agents do, is judged by its Host alone.
//   - It forwards only to the configured upstreams: a request naming another
//     host (absolute-form URI, CONNECT) is refused, so it is never an open
//     proxy.
//   - Requests stay within an upstream's path prefix: a path with a . or ..
//     segment, raw, percent-encoded (%2e), or set off by an encoded slash
//     (%2f, %5c) or a backslash, is refused with 400, not resolved; no
//     client of these APIs sends one.
//   - Headers pass through (hop-by-hop ones aside) and nothing is added but
//     the thinking-binding beta, to an Anthropic request whose body the
//     Folder gave the drop_block it needs (withBinding); API
//     keys are never logged: logs carry the method, the path without its
//     query, the status and the time, and a refused request's Host or
//     Origin cut to 100 bytes.
//   - Response bodies are forwarded as they arrive, flushed chunk by chunk,
//     never buffered; upstream statuses, headers and bodies pass through
//     verbatim, errors included. An event stream's headers wait for its
//     first bytes, 10 ms at most, to go to the client with them (flush.go).
//   - Request bodies are bounded (Config.MaxBody): a larger one is refused
//     with 413 before the upstream sees it when its length is declared.
//     Over HTTP/1 the rest of such a body is then read and dropped, 1 GiB
//     or 10 s at most, before the connection closes: a client still
//     sending gets the 413, not a reset.
//   - When the upstream cannot be reached, the client gets a 502 in its API's
//     error shape, so its SDK reports it as a provider error.
package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/contextfold/contextfold/internal/proxy/codec"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// API is a provider wire family the proxy forwards to.
type API int

const (
	// Anthropic is the Anthropic Messages API (Claude Code).
	Anthropic API = iota
	// OpenAI is the OpenAI API: Responses (Codex) and Chat Completions
	// (opencode and most OpenAI-compatible clients).
	OpenAI
)

func (a API) String() string {
	if a == Anthropic {
		return "anthropic"
	}
	return "openai"
}

// DefaultMaxBody bounds a request body when Config.MaxBody is 0. Anthropic's
// own limit for a Messages request is 32 MB; images make OpenAI requests as
// large.
const DefaultMaxBody = 64 << 20

// Config is what a Proxy forwards to and how.
type Config struct {
	// Anthropic and OpenAI are the upstream origins, with an optional path
	// prefix: a request's path is appended to it unchanged. Nil: requests
	// of that API are answered with 502.
	Anthropic, OpenAI *url.URL
	// MaxBody bounds a request body in bytes (0: DefaultMaxBody).
	MaxBody int64
	// Log receives one debug line per request and one warning per failure.
	Log *slog.Logger
	// Transport reaches the upstreams (nil: a clone of http.DefaultTransport
	// that asks for no compression the client did not ask for).
	Transport http.RoundTripper
	// Folder folds the requests of the routes it knows (nil: none fold).
	Folder *Folder
	// StoreAndForward holds a folded request's body until it is whole
	// before anything goes upstream; by default a body of declared length
	// is sent while it arrives (cut-through, see cutthrough.go).
	StoreAndForward bool
	// ListenHost is the host of the address the proxy listens on: a
	// request may name it as it may a loopback name (origin.go). An
	// unspecified address (0.0.0.0, ::) adds nothing.
	ListenHost string
	// AllowedHosts are further host names or IP addresses a request's Host
	// and Origin may name; AnyHost accepts any Host, but an Origin must
	// still be loopback, the listen host or listed by name.
	AllowedHosts []string
}

// Proxy is an http.Handler forwarding to the configured upstreams.
type Proxy struct {
	cfg   Config
	hosts *hostPolicy
	rp    *httputil.ReverseProxy
}

type ctxKey struct{}

// reqInfo travels with a request through the reverse proxy.
type reqInfo struct {
	api   API
	start time.Time
	// in followed the body of a request the Folder saw (nil: none).
	in *Incoming
	// ct is the request's cut-through (nil: stored and forwarded), and
	// body its first reader, for the transport.
	ct   *cutThrough
	body io.ReadCloser
	// held is the writer the answer goes to the client through.
	held *heldHeaders
	// client is the request's body as the server gave it, unbounded.
	client io.Reader
	// betas are the client's own anthropic-beta header values.
	betas []string
}

// withBinding sets h's anthropic-beta to the client's own betas, plus the
// beta block_binding needs when the body carries one the proxy put there
// (codec.BindSpan), which is the only header the proxy ever adds.
func withBinding(h http.Header, client []string, binds bool) {
	vals := slices.Clone(client)
	if binds && !slices.ContainsFunc(vals, func(v string) bool {
		return slices.ContainsFunc(strings.Split(v, ","), func(b string) bool { return strings.TrimSpace(b) == codec.BindingBeta })
	}) {
		if n := len(vals); n > 0 && strings.TrimSpace(vals[n-1]) != "" {
			vals[n-1] += "," + codec.BindingBeta
		} else {
			vals = append(vals, codec.BindingBeta)
		}
	}
	if len(vals) == 0 {
		h.Del("Anthropic-Beta")
		return
	}
	h["Anthropic-Beta"] = vals
}

// errReader fails every read with its error.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// path is the conversation file the request was folded in ("": none, or
// not decided yet).
func (info *reqInfo) path() string {
	switch {
	case info.ct != nil:
		return info.ct.decidedPath()
	case info.in != nil:
		return info.in.path
	}
	return ""
}

// New returns a Proxy for cfg.
func New(cfg Config) (*Proxy, error) {
	for _, u := range []*url.URL{cfg.Anthropic, cfg.OpenAI} {
		if u == nil {
			continue
		}
		if err := CheckUpstream(u); err != nil {
			return nil, err
		}
	}
	hosts, err := newHostPolicy(cfg.ListenHost, cfg.AllowedHosts)
	if err != nil {
		return nil, err
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Go's transport would add "Accept-Encoding: gzip" to a request
		// without one and decompress the answer itself: headers go upstream
		// as the client sent them, and the answer comes back as sent.
		t.DisableCompression = true
		cfg.Transport = t
	}
	p := &Proxy{cfg: cfg, hosts: hosts}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			info := pr.In.Context().Value(ctxKey{}).(*reqInfo)
			pr.SetURL(p.upstream(info.api))
			if info.in != nil && info.api == Anthropic {
				// A cut-through sends its prediction; the fold may still be
				// deciding (and writing in.applied) meanwhile.
				var spans []codec.Span
				if info.ct != nil {
					spans = info.ct.predicted()
				} else {
					spans = info.in.applied
				}
				withBinding(pr.Out.Header, info.betas, codec.Binds(spans))
			}
			// A reader the transport itself closes, so the body's buffer
			// is let go once it is sent (ReverseProxy hides the Close of the
			// body it was given).
			switch {
			case info.body != nil:
				pr.Out.Body, info.body = info.body, nil
			case info.in != nil && pr.In.GetBody != nil:
				b, err := pr.In.GetBody()
				if err != nil {
					// Never a body shorter than declared: the transport
					// fails the request instead.
					b = io.NopCloser(errReader{err})
				}
				pr.Out.Body = b
			}
		},
		Transport: cutTransport{cfg.Transport, cfg.Log},
		// Every chunk goes to the client as soon as it is read: a stream
		// is never held back.
		FlushInterval:  -1,
		BufferPool:     &copyBuffers{},
		ModifyResponse: p.logged,
		ErrorHandler:   p.failed,
		ErrorLog:       slog.NewLogLogger(cfg.Log.Handler(), slog.LevelWarn),
	}
	return p, nil
}

// copyBuffers lends ReverseProxy the buffer it copies an answer through,
// which it would otherwise allocate (32 KB) for every response.
type copyBuffers struct{ pool sync.Pool }

func (c *copyBuffers) Get() []byte {
	if b, ok := c.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (c *copyBuffers) Put(b []byte) { c.pool.Put(&b) }

// CheckUpstream reports whether u can be an upstream: an http or https
// origin with an optional path, and nothing else.
func CheckUpstream(u *url.URL) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("upstream %q: want an http or https URL", u.Redacted())
	case u.Host == "":
		return fmt.Errorf("upstream %q: no host", u.Redacted())
	case u.User != nil:
		return fmt.Errorf("upstream %q: credentials belong in the client's headers, not the URL", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("upstream %q: no query or fragment allowed", u.Redacted())
	}
	return nil
}

func (p *Proxy) upstream(a API) *url.URL {
	if a == Anthropic {
		return p.cfg.Anthropic
	}
	return p.cfg.OpenAI
}

// APIOf says which API a request belongs to: Anthropic's paths, or any
// request carrying the anthropic-version header every Anthropic SDK sends;
// everything else is OpenAI's.
func APIOf(r *http.Request) API {
	path := r.URL.Path
	if strings.HasPrefix(path, "/v1/messages") || strings.HasPrefix(path, "/v1/complete") || r.Header.Get("anthropic-version") != "" {
		return Anthropic
	}
	return OpenAI
}

// ServeHTTP forwards r to its API's upstream.
func (p *Proxy) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := &heldHeaders{ResponseWriter: rw}
	defer w.stop()
	p.serve(w, r)
}

func (p *Proxy) serve(w *heldHeaders, r *http.Request) {
	api := APIOf(r)
	// Before anything else: a request the proxy does not serve reaches
	// neither the Folder nor an upstream.
	if why, value := p.hosts.refused(r); why != nil {
		p.cfg.Log.Warn(why.log, why.header, logValue(value), "method", r.Method, "path", r.URL.Path)
		writeError(w, api, http.StatusForbidden, "permission_error", why.message)
		return
	}
	// An absolute-form target or CONNECT asks for another host: refused,
	// whatever the host, so the proxy reaches only its upstreams.
	if r.Method == http.MethodConnect || r.URL.IsAbs() || r.URL.Host != "" || !strings.HasPrefix(r.RequestURI, "/") {
		p.cfg.Log.Warn("refused a request for another host", "method", r.Method)
		writeError(w, api, http.StatusBadRequest, "invalid_request_error", "contextfold proxy forwards only to its configured upstreams; send the request to its path, e.g. POST /v1/messages")
		return
	}
	// Appended to an upstream's path prefix, a dot segment could leave it:
	// refused, not resolved, as no client of these APIs sends one.
	if hasDotSegment(r.URL.Path) {
		p.cfg.Log.Warn("refused a path with a dot segment", "method", r.Method, "path", logValue(r.URL.Path))
		writeError(w, api, http.StatusBadRequest, "invalid_request_error", "contextfold proxy refuses a path with a . or .. segment, which could leave the upstream's path; send the request to its path as the API names it, e.g. POST /v1/messages")
		return
	}
	if r.URL.Path == StatusPath {
		p.status(w, r)
		return
	}
	if p.upstream(api) == nil {
		writeError(w, api, http.StatusBadGateway, "api_error", fmt.Sprintf("contextfold proxy has no %s upstream configured", api))
		return
	}
	info := &reqInfo{api: api, start: time.Now(), held: w, client: r.Body, betas: r.Header.Values("Anthropic-Beta")}
	if r.ContentLength > p.cfg.MaxBody {
		p.tooLarge(w, r, info)
		return
	}
	// The server's own writer: over the limit, MaxBytesReader has it close
	// the connection after the answer, which a wrapper would hide. Closing
	// the body does nothing (the transport closes the body it fails to
	// send), so the rest can still be read after a 413; the server closes
	// it once the handler returns.
	r.Body = http.MaxBytesReader(w.ResponseWriter, io.NopCloser(r.Body), p.cfg.MaxBody)
	if fa, ok := foldable(r); ok && p.cfg.Folder != nil {
		in := p.cfg.Folder.Begin(r, fa)
		info.in = in
		in.buf = newBuffer(r.ContentLength)
		// Held until the request is served; the body's readers and the
		// Folder hold it on their own.
		defer in.buf.release()
		if !p.cfg.StoreAndForward && r.ContentLength > 0 && len(in.cands) > 0 {
			p.serveCutThrough(w, r, fa, info)
			return
		}
		err := readBody(r.Body, in.buf, in)
		if err != nil {
			in.done()
			p.unread(w, r, info, err)
			return
		}
		out, why := p.cfg.Folder.Fold(r, fa, in.buf.b, in)
		p.cfg.Folder.Settle(in)
		if why != "" {
			p.cfg.Log.Debug("forwarded unfolded", "path", r.URL.Path, "why", why)
		}
		setBody(r, out, in.buf)
	}
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, info)))
}

// StatusPath is where the proxy answers, itself, with the status of the
// conversations it folds (Folder.Status) as JSON: no provider has a path
// there.
const StatusPath = "/contextfold/status"

func (p *Proxy) status(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "contextfold proxy: GET "+StatusPath, http.StatusMethodNotAllowed)
		return
	}
	st := struct {
		Folding       bool                 `json:"folding"`
		Conversations []ConversationStatus `json:"conversations"`
	}{Conversations: []ConversationStatus{}}
	if p.cfg.Folder != nil {
		st.Folding = true
		st.Conversations = p.cfg.Folder.Status()
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(append(b, '\n'))
}

// hasDotSegment reports whether path, as decoded (so %2e is a dot and %2f
// a slash), has a . or .. segment between slashes or backslashes, which
// some servers also take for slashes.
func hasDotSegment(path string) bool {
	for seg := range strings.FieldsFuncSeq(path, func(c rune) bool { return c == '/' || c == '\\' }) {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// errInternal marks a request the proxy itself failed.
var errInternal = errors.New("contextfold proxy internal error")

// unread answers a request whose body could not be read.
func (p *Proxy) unread(w http.ResponseWriter, r *http.Request, info *reqInfo, err error) {
	var big *http.MaxBytesError
	if errors.As(err, &big) {
		p.tooLarge(w, r, info)
		return
	}
	if errors.Is(err, errInternal) {
		writeError(w, info.api, http.StatusBadGateway, "api_error", err.Error())
		return
	}
	p.cfg.Log.Debug("client went away while sending", "method", r.Method, "path", r.URL.Path)
}

// serveCutThrough serves a request whose body may be predicted (see
// cutthrough.go): upstream while it arrives if a candidate predicts it,
// else once it is in and decided.
func (p *Proxy) serveCutThrough(w http.ResponseWriter, r *http.Request, fa codec.API, info *reqInfo) {
	ct := newCutThrough(info.in, r.ContentLength, p.cfg.Log)
	info.ct = ct
	wait := p.cutThrough(r, fa, ct)
	defer wait() // the body is read and decided before its buffer goes
	// The upstream may answer before the body is in (an error): the body
	// is still read on, by the goroutine, not discarded by the server.
	http.NewResponseController(w).EnableFullDuplex()
	<-ct.ready
	out := r.WithContext(context.WithValue(r.Context(), ctxKey{}, info))
	// The reader is opened here, not by the transport: if the fold has
	// meanwhile decided otherwise, the decided body goes instead.
	if body, ok := ct.open(); ok {
		info.body = body
		out.Header = r.Header.Clone() // the goroutine reads r's
		out.Header.Set("Content-Length", strconv.Itoa(ct.total))
		out.Body, out.GetBody = http.NoBody, ct.body
		out.ContentLength = int64(ct.total)
		out.TransferEncoding = nil
		p.rp.ServeHTTP(w, out)
		return
	}
	wait()
	if ct.state == cutFailed {
		p.unread(w, r, info, ct.err)
		return
	}
	info.ct = nil
	info.in.path = ct.path
	setBody(out, ct.final, info.in.buf)
	p.rp.ServeHTTP(w, out)
}

// cutThrough reads r's body into ct as it arrives and has the Folder decide
// what goes out once it is in, on a goroutine of its own: the handler sends
// the prediction meanwhile. wait returns once both are done.
func (p *Proxy) cutThrough(r *http.Request, fa codec.API, ct *cutThrough) (wait func()) {
	done := make(chan struct{})
	body := r.Body
	go func() {
		defer close(done)
		defer func() {
			// Fold fails open on its own; nothing else here should panic.
			if v := recover(); v != nil {
				p.cfg.Log.Warn("internal error while reading a request", "path", r.URL.Path, "err", fmt.Sprint(v))
				ct.fail(fmt.Errorf("%w: %v", errInternal, v))
			}
		}()
		if err := readBody(body, ct.in.buf, ct); err != nil {
			ct.in.done()
			ct.fail(err)
			return
		}
		// After the decision is handed to the upload, even if that panics.
		defer p.cfg.Folder.Settle(ct.in)
		out, why := p.cfg.Folder.Fold(r, fa, ct.in.buf.b, ct.in)
		if why != "" {
			p.cfg.Log.Debug("forwarded unfolded", "path", r.URL.Path, "why", why)
		}
		ct.decide(out, ct.in.path)
		// decide readied the goroutine uploading the body to this P; the
		// idle work's goroutine, started now (Settle, deferred), would
		// take its turn and delay the upload's last byte.
		runtime.Gosched()
	}()
	return func() { <-done }
}

// drainMax and drainTime bound what tooLarge reads of a body after its
// answer.
const (
	drainMax  = 1 << 30
	drainTime = 10 * time.Second
)

// tooLarge answers a request whose body is over the limit. Over HTTP/1 it
// then reads the rest of the body and drops it, drainMax or drainTime at
// most, before the connection closes: closed with bytes unread, it would
// be reset, and a client still sending, or that reads only once it has
// sent, would see the reset instead of the 413.
func (p *Proxy) tooLarge(w http.ResponseWriter, r *http.Request, info *reqInfo) {
	p.cfg.Log.Warn("refused a request body over the limit", "method", r.Method, "path", r.URL.Path, "limit", p.cfg.MaxBody)
	drain := r.ProtoMajor == 1
	rc := http.NewResponseController(w)
	if drain {
		// Full duplex: net/http's word that the body is read after the
		// answer has begun (else it may give up on the body itself).
		rc.EnableFullDuplex()
		w.Header().Set("Connection", "close")
	}
	writeError(w, info.api, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("request body over contextfold proxy's limit of %d bytes (-max-body)", p.cfg.MaxBody))
	if !drain {
		return
	}
	rc.Flush() // the 413 goes before the drain, for a client reading while it sends
	rc.SetReadDeadline(time.Now().Add(drainTime))
	// 64 KB reads rather than io.Discard's 8 KB: fewer of them.
	io.CopyBuffer(struct{ io.Writer }{io.Discard}, io.LimitReader(info.client, drainMax), make([]byte, 64<<10))
}

// logged notes the upstream's answer, and has the calls of context-fold's
// own tools in a folded conversation's answer, and the usage it reports,
// noted in its file (see watchCalls); the response itself is not touched.
func (p *Proxy) logged(res *http.Response) error {
	if info, ok := res.Request.Context().Value(ctxKey{}).(*reqInfo); ok {
		if res.StatusCode != http.StatusSwitchingProtocols { // its body is the connection, for ReverseProxy to take over
			res.Body = &stopAtEnd{res.Body, info.held}
		}
		p.cfg.Log.Debug("forwarded", "api", info.api.String(), "method", res.Request.Method, "path", res.Request.URL.Path, "status", res.StatusCode, "headers_after", time.Since(info.start))
		if path := info.path(); path != "" && res.StatusCode/100 == 2 {
			note := func(c foldstore.Call) error { return p.cfg.Folder.store.NoteCall(path, c) }
			var usage func(foldstore.Usage)
			if n := info.in.request; n > 0 {
				usage = p.cfg.Folder.usageNote(path, n)
			}
			res.Body = watchCalls(res, info.in.api, note, usage, p.cfg.Log)
		}
	}
	return nil
}

// failed answers a request the upstream did not: 413 for a body that grew
// over the limit, nothing for a client that went away, 502 otherwise.
func (p *Proxy) failed(w http.ResponseWriter, r *http.Request, err error) {
	info := r.Context().Value(ctxKey{}).(*reqInfo)
	api := info.api
	if info.ct != nil {
		if e := info.ct.failure(); e != nil {
			// The client's body broke off while it was being sent on.
			p.unread(w, r, info, e)
			return
		}
	}
	var big *http.MaxBytesError
	switch {
	case errors.As(err, &big):
		p.tooLarge(w, r, info)
	case r.Context().Err() != nil:
		p.cfg.Log.Debug("client went away", "method", r.Method, "path", r.URL.Path)
	default:
		up := p.upstream(api)
		p.cfg.Log.Warn("upstream unreachable", "api", api.String(), "upstream", up.Host, "path", r.URL.Path, "err", redact(err))
		writeError(w, api, http.StatusBadGateway, "api_error", fmt.Sprintf("contextfold proxy could not reach the %s upstream %s: %v", api, up.Host, redact(err)))
	}
}

// redact drops the URL (and so any query) from a transport error.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// anthropicError and openaiError are the two APIs' error bodies.
type anthropicError struct {
	Type  string `json:"type"` // "error"
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type openaiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
		Param   *string `json:"param"`
	} `json:"error"`
}

// writeError writes an error in api's shape, marked as the proxy's own.
func writeError(w http.ResponseWriter, api API, status int, typ, msg string) {
	var v any
	if api == Anthropic {
		var e anthropicError
		e.Type, e.Error.Type, e.Error.Message = "error", typ, msg
		v = e
	} else {
		var e openaiError
		e.Error.Message, e.Error.Type = msg, typ
		v = e
	}
	body, _ := json.Marshal(v) // strings always marshal
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Contextfold-Proxy", "error")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
