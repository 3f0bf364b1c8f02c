package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// seen is what an upstream received.
type seen struct {
	method, path, query, host string
	header                    http.Header
	body                      []byte
}

// upstream is a recording upstream answering with answer.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	got  []seen
	name string
}

func newUpstream(t *testing.T, name string, answer http.HandlerFunc) *upstream {
	u := &upstream{name: name}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			// A body short of its declared length is no request (the
			// proxy abandoned a prediction, see cutthrough.go).
			http.Error(w, "short body: "+err.Error(), http.StatusBadRequest)
			return
		}
		u.mu.Lock()
		u.got = append(u.got, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Host, r.Header.Clone(), b})
		u.mu.Unlock()
		if answer != nil {
			answer(w, r)
			return
		}
		w.Header().Set("X-Upstream", name)
		w.Write([]byte("from " + name))
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.got...)
}

// last is the body of the newest request whose X-Test-Conv header is conv.
func (u *upstream) last(conv string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := len(u.got) - 1; i >= 0; i-- {
		if u.got[i].header.Get("X-Test-Conv") == conv {
			return string(u.got[i].body)
		}
	}
	return ""
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// front starts a proxy before the two upstreams.
func front(t *testing.T, ant, oai *upstream, tweak func(*Config)) (*httptest.Server, *bytes.Buffer) {
	var logs bytes.Buffer
	var mu sync.Mutex
	cfg := Config{Log: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if ant != nil {
		cfg.Anthropic = mustURL(t, ant.URL)
	}
	if oai != nil {
		cfg.OpenAI = mustURL(t, oai.URL)
	}
	if tweak != nil {
		tweak(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(p)
	t.Cleanup(s.Close)
	return s, &logs
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestForwardsUnchanged: each request reaches its API's upstream with its
// method, path, query, body and headers as the client sent them (no
// Accept-Encoding the client did not send), and the upstream's answer
// comes back as it was sent.
func TestForwardsUnchanged(t *testing.T) {
	ant := newUpstream(t, "anthropic", nil)
	oai := newUpstream(t, "openai", nil)
	s, _ := front(t, ant, oai, nil)
	// A client that sends only the headers set here.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	body := `{"model":"m","messages":[{"role":"user","content":"hi é \u00e9"}],"stream":true}` + "\n"
	cases := []struct {
		method, target string
		header         map[string]string
		to             *upstream
	}{
		{"POST", "/v1/messages?beta=true", map[string]string{"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-1", "x-claude-code-session-id": "abc", "anthropic-beta": "a,b"}, ant},
		{"POST", "/v1/messages/count_tokens?beta=true", nil, ant},
		{"GET", "/v1/models", map[string]string{"anthropic-version": "2023-06-01"}, ant},
		{"HEAD", "/api/hello", map[string]string{"anthropic-version": "2023-06-01"}, ant},
		{"POST", "/v1/responses", map[string]string{"authorization": "Bearer sk-1", "session-id": "t1"}, oai},
		{"POST", "/v1/chat/completions", map[string]string{"authorization": "Bearer sk-2", "x-session-id": "ses_1"}, oai},
		{"POST", "/v1/chat/completions", map[string]string{"accept-encoding": "gzip, br"}, oai},
		{"GET", "/v1/models", nil, oai},
		{"DELETE", "/v1/responses/resp_1", nil, oai},
		{"POST", "/v1/chat/completions?x=1&y=%2F", nil, oai},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.target, func(t *testing.T) {
			before := len(c.to.requests())
			var rd io.Reader
			if c.method == "POST" {
				rd = strings.NewReader(body)
			}
			req, _ := http.NewRequest(c.method, s.URL+c.target, rd)
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			req.Header.Set("User-Agent", "client/1.0")
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || res.Header.Get("X-Upstream") != c.to.name || (c.method != "HEAD" && string(got) != "from "+c.to.name) {
				t.Fatalf("answer %d %q %q, want 200 from %s", res.StatusCode, res.Header.Get("X-Upstream"), got, c.to.name)
			}
			reqs := c.to.requests()
			if len(reqs) != before+1 {
				t.Fatalf("%s upstream got %d requests, want %d", c.to.name, len(reqs), before+1)
			}
			r := reqs[len(reqs)-1]
			u := mustURL(t, c.target)
			if r.method != c.method || r.path != u.Path || r.query != u.RawQuery {
				t.Errorf("upstream saw %s %s?%s, want %s %s", r.method, r.path, r.query, c.method, c.target)
			}
			if c.method == "POST" && string(r.body) != body {
				t.Errorf("body %q, want %q", r.body, body)
			}
			for k, v := range c.header {
				if r.header.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, r.header.Get(k), v)
				}
			}
			if r.header.Get("User-Agent") != "client/1.0" {
				t.Errorf("User-Agent %q", r.header.Get("User-Agent"))
			}
			if _, sent := c.header["accept-encoding"]; !sent && r.header.Get("Accept-Encoding") != "" {
				t.Errorf("proxy added Accept-Encoding: %q", r.header.Get("Accept-Encoding"))
			}
			for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Host", "Forwarded"} {
				if v := r.header.Get(k); v != "" {
					t.Errorf("proxy added %s: %q", k, v)
				}
			}
			if r.host != mustURL(t, c.to.URL).Host {
				t.Errorf("Host %q, want the upstream's %q", r.host, mustURL(t, c.to.URL).Host)
			}
		})
	}
}

// TestUpstreamPathPrefix: an upstream with a path keeps it before the
// request's path.
func TestUpstreamPathPrefix(t *testing.T) {
	oai := newUpstream(t, "openai", nil)
	s, _ := front(t, nil, oai, func(c *Config) { c.OpenAI = mustURL(t, oai.URL+"/gateway/openai") })
	res, err := http.Post(s.URL+"/v1/responses", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if r := oai.requests(); len(r) != 1 || r[0].path != "/gateway/openai/v1/responses" {
		t.Fatalf("upstream saw %+v", r)
	}
}

// TestStreamsAsTheyArrive: the first event of a stream reaches the client
// while the upstream still holds the rest back, so nothing is buffered.
func TestStreamsAsTheyArrive(t *testing.T) {
	release := make(chan struct{})
	ant := newUpstream(t, "anthropic", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	})
	s, _ := front(t, ant, nil, nil)
	res, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	first := make(chan string, 1)
	go func() {
		var b strings.Builder
		for {
			line, err := br.ReadString('\n')
			b.WriteString(line)
			if err != nil || line == "\n" {
				break
			}
		}
		first <- b.String()
	}()
	select {
	case ev := <-first:
		if !strings.Contains(ev, "message_start") {
			t.Fatalf("first event %q", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event did not arrive while the upstream held the rest: the proxy buffers")
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "message_stop") {
		t.Fatalf("rest %q", rest)
	}
}

// TestClientGoneCancelsUpstream: when the client drops a stream, the
// upstream's request ends too.
func TestClientGoneCancelsUpstream(t *testing.T) {
	done := make(chan struct{})
	oai := newUpstream(t, "openai", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(done)
		case <-time.After(10 * time.Second):
		}
	})
	s, _ := front(t, nil, oai, nil)
	res, err := http.Post(s.URL+"/v1/responses", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(res.Body).ReadString('\n')
	res.Body.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request outlived the client's")
	}
}

// TestNotAnOpenProxy: a request naming another host, in absolute form or
// with CONNECT, is refused and reaches no server.
func TestNotAnOpenProxy(t *testing.T) {
	ant := newUpstream(t, "anthropic", nil)
	oai := newUpstream(t, "openai", nil)
	other := newUpstream(t, "other", nil)
	s, _ := front(t, ant, oai, nil)
	otherHost := mustURL(t, other.URL).Host
	for _, raw := range []string{
		"GET http://" + otherHost + "/v1/models HTTP/1.1\r\nHost: " + otherHost + "\r\n\r\n",
		"POST http://" + otherHost + "/v1/messages HTTP/1.1\r\nHost: " + otherHost + "\r\nContent-Length: 2\r\n\r\n{}",
		"CONNECT " + otherHost + " HTTP/1.1\r\nHost: " + otherHost + "\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", mustURL(t, s.URL).Host)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(conn, raw)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: status %d, want 400", strings.SplitN(raw, "\r\n", 2)[0], res.StatusCode)
		}
	}
	for _, u := range []*upstream{ant, oai, other} {
		if n := len(u.requests()); n != 0 {
			t.Errorf("%s got %d requests", u.name, n)
		}
	}
}

