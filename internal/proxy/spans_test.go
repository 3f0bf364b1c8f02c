package proxy

import (
	"bytes"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/contextfold/contextfold/internal/proxy/codec"
)

// TestSpansReused checks the steady-state shortcut of step: a request that
// only appends to the previous one, at the same placement version, goes
// out with the previous request's spans. Whatever the request, its body
// must go out with the engine's placements placed in its own bytes: the
// test places them afresh after every request and compares. The turns
// include bodies whose bytes before the conversation change length (every
// span moves), retries, a truncated conversation, and fold events; it
// checks that the shortcut was taken where it applies, so that it cannot
// pass by never taking it.
// markIndex is where among spans the breakpoint at the end of the frozen
// region is, -1 for nowhere: it moves the request after an event, without
// an event of its own.
func markIndex(spans []codec.Span) int {
	return slices.IndexFunc(spans, func(sp codec.Span) bool { return sp.Start == sp.End })
}

func TestSpansReused(t *testing.T) {
	for _, cl := range clients {
		t.Run(string(cl.api), func(t *testing.T) {
			f := testFolder(t, 40_000, nil)
			r := httptest.NewRequest("POST", cl.path, nil)
			r.Header.Set("x-claude-code-session-id", "spans")
			other := httptest.NewRequest("POST", cl.path, nil)
			other.Header.Set("x-claude-code-session-id", "other")
			// lead puts a member before the conversation, shifting it.
			lead := func(body, pad string) string {
				if pad == "" {
					return body
				}
				return `{"metadata":{"pad":"` + pad + `"},` + body[1:]
			}
			type turn struct {
				n     int
				pad   string
				reuse bool // the shortcut applies
			}
			var turns []turn
			for n := 1; n <= 30; n++ {
				turns = append(turns, turn{n: n, reuse: n > 1})
			}
			turns = append(turns,
				turn{n: 30, reuse: true},           // a retry
				turn{n: 31, pad: "x"},              // every span moves
				turn{n: 32, pad: "x", reuse: true}, // and stays there
				turn{n: 33, pad: "xyz"},            // moves again
				turn{n: 33},                        // back, nothing new
				turn{n: 20},                        // truncated
				turn{n: 21, reuse: true},
			)
			for n := 22; n <= 45; n++ {
				turns = append(turns, turn{n: n, pad: "ppp", reuse: n > 22})
			}
			// repeated: body repeats last through the end of its spans.
			repeated := func(body, last []byte, spans []codec.Span) bool {
				end := spans[len(spans)-1].End
				return len(body) >= end && bytes.Equal(body[:end], last[:end])
			}
			var last []byte
			reused, events, marks := 0, 0, 0
			for i, tu := range turns {
				body := []byte(lead(cl.body(tu.n), tu.pad))
				var c *conversation
				f.mu.Lock()
				for _, cv := range f.convs {
					c = cv
				}
				f.mu.Unlock()
				var before []codec.Span
				version := -1
				if c != nil {
					c.mu.Lock()
					before, version = c.prevSpans, c.eng.Version()
					c.mu.Unlock()
				}
				// Every third request is compared with no earlier body as
				// it arrives (another scope's Incoming): step then compares
				// the bytes itself.
				var in *Incoming
				if i%3 == 2 {
					in = f.Begin(other, cl.api)
					in.Write(body)
				}
				out, why := f.Fold(r, cl.api, body, in)
				if why != "" {
					t.Fatalf("turn %d (%d): %s", i, tu.n, why)
				}
				if in != nil {
					f.Settle(in)
				}
				f.Idle()
				f.mu.Lock()
				for _, cv := range f.convs {
					c = cv
				}
				f.mu.Unlock()
				c.mu.Lock()
				spans, err := c.prev.Spans(c.edits(c.eng.Placements()))
				got := c.prevSpans
				if c.eng.Version() != version {
					events++
				}
				c.mu.Unlock()
				if err != nil {
					t.Fatalf("turn %d (%d): placing afresh: %v", i, tu.n, err)
				}
				// What went out is the engine's placements and, for
				// Anthropic once something is frozen, one breakpoint more
				// at the end of the frozen region (at most four in all).
				var placedOnly []codec.Span
				for _, sp := range got {
					if sp.Start == sp.End && bytes.HasPrefix(sp.Value, []byte(`,"cache_control":`)) {
						marks++
						continue
					}
					placedOnly = append(placedOnly, sp)
				}
				want, _ := codec.Splice(body, got)
				if !bytes.Equal(bytes.Join(out, nil), bytes.Join(want, nil)) || !slices.EqualFunc(placedOnly, spans, func(a, b codec.Span) bool {
					return a.Start == b.Start && a.End == b.End && bytes.Equal(a.Value, b.Value)
				}) {
					t.Fatalf("turn %d (%d, pad %q): the body went out other than with the engine's placements placed in it", i, tu.n, tu.pad)
				}
				if n := bytes.Count(bytes.Join(out, nil), []byte(`"cache_control":`)); n > codec.MaxBreakpoints {
					t.Fatalf("turn %d (%d): %d breakpoints", i, tu.n, n)
				}
				if len(got) > 0 && len(before) > 0 && &got[0] == &before[0] {
					reused++
				} else if tu.reuse && c.eng.Version() == version && len(before) > 0 && repeated(body, last, before) && markIndex(got) == markIndex(before) {
					t.Errorf("turn %d (%d): the previous spans were not reused", i, tu.n)
				}
				last = body
			}
			if events < 2 || reused < 10 {
				t.Fatalf("%d fold events and %d reuses: the test does not exercise the shortcut", events, reused)
			}
			if (marks > 0) != (cl.api == codec.Messages) {
				t.Errorf("%d requests went out with the frozen region's breakpoint", marks)
			}
			t.Logf("%d turns, %d version changes, %d reuses", len(turns), events, reused)
		})
	}
}
