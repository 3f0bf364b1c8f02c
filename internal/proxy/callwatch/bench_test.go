package callwatch

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// BenchmarkWatcher measures the cost per body byte, the body written one
// event at a time as a streaming proxy forwards it (SetBytes: MB/s is body
// throughput). The model's pieces are 16 bytes, about a token or four. The
// usage is watched too, as the proxy watches it.
func BenchmarkWatcher(b *testing.B) {
	g := newGen(b, 16)
	text := strings.Repeat("The build ran 120 steps; six of them failed with a disk quota error. ", 400)
	args := json.RawMessage(`{"path":"notes.txt","content":"` + strings.Repeat("lorem ipsum dolor sit amet ", 400) + `"}`)
	cases := []struct {
		name  string
		reply fakellm.Reply
	}{
		{"text", fakellm.Reply{Text: text}},
		{"unwanted-call", fakellm.Reply{Text: "Writing it.", ToolCalls: []fakellm.ToolCall{{ID: "c1", Name: "write_file", Arguments: args}}}},
		{"wanted-call", fakellm.Reply{Text: "Recalling it.", ToolCalls: []fakellm.ToolCall{{ID: "c1", Name: "recall_folded", Arguments: args}}}},
	}
	for _, f := range []Format{Messages, Responses, Chat} {
		for _, c := range cases {
			body, _ := g.body(b, f, true, c.reply)
			events := bytes.SplitAfter(body, []byte("\n\n"))
			b.Run(f.String()+"/"+c.name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					w := New(f, true, recallOnly, func(Call) { n++ })
					w.OnUsage(func(Usage) {}) // as the proxy watches
					for _, e := range events {
						w.Write(e)
					}
					w.Close()
				}
				if want := 0; c.name == "wanted-call" {
					want = 1
					if n%want != 0 || n == 0 {
						b.Fatalf("%d calls", n)
					}
				} else if n != want {
					b.Fatalf("%d calls", n)
				}
			})
		}
	}
}
