// Package fakellm is a scripted fake of an OpenAI-compatible (and, secondarily,
// Anthropic-compatible) streaming model server, for keyless end-to-end tests
// of Pi and context-fold.
//
// The server listens on 127.0.0.1 only, records every model request (raw body
// plus a parsed view) and answers it with whatever its Script returns. It
// stops by itself after Options.MaxLifetime so a forgotten server never
// lingers.
//
// Routes:
//
//	POST /v1/chat/completions  OpenAI chat completions, stream or not
//	POST /v1/messages          Anthropic Messages (the query, e.g. ?beta=true, is ignored)
//	GET  /v1/models            model list
//
// # Streaming format
//
// An OpenAI streaming answer is a text/event-stream of "data: <json>\n\n"
// chunks: a first chunk carrying the role (and, with no text, "content":null),
// the reply's Thinking as reasoning_content deltas (no signature: the wire
// has none), text deltas, for each tool call a chunk with its id, type and name followed
// by argument pieces, a chunk with an empty delta and the finish_reason
// ("tool_calls" when there are tool calls, else "stop"; Pi rejects a stream
// without one), a usage chunk with empty choices, and "data: [DONE]". The usage
// chunk carries prompt_tokens, completion_tokens, total_tokens and
// prompt_tokens_details {cached_tokens, cache_write_tokens}; Pi maps them to
// input = prompt - cached - cache_write, cacheRead = cached,
// cacheWrite = cache_write.
//
// # Usage accounting
//
// When a Reply's Usage is zero the server computes one:
//
//   - Prompt is len(body)/4 (at least 1).
//   - Cached is the longest common byte prefix of this request's "messages"
//     array with the "messages" array of any earlier request on the same
//     route, divided by 4 and capped at Prompt. For a linear session this is
//     the prefix shared with the previous request; taking the best earlier
//     request keeps the cache warm across an interleaved summary request, as
//     a real provider cache would. On the Anthropic route the compared bytes
//     are tools, system and messages, in the provider's cache order, with the
//     cache_control markers removed (Pi moves the breakpoint to the newest
//     message on every request).
//   - CacheWrite is the rest, Prompt - Cached, so Pi sees input = 0.
//   - Completion is the reply's text plus tool-call names and arguments, in
//     bytes, /4 (at least 1).
//
// # Tool-less requests
//
// A request that declares no tools is how Pi's own compaction and
// branch-summary requests look. It is recorded like any other (its
// Recorded.Tools is empty; see Request.ToolLess) but the Script is not asked:
// the answer is plain text from the Script's Summary method if it implements
// Summarizer, else Options.SummaryText, else DefaultSummaryText.
package fakellm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DefaultMaxLifetime is how long a server lives when Options.MaxLifetime is 0.
const DefaultMaxLifetime = 10 * time.Minute

// DefaultSummaryText answers tool-less requests when nothing else is set. It
// follows the section layout of Pi's compaction summary.
const DefaultSummaryText = "## Goal\nFAKE LLM SUMMARY\n\n## Progress\n- summarized by fakellm\n"

// maxBody bounds a request body.
const maxBody = 64 << 20

// Usage is the token usage a reply reports. See the package documentation for
// how a zero Usage is computed.
type Usage struct {
	// Prompt is all prompt tokens, cached ones included (OpenAI semantics).
	Prompt int
	// Cached is the prompt tokens read from the cache.
	Cached int
	// CacheWrite is the prompt tokens written to the cache.
	CacheWrite int
	// Completion is the output tokens.
	Completion int
}

// IsZero reports whether u is all zero.
func (u Usage) IsZero() bool { return u == Usage{} }

// Reply is what the model answers.
type Reply struct {
	// Thinking are the model's reasoning blocks, streamed before the text
	// and tool calls, each minted with a signature (an Anthropic thinking
	// block with its signature, a Responses reasoning item with its
	// encrypted content, a Gemini thought part with its thoughtSignature).
	Thinking []string
	// Text is the assistant text, streamed in pieces. It may be combined with
	// ToolCalls; the text comes first.
	Text string
	// ToolCalls are the calls the model makes.
	ToolCalls []ToolCall
	// Usage is reported as given; zero means computed (see package doc).
	Usage Usage
	// FinishReason overrides the finish reason ("stop", "tool_calls",
	// "length"). Empty means "tool_calls" if there are tool calls, else
	// "stop". For Anthropic the equivalent stop_reason is sent.
	FinishReason string
	// Status, when not 0 or 200, makes the server answer with that HTTP status
	// and an error body carrying ErrorMessage instead of a completion.
	Status int
	// ErrorMessage is the error text for Status.
	ErrorMessage string
}

