package proxy

import (
	"net/http/httptest"
	"testing"

	"github.com/contextfold/contextfold/internal/foldstore"
)

// BenchmarkFold measures what the proxy adds to a request of a conversation
// at 1,000 messages: reading the client's whole body (every tool output
// raw, ~4.6 MB), the engine's step and the rewritten body. Each iteration
// is the next turn: two messages more.
func BenchmarkFold(b *testing.B) {
	for _, cl := range clients {
		b.Run(string(cl.api), func(b *testing.B) {
			st, err := foldstore.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			f := NewFolder(st, 0, nil)
			defer f.Close()
			r := httptest.NewRequest("POST", cl.path, nil)
			r.Header.Set("x-claude-code-session-id", "bench")
			const start = 500 // turns: a system and a user message, then a call and a result each
			for n := 1; n < start; n += 25 {
				f.Fold(r, cl.api, []byte(cl.body(n)))
			}
			body := []byte(cl.body(start))
			f.Fold(r, cl.api, body)
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				body = []byte(cl.body(start + 1 + i))
				b.StartTimer()
				if _, why := f.Fold(r, cl.api, body); why != "" {
					b.Fatal(why)
				}
			}
		})
	}
}
