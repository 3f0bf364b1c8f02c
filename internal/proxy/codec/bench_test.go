package codec

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// chatBody is a Chat Completions body of n tool turns with outputs of
// about size bytes each: the shape of a client's request at 2n+2
// messages.
func chatBody(n, size int) []byte {
	msgs := []any{map[string]any{"role": "system", "content": "You are a test agent."}, map[string]any{"role": "user", "content": "Run the build."}}
	line := "INFO: step ok - compiled module.o (padding padding padding)\n"
	out := strings.Repeat(line, max(1, size/len(line)))
	for k := 1; k <= n; k++ {
		id := fmt.Sprintf("call_%04d", k)
		args, _ := json.Marshal(map[string]any{"command": fmt.Sprintf("make step%d", k)})
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "bash", "arguments": string(args)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": fmt.Sprintf("turn %d\n%s", k, out)})
	}
	b, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}}, "stream": true})
	return b
}

// BenchmarkDecodeAfter: decoding a request at 1,000 messages against the
// previous one, which it extends by a turn: what the proxy does once a
// body is in, before the engine's step. Outputs are of about 1 KB, or 9 KB
// ("-9KB": a 5 MB body, BenchmarkProxyTTFB's).
func BenchmarkDecodeAfter(b *testing.B) {
	// in-place: the request extends the previous one's arrays, as the one
	// request after it does; copy: the previous one was extended already
	// (a retry, a second conversation of a scope), so its arrays are copied.
	for _, c := range []struct {
		name    string
		inPlace bool
		size    int
	}{{"in-place", true, 1000}, {"copy", false, 1000}, {"in-place-9KB", true, 9000}} {
		prevBody, body := chatBody(499, c.size), chatBody(500, c.size)
		common := CommonLen(prevBody, body)
		inPlace := c.inPlace
		b.Run(c.name, func(b *testing.B) {
			prev, err := Decode(Chat, prevBody)
			if err != nil {
				b.Fatal(err)
			}
			prev.extended.Store(!inPlace)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := DecodeAfterPrefix(Chat, body, prev, common); err != nil {
					b.Fatal(err)
				}
				// The in-place decoding wrote the same bytes where it writes
				// again.
				prev.extended.Store(!inPlace)
			}
		})
	}
}

// BenchmarkDecodeAfterClient: each real client's captured request decoded
// against the same request decoded before (extending it in place, as the
// next request does): the cost of what surrounds the conversation, the
// tools and system prompt the clients send after it.
func BenchmarkDecodeAfterClient(b *testing.B) {
	for _, s := range samples {
		b.Run(s.file, func(b *testing.B) {
			body := readSample(b, s.file)
			prev, err := Decode(s.api, body)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				prev.extended.Store(false)
				if _, err := DecodeAfterPrefix(s.api, body, prev, len(body)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeAfterClaudeCode: as BenchmarkDecodeAfter/in-place, for
// Claude Code's bodies, whose cache breakpoint moves off the previous
// request's last item (breakpointLeft finds it need not be decoded again);
// outputs are short, or of about 9 KB.
func BenchmarkDecodeAfterClaudeCode(b *testing.B) {
	for _, size := range []int{0, 9000} {
		name := "short"
		if size > 0 {
			name = "9KB"
		}
		b.Run(name, func(b *testing.B) {
			prevBody, body := claudeSized(499, 499, "", size), claudeSized(500, 500, "", size)
			common := CommonLen(prevBody, body)
			prev, err := Decode(Messages, prevBody)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				prev.extended.Store(false)
				if _, err := DecodeAfterPrefix(Messages, body, prev, common); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