// Script decides the model's answers. The server calls Reply once per model
// request that declares tools, one call at a time, in arrival order. Reply
// must not retain req after returning (it may read it freely while running).
type Script interface {
	Reply(req *Request) Reply
}

// ScriptFunc adapts a function to Script.
type ScriptFunc func(req *Request) Reply

// Reply calls f(req).
func (f ScriptFunc) Reply(req *Request) Reply { return f(req) }

// Summarizer is optionally implemented by a Script to answer tool-less
// (summary) requests itself.
type Summarizer interface {
	Summary(req *Request) string
}

// Options configure a Server. The zero value is usable.
type Options struct {
	// MaxLifetime is how long the server runs before closing itself;
	// 0 means DefaultMaxLifetime.
	MaxLifetime time.Duration
	// Models are the ids GET /v1/models lists; nil means ["fake-model"].
	Models []string
	// SummaryText answers tool-less requests when the Script is not a
	// Summarizer; "" means DefaultSummaryText.
	SummaryText string
	// MaxPromptTokens, when > 0, makes requests whose prompt tokens (as
	// reported) exceed it fail with HTTP 400 and an OpenAI-style
	// context-length error that Pi classifies as a context overflow.
	MaxPromptTokens int
	// ChunkBytes is the size of the text and argument pieces streamed;
	// 0 means 64.
	ChunkBytes int
	// MinCacheTokens is the Anthropic minimum cacheable prompt length;
	// 0 means DefaultMinCacheTokens.
	MinCacheTokens int
	// Now is the clock of the prompt-cache lifetime; nil means time.Now.
	Now func() time.Time
}

// Recorded is one model request together with the answer it got.
type Recorded struct {
	Request
	// Reply is the reply as sent, with defaults filled in (tool-call ids,
	// finish reason). For a tool-less request it is the summary text.
	Reply Reply
	// Usage is the usage reported.
	Usage Usage
	// Status is the HTTP status sent.
	Status int
	// Signatures are the signatures minted for Reply.Thinking, one each
	// (for Gemini, then one more for the first function call, or for the
	// text of a reply without calls; see gemini.go).
	Signatures []string
	// Dropped lists the replayed signed blocks the strict rules dropped
	// instead of rejecting (Anthropic's drop_block, Responses reasoning
	// removals): what the provider reports in input_transformations.
	Dropped []Transformation

	ant *antState // what the Anthropic rules derived, for minting and usage
	// ParseError is set when the body could not be parsed; the request was
	// answered with HTTP 400.
	ParseError string
	// Error is the strict rule the request broke, answered as the provider
	// would (HTTP 400 and its error shape); nil when it broke none.
	Error *APIError
}

// Server is a running fake model server.
type Server struct {
	script Script
	opts   Options
	ln     net.Listener
	srv    *http.Server
	url    string
	done   chan struct{}
	once   sync.Once
	timer  *time.Timer

	// handleMu serializes model requests so Script calls and usage
	// computation see a consistent order.
	handleMu sync.Mutex

	mu        sync.Mutex
	reqs      []Recorded
	unhandled []string
	cache     map[[32]byte]cacheEntry // Anthropic's prompt cache
}

// Start starts a server on 127.0.0.1 with an ephemeral port.
func Start(script Script, opts Options) (*Server, error) {
	if script == nil {
		return nil, errors.New("fakellm: nil script")
	}
	if opts.MaxLifetime <= 0 {
		opts.MaxLifetime = DefaultMaxLifetime
	}
	if opts.Models == nil {
		opts.Models = []string{"fake-model"}
	}
	if opts.SummaryText == "" {
		opts.SummaryText = DefaultSummaryText
	}
	if opts.ChunkBytes <= 0 {
		opts.ChunkBytes = 64
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakellm: listen: %w", err)
	}
	s := &Server{
		script: script,
		opts:   opts,
		ln:     ln,
		url:    "http://" + ln.Addr().String() + "/v1",
		done:   make(chan struct{}),
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 30 * time.Second}
	go s.srv.Serve(ln)
	s.timer = time.NewTimer(opts.MaxLifetime)
	go func() {
		select {
		case <-s.timer.C:
			s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// URL returns the OpenAI-style base URL, "http://127.0.0.1:<port>/v1".
func (s *Server) URL() string { return s.url }

// AnthropicURL returns the base URL for Pi's anthropic-messages api, which
// appends /v1/messages itself: "http://127.0.0.1:<port>".
func (s *Server) AnthropicURL() string { return strings.TrimSuffix(s.url, "/v1") }

// Requests returns a copy of the recorded model requests in arrival order.
// The byte slices inside are shared with the server; do not modify them.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.reqs...)
}

// Len returns the number of recorded model requests.
func (s *Server) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// Unhandled returns "METHOD /path" for every request that matched no route.
func (s *Server) Unhandled() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unhandled...)
}