// TestDotSegments: a path with a . or .. segment, raw, percent-encoded or
// made of an encoded slash or a backslash, is refused with 400 in its API's
// shape and reaches no upstream, whose path prefix it could leave; a path
// without one is forwarded behind the prefix as sent.
func TestDotSegments(t *testing.T) {
	ant := newUpstream(t, "anthropic", nil)
	oai := newUpstream(t, "openai", nil)
	s, _ := front(t, ant, oai, func(c *Config) {
		c.Anthropic = mustURL(t, ant.URL+"/gateway/anthropic")
		c.OpenAI = mustURL(t, oai.URL+"/gateway/openai")
	})
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{"/v1/messages", true},
		{"/v1/a..b/messages", true},
		{"/v1/.well-known/x", true},
		{"/v1/messages...", true},
		{"/v1/../x", false},
		{"/v1/..", false},
		{"/..", false},
		{"/v1/%2e%2e/x", false},
		{"/v1/%2E%2e%2fx", false},
		{"/v1/%2e%2E%2Fx", false},
		{"/v1/..%2fx", false},
		{"/v1/..%5cx", false},
		{"/v1/..%5Cx", false},
		{"/v1/..\\x", false},
		{"/v1/./messages", false},
		{"/v1/%2e/messages", false},
		{"/v1/messages/.", false},
		{"/v1/messages?a=/../b", true},
		{"/v1/chat/completions", true},
		{"/v1/chat/../../admin", false},
	} {
		for _, header := range []string{"anthropic-version: 2023-06-01\r\n", ""} {
			api := struct {
				to     *upstream
				prefix string
			}{oai, "/gateway/openai"}
			if header != "" || strings.HasPrefix(c.path, "/v1/messages") {
				api.to, api.prefix = ant, "/gateway/anthropic"
			}
			before := len(api.to.requests())
			conn, err := net.Dial("tcp", mustURL(t, s.URL).Host)
			if err != nil {
				t.Fatal(err)
			}
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: 2\r\nConnection: close\r\n\r\n{}", c.path, header)
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("%s: %v", c.path, err)
			}
			b, _ := io.ReadAll(res.Body)
			conn.Close()
			got := api.to.requests()[before:]
			if c.ok {
				want := api.prefix + strings.SplitN(c.path, "?", 2)[0]
				if res.StatusCode != 200 || len(got) != 1 || got[0].path != want {
					t.Errorf("%s to %s: status %d, upstream saw %+v, want 200 and %s", c.path, api.to.name, res.StatusCode, got, want)
				}
				continue
			}
			var e struct {
				Type  string
				Error struct{ Type, Message string }
			}
			json.Unmarshal(b, &e)
			if res.StatusCode != 400 || len(got) != 0 || e.Error.Type != "invalid_request_error" || (api.to == ant) != (e.Type == "error") {
				t.Errorf("%s to %s: status %d %s, upstream saw %+v; want 400 in the API's shape, nothing forwarded", c.path, api.to.name, res.StatusCode, b, got)
			}
		}
	}
}

