package proxy

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/tokens"
	"github.com/contextfold/contextfold/internal/proxy/codec"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// usageStream is a streamed answer of api reporting, for request n, a
// prompt of 1000·n tokens of which 100·n were read from the cache and (on
// Messages, which counts them apart) 10·n written to it, and 5+n output
// tokens.
func usageStream(api codec.API, n int) string {
	switch api {
	case codec.Messages:
		return fmt.Sprintf("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_%d\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":%d,\"cache_read_input_tokens\":%d,\"cache_creation_input_tokens\":%d,\"output_tokens\":1}}}\n\n", n, 1000*n-110*n, 100*n, 10*n) +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			fmt.Sprintf("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":%d}}\n\n", 5+n) +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	case codec.Responses:
		return fmt.Sprintf("data: {\"type\":\"response.created\",\"response\":{\"status\":\"in_progress\",\"output\":[],\"usage\":null}}\n\n"+
			"data: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":%d,\"input_tokens_details\":{\"cached_tokens\":%d},\"output_tokens\":%d}}}\n\n", 1000*n-10*n, 100*n, 5+n)
	}
	return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n" +
		fmt.Sprintf("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":%d}}}\n\n", 1000*n-10*n, 5+n, 100*n) +
		"data: [DONE]\n\n"
}

// TestRequestsNoted: over a 40-turn conversation of each wire format, the
// conversation's file gets one line per request, numbered, with its size
// as the client sent it and as it went upstream (estimates that match the
// bodies), the window and budget it was planned for, the fold events it
// committed, and the usage its streamed answer reported.
func TestRequestsNoted(t *testing.T) {
	for _, cl := range clients {
		t.Run(string(cl.api), func(t *testing.T) {
			var count atomic.Int64
			up := newUpstream(t, "up", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write([]byte(usageStream(cl.api, int(count.Add(1)))))
			})
			dir := t.TempDir()
			base, stop := foldingFront(t, up, dir, 40_000)
			const turns = 40
			for n := 1; n <= turns; n++ {
				send(t, base, cl.path, cl.body(n))
			}
			stop() // waits for the lines being noted
			files, _ := foldstore.Files(dir)
			if len(files) != 1 {
				t.Fatalf("%d conversation files, want 1", len(files))
			}
			c, err := foldstore.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Requests) != turns || c.Bad != 0 {
				t.Fatalf("%d requests noted (%d bad lines), want %d", len(c.Requests), c.Bad, turns)
			}
			events := map[int]bool{}
			for _, en := range c.Entries {
				if en.Kind == engine.KindFold {
					events[en.Seq] = true
				}
			}
			upstream := up.requests()
			folded := 0
			for i, r := range c.Requests {
				n := i + 1
				if r.N != n || r.Window != 40_000 || r.Budget <= 0 || r.Budget > r.Window || r.At.IsZero() {
					t.Fatalf("request %d noted as %+v", n, r)
				}
				// The estimates are the proxy's, of the whole body: within
				// a fifth of the bodies' own estimate.
				if !near(r.Raw, tokens.EstimateUnits(len(cl.body(n)))) || !near(r.Sent, tokens.EstimateUnits(len(upstream[i].body))) {
					t.Fatalf("request %d: raw %d sent %d; bodies %d and %d bytes", n, r.Raw, r.Sent, len(cl.body(n)), len(upstream[i].body))
				}
				if r.Sent > r.Raw {
					t.Fatalf("request %d: sent %d over raw %d", n, r.Sent, r.Raw)
				}
				if r.Seq != 0 {
					if !events[r.Seq] {
						t.Fatalf("request %d names fold event %d, which the file does not hold", n, r.Seq)
					}
					delete(events, r.Seq)
				}
				if r.Sent < r.Raw {
					folded++
				}
				want := foldstore.Usage{Input: 1000*n - 110*n, CacheRead: 100 * n, CacheWrite: 10 * n, Output: 5 + n}
				if cl.api != codec.Messages {
					want = foldstore.Usage{Input: 1000*n - 110*n, CacheRead: 100 * n, Output: 5 + n}
				}
				if r.Usage == nil || *r.Usage != want {
					t.Fatalf("request %d: usage %+v, want %+v", n, r.Usage, want)
				}
			}
			if len(events) != 0 || folded < turns/2 {
				t.Fatalf("fold events no request names: %v; %d requests went out smaller than sent", events, folded)
			}
		})
	}
}

// near reports whether a is within a fifth of b.
func near(a, b int) bool { return 5*a >= 4*b && 5*a <= 6*b }