// Done is closed when the server has stopped, by Close or by its lifetime.
func (s *Server) Done() <-chan struct{} { return s.done }

// Close stops the server and drops open connections. It is idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		s.timer.Stop()
		err = s.srv.Close()
		close(s.done)
	})
	return err
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/chat/completions"):
		s.handleModel(w, r, OpenAI)
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/messages"):
		s.handleModel(w, r, Anthropic)
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/responses"):
		s.handleModel(w, r, Responses)
	case r.Method == http.MethodPost && (strings.HasSuffix(path, ":streamGenerateContent") || strings.HasSuffix(path, ":generateContent")):
		s.handleModel(w, r, Gemini)
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/models"):
		s.handleModels(w)
	default:
		s.mu.Lock()
		s.unhandled = append(s.unhandled, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		writeError(w, &APIError{Status: http.StatusNotFound, Message: "no route " + r.Method + " " + r.URL.Path}, OpenAI)
	}
}

func (s *Server) handleModels(w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, id := range s.opts.Models {
		list.Data = append(list.Data, model{ID: id, Object: "model", OwnedBy: "fakellm"})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(list)
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request, api API) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, &APIError{Status: http.StatusBadRequest, Message: "read body: " + err.Error()}, api)
		return
	}
	rec := s.decide(r, api, body)
	if rec.Status != http.StatusOK {
		e := rec.Error
		if e == nil {
			msg := rec.ParseError
			if msg == "" {
				msg = rec.Reply.ErrorMessage
			}
			if msg == "" {
				msg = http.StatusText(rec.Status)
			}
			e = &APIError{Status: rec.Status, Message: msg}
		}
		writeError(w, e, api)
		return
	}
	model := rec.Model
	if model == "" {
		model = "fake-model"
	}
	enc := encoder{chunk: s.opts.ChunkBytes, model: model, seq: rec.Seq, created: time.Now().Unix()}
	switch {
	case api == OpenAI && rec.Stream:
		enc.openAIStream(w, rec.Reply, rec.Usage)
	case api == OpenAI:
		enc.openAIJSON(w, rec.Reply, rec.Usage)
	case api == Responses:
		enc.responsesStream(w, &rec)
	case api == Gemini:
		enc.geminiStream(w, &rec)
	case rec.Stream:
		enc.anthropicStream(w, &rec)
	default:
		enc.anthropicJSON(w, &rec)
	}
}

// parse parses a request body of api.
func parse(api API, r *http.Request, body []byte) (*Request, error) {
	switch api {
	case OpenAI:
		return ParseOpenAI(body)
	case Responses:
		return ParseResponses(body)
	case Gemini:
		req, err := ParseGemini(body)
		if err == nil {
			req.Model = GeminiModel(r.URL.Path)
			req.Stream = strings.HasSuffix(r.URL.Path, ":streamGenerateContent")
		}
		return req, err
	}
	return ParseAnthropic(body)
}

// check applies api's strict rules to a parsed request. A non-nil error is
// answered as the provider would answer it; drops are recorded in rec.
func (s *Server) check(api API, req *Request, rec *Recorded) *APIError {
	switch api {
	case Anthropic:
		return s.checkAnthropic(req, rec)
	case Responses:
		return s.checkResponses(req, rec)
	case Gemini:
		return s.checkGemini(req, rec)
	}
	return nil
}

// mint fills rec.Signatures for rec.Reply.
func (s *Server) mint(api API, req *Request, rec *Recorded) {
	switch api {
	case Anthropic:
		s.mintAnthropic(req, rec)
	case Responses:
		s.mintResponses(req, rec)
	case Gemini:
		s.mintGemini(req, rec)
	}
}