// TestBodyLimit: a body over the limit gets 413 in the API's error shape;
// with its length declared, the upstream never sees it.
func TestBodyLimit(t *testing.T) {
	ant := newUpstream(t, "anthropic", nil)
	oai := newUpstream(t, "openai", nil)
	s, _ := front(t, ant, oai, func(c *Config) { c.MaxBody = 1000 })
	big := strings.Repeat("x", 1001)

	res, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	var ae struct {
		Type  string
		Error struct{ Type, Message string }
	}
	json.NewDecoder(res.Body).Decode(&ae)
	res.Body.Close()
	if res.StatusCode != 413 || ae.Type != "error" || ae.Error.Type != "request_too_large" || !strings.Contains(ae.Error.Message, "1000 bytes") {
		t.Errorf("declared length: %d %+v", res.StatusCode, ae)
	}
	if n := len(ant.requests()); n != 0 {
		t.Errorf("anthropic upstream got %d requests", n)
	}

	// Chunked: the length shows only while reading.
	req, _ := http.NewRequest("POST", s.URL+"/v1/chat/completions", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var oe struct {
		Error struct{ Type, Message string }
	}
	json.NewDecoder(res.Body).Decode(&oe)
	res.Body.Close()
	if res.StatusCode != 413 || oe.Error.Type != "request_too_large" {
		t.Errorf("chunked: %d %+v", res.StatusCode, oe)
	}
	// The rest of the body is never taken for the next request: the
	// connection closes after the answer.
	if !res.Close {
		t.Errorf("chunked: the connection stays open after the 413 (header %v)", res.Header)
	}

	// At the limit: forwarded.
	res, err = http.Post(s.URL+"/v1/responses", "application/json", strings.NewReader(big[:1000]))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("at the limit: %d", res.StatusCode)
	}
}

