package proxy

import (
	"io"
	"mime"
	"net/http"
	"sync"
	"time"
)

// headerHold is how long an event stream's headers wait for its first
// bytes before they go alone.
const headerHold = 10 * time.Millisecond

// heldHeaders is the ResponseWriter the reverse proxy answers through. For
// a streamed answer, httputil.ReverseProxy flushes the headers at once from
// a goroutine of its own, while the first event, which upstreams send with
// the headers, is still on its way through the handler; the client then
// wakes for the headers and again for its first byte. heldHeaders holds an
// event stream's flush of headers alone until its first bytes, headerHold
// at most, so that both usually go in one write. Anything else flushes as
// asked.
type heldHeaders struct {
	http.ResponseWriter
	mu    sync.Mutex
	wrote bool        // body bytes were written
	done  bool        // the handler returned: w is no longer to be used
	timer *time.Timer // the held flush, if any
}

func (w *heldHeaders) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(p) > 0 {
		w.wrote = true
	}
	return w.ResponseWriter.Write(p)
}

// Flush flushes w, unless it would send an event stream's headers alone:
// that flush waits for the first Write, or headerHold.
func (w *heldHeaders) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.wrote && w.holds() {
		if w.timer == nil {
			w.timer = time.AfterFunc(headerHold, w.release)
		}
		return
	}
	w.flush()
}

// holds reports whether the headers are an event stream's without
// trailers (announcing trailers, ReverseProxy flushes to force chunking).
// w.mu is held.
func (w *heldHeaders) holds() bool {
	h := w.Header()
	ct, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return ct == "text/event-stream" && len(h["Trailer"]) == 0
}

// release sends held headers that no bytes came to join.
func (w *heldHeaders) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.wrote && !w.done {
		w.flush()
	}
}

// flush flushes the underlying writer. w.mu is held.
func (w *heldHeaders) flush() {
	http.NewResponseController(w.ResponseWriter).Flush()
}

// stop ends w's held flush: net/http sends what is left when the handler
// returns, and once an answer's body ends ReverseProxy may write the
// trailers it brought into the headers (stopAtEnd).
func (w *heldHeaders) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *heldHeaders) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// stopAtEnd is an answer's body that stops its writer's held flush when it
// ends, before ReverseProxy touches the headers again.
type stopAtEnd struct {
	io.ReadCloser
	w *heldHeaders
}

func (b *stopAtEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.w.stop()
	}
	return n, err
}
