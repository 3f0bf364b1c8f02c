package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/rawjson"
)

// resumeParams is a turn carrying a whole 3,000-message (~3 MB) session, as
// the first request after a resume sends it.
func resumeParams(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"keep":0,"window":100000000,"reported":100000,"full":true,"append":[`)
	for i := 0; i < n/2; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":"assistant","content":[{"type":"toolCall","id":"t%d","name":"bash","arguments":{"command":"pytest tests/test_%d.py"}}],"api":"x","usage":{"input":10,"output":5},"stopReason":"toolUse","timestamp":%d,"responseId":"r%d"},`, i, i, 10+2*i, i)
		var lines []string
		for k := 0; k < 4+(i*7)%30; k++ {
			lines = append(lines, fmt.Sprintf("t%d line %d: the quick brown fox jumps over the lazy dog", i, k))
		}
		fmt.Fprintf(&b, `{"role":"toolResult","toolCallId":"t%d","toolName":"bash","content":[{"type":"text","text":%s}],"isError":false,"timestamp":%d}`, i, rawjson.QuoteString(strings.Join(lines, "\n")), 11+2*i)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// BenchmarkResumeTurn is the engine side of the first request after a
// resume: decode the params and run one step on 3,000 messages.
func BenchmarkResumeTurn(b *testing.B) {
	params := resumeParams(3000)
	b.SetBytes(int64(len(params)))
	b.ReportAllocs()
	for b.Loop() {
		s := New(nil, nil)
		s.open(OpenParams{SessionID: "b", Env: map[string]string{"CONTEXTFOLD_BUDGET_CAP": "off"}})
		p, err := parseTurn(params)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.turn(context.Background(), p); err != nil {
			b.Fatal(err)
		}
	}
}

var _ = json.Valid

// BenchmarkFoldEventTurn is the engine side of a request that commits a fold
// event on a 1,000-message session whose digests were prepared while idle:
// lower, sha256, seed-index record and file, the persist round trip through
// a (test) adapter, and the result with the new layer.
func BenchmarkFoldEventTurn(b *testing.B) {
	all := resumeParams(1000)
	for b.Loop() {
		b.StopTimer()
		c, _ := startB(b)
		call(nil, c, "open", OpenParams{SessionID: "b", SessionDir: b.TempDir()}, nil)
		low := strings.Replace(string(all), `"reported":100000`, `"reported":1000`, 1)
		low = strings.Replace(low, `"window":1000000`, `"window":400000`, 1)
		call(nil, c, "turn", json.RawMessage(low), nil)
		call(nil, c, "status", nil, nil) // the worker idles between requests: wait for the digests
		time.Sleep(300 * time.Millisecond)
		b.StartTimer()
		var out struct{ Event *EventSummary }
		call(nil, c, "turn", json.RawMessage(`{"keep":1000,"append":[],"window":400000,"reported":190000}`), &out)
		if out.Event == nil {
			b.Fatal("no fold event")
		}
	}
}
