package e2e

// What `contextfold proxy` adds to a request's time to first streamed byte
// (TTFB), measured end to end with the real binary on 127.0.0.1:
//
//	make build
//	CONTEXTFOLD_BIN=$PWD/bin/contextfold go test -run '^$' -bench BenchmarkProxyTTFB -benchtime 200x ./e2e
//
// The client is an http.Client per path (keep-alive), the upstream an
// httptest server in this process that reads the whole request body, then
// writes and flushes its SSE response's first event at once, then a few
// more. Each iteration sends the next turn of a conversation (one more
// tool call and its ~9 KB output: a client resends its whole conversation)
// along three paths, in an order that rotates per iteration so that machine
// noise hits them alike:
//
//	direct  client -> upstream
//	pass    client -> contextfold proxy -fold=false -> upstream
//	fold    client -> contextfold proxy -window 200000 -> upstream
//
// TTFB is from just before the client sends the request to the arrival of
// the response's first body byte. Before each request the benchmark sleeps
// ttfbGap with its timer stopped (the model's answer time), so what a proxy
// does after a request is not charged to the next. A conversation is warmed
// up to ttfbStartTurns turns (about 1,000 messages, 5.2 MB), measured for
// ttfbSpan turns, then a new one begins, so every measured request is at
// 1,000 to 1,100 messages. The fold path's upstream must receive digests
// ({#xxxxxx FOLDED}) in every request, the direct and pass paths' upstream
// the client's bytes unchanged.
//
// Metrics, in microseconds: <path>-p50-us and <path>-p99-us per path; and
// fold-added-* and pass-added-*, the p50 and p99 of the per-iteration
// differences proxy minus direct. ns/op is the wall time of one iteration's
// three requests, responses read whole. Percentiles are nearest-rank, so
// at -benchtime 200x p99 is the third slowest. The log has the body sizes
// and where each path's TTFB goes, as the upstream saw it: "arrive" (until
// the upstream's handler starts: the request's headers reached it),
// "upload" (the upstream reading the body), "respond" (until it flushes its
// first event) and "relay" (from that flush to the first byte at the
// client); and the folding path's TTFB split by whether the request carried
// a fold event (its upstream body has more digests than the one before);
// on Linux also each proxy process's minor page faults per request and its
// mean CPU time per request (from /proc/PID/stat). With
// CONTEXTFOLD_TTFB_SAMPLES=dir every sample goes to dir/<name>.csv.
//
// BenchmarkInProcessProxyTTFB is the same run with the proxies built from
// internal/proxy inside the test process, for -cpuprofile, and with four
// more columns: "proxy handler" (from the client's send to the proxy's
// handler starting), "proxy read" (the handler reading the client's body
// whole), "read→send" (from then to the upstream request's handing to the
// proxy's transport: the fold; negative when the proxy streams) and
// "send→upstream" (from then to the upstream's handler starting). It has
// two more paths, through internal/proxy without a Folder behind a handler
// that first reads the whole body (store-and-forward of the client's bytes
// unchanged): "store" reads it into a new buffer of the body's size, as
// the folding proxy does, "reuse" into one buffer kept from request to
// request; and "plain", net/http/httputil's ReverseProxy alone, streaming
// (no internal/proxy at all).
//
// BenchmarkLoopback is the floor: 5.2, 1 and 0.5 MB over loopback TCP and
// as an HTTP POST, with no proxy.
//
// With CONTEXTFOLD_TTFB_UPLINK_MBPS set, the upstream reads request bodies
// no faster than that many MB/s, standing for a provider behind a network
// link rather than on loopback.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/proxy"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

const (
	// ttfbStartTurns is the conversation's length at the first measured
	// request: a system and a user message, then a call and a result per
	// turn, about 1,000 messages.
	ttfbStartTurns = 500
	// ttfbWarmStep: the turns sent before measuring are 1, 1+step, ... so
	// the folding proxy has seen the conversation grow.
	ttfbWarmStep = 25
	// ttfbSpan: a conversation goes this many turns past ttfbStartTurns;
	// then a new one starts, so that every measured request is at 1,000
	// to 1,100 messages.
	ttfbSpan = 50
	// ttfbGap is the pause before each request, timer stopped: the model's
	// answer time.
	ttfbGap = 50 * time.Millisecond
	// ttfbWindow is the folding proxy's -window in tokens. 500 outputs of
	// ~9 KB are about 1.1 M tokens, so at this window the proxy folds.
	ttfbWindow = 200_000
	// ttfbRoute is the header naming a request's path, for the upstream.
	ttfbRoute = "x-contextfold-bench-route"
)

var ttfbDigest = regexp.MustCompile(`\{#[0-9a-z]+ FOLDED\}`)

// ---- Request bodies --------------------------------------------------------

// ttfbLines is how many lines a tool output has: 120 (about 9 KB) makes
// 5.2 MB at 1,000 messages; 24 (about 1.8 KB) makes 1.1 MB, the size of
// the bench set's real sessions at 1,000 messages (a median of about 1 KB
// a message). benchmarkTTFB runs both.
var ttfbLines = 120

