package proxy

import (
	"errors"
	"io"
	"math/bits"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// A request body the proxy folds is read whole into a buffer, and the
// buffer is reused: a client sends its whole conversation every request
// (megabytes, the same size give or take), and a fresh buffer each time
// costs zeroing it, faulting its pages in and collecting it, on the
// request's path. A buffer returns to its pool when its last holder lets
// go: the request being served, each reader of the rewritten body the
// transport opens (it may read after the handler returns, and again for a
// retry), and the Folder while the body is a conversation's previous
// request. A buffer nobody returns is simply collected.

// Pooled buffers come in power-of-two classes from minPooled bytes.
const (
	minPooledShift = 16 // 64 KB
	maxPooledShift = 27 // 128 MB, above the largest body allowed by default
)

var bufferPools [maxPooledShift - minPooledShift + 1]sync.Pool

// buffer is a request body's storage.
type buffer struct {
	b     []byte
	refs  atomic.Int32
	class int // index in bufferPools; -1: not pooled
}

// newBuffer returns a buffer with room for n bytes (n ≤ 0: unknown), held
// once by its caller.
func newBuffer(n int64) *buffer {
	class := -1
	if n > 0 {
		shift := max(bits.Len64(uint64(n-1)), minPooledShift)
		if shift <= maxPooledShift {
			class = shift - minPooledShift
		}
	}
	var buf *buffer
	if class >= 0 {
		if v := bufferPools[class].Get(); v != nil {
			buf = v.(*buffer)
			buf.b = buf.b[:0]
		} else {
			buf = &buffer{b: make([]byte, 0, 1<<(class+minPooledShift)), class: class}
		}
	} else {
		buf = &buffer{class: -1}
		if n > 0 {
			buf.b = make([]byte, 0, n)
		}
	}
	buf.refs.Store(1)
	return buf
}

// hold adds a holder.
func (b *buffer) hold() { b.refs.Add(1) }

// release drops a holder; the last one returns the buffer to its pool.
func (b *buffer) release() {
	if b.refs.Add(-1) == 0 && b.class >= 0 && cap(b.b) == 1<<(b.class+minPooledShift) {
		hookEvent("returned")
		bufferPools[b.class].Put(b)
	}
}

// readBody reads a request body whole into buf, within the proxy's limit,
// writing each piece to seen as it arrives.
func readBody(body io.ReadCloser, buf *buffer, seen io.Writer) error {
	defer body.Close()
	for {
		if len(buf.b) == cap(buf.b) {
			// Full: a body of exactly this size ends here, which a one-byte
			// read tells without growing the buffer.
			var probe [1]byte
			n, err := body.Read(probe[:])
			if n == 0 && err == io.EOF {
				return nil
			}
			if n == 0 && err != nil {
				return err
			}
			buf.b = append(buf.b, probe[:n]...) // grows; a grown buffer is not pooled again
			seen.Write(probe[:n])
			if err == io.EOF {
				return nil
			}
			continue
		}
		n, err := body.Read(buf.b[len(buf.b):cap(buf.b)])
		if n > 0 {
			seen.Write(buf.b[len(buf.b) : len(buf.b)+n])
			buf.b = buf.b[:len(buf.b)+n]
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// setBody replaces r's body with the concatenation of segs, which alias
// buf. Each reader GetBody opens holds buf until it is closed: the proxy
// gives the transport one (ReverseProxy would hide r.Body's Close from
// it), and the transport opens more for retries. r.Body itself holds
// nothing and is not read.
func setBody(r *http.Request, segs [][]byte, buf *buffer) {
	n := 0
	for _, s := range segs {
		n += len(s)
	}
	r.GetBody = func() (io.ReadCloser, error) {
		buf.hold()
		return &segReader{bufs: append(net.Buffers(nil), segs...), buf: buf}, nil
	}
	bufs := append(net.Buffers(nil), segs...)
	r.Body = io.NopCloser(&bufs)
	r.ContentLength = int64(n)
	r.Header.Set("Content-Length", strconv.Itoa(n))
	r.TransferEncoding = nil
}

// segReader reads segments of a held buffer. The transport may close it
// while a Read is in progress (HTTP/2 does, from another goroutine), so
// Read and Close exclude each other: the buffer goes back only when no
// Read can be copying from it.
type segReader struct {
	mu     sync.Mutex
	bufs   net.Buffers
	buf    *buffer
	closed bool
}

func (s *segReader) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errReadAfterClose
	}
	return s.bufs.Read(p)
}

func (s *segReader) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.bufs = nil
		s.buf.release()
	}
	return nil
}

var errReadAfterClose = errors.New("contextfold proxy: request body read after close")
