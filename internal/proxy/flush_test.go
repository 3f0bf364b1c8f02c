package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// callLog is a ResponseWriter that records what reaches it.
type callLog struct {
	mu      sync.Mutex
	header  http.Header
	start   time.Time
	headAt  time.Duration   // WriteHeader
	flushes []time.Duration // each Flush
	early   int             // Flushes before any body bytes
	writes  []time.Duration // each Write
}

func newCallLog() *callLog { return &callLog{header: http.Header{}, start: time.Now()} }

func (c *callLog) Header() http.Header { return c.header }

func (c *callLog) WriteHeader(int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.headAt = time.Since(c.start)
}

func (c *callLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, time.Since(c.start))
	return len(p), nil
}

func (c *callLog) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushes = append(c.flushes, time.Since(c.start))
	if len(c.writes) == 0 {
		c.early++
	}
}

// TestHeadersWaitForFirstBytes: an event stream's headers go with its
// first event when it follows them within headerHold, and alone once
// headerHold has passed without it; other answers flush as ReverseProxy
// asks, headers first.
func TestHeadersWaitForFirstBytes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		contentType string
		trailer     bool
		delay       time.Duration // between the headers and the first bytes
		early       bool          // a flush of the headers alone
	}{
		{"event stream, first event at once", "text/event-stream", false, 0, false},
		{"event stream, first event after 2ms", "text/event-stream; charset=utf-8", false, 2 * time.Millisecond, false},
		{"event stream, first event after 150ms", "text/event-stream", false, 150 * time.Millisecond, true},
		{"event stream announcing trailers", "text/event-stream", true, 30 * time.Millisecond, true},
		{"JSON of unknown length", "application/json", false, 30 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, "oai", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				if tc.trailer {
					w.Header().Set("Trailer", "X-End")
				}
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				time.Sleep(tc.delay)
				io.WriteString(w, "data: 1\n\n")
				w.(http.Flusher).Flush()
				io.WriteString(w, "data: 2\n\n")
				if tc.trailer {
					w.Header().Set("X-End", "yes")
				}
			})
			// httptest.NewRequest names host example.com.
			p, err := New(Config{OpenAI: mustURL(t, up.URL), AllowedHosts: []string{"example.com"}})
			if err != nil {
				t.Fatal(err)
			}
			c := newCallLog()
			p.ServeHTTP(c, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"messages":[]}`)))
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.writes) == 0 || len(c.flushes) == 0 {
				t.Fatalf("writes %v, flushes %v", c.writes, c.flushes)
			}
			if got := c.early > 0; got != tc.early {
				t.Fatalf("headers flushed alone: %v, want %v (WriteHeader at %v, flushes %v, writes %v)", got, tc.early, c.headAt, c.flushes, c.writes)
			}
			if tc.early && !tc.trailer && tc.contentType == "text/event-stream" {
				// Held headerHold, then sent without waiting for the event.
				if d := c.flushes[0] - c.headAt; d < headerHold || c.flushes[0] > c.writes[0]-tc.delay/2 {
					t.Fatalf("headers alone %v after WriteHeader, first write at %v", d, c.writes[0])
				}
			}
		})
	}
}

// TestUpgradePassesThrough: a protocol switch (a WebSocket, say) still
// hands the connection over, both ways.
func TestUpgradePassesThrough(t *testing.T) {
	up := newUpstream(t, "oai", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		fmt.Fprintf(brw, "echo %s", line)
		brw.Flush()
	})
	// The request names host x, which the proxy serves only when told to.
	s, _ := front(t, nil, up, func(c *Config) { c.AllowedHosts = []string{"x"} })
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /v1/realtime HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("status %d: %s", res.StatusCode, b)
	}
	fmt.Fprintf(conn, "ping\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo ping\n" {
		t.Fatalf("through the switched connection: %q, %v", line, err)
	}
}