// ttfbOutput is turn k's tool output: ttfbLines lines, one in 40 an error
// line (the output of internal/proxy's fold tests at 120 lines).
func ttfbOutput(k int) string {
	var b strings.Builder
	for i := 1; i <= ttfbLines; i++ {
		if i%40 == 0 {
			fmt.Fprintf(&b, "ERROR: turn %d step %d failed: disk quota exceeded on /var/tmp/build-%d\n", k, i, i)
			continue
		}
		fmt.Fprintf(&b, "INFO: turn %d step %d ok - compiled module_%d.o in 0.%02ds (padding padding padding)\n", k, i, i, i%100)
	}
	return b.String()
}

func ttfbJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// ttfbToolResult is a tool result block with its members in the order
// Claude Code sends them (internal/proxy/codec/testdata/clients/claude-basic.json):
// the breakpoint comes after the content.
type ttfbToolResult struct {
	ToolUseID    string `json:"tool_use_id"`
	Type         string `json:"type"`
	Content      string `json:"content"`
	IsError      bool   `json:"is_error"`
	CacheControl any    `json:"cache_control,omitempty"`
}

func ttfbCallID(k int) string { return fmt.Sprintf("call_%03d", k) }

// ttfbFormat is one wire format's client: its request bodies (shaped like
// internal/proxy's fold tests, i.e. like the real clients'), its headers and
// the SSE events its upstream answers with.
type ttfbFormat struct {
	name, path string
	// top is the body around the conversation array, whose place holds
	// ttfbItems; head are the array's first items.
	top  map[string]any
	head []any
	// turn is turn k's items; newest: k is the last turn.
	turn func(k int, newest bool) []any
	// header sets the client's headers for conversation session.
	header func(h http.Header, session string)
	events []string
}

// ttfbItems marks the conversation array in a format's top.
const ttfbItems = "\x00items"

var ttfbFormats = []*ttfbFormat{
	{
		name: "chat", path: "/v1/chat/completions",
		top:  map[string]any{"model": "m", "messages": ttfbItems, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}}, "stream": true},
		head: []any{map[string]any{"role": "system", "content": "You are a test agent."}, map[string]any{"role": "user", "content": "Run the build."}},
		turn: func(k int, _ bool) []any {
			return []any{
				map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": ttfbCallID(k), "type": "function", "function": map[string]any{"name": "bash", "arguments": string(ttfbJSON(map[string]any{"command": fmt.Sprintf("make step%d", k)}))}}}},
				map[string]any{"role": "tool", "tool_call_id": ttfbCallID(k), "content": ttfbOutput(k)},
			}
		},
		header: func(h http.Header, session string) { h.Set("x-session-id", session) },
		events: []string{
			`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Done"},"finish_reason":null}]}` + "\n\n",
			`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"."},"finish_reason":"stop"}]}` + "\n\n",
			`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}` + "\n\n",
			"data: [DONE]\n\n",
		},
	},
	{
		name: "responses", path: "/v1/responses",
		top: map[string]any{"model": "m", "input": ttfbItems, "tools": []any{map[string]any{"type": "function", "name": "exec_command"}}, "store": false, "prompt_cache_key": "thread-1", "stream": true},
		head: []any{map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "You are a test agent."}}},
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "Run the build."}}}},
		turn: func(k int, _ bool) []any {
			return []any{
				map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%d", k), "summary": []any{}, "encrypted_content": "opaque"},
				map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", k), "call_id": ttfbCallID(k), "name": "exec_command", "arguments": string(ttfbJSON(map[string]any{"cmd": fmt.Sprintf("make step%d", k)}))},
				map[string]any{"type": "function_call_output", "call_id": ttfbCallID(k), "output": ttfbOutput(k)},
			}
		},
		header: func(h http.Header, session string) { h.Set("session-id", session) },
		events: []string{
			"event: response.created\n" + `data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}` + "\n\n",
			"event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Done."}` + "\n\n",
			"event: response.completed\n" + `data: {"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","object":"response","status":"completed","usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3}}}` + "\n\n",
		},
	},
	{
		name: "messages", path: "/v1/messages?beta=true",
		top:  map[string]any{"model": "m", "messages": ttfbItems, "system": []any{map[string]any{"type": "text", "text": "You are a test agent.", "cache_control": map[string]any{"type": "ephemeral"}}}, "tools": []any{map[string]any{"name": "Bash", "input_schema": map[string]any{"type": "object"}}}, "stream": true},
		head: []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Run the build."}}}},
		turn: func(k int, newest bool) []any {
			result := ttfbToolResult{ToolUseID: ttfbCallID(k), Type: "tool_result", Content: ttfbOutput(k)}
			if newest {
				// Claude Code moves its last breakpoint to the newest block.
				result.CacheControl = map[string]any{"type": "ephemeral"}
			}
			return []any{
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "thinking", "thinking": "plan", "signature": "sig"}, map[string]any{"type": "tool_use", "id": ttfbCallID(k), "name": "Bash", "input": map[string]any{"command": fmt.Sprintf("make step%d", k)}}}},
				map[string]any{"role": "user", "content": []any{result}},
			}
		},
		header: func(h http.Header, session string) {
			h.Set("anthropic-version", "2023-06-01")
			h.Set("x-claude-code-session-id", session)
		},
		events: []string{
			"event: message_start\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}` + "\n\n",
			"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n",
			"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Done."}}` + "\n\n",
			"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n",
			"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}` + "\n\n",
			"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n",
		},
	},
}

