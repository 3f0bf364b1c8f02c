package proxy

import (
	"net/http/httptest"
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkFold measures what the proxy adds to a request of a conversation
// at 1,000 messages, from the body's last byte to the rewritten body being
// ready to send: decoding what differs from the previous body (the
// client's whole body is ~5 MB: a client always sends every output raw),
// the engine's step, fold events written and synced to the store in a
// temporary directory, and the rewritten body as segments. Each iteration
// is the next turn: two messages more. As in the proxy, the body is
// compared with the previous one while it arrives (Incoming), in 32 KB
// pieces, before the timer starts; "whole" times that comparison too (the
// CPU a request costs). Between requests the proxy's idle work finishes (a
// model takes far longer to answer than it needs); "back-to-back" gives it
// no time at all. Beside the mean (ns/op) it reports the median and the
// 99th percentile of the iterations.
func BenchmarkFold(b *testing.B) {
	for _, mode := range []string{"idle", "back-to-back", "whole"} {
		idle, arrive := mode != "back-to-back", mode != "whole"
		for _, cl := range clients {
			b.Run(mode+"/"+string(cl.api), func(b *testing.B) {
				f := testFolder(b, 0, nil)
				r := httptest.NewRequest("POST", cl.path, nil)
				r.Header.Set("x-claude-code-session-id", "bench")
				const start = 500 // turns: a system and a user message, then a call and a result each
				for n := 1; n < start; n += 25 {
					f.Fold(r, cl.api, []byte(cl.body(n)), nil)
				}
				body := []byte(cl.body(start))
				f.Fold(r, cl.api, body, nil)
				f.Idle()
				b.SetBytes(int64(len(body)))
				times := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					body = []byte(cl.body(start + 1 + i))
					if idle {
						f.Idle()
					}
					// Building the body made ~10 MB of garbage, which the
					// proxy, reading bodies into pooled buffers, does not: a
					// collection it starts must not land in the timed part.
					runtime.GC()
					var in *Incoming
					if arrive {
						in = f.Begin(r, cl.api)
						for o := 0; o < len(body); o += 32 << 10 {
							in.Write(body[o:min(len(body), o+32<<10)])
						}
					}
					b.StartTimer()
					t0 := time.Now()
					if _, why := f.Fold(r, cl.api, body, in); why != "" {
						b.Fatal(why)
					}
					times = append(times, time.Since(t0))
					if in != nil {
						// Outside the timer: the proxy settles once the
						// body is on its way.
						b.StopTimer()
						f.Settle(in)
						b.StartTimer()
					}
				}
				b.StopTimer()
				slices.Sort(times)
				b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(times[(len(times)*99)/100].Microseconds()), "p99-µs")
			})
		}
	}
}
