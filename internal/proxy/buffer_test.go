package proxy

import (
	"net/http"
	"sync/atomic"
	"testing"
)

// TestBufferNotReusedWhileHeld: a buffer goes back to its pool only when
// its last holder lets go; until then no other request gets it.
func TestBufferNotReusedWhileHeld(t *testing.T) {
	b := newBuffer(100_000)
	b.b = append(b.b, "held"...)
	b.hold() // a second holder (a reader, the Folder)
	b.release()
	for i := 0; i < 1000; i++ {
		o := newBuffer(100_000)
		if o == b {
			t.Fatal("a held buffer was handed out again")
		}
		if cap(o.b) < 100_000 || len(o.b) != 0 {
			t.Fatalf("buffer of len %d cap %d", len(o.b), cap(o.b))
		}
		o.release()
	}
	if string(b.b) != "held" {
		t.Fatalf("a held buffer was written: %q", b.b)
	}
	b.release()
	if c := newBuffer(0); c.class != -1 || cap(c.b) != 0 {
		t.Fatalf("a body of unknown length got a pooled buffer: class %d cap %d", c.class, cap(c.b))
	}
	if c := newBuffer(1 << 30); c.class != -1 {
		t.Fatalf("a body over the largest class got class %d", c.class)
	}
}

// TestBuffersComeBack: through the whole proxy, a folded request's body
// goes to the transport as a reader that holds its buffer until the
// transport closes it (it may read after the handler returns), and the
// buffer goes back to its pool once the upstream has the request and the
// conversation has moved on, so a conversation's requests reuse buffers
// instead of allocating one each.
func TestBuffersComeBack(t *testing.T) {
	up := newUpstream(t, "up", nil)
	folder := testFolder(t, 40_000, nil)
	var holding, bodies atomic.Int64
	s, _ := front(t, up, up, func(c *Config) {
		c.Folder = folder
		c.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			bodies.Add(1)
			switch r.Body.(type) {
			case *segReader, *cutReader:
				holding.Add(1)
			}
			return http.DefaultTransport.RoundTrip(r)
		})
	})
	cl := clients[0]
	var returned atomic.Int64
	defer watchEvents(func(e string) {
		if e == "returned" {
			returned.Add(1)
		}
	})()
	const n = 12
	for k := 10; k < 10+n; k++ {
		send(t, s.URL, cl.path, cl.body(k)) // ≥ 90 KB: pooled
	}
	// A prediction a fold event abandoned reaches the transport again
	// with the decided body; the upstream has each request once.
	if holding.Load() != bodies.Load() || bodies.Load() < n {
		t.Fatalf("%d of %d request bodies reached the transport holding their buffer", holding.Load(), bodies.Load())
	}
	if got := len(up.requests()); got != n {
		t.Fatalf("the upstream had %d requests, want %d", got, n)
	}
	// The last request's buffer is still its conversation's previous one.
	if got := returned.Load(); got < n-2 {
		t.Fatalf("%d of %d buffers came back", got, n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