// ttfbConversation builds a format's bodies turn by turn; the JSON of each
// turn is kept, so a body costs one copy.
type ttfbConversation struct {
	f              *ttfbFormat
	session        string
	before, after  []byte   // the body around the items
	head           [][]byte // the array's first items
	turns          [][]byte // turns[k-1]: turn k's items as not the newest
	buf            []byte
	turn, messages int // the last body's turn and item count
}

func newTTFBConversation(f *ttfbFormat, session string) *ttfbConversation {
	m := maps.Clone(f.top)
	if _, ok := m["prompt_cache_key"]; ok {
		m["prompt_cache_key"] = session
	}
	top := ttfbJSON(m)
	mark := ttfbJSON(ttfbItems)
	i := bytes.Index(top, mark)
	c := &ttfbConversation{f: f, session: session, before: top[:i], after: top[i+len(mark):]}
	for _, it := range f.head {
		c.head = append(c.head, ttfbJSON(it))
	}
	return c
}

// items is turn k's items as JSON, comma-separated.
func (c *ttfbConversation) items(k int, newest bool) []byte {
	var parts [][]byte
	for _, it := range c.f.turn(k, newest) {
		parts = append(parts, ttfbJSON(it))
	}
	return bytes.Join(parts, []byte(","))
}

// body is the request body at turn n (n ≥ 1): the whole conversation. It
// is valid until the next call.
func (c *ttfbConversation) body(n int) []byte {
	for len(c.turns) < n {
		c.turns = append(c.turns, c.items(len(c.turns)+1, false))
	}
	b := append(c.buf[:0], c.before...)
	b = append(b, '[')
	for i, h := range c.head {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, h...)
	}
	for k := 1; k < n; k++ {
		b = append(b, ',')
		b = append(b, c.turns[k-1]...)
	}
	b = append(b, ',')
	b = append(b, c.items(n, true)...)
	b = append(b, ']')
	b = append(b, c.after...)
	c.buf = b
	c.turn, c.messages = n, len(c.head)+n*len(c.f.turn(n, true))
	return b
}

// ---- The upstream ------------------------------------------------------------

// ttfbSeen is what the upstream saw of a route's last request.
type ttfbSeen struct {
	// body is valid until the route's next request.
	body []byte
	// start: the handler started (the headers had arrived); read: the body
	// was read whole; flushed: the first event was written, its flush
	// about to start.
	start, read, flushed time.Time
	count                int
}

// ttfbUpstream answers every request with its format's SSE events, the
// first one flushed as soon as the body is read. It keeps each route's last
// body and times, for one request at a time per route.
type ttfbUpstream struct {
	// uplink, when not 0, bounds the rate at which the upstream reads a
	// request body, in bytes per second (ttfbUplinkEnv).
	uplink float64
	ttfbRoutes
}

// ttfbRoutes keeps each route's last request, for one request at a time
// per route.
type ttfbRoutes struct {
	mu   sync.Mutex
	seen map[string]*ttfbSeen
}

// begin returns route's record and a buffer over its last body's memory.
func (u *ttfbRoutes) begin(route string) (*ttfbSeen, *bytes.Buffer) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen == nil {
		u.seen = map[string]*ttfbSeen{}
	}
	s := u.seen[route]
	if s == nil {
		s = &ttfbSeen{}
		u.seen[route] = s
	}
	return s, bytes.NewBuffer(s.body[:0])
}

// end records a request begin started.
func (u *ttfbRoutes) end(s *ttfbSeen, body []byte, start, read, flushed time.Time) {
	u.mu.Lock()
	s.body, s.start, s.read, s.flushed = body, start, read, flushed
	s.count++
	u.mu.Unlock()
}

// last returns route's last request record.
func (u *ttfbRoutes) last(route string) ttfbSeen {
	u.mu.Lock()
	defer u.mu.Unlock()
	if s := u.seen[route]; s != nil {
		return *s
	}
	return ttfbSeen{}
}

// ttfbUplinkEnv names the variable that makes the upstream read request
// bodies at most that many MB/s, as a provider behind a network link would:
// e.g. CONTEXTFOLD_TTFB_UPLINK_MBPS=12.5 for 100 Mbit/s. Unset: at once.
const ttfbUplinkEnv = "CONTEXTFOLD_TTFB_UPLINK_MBPS"

// throttled reads no faster than rate bytes per second since start.
type throttled struct {
	io.ReadCloser
	rate  float64
	start time.Time
	n     int
}

func (t *throttled) Read(p []byte) (int, error) {
	if len(p) > 64<<10 {
		p = p[:64<<10]
	}
	n, err := t.ReadCloser.Read(p)
	t.n += n
	if d := time.Until(t.start.Add(time.Duration(float64(t.n) / t.rate * float64(time.Second)))); d > 0 {
		time.Sleep(d)
	}
	return n, err
}

