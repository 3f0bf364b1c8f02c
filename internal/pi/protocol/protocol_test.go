package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// pair connects two Conns through pipes: a's writes are b's reads and back.
func pair(t *testing.T, ha, hb Handler) (*Conn, *Conn, func()) {
	ar, bw := io.Pipe()
	br, aw := io.Pipe()
	a, b := NewConn(aw), NewConn(bw)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { a.Serve(ctx, ar, ha); done <- struct{}{} }()
	go func() { b.Serve(ctx, br, hb); done <- struct{}{} }()
	return a, b, func() {
		aw.Close()
		bw.Close()
		<-done
		<-done
		cancel()
	}
}

func TestBidirectionalCall(t *testing.T) {
	var b *Conn
	hb := HandlerFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		switch method {
		case "turn":
			// Call back into the peer while serving its request.
			var ok bool
			if err := b.Call(ctx, "journal", map[string]int{"seq": 1}, &ok); err != nil {
				return nil, err
			}
			return map[string]any{"committed": ok, "echo": json.RawMessage(params)}, nil
		case "boom":
			panic("bad")
		}
		return nil, &Error{Code: CodeNoMethod, Message: method}
	})
	ha := HandlerFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		return method == "journal", nil
	})
	a, bb, stop := pair(t, ha, hb)
	b = bb
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var res struct {
		Committed bool
		Echo      []int
	}
	var got bool
	if err := b.Call(ctx, "x", nil, &got); err != nil || got {
		t.Fatalf("b→a call: %v %v", got, err)
	}
	if err := a.Call(ctx, "turn", []int{1, 2}, &res); err != nil || !res.Committed || len(res.Echo) != 2 {
		t.Fatalf("turn: %+v %v", res, err)
	}
	var pe *Error
	if err := a.Call(ctx, "boom", nil, nil); !errors.As(err, &pe) || pe.Code != CodeInternal {
		t.Fatalf("panic not turned into an error: %v", err)
	}
	if err := a.Call(ctx, "nope", nil, nil); !errors.As(err, &pe) || pe.Code != CodeNoMethod {
		t.Fatalf("unknown method: %v", err)
	}
}

func TestPendingCallsFailOnClose(t *testing.T) {
	block := make(chan struct{})
	hb := HandlerFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		<-block
		return nil, nil
	})
	a, _, stop := pair(t, nil, hb)
	errc := make(chan error, 1)
	go func() { errc <- a.Call(context.Background(), "slow", nil, nil) }()
	time.Sleep(50 * time.Millisecond)
	close(block)
	stop()
	select {
	case <-errc:
	case <-time.After(5 * time.Second):
		t.Fatal("a pending call hung after close")
	}
}

func TestFrameLimits(t *testing.T) {
	if _, err := ReadFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff})); err == nil {
		t.Fatal("oversized frame accepted")
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{10, 0, 0, 0, 'a'})); err == nil {
		t.Fatal("truncated frame accepted")
	}
	var buf bytes.Buffer
	WriteFrame(&buf, []byte(`{"method":"hello"}`))
	if got, err := ReadFrame(&buf); err != nil || string(got) != `{"method":"hello"}` {
		t.Fatalf("round trip %q %v", got, err)
	}
}

type idler struct {
	HandlerFunc
	calls atomic.Int32
	left  atomic.Int32
}

func (i *idler) Idle() bool {
	i.calls.Add(1)
	return i.left.Add(-1) > 0
}

func TestIdleRunsBetweenRequests(t *testing.T) {
	h := &idler{HandlerFunc: func(context.Context, string, json.RawMessage) (any, error) { return 1, nil }}
	h.left.Store(5)
	a, _, stop := pair(t, nil, h)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Call(ctx, "x", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Call(ctx, "x", nil, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := h.calls.Load(); n < 5 {
		t.Fatalf("Idle called %d times, want it to drain its 5 units", n)
	}
}

// TestAdapterSpeaksThisVersion: the adapter's PROTOCOL_VERSION is this one.
func TestAdapterSpeaksThisVersion(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "extension", "locate.js"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`export const PROTOCOL_VERSION = (\d+);`).FindSubmatch(src)
	if m == nil {
		t.Fatal("extension/locate.js declares no PROTOCOL_VERSION")
	}
	if got := string(m[1]); got != strconv.Itoa(Version) {
		t.Fatalf("adapter speaks protocol %s, engine %d: bump both together", got, Version)
	}
}
