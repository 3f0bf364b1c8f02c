package service

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/core/rawjson"
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

// steadyTurns is a session as the adapter bench's steady60 drives it: 60
// turns whose tool results are 5–40 KB, each an assistant tool call (with
// the provider's usage) and its result.
func steadyTurns(run int) [][2]json.RawMessage {
	var out [][2]json.RawMessage
	for i := 0; i < 60; i++ {
		size := 5_000 + (i*7919+run*104729)%35_001
		var lines []string
		for k, n := 0, 0; n < size; k++ {
			l := fmt.Sprintf("toolu_%d line %d: the quick brown fox jumps over the lazy dog %d", i, k, (i*31+k*17)%1000)
			if k == 2 {
				l = fmt.Sprintf("ERROR: test_%d failed at step %d (tests/test_%d.py:%d)", i, k, i, 40+k)
			}
			lines = append(lines, l)
			n += len(l) + 1
		}
		think := ""
		if i%3 == 0 {
			think = `{"type":"thinking","thinking":` + rawjson.QuoteString(strings.Repeat("Consider the failing assertion and where it is raised. ", 6)) + `,"thinkingSignature":"sig"},`
		}
		a := fmt.Sprintf(`{"role":"assistant","content":[%s{"type":"toolCall","id":"toolu_%d","name":"bash","arguments":{"command":"pytest tests/test_%d.py -x -q"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":3,"output":60,"cacheRead":1000,"cacheWrite":100,"totalTokens":1163,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":%d,"responseId":"msg_%d"}`, think, i, i, 1_796_000_000_000+4000*i, i)
		r := fmt.Sprintf(`{"role":"toolResult","toolCallId":"toolu_%d","toolName":"bash","content":[{"type":"text","text":%s}],"isError":%v,"timestamp":%d}`, i, rawjson.QuoteString(strings.Join(lines, "\n")), i%11 == 0, 1_796_000_000_800+4000*i)
		out = append(out, [2]json.RawMessage{json.RawMessage(a), json.RawMessage(r)})
	}
	return out
}

// BenchmarkSteady60Turn is the engine side of the adapter bench's steady60:
// 60 requests, each appending a 5–40 KB tool result, at a 200k window,
// through the protocol (frames, a persist round trip on fold events). The
// idle worker digests between requests, untimed, as it does while the model
// answers. ns/turn is the median request; p95/turn the 95th percentile.
func BenchmarkSteady60Turn(b *testing.B) {
	var times []time.Duration
	run := 0
	for range b.N {
		c, _ := startB(b)
		call(nil, c, "open", OpenParams{SessionID: "b", SessionDir: b.TempDir()}, nil)
		sys := json.RawMessage(`{"role":"system","content":` + rawjson.QuoteString(strings.Repeat("You are a coding assistant running inside pi. ", 120)) + `,"timestamp":0}`)
		user := json.RawMessage(`{"role":"user","content":[{"type":"text","text":"work through the failing tests"}],"timestamp":1796000000000}`)
		held := 0
		pending := []json.RawMessage{sys, user}
		tokens := 2000
		for _, t := range steadyTurns(run) {
			pending = append(pending, t[0], t[1])
			tokens += (len(t[0]) + len(t[1])) / 4
			params := map[string]any{"keep": held, "append": pending, "window": 200_000, "reported": tokens,
				"model": map[string]any{"api": "anthropic-messages", "provider": "anthropic", "id": "claude-sonnet-4-5"}}
			var out struct {
				Len   int
				Event *EventSummary
			}
			t0 := time.Now()
			if err := call(nil, c, "turn", params, &out); err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(t0))
			if out.Event != nil {
				tokens -= out.Event.Masked
			}
			held, pending = out.Len, nil
			time.Sleep(10 * time.Millisecond) // the model's answer: the engine digests ahead
		}
		run++
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "ns/turn")
	b.ReportMetric(float64(times[len(times)*95/100].Nanoseconds()), "p95-ns/turn")
}