func (u *ttfbUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if u.uplink > 0 {
		r.Body = &throttled{ReadCloser: r.Body, rate: u.uplink, start: start}
	}
	s, body := u.begin(r.Header.Get(ttfbRoute))
	var events []string
	if f := formatOf(r); f != nil {
		events = f.events
	}
	_, err := body.ReadFrom(r.Body)
	read := time.Now()
	if err != nil || events == nil {
		http.Error(w, fmt.Sprintf("upstream: %s %s: %v", r.Method, r.URL.Path, err), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, events[0])
	flushed := time.Now()
	w.(http.Flusher).Flush()
	for _, e := range events[1:] {
		io.WriteString(w, e)
		w.(http.Flusher).Flush()
	}
	u.end(s, body.Bytes(), start, read, flushed)
}

func startTTFBUpstream(b testing.TB) (*ttfbUpstream, string) {
	u := &ttfbUpstream{}
	if v := os.Getenv(ttfbUplinkEnv); v != "" {
		mbps, err := strconv.ParseFloat(v, 64)
		if err != nil || mbps <= 0 {
			b.Fatalf("%s=%q: want a positive number of MB/s", ttfbUplinkEnv, v)
		}
		u.uplink = mbps * 1e6
	}
	srv := httptest.NewServer(u) // 127.0.0.1
	b.Cleanup(srv.Close)
	return u, srv.URL
}

// ---- The proxy process ---------------------------------------------------

// ttfbClockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times (100
// on every Linux architecture Go runs on).
const ttfbClockTicks = 100

// ttfbProcCounters are a process's minor page faults and CPU time (user
// and system, in clock ticks) from /proc/PID/stat.
type ttfbProcCounters struct{ minflt, ticks int64 }

// procStatFields are the fields of /proc/PID/stat after the command's
// name: [0] is field 3, the state.
func procStatFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return nil
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return nil
	}
	return f
}

func readTTFBProc(pid int) (ttfbProcCounters, bool) {
	if pid == 0 {
		return ttfbProcCounters{}, false
	}
	f := procStatFields(pid)
	if f == nil {
		return ttfbProcCounters{}, false
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(f[i], 10, 64); return v }
	return ttfbProcCounters{minflt: n(7), ticks: n(11) + n(12)}, true
}

// newestChild returns the PID of this process's most recently started
// child whose command line holds arg, or 0 (not Linux, or none).
func newestChild(arg string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := strconv.Itoa(os.Getpid())
	pid, started := 0, int64(-1)
	for _, e := range entries {
		id, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := procStatFields(id)
		if f == nil || f[1] != self {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", id))
		if err != nil || !slices.Contains(strings.Split(string(cmd), "\x00"), arg) {
			continue
		}
		if st, _ := strconv.ParseInt(f[19], 10, 64); st > started {
			pid, started = id, st
		}
	}
	return pid
}

// ---- Paths and samples -------------------------------------------------------

// ttfbPath is one way from the client to the upstream, with its samples.
type ttfbPath struct {
	name   string
	base   string
	client *http.Client
	// stamps, for an in-process proxy: when its handler last started and
	// when it had read the client's body whole.
	stamps *ttfbProxyStamps
	buf    []byte

	ttfb, arrive, upload, respond, relay []time.Duration
	// handler, receive, fold and forward are an in-process proxy's: from the
	// client's send to the handler's start, the handler reading the body
	// whole, from then to the upstream request's handing to the transport
	// (negative when the proxy streams), and from then to the upstream's
	// handler starting.
	handler, receive, fold, forward []time.Duration
	sentBytes, upBytes              []int
	// events[i]: the upstream's body had more digests than the path's
	// previous one (a fold event); digests is that count.
	events  []bool
	digests int
	// count is the upstream's count of this path's requests.
	count int
	// pid is the proxy process's (0: none, or not known); faults are its
	// minor page faults during each request, ticks its CPU time during
	// them, in clock ticks.
	pid    int
	faults []int64
	ticks  int64
}

func newTTFBPath(name, base string) *ttfbPath {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
	}
	return &ttfbPath{name: name, base: base, client: &http.Client{Transport: tr}, buf: make([]byte, 32<<10)}
}

func (p *ttfbPath) reset() {
	p.ttfb, p.arrive, p.upload, p.respond, p.relay = nil, nil, nil, nil, nil
	p.handler, p.receive, p.fold, p.forward = nil, nil, nil, nil
	p.sentBytes, p.upBytes, p.events = nil, nil, nil
	p.faults, p.ticks = nil, 0
}

// send sends c's body at turn n along p and reads the response whole. It
// returns the TTFB and when the request was sent.
func (p *ttfbPath) send(b testing.TB, c *ttfbConversation, body []byte) (time.Duration, time.Time) {
	ttfb, _, t0 := p.sendTimed(b, c, body, nil)
	return ttfb, t0
}

