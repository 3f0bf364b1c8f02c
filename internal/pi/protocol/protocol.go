// Package protocol is the versioned stdio protocol between the engine
// process and the Pi adapter that runs it.
//
// Values are encoded with rawjson.Marshal, so strings reach JavaScript
// exactly as JSON.stringify would have written them.
//
// Frames are a 4-byte little-endian length followed by that many bytes of
// JSON, in both directions over the child's stdin and stdout, the way
// esbuild's service talks to its JavaScript API. A frame is a request
// ({"id","method","params"}), a notification (no id) or a response
// ({"id","result"} or {"id","error"}). Either side may call the other: the
// adapter asks the engine to run a turn; during it the engine asks the
// adapter to make a fold event durable. Each side numbers its own requests,
// and a frame with a method is a request, so ids never clash.
//
// The engine speaks first with a "hello" notification carrying the protocol
// version, its release version, build id and platform; an adapter whose
// protocol or release version differs must stop the child and say so.
package protocol

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// Version is the protocol version. Bump it on any incompatible change.
// 2: the hello carries the build and platform, and the adapter also
// requires the engine's release version to equal its own.
const Version = 2

// MaxFrame bounds one frame (a resumed session's full transcript fits).
const MaxFrame = 1 << 30

// Frame is the envelope of every message.
type Frame struct {
	ID     *int64          `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Error is a failed request.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Error codes.
const (
	CodeBadRequest = "bad_request"
	CodeNoMethod   = "no_method"
	CodeInternal   = "internal"
	CodeClosed     = "closed"
)

// ReadFrame reads one length-prefixed frame body.
func ReadFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > MaxFrame {
		return nil, fmt.Errorf("protocol: frame of %d bytes exceeds the %d limit", n, MaxFrame)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("protocol: truncated frame: %w", err)
	}
	return buf, nil
}

// WriteFrame writes one length-prefixed frame body.
func WriteFrame(w io.Writer, body []byte) error {
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(len(body)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

// Handler serves requests from the peer. It is called from one goroutine, in
// arrival order; it may call back to the peer through the Conn.
type Handler interface {
	Handle(ctx context.Context, method string, params json.RawMessage) (result any, err error)
}

// Idler is a Handler that has work to do between requests. Idle is called
// only while no request is waiting, and must return quickly; it reports
// whether more idle work remains.
type Idler interface {
	Idle() bool
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, method string, params json.RawMessage) (any, error)

// Handle implements Handler.
func (f HandlerFunc) Handle(ctx context.Context, method string, params json.RawMessage) (any, error) {
	return f(ctx, method, params)
}

// Conn is one side of a connection.
type Conn struct {
	w   *bufio.Writer
	wmu sync.Mutex

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan *Frame
	closed  error
}

// NewConn returns a connection writing to w. Call Serve to read.
func NewConn(w io.Writer) *Conn {
	return &Conn{w: bufio.NewWriterSize(w, 64<<10), pending: make(map[int64]chan *Frame)}
}

func (c *Conn) send(f *Frame) error {
	body, err := rawjson.Marshal(f)
	if err != nil {
		return fmt.Errorf("protocol: encode %s: %w", f.Method, err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := WriteFrame(c.w, body); err != nil {
		return err
	}
	return c.w.Flush()
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	raw, err := rawjson.Marshal(params)
	if err != nil {
		return err
	}
	return c.send(&Frame{Method: method, Params: raw})
}

// Call sends a request and waits for its response, decoding the result into
// result when it is non-nil.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	raw, err := rawjson.Marshal(params)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed != nil {
		c.mu.Unlock()
		return &Error{Code: CodeClosed, Message: c.closed.Error()}
	}
	c.nextID++
	id := c.nextID
	ch := make(chan *Frame, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.send(&Frame{ID: &id, Method: method, Params: raw}); err != nil {
		c.drop(id)
		return err
	}
	select {
	case <-ctx.Done():
		c.drop(id)
		return ctx.Err()
	case f := <-ch:
		if f.Error != nil {
			return f.Error
		}
		if result != nil && len(f.Result) > 0 {
			return json.Unmarshal(f.Result, result)
		}
		return nil
	}
}

func (c *Conn) drop(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Serve reads frames from r until EOF or an error, handing requests to h one
// at a time on a separate goroutine (so h can Call the peer while Serve keeps
// reading its responses). It returns nil on a clean EOF.
func (c *Conn) Serve(ctx context.Context, r io.Reader, h Handler) error {
	br := bufio.NewReaderSize(r, 64<<10)
	work := make(chan *Frame, 64)
	done := make(chan struct{})
	idler, _ := h.(Idler)
	go func() {
		defer close(done)
		for {
			var f *Frame
			var ok bool
			select {
			case f, ok = <-work:
			default:
				if idler != nil && idler.Idle() {
					continue // more idle work; check for requests first
				}
				f, ok = <-work
			}
			if !ok {
				return
			}
			c.handle(ctx, h, f)
		}
	}()
	var err error
	for {
		var body []byte
		body, err = ReadFrame(br)
		if err != nil {
			break
		}
		f, ferr := decodeFrame(body)
		if ferr != nil {
			err = fmt.Errorf("protocol: bad frame: %w", ferr)
			break
		}
		if f.Method != "" {
			work <- f
			continue
		}
		if f.ID == nil {
			continue
		}
		c.mu.Lock()
		ch, ok := c.pending[*f.ID]
		delete(c.pending, *f.ID)
		c.mu.Unlock()
		if ok {
			ch <- f
		}
	}
	close(work)
	<-done
	c.shutdown(err)
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// shutdown fails every pending call.
func (c *Conn) shutdown(err error) {
	if err == nil || errors.Is(err, io.EOF) {
		err = errors.New("connection closed")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = err
	for id, ch := range c.pending {
		ch <- &Frame{ID: &id, Error: &Error{Code: CodeClosed, Message: err.Error()}}
		delete(c.pending, id)
	}
}

func (c *Conn) handle(ctx context.Context, h Handler, f *Frame) {
	res, err := safeHandle(ctx, h, f)
	if f.ID == nil {
		return // a notification wants no answer
	}
	out := &Frame{ID: f.ID}
	if err != nil {
		var pe *Error
		if !errors.As(err, &pe) {
			pe = &Error{Code: CodeInternal, Message: err.Error()}
		}
		out.Error = pe
	} else {
		raw, merr := marshalResult(res)
		if merr != nil {
			out.Error = &Error{Code: CodeInternal, Message: merr.Error()}
		} else {
			out.Result = raw
		}
	}
	c.send(out)
}

func marshalResult(res any) (json.RawMessage, error) {
	if raw, ok := res.(json.RawMessage); ok {
		return raw, nil
	}
	return rawjson.Marshal(res)
}

// safeHandle turns a handler panic into an error: a bug in one request must
// not take the session's engine down.
func safeHandle(ctx context.Context, h Handler, f *Frame) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Code: CodeInternal, Message: fmt.Sprintf("panic in %s: %v", f.Method, r)}
		}
	}()
	return h.Handle(ctx, f.Method, f.Params)
}

// decodeFrame splits a frame with rawjson: one validating scan, and params
// stay a slice of the frame (a resumed session's transcript is megabytes).
func decodeFrame(body []byte) (*Frame, error) {
	ms, err := rawjson.Object(body)
	if err != nil {
		return nil, err
	}
	f := new(Frame)
	for _, m := range ms {
		switch m.Key {
		case "id":
			var id int64
			if err := json.Unmarshal(m.Value, &id); err != nil {
				return nil, fmt.Errorf("id: %w", err)
			}
			f.ID = &id
		case "method":
			if f.Method, err = rawjson.Unquote(m.Value); err != nil {
				return nil, fmt.Errorf("method: %w", err)
			}
		case "params":
			f.Params = m.Value
		case "result":
			f.Result = m.Value
		case "error":
			f.Error = new(Error)
			if err := json.Unmarshal(m.Value, f.Error); err != nil {
				return nil, fmt.Errorf("error: %w", err)
			}
		}
	}
	return f, nil
}
