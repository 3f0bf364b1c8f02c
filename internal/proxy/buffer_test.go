package proxy

import "testing"

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