// sendTimed is send that also returns the time from the send to the
// response's end (its last byte read), with the extra headers set.
func (p *ttfbPath) sendTimed(b testing.TB, c *ttfbConversation, body []byte, extra http.Header) (ttfb, total time.Duration, t0 time.Time) {
	req, err := http.NewRequest("POST", p.base+c.f.path, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer sk-fake-key-for-local-tests")
	req.Header.Set(ttfbRoute, p.name)
	c.f.header(req.Header, c.session)
	for k, v := range extra {
		req.Header[k] = v
	}
	t0 = time.Now()
	res, err := p.client.Do(req)
	if err != nil {
		b.Fatalf("%s %s: %v", p.name, c.f.name, err)
	}
	n := 0
	for n == 0 && err == nil {
		n, err = res.Body.Read(p.buf)
	}
	first := time.Now()
	if res.StatusCode != http.StatusOK {
		rest, _ := io.ReadAll(res.Body)
		res.Body.Close()
		b.Fatalf("%s %s: status %d: %s", p.name, c.f.name, res.StatusCode, string(p.buf[:n])+string(rest))
	}
	if n == 0 {
		b.Fatalf("%s %s: no response body: %v", p.name, c.f.name, err)
	}
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		b.Fatalf("%s %s: reading the stream: %v", p.name, c.f.name, err)
	}
	end := time.Now()
	res.Body.Close()
	return first.Sub(t0), end.Sub(t0), t0
}

// ttfbProxyStamps are an in-process proxy's times for its last request.
type ttfbProxyStamps struct {
	mu sync.Mutex
	// start: the handler started; eof: it had read the body whole; send:
	// the proxy's transport was handed the upstream request.
	start, eof, send time.Time
}

// transport stamps send on the way to rt.
func (s *ttfbProxyStamps) transport(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		s.mu.Lock()
		s.send = time.Now()
		s.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// eofStamp notes when a request body reports its end.
type eofStamp struct {
	io.ReadCloser
	s *ttfbProxyStamps
}

func (e *eofStamp) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	if err == io.EOF {
		e.s.mu.Lock()
		if e.s.eof.IsZero() {
			e.s.eof = time.Now()
		}
		e.s.mu.Unlock()
	}
	return n, err
}

func (s *ttfbProxyStamps) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.start, s.eof, s.send = time.Now(), time.Time{}, time.Time{}
		s.mu.Unlock()
		r.Body = &eofStamp{r.Body, s}
		h.ServeHTTP(w, r)
	})
}

// ttfbPercentile is the nearest-rank p-th percentile (0 < p ≤ 100) of xs.
func ttfbPercentile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// ---- The run ------------------------------------------------------------

// ttfbRun is the state of one format's run across the calls of its
// sub-benchmark (the framework calls it with b.N = 1 first): the
// conversation goes on where the last call left it.
type ttfbRun struct {
	f     *ttfbFormat
	up    *ttfbUpstream
	paths []*ttfbPath // direct first
	conv  *ttfbConversation
	// convs counts the conversations begun.
	convs int
	// turns and items: of each recorded iteration.
	turns, items []int
}

// next returns the turn to send next: the conversation's next one, or,
// once it has gone ttfbSpan turns past ttfbStartTurns, the first of a new
// conversation, warmed up as the first was (along every path the first
// time, then along the folding one only).
func (r *ttfbRun) next(b *testing.B) int {
	if r.conv != nil && r.conv.turn < ttfbStartTurns+ttfbSpan {
		return r.conv.turn + 1
	}
	paths := r.paths
	if r.conv != nil {
		paths = []*ttfbPath{r.path("fold")}
	}
	r.convs++
	r.conv = newTTFBConversation(r.f, fmt.Sprintf("bench-%s-%d", r.f.name, r.convs))
	for n := 1; n < ttfbStartTurns; n += ttfbWarmStep {
		r.turn(b, paths, n, false)
	}
	r.turn(b, paths, ttfbStartTurns, false)
	if r.convs == 1 {
		b.Logf("warm-up to turn %d (%d items): body %.2f MB", r.conv.turn, r.conv.messages, float64(len(r.conv.buf))/1e6)
	}
	return r.conv.turn + 1
}

func (r *ttfbRun) path(name string) *ttfbPath {
	for _, p := range r.paths {
		if p.name == name {
			return p
		}
	}
	panic("no path " + name)
}

// runTTFB is one sub-benchmark: b.N turns along every path.
func runTTFB(b *testing.B, r *ttfbRun) {
	for _, p := range r.paths {
		p.reset()
	}
	r.turns, r.items = nil, nil
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		n := r.next(b)
		r.turn(b, r.paths, n, true)
	}
	b.StopTimer()
	r.report(b)
}