// TestTooLargeReachesTheClient: a client that sends the whole of a body
// over the limit before it reads can send it all, then reads the 413, every
// time: with its length declared or chunked, read by the proxy (folded) or
// the transport (not), with Connection: close or without. The body
// overflows the sockets' buffers: unless the proxy reads it on after the
// answer, the client's write ends in a reset. (Linux still hands such a
// client the 413 it received, but a client that stops at the failed write,
// as many do, or a system that drops what it received on a reset, shows
// the reset instead.)
func TestTooLargeReachesTheClient(t *testing.T) {
	const limit, size = 1 << 20, 32 << 20
	ant := newUpstream(t, "anthropic", nil)
	oai := newUpstream(t, "openai", nil)
	plain, _ := front(t, ant, oai, func(c *Config) { c.MaxBody = limit })
	folding, _ := front(t, ant, oai, func(c *Config) {
		c.MaxBody = limit
		c.Folder = testFolder(t, 0, nil)
	})
	body := bytes.Repeat([]byte("x"), size)
	var chunked bytes.Buffer
	for b := body; len(b) > 0; b = b[64<<10:] {
		fmt.Fprintf(&chunked, "%x\r\n%s\r\n", 64<<10, b[:64<<10])
	}
	chunked.WriteString("0\r\n\r\n")
	for _, c := range []struct {
		name    string
		s       *httptest.Server
		path    string
		chunked bool
		close   bool
	}{
		{"declared, close", plain, "/v1/messages", false, true},
		{"chunked, close, forwarded", plain, "/v1/responses", true, true},
		{"chunked, close, folded", folding, "/v1/chat/completions", true, true},
		{"declared, keep-alive", plain, "/v1/responses", false, false},
		{"chunked, keep-alive", folding, "/v1/messages", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			head := "POST " + c.path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
			out := body
			if c.chunked {
				head += "Transfer-Encoding: chunked\r\n"
				out = chunked.Bytes()
			} else {
				head += fmt.Sprintf("Content-Length: %d\r\n", size)
			}
			if c.close {
				head += "Connection: close\r\n"
			}
			head += "\r\n"
			req := append([]byte(head), out...)
			failed := 0
			for i := range 20 {
				conn, err := net.Dial("tcp", mustURL(t, c.s.URL).Host)
				if err != nil {
					t.Fatal(err)
				}
				conn.SetDeadline(time.Now().Add(30 * time.Second))
				// The connection reset, the write fails (and some clients
				// report that, not the answer they have received).
				_, werr := conn.Write(req)
				br := bufio.NewReader(conn)
				res, err := http.ReadResponse(br, nil)
				if werr != nil || err != nil {
					failed++
					t.Errorf("try %d: sending: %v; answer: %v", i, werr, err)
					conn.Close()
					continue
				}
				b, _ := io.ReadAll(res.Body)
				rest, _ := io.ReadAll(br)
				conn.Close()
				if res.StatusCode != 413 || !strings.Contains(string(b), "request_too_large") || res.Proto != "HTTP/1.1" {
					failed++
					t.Errorf("try %d: %s %d %s", i, res.Proto, res.StatusCode, b)
				}
				if !res.Close || len(rest) != 0 {
					t.Errorf("try %d: the connection did not close after the answer (%d bytes more)", i, len(rest))
				}
			}
			if failed > 0 {
				t.Errorf("%d of 20 tries sent no whole body or got no 413", failed)
			}
		})
	}
	if n := len(ant.requests()) + len(oai.requests()); n != 0 {
		t.Errorf("the upstreams got %d requests", n)
	}
}

// TestTooLargeAnsweredFirst: the 413 is sent before the rest of the body is
// read and dropped, so a client reading while it sends has it at once,
// not once it has sent all or the proxy gives up reading.
func TestTooLargeAnsweredFirst(t *testing.T) {
	oai := newUpstream(t, "openai", nil)
	s, _ := front(t, nil, oai, func(c *Config) { c.MaxBody = 1 << 20 })
	for _, te := range []string{fmt.Sprintf("Content-Length: %d", 8<<20), "Transfer-Encoding: chunked"} {
		conn, err := net.Dial("tcp", mustURL(t, s.URL).Host)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		part := strings.Repeat("x", 2<<20)
		if te[0] == 'T' {
			part = fmt.Sprintf("%x\r\n%s\r\n", len(part), part)
		}
		// The rest of the body is never sent.
		fmt.Fprintf(conn, "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n\r\n%s", te, part)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil || res.StatusCode != 413 {
			t.Errorf("%s: no 413 while the body is still due: %v %v", te, res, err)
		}
	}
}