// decide parses and records one model request and works out its answer.
// Requests are decided one at a time, in arrival order.
func (s *Server) decide(r *http.Request, api API, body []byte) Recorded {
	s.handleMu.Lock()
	defer s.handleMu.Unlock()

	req, err := parse(api, r, body)
	if err != nil {
		req = &Request{API: api, Body: body}
	}
	req.Method, req.Path, req.Query, req.Header = r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone()

	s.mu.Lock()
	req.Seq = len(s.reqs) + 1
	prev := make([][]byte, 0, len(s.reqs))
	for i := range s.reqs {
		if s.reqs[i].API == api {
			prev = append(prev, s.reqs[i].cacheKey)
		}
	}
	s.mu.Unlock()

	rec := Recorded{Request: *req}
	if err != nil {
		rec.ParseError = err.Error()
		rec.Status = http.StatusBadRequest
		s.record(rec)
		return rec
	}
	if e := s.check(api, req, &rec); e != nil {
		rec.Status, rec.Error = e.Status, e
		s.record(rec)
		return rec
	}

	var reply Reply
	if req.ToolLess() {
		text := s.opts.SummaryText
		if sm, ok := s.script.(Summarizer); ok {
			text = sm.Summary(req)
		}
		reply = Reply{Text: text}
	} else {
		reply = s.script.Reply(req)
	}
	reply = fillReply(reply, req.Seq)
	rec.Reply, rec.Status = reply, http.StatusOK
	s.mint(api, req, &rec)
	usage := reply.Usage
	if usage.IsZero() {
		if api == Anthropic {
			usage = s.anthropicUsage(req, &rec)
		} else {
			usage = computeUsage(req, prev, reply)
		}
	}
	rec.Usage = usage

	switch {
	case reply.Status != 0 && reply.Status != http.StatusOK:
		rec.Status = reply.Status
	case s.opts.MaxPromptTokens > 0 && usage.Prompt > s.opts.MaxPromptTokens:
		rec.Status = http.StatusBadRequest
		rec.Reply = Reply{Status: http.StatusBadRequest, ErrorMessage: fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. (context_length_exceeded)",
			s.opts.MaxPromptTokens, usage.Prompt)}
	}
	s.record(rec)
	return rec
}

func (s *Server) record(rec Recorded) {
	s.mu.Lock()
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()
}

// fillReply fills in tool-call ids, empty arguments and the finish reason.
func fillReply(r Reply, seq int) Reply {
	calls := make([]ToolCall, len(r.ToolCalls))
	for i, tc := range r.ToolCalls {
		if tc.ID == "" {
			tc.ID = fmt.Sprintf("call_%d_%d", seq, i)
		}
		if len(tc.Arguments) == 0 {
			tc.Arguments = json.RawMessage("{}")
		}
		calls[i] = tc
	}
	r.ToolCalls = calls
	if r.FinishReason == "" {
		if len(calls) > 0 {
			r.FinishReason = "tool_calls"
		} else {
			r.FinishReason = "stop"
		}
	}
	return r
}

// computeUsage implements the accounting described in the package doc.
func computeUsage(req *Request, prev [][]byte, reply Reply) Usage {
	u := Usage{Prompt: max(len(req.Body)/4, 1)}
	best := 0
	for _, p := range prev {
		best = max(best, commonPrefix(p, req.cacheKey))
	}
	u.Cached = min(best/4, u.Prompt)
	u.CacheWrite = u.Prompt - u.Cached
	out := len(reply.Text)
	for _, tc := range reply.ToolCalls {
		out += len(tc.Name) + len(tc.Arguments)
	}
	u.Completion = max(out/4, 1)
	return u
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// APIError is a request the server refuses, answered in the provider's
// error shape.
type APIError struct {
	// Status is the HTTP status, 400 for a rule violation.
	Status int
	// Type is the provider's error type ("invalid_request_error"); for
	// Gemini the status word ("INVALID_ARGUMENT").
	Type string
	// Message is the provider's error text.
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

// Transformation is one entry of a response's input_transformations: a
// replayed block the provider dropped (or let through) instead of rejecting
// the request.
type Transformation struct {
	Type   string `json:"type"`
	Path   string `json:"path,omitempty"`
	ID     string `json:"id,omitempty"`
	Action string `json:"action,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// writeError writes an error body in the style of the API.
func writeError(w http.ResponseWriter, e *APIError, api API) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	typ := e.Type
	var body any
	switch api {
	case Anthropic:
		if typ == "" {
			typ = "invalid_request_error"
		}
		body = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": e.Message}}
	case Gemini:
		if typ == "" {
			typ = "INVALID_ARGUMENT"
		}
		body = map[string]any{"error": map[string]any{"code": e.Status, "message": e.Message, "status": typ}}
	default:
		if typ == "" {
			typ = "invalid_request_error"
		}
		body = map[string]any{"error": map[string]any{"message": e.Message, "type": typ, "param": nil, "code": nil}}
	}
	json.NewEncoder(w).Encode(body)
}