// turn sends turn n along paths, each after ttfbGap, in an order rotated
// by n, and checks what the upstream received. The timer runs only while
// a request is under way.
func (r *ttfbRun) turn(b *testing.B, paths []*ttfbPath, n int, record bool) {
	b.StopTimer()
	body := r.conv.body(n)
	if record {
		r.turns, r.items = append(r.turns, n), append(r.items, r.conv.messages)
	}
	for j := range paths {
		p := paths[(n+j)%len(paths)]
		time.Sleep(ttfbGap)
		before, known := readTTFBProc(p.pid)
		b.StartTimer()
		ttfb, t0 := p.send(b, r.conv, body)
		b.StopTimer()
		after, _ := readTTFBProc(p.pid)
		seen := r.up.last(p.name)
		if seen.count != p.count+1 {
			b.Fatalf("%s turn %d: the upstream saw %d requests of the %s path, want %d", r.f.name, n, seen.count, p.name, p.count+1)
		}
		p.count = seen.count
		got := seen.body
		digests := 0
		if p.name == "fold" {
			digests = len(ttfbDigest.FindAllIndex(got, -1))
			if n >= ttfbStartTurns && digests == 0 {
				b.Fatalf("%s turn %d: no digest reached the upstream through the folding proxy (%d bytes sent, %d received)", r.f.name, n, len(body), len(got))
			}
		} else if !bytes.Equal(got, body) {
			b.Fatalf("%s turn %d: the %s path's upstream received %d bytes, not the client's %d", r.f.name, n, p.name, len(got), len(body))
		}
		event := digests > p.digests
		p.digests = digests
		if !record {
			continue
		}
		p.events = append(p.events, event)
		p.ttfb = append(p.ttfb, ttfb)
		p.arrive = append(p.arrive, seen.start.Sub(t0))
		p.upload = append(p.upload, seen.read.Sub(seen.start))
		p.respond = append(p.respond, seen.flushed.Sub(seen.read))
		p.relay = append(p.relay, t0.Add(ttfb).Sub(seen.flushed))
		p.sentBytes = append(p.sentBytes, len(body))
		p.upBytes = append(p.upBytes, len(got))
		if known {
			p.faults = append(p.faults, after.minflt-before.minflt)
			p.ticks += after.ticks - before.ticks
		}
		if p.stamps != nil {
			p.stamps.mu.Lock()
			p.handler = append(p.handler, p.stamps.start.Sub(t0))
			p.receive = append(p.receive, p.stamps.eof.Sub(p.stamps.start))
			p.fold = append(p.fold, p.stamps.send.Sub(p.stamps.eof))
			p.forward = append(p.forward, seen.start.Sub(p.stamps.send))
			p.stamps.mu.Unlock()
		}
	}
	b.StartTimer()
}

// ttfbSamplesEnv names a directory to write each sub-benchmark's samples
// to, as CSV (one row per request, times in µs).
const ttfbSamplesEnv = "CONTEXTFOLD_TTFB_SAMPLES"

func (r *ttfbRun) report(b *testing.B) {
	direct := r.paths[0]
	for _, p := range r.paths {
		b.ReportMetric(us(ttfbPercentile(p.ttfb, 50)), p.name+"-p50-us")
		b.ReportMetric(us(ttfbPercentile(p.ttfb, 99)), p.name+"-p99-us")
	}
	for _, p := range r.paths[1:] {
		added := make([]time.Duration, len(p.ttfb))
		for i := range added {
			added[i] = p.ttfb[i] - direct.ttfb[i]
		}
		b.ReportMetric(us(ttfbPercentile(added, 50)), p.name+"-added-p50-us")
		b.ReportMetric(us(ttfbPercentile(added, 99)), p.name+"-added-p99-us")
	}
	if b.N < 2 {
		return
	}
	if dir := os.Getenv(ttfbSamplesEnv); dir != "" {
		r.writeSamples(b, dir)
	}
	b.Logf("%s: %d conversations, turns %d..%d (%d..%d items), client body %.2f..%.2f MB",
		r.f.name, r.convs, slices.Min(r.turns), slices.Max(r.turns), slices.Min(r.items), slices.Max(r.items),
		float64(slices.Min(direct.sentBytes))/1e6, float64(slices.Max(direct.sentBytes))/1e6)
	pct := func(xs []time.Duration) string {
		if len(xs) == 0 {
			return "-"
		}
		return fmt.Sprintf("%7.0f %7.0f", us(ttfbPercentile(xs, 50)), us(ttfbPercentile(xs, 99)))
	}
	var t strings.Builder
	fmt.Fprintf(&t, "p50 and p99 in µs   %15s %15s %15s %15s %15s", "ttfb", "arrive", "upload", "respond", "relay")
	inProcess := r.paths[1].stamps != nil
	if inProcess {
		fmt.Fprintf(&t, " %15s %15s %15s %15s", "proxy handler", "proxy read", "read→send", "send→upstream")
	}
	fmt.Fprintf(&t, "   upstream body MB\n")
	for _, p := range r.paths {
		fmt.Fprintf(&t, "%-19s %15s %15s %15s %15s %15s", p.name, pct(p.ttfb), pct(p.arrive), pct(p.upload), pct(p.respond), pct(p.relay))
		if inProcess {
			fmt.Fprintf(&t, " %15s %15s %15s %15s", pct(p.handler), pct(p.receive), pct(p.fold), pct(p.forward))
		}
		fmt.Fprintf(&t, "   %.2f..%.2f\n", float64(slices.Min(p.upBytes))/1e6, float64(slices.Max(p.upBytes))/1e6)
	}
	// The folding path's iterations with a fold event, against the rest.
	fold := r.path("fold")
	var with, without, addWith, addWithout []time.Duration
	for i, ev := range fold.events {
		add := fold.ttfb[i] - direct.ttfb[i]
		if ev {
			with, addWith = append(with, fold.ttfb[i]), append(addWith, add)
		} else {
			without, addWithout = append(without, fold.ttfb[i]), append(addWithout, add)
		}
	}
	fmt.Fprintf(&t, "fold: %d of %d requests carried a fold event: ttfb p50 p99 %s, added %s; without one: ttfb %s, added %s",
		len(with), len(fold.events), pct(with), pct(addWith), pct(without), pct(addWithout))
	for _, p := range r.paths {
		if len(p.faults) > 0 {
			fs := slices.Sorted(slices.Values(p.faults))
			fmt.Fprintf(&t, "\n%s proxy process: minor page faults per request p50 %d p99 %d; CPU %.2f ms per request (mean, from /proc clock ticks)",
				p.name, fs[len(fs)/2], fs[max(0, int(math.Ceil(0.99*float64(len(fs))))-1)], float64(p.ticks)*1000/ttfbClockTicks/float64(len(p.faults)))
		}
	}
	if r.up.uplink > 0 {
		fmt.Fprintf(&t, "\nthe upstream read request bodies at %.1f MB/s (%s)", r.up.uplink/1e6, ttfbUplinkEnv)
	}
	b.Logf("%s, %d iterations:\n%s", r.f.name, b.N, t.String())
}