// TestUpstreamErrorsVerbatim: an upstream error answer reaches the client
// with its status, headers and body unchanged.
func TestUpstreamErrorsVerbatim(t *testing.T) {
	const errBody = `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`
	ant := newUpstream(t, "anthropic", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(429)
		io.WriteString(w, errBody)
	})
	s, _ := front(t, ant, nil, nil)
	res, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "7" || string(b) != errBody || res.Header.Get("X-Contextfold-Proxy") != "" {
		t.Fatalf("got %d %v %q", res.StatusCode, res.Header, b)
	}
}

// TestUpstreamDown: an unreachable upstream is a 502 in the API's error
// shape, with one warning that names the upstream's host and no secret.
func TestUpstreamDown(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	s, logs := front(t, nil, nil, func(c *Config) {
		c.Anthropic = mustURL(t, deadURL)
		c.OpenAI = mustURL(t, deadURL)
	})
	for _, c := range []struct {
		path  string
		shape string
	}{{"/v1/messages?beta=true&key=SECRET-Q", `"type":"error"`}, {"/v1/responses?key=SECRET-Q", `"error":{"message"`}} {
		req, _ := http.NewRequest("POST", s.URL+c.path, strings.NewReader("{}"))
		req.Header.Set("x-api-key", "SECRET-K")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 502 || !strings.Contains(string(b), c.shape) || !json.Valid(b) {
			t.Errorf("%s: %d %s", c.path, res.StatusCode, b)
		}
		if strings.Contains(string(b), "SECRET") {
			t.Errorf("%s: the answer carries a secret: %s", c.path, b)
		}
	}
	if !strings.Contains(logs.String(), "upstream unreachable") {
		t.Errorf("no warning logged:\n%s", logs)
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Errorf("a secret reached the log:\n%s", logs)
	}
}

// TestNoSecretsLogged: with debug logging, no key, header value or query
// string reaches the log.
func TestNoSecretsLogged(t *testing.T) {
	ant := newUpstream(t, "anthropic", nil)
	oai := newUpstream(t, "openai", nil)
	s, logs := front(t, ant, oai, nil)
	for _, path := range []string{"/v1/messages?key=SECRET-Q", "/v1/responses?key=SECRET-Q"} {
		req, _ := http.NewRequest("POST", s.URL+path, strings.NewReader(`{"SECRET-B":1}`))
		req.Header.Set("x-api-key", "SECRET-K")
		req.Header.Set("Authorization", "Bearer SECRET-A")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	if !strings.Contains(logs.String(), "forwarded") {
		t.Fatalf("no debug line:\n%s", logs)
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Fatalf("a secret reached the log:\n%s", logs)
	}
}

func TestCheckUpstream(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"https://api.anthropic.com", true},
		{"http://127.0.0.1:9/v1", true},
		{"ftp://x", false},
		{"https://", false},
		{"https://u:p@host", false},
		{"https://host/?a=1", false},
		{"https://host/#f", false},
		{"127.0.0.1:80", false},
	} {
		u, err := url.Parse(c.in)
		if err == nil {
			err = CheckUpstream(u)
		}
		if (err == nil) != c.ok {
			t.Errorf("%q: err %v, want ok=%v", c.in, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), ":p@") {
			t.Errorf("%q: the error shows the password: %v", c.in, err)
		}
	}
}

// TestRelayReusesCopyBuffer: relaying an answer does not allocate anew the
// 32 KB buffer ReverseProxy copies it through (about 16 KB a request is
// left, the client's, the upstream's and the proxy's together).
func TestRelayReusesCopyBuffer(t *testing.T) {
	if raceOn {
		t.Skip("sync.Pool drops buffers at random under the race detector")
	}
	oai := newUpstream(t, "openai", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "data: x\n\n") })
	s, _ := front(t, nil, oai, nil)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	relay := func() {
		res, err := client.Post(s.URL+"/v1/models", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	for range 20 {
		relay() // connections, pools
	}
	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		relay()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per >= 32<<10 {
		t.Errorf("%d bytes allocated per relayed request: the copy buffer is not reused", per)
	}
}