// writeSamples writes r's samples to dir/<benchmark name>.csv.
func (r *ttfbRun) writeSamples(b *testing.B, dir string) {
	var t strings.Builder
	t.WriteString("iteration,turn,items,path,ttfb,arrive,upload,respond,relay,proxy_handler,proxy_read,read_send,send_upstream,client_bytes,upstream_bytes,fold_event,proxy_faults\n")
	opt := func(xs []time.Duration, i int) string {
		if i < len(xs) {
			return fmt.Sprintf("%.1f", us(xs[i]))
		}
		return ""
	}
	for _, p := range r.paths {
		for i := range p.ttfb {
			faults := ""
			if i < len(p.faults) {
				faults = strconv.FormatInt(p.faults[i], 10)
			}
			fmt.Fprintf(&t, "%d,%d,%d,%s,%.1f,%.1f,%.1f,%.1f,%.1f,%s,%s,%s,%s,%d,%d,%v,%s\n", i, r.turns[i], r.items[i], p.name,
				us(p.ttfb[i]), us(p.arrive[i]), us(p.upload[i]), us(p.respond[i]), us(p.relay[i]),
				opt(p.handler, i), opt(p.receive, i), opt(p.fold, i), opt(p.forward, i), p.sentBytes[i], p.upBytes[i], p.events[i], faults)
		}
	}
	name := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(b.Name())+".csv")
	if err := os.WriteFile(name, []byte(t.String()), 0o644); err != nil {
		b.Fatal(err)
	}
}

// benchmarkTTFB runs a sub-benchmark per format with the paths that start
// makes (direct first, then the proxies' bases by name).
func benchmarkTTFB(b *testing.B, start func(b *testing.B, upstream string) []*ttfbPath) {
	for _, size := range []struct {
		name  string
		lines int
	}{{"", 120}, {"/1MB", 24}} {
		for _, f := range ttfbFormats {
			ttfbLines = size.lines
			up, origin := startTTFBUpstream(b)
			r := &ttfbRun{f: f, up: up, paths: append([]*ttfbPath{newTTFBPath("direct", origin)}, start(b, origin)...)}
			b.Run(f.name+size.name, func(b *testing.B) { runTTFB(b, r) })
		}
	}
	ttfbLines = 120
}

// BenchmarkProxyTTFB: what the real `contextfold proxy` adds to the time to
// first streamed byte at 1,000 messages (see the top of this file).
func BenchmarkProxyTTFB(b *testing.B) {
	benchmarkTTFB(b, func(b *testing.B, origin string) []*ttfbPath {
		pass := newTTFBPath("pass", startProxy(b, origin, "-fold=false"))
		pass.pid = newestChild("-fold=false")
		fold := newTTFBPath("fold", startProxy(b, origin, "-window", fmt.Sprint(ttfbWindow)))
		fold.pid = newestChild("-window")
		return []*ttfbPath{pass, fold}
	})
}

// BenchmarkInProcessProxyTTFB is BenchmarkProxyTTFB with the proxies in
// this process (internal/proxy as `contextfold proxy` configures it, and
// the store and reuse paths), to profile them and to time the proxy's
// handler (see the top of this file).
func BenchmarkInProcessProxyTTFB(b *testing.B) {
	benchmarkTTFB(b, func(b *testing.B, origin string) []*ttfbPath {
		u, err := url.Parse(origin)
		if err != nil {
			b.Fatal(err)
		}
		st, err := foldstore.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		folder := proxy.NewFolder(st, schedule.Economic{}, ttfbWindow, nil)
		b.Cleanup(func() { folder.Close(); st.Close() })
		var paths []*ttfbPath
		for _, pc := range []struct {
			name   string
			folder *proxy.Folder
			// store: read the whole body first, into a new buffer or
			// into a reused one ("reuse").
			store string
		}{{"pass", nil, ""}, {"store", nil, "new"}, {"reuse", nil, "reuse"}, {"fold", folder, ""}} {
			stamps := &ttfbProxyStamps{}
			tr := stamps.transport(http.DefaultTransport.(*http.Transport).Clone())
			p, err := proxy.New(proxy.Config{Anthropic: u, OpenAI: u, Folder: pc.folder, Transport: tr})
			if err != nil {
				b.Fatal(err)
			}
			var h http.Handler = p
			if pc.store != "" {
				h = storeAndForward(p, pc.store == "reuse")
			}
			srv := httptest.NewServer(stamps.wrap(h))
			b.Cleanup(srv.Close)
			path := newTTFBPath(pc.name, srv.URL)
			path.stamps = stamps
			paths = append(paths, path)
		}
		// plain: the standard library's reverse proxy alone, streaming,
		// the floor for any proxy written on it.
		rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) }, FlushInterval: -1, Transport: http.DefaultTransport.(*http.Transport).Clone()}
		srv := httptest.NewServer(rp)
		b.Cleanup(srv.Close)
		return append(paths, newTTFBPath("plain", srv.URL))
	})
}

// storeAndForward reads a request's body whole before next forwards it
// unchanged: what the folding proxy does before it folds, into a new buffer
// of the body's size as internal/proxy's readBody does, or into one buffer
// reused from request to request (reuse; one request at a time).
func storeAndForward(next http.Handler, reuse bool) http.Handler {
	var mu sync.Mutex
	var kept []byte
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reuse {
			mu.Lock()
			defer mu.Unlock()
		}
		buf := bytes.NewBuffer(kept[:0])
		if r.ContentLength > 0 {
			buf.Grow(int(r.ContentLength))
		}
		_, err := io.Copy(buf, r.Body)
		r.Body.Close()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if reuse {
			kept = buf.Bytes()
		}
		r.Body = io.NopCloser(bytes.NewReader(buf.Bytes()))
		next.ServeHTTP(w, r)
	})
}

// ---- The loopback floor ---------------------------------------------------

// BenchmarkLoopback is the floor under a store-and-forward hop: a body sent
// over 127.0.0.1 to a reader that answers one byte once it has it all, over
// a raw TCP connection and as an HTTP POST answered with an SSE event
// (what the direct path does, without the conversation). ns/op is the time
// from the first byte written to the answer's arrival; the same ttfbGap
// passes before each send.
func BenchmarkLoopback(b *testing.B) {
	for _, size := range []int{5_200_000, 1_000_000, 500_000} {
		body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
		name := fmt.Sprintf("%.1fMB", float64(len(body))/1e6)
		b.Run("tcp/"+name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				buf := make([]byte, 256<<10)
				for {
					for got := 0; got < len(body); {
						n, err := c.Read(buf)
						if err != nil {
							return
						}
						got += n
					}
					if _, err := c.Write([]byte{1}); err != nil {
						return
					}
				}
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var ds []time.Duration
			one := make([]byte, 1)
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				time.Sleep(ttfbGap)
				b.StartTimer()
				t0 := time.Now()
				if _, err := c.Write(body); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, one); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
			}
			b.StopTimer()
			b.ReportMetric(us(ttfbPercentile(ds, 50)), "p50-us")
			b.ReportMetric(us(ttfbPercentile(ds, 99)), "p99-us")
		})
		b.Run("http/"+name, func(b *testing.B) {
			up, origin := startTTFBUpstream(b)
			p := newTTFBPath("direct", origin)
			c := &ttfbConversation{f: ttfbFormats[0], session: "loopback"}
			var ds []time.Duration
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				time.Sleep(ttfbGap)
				b.StartTimer()
				d, _ := p.send(b, c, body)
				ds = append(ds, d)
			}
			b.StopTimer()
			if got := up.last("direct"); len(got.body) != len(body) {
				b.Fatalf("upstream received %d bytes, want %d", len(got.body), len(body))
			}
			b.ReportMetric(us(ttfbPercentile(ds, 50)), "p50-us")
			b.ReportMetric(us(ttfbPercentile(ds, 99)), "p99-us")
		})
	}
}

// TestTTFBBodies: the benchmark's bodies are JSON with the conversation
// array of the client's shape: the head, then each turn's items, the
// newest tool result alone carrying Claude Code's cache breakpoint.
func TestTTFBBodies(t *testing.T) {
	for _, f := range ttfbFormats {
		c := newTTFBConversation(f, "s-1")
		for _, n := range []int{1, 3} {
			var body map[string]any
			if err := json.Unmarshal(c.body(n), &body); err != nil {
				t.Fatalf("%s turn %d: %v", f.name, n, err)
			}
			key := "messages"
			if f.name == "responses" {
				key = "input"
				if body["prompt_cache_key"] != "s-1" {
					t.Errorf("%s: prompt_cache_key %v, want the session", f.name, body["prompt_cache_key"])
				}
			}
			items, _ := body[key].([]any)
			if len(items) != c.messages || c.messages != len(f.head)+n*len(f.turn(1, false)) {
				t.Fatalf("%s turn %d: %d items (counted %d)", f.name, n, len(items), c.messages)
			}
			if got := strings.Count(string(c.body(n)), ttfbOutput(n)[:40]); got != 1 {
				t.Errorf("%s turn %d: the newest output appears %d times", f.name, n, got)
			}
			if f.name == "messages" {
				if got := strings.Count(string(c.body(n)), `"cache_control"`); got != 2 { // the system's and the newest result's
					t.Errorf("%s turn %d: %d cache_control marks, want 2", f.name, n, got)
				}
			}
		}
	}
}
