package service

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// resumeFixture is a Pi session as the adapter bench's resume sections
// build it: n messages (tool results of 300–2,250 bytes), run through the
// service a request per turn at a 1M window so that its fold entries sit in
// the session file where they were committed, and its seed index beside it.
type resumeFixture struct {
	dir, file string
	msgs      []json.RawMessage
	ids       []string          // the message entries' ids, in order
	entries   []json.RawMessage // the contextfold.fold entries' data, in file order
	entryIDs  []string
	bytes     int
}

var (
	fixtureOnce sync.Once
	fixture     *resumeFixture
)

func resumeMessages(n int) []json.RawMessage {
	t0 := int64(1_796_000_000_000)
	out := []json.RawMessage{
		json.RawMessage(`{"role":"system","content":` + rawjson.QuoteString(strings.Repeat("You are a coding assistant running inside pi. ", 120)) + `,"timestamp":0}`),
		json.RawMessage(fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":"work through the failing tests"}],"timestamp":%d}`, t0)),
	}
	for i := 0; len(out) < n; i++ {
		size := 300 + (i*7919)%1951
		var lines []string
		for k, m := 0, 0; m < size; k++ {
			l := fmt.Sprintf("toolu_%d line %d: the quick brown fox jumps over the lazy dog %d", i, k, (i*31+k*17)%1000)
			if k == 2 {
				l = fmt.Sprintf("ERROR: test_%d failed at step %d (tests/test_%d.py:%d)", i, k, i, 40+k)
			}
			lines = append(lines, l)
			m += len(l) + 1
		}
		think := ""
		if i%3 == 0 {
			think = `{"type":"thinking","thinking":` + rawjson.QuoteString(strings.Repeat("Consider the failing assertion and where it is raised. ", 6)) + `,"thinkingSignature":"sig"},`
		}
		at := t0 + 4000*int64(i) + 2000
		out = append(out,
			json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":[%s{"type":"toolCall","id":"toolu_%d","name":"bash","arguments":{"command":"pytest tests/test_%d.py -x -q"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":3,"output":60,"cacheRead":1000,"cacheWrite":100,"totalTokens":1163,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"toolUse","timestamp":%d,"responseId":"msg_%d"}`, think, i, i, at, i)),
			json.RawMessage(fmt.Sprintf(`{"role":"toolResult","toolCallId":"toolu_%d","toolName":"bash","content":[{"type":"text","text":%s}],"isError":%v,"timestamp":%d}`, i, rawjson.QuoteString(strings.Join(lines, "\n")), i%11 == 0, at+800)))
	}
	return out[:n]
}

func buildResumeFixture(b *testing.B, n int) *resumeFixture {
	dir, err := os.MkdirTemp("", "cf-resume-bench-")
	if err != nil {
		b.Fatal(err)
	}
	c, ad := startB(b)
	if err := call(nil, c, "open", OpenParams{SessionID: "bench", SessionDir: dir}, nil); err != nil {
		b.Fatal(err)
	}
	msgs := resumeMessages(n)
	f := &resumeFixture{dir: dir, msgs: msgs}
	var file strings.Builder
	file.WriteString(`{"type":"session","version":3,"id":"bench","timestamp":"2026-12-02T00:00:00.000Z","cwd":"/w"}` + "\n")
	parent := "null"
	line := func(kind, body string) string {
		id := fmt.Sprintf("%08x", len(f.ids)+len(f.entryIDs)+1)
		fmt.Fprintf(&file, `{"type":%q,%s,"id":%q,"parentId":%s,"timestamp":"2026-12-02T00:00:00.000Z"}`+"\n", kind, body, id, parent)
		parent = `"` + id + `"`
		return id
	}
	held, tokens := 0, 0
	for i, m := range msgs {
		f.ids = append(f.ids, line("message", `"message":`+string(m)))
		tokens += len(m) / 4
		if i < 3 || i%2 == 0 {
			continue // a request per turn: after each tool result
		}
		params := map[string]any{"keep": held, "append": msgs[held : i+1], "window": 1_000_000, "reported": tokens}
		var out struct {
			Len   int
			Event *EventSummary
		}
		if err := call(nil, c, "turn", params, &out); err != nil {
			b.Fatal(err)
		}
		held = out.Len
		if out.Event != nil {
			tokens -= out.Event.Masked
			ad.mu.Lock()
			for _, en := range ad.entries[len(f.entries):] {
				f.entries = append(f.entries, en)
				f.entryIDs = append(f.entryIDs, line("custom", `"customType":"contextfold.fold","data":`+string(en)))
			}
			ad.mu.Unlock()
		}
	}
	f.file = filepath.Join(dir, "session.jsonl")
	if err := os.WriteFile(f.file, []byte(file.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	f.bytes = file.Len()
	return f
}

func resume3000(b *testing.B) *resumeFixture {
	fixtureOnce.Do(func() { fixture = buildResumeFixture(b, 3000) })
	if len(fixture.entries) == 0 {
		b.Fatal("fixture: nothing folded")
	}
	return fixture
}

// BenchmarkOpenFolded3000 is the engine side of `open` for a resumed
// 3,000-message session that context-fold folded as it ran: decode and
// replay its fold entries, read the seed-index floor and the session file.
func BenchmarkOpenFolded3000(b *testing.B) {
	f := resume3000(b)
	params, _ := json.Marshal(OpenParams{SessionID: "bench", SessionFile: f.file, SessionDir: f.dir, Entries: f.entries})
	b.ReportAllocs()
	for b.Loop() {
		s := New(nil, nil)
		if _, err := s.Handle(b.Context(), "open", params); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(f.bytes)/1e6, "file-MB")
	b.ReportMetric(float64(len(f.entries)), "entries")
}

// BenchmarkResumeFolded3000 is open and the first request after it, which
// carries all 3,000 messages: the engine side of the first request after
// `pi -c` (the adapter bench's resumeFolded3000 adds spawn, Node and pipe).
func BenchmarkResumeFolded3000(b *testing.B) {
	f := resume3000(b)
	open, _ := json.Marshal(OpenParams{SessionID: "bench", SessionFile: f.file, SessionDir: f.dir, Entries: f.entries})
	turn, _ := json.Marshal(map[string]any{"keep": 0, "full": true, "append": f.msgs, "window": 1_000_000, "reported": 300_000})
	b.ReportAllocs()
	defer b.ReportMetric(float64(f.bytes)/1e6, "file-MB")
	for b.Loop() {
		s := New(nil, nil)
		s.now = func() time.Time { return time.UnixMilli(1_796_000_000_000 + 4000*1500 + 60_000) }
		if _, err := s.Handle(b.Context(), "open", open); err != nil {
			b.Fatal(err)
		}
		res, err := s.Handle(b.Context(), "turn", turn)
		if err != nil {
			b.Fatal(err)
		}
		if tr := res.(*TurnResult); tr.Event != nil {
			b.Fatal("the first request after resume folded anew")
		}
		if _, err := rawjson.Marshal(res); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResumeFolded3000FromFile is BenchmarkResumeFolded3000 as the
// adapter now sends it: open names the fold entries and the first request
// names the messages by their ids in the session file, which the engine
// reads itself.
func BenchmarkResumeFolded3000FromFile(b *testing.B) {
	f := resume3000(b)
	open, _ := json.Marshal(OpenParams{SessionID: "bench", SessionFile: f.file, SessionDir: f.dir, EntryIDs: f.entryIDs, FileVersion: 3})
	turn, _ := json.Marshal(map[string]any{"keep": 0, "full": true, "file": f.ids, "fileVersion": 3, "append": []json.RawMessage{}, "window": 1_000_000, "reported": 300_000})
	b.ReportAllocs()
	defer b.ReportMetric(float64(f.bytes)/1e6, "file-MB")
	for b.Loop() {
		s := New(nil, nil)
		s.now = func() time.Time { return time.UnixMilli(1_796_000_000_000 + 4000*1500 + 60_000) }
		res, err := s.Handle(b.Context(), "open", open)
		if err != nil || !res.(*OpenResult).EntriesFromFile {
			b.Fatal("open did not read the entries from the file", err)
		}
		tr, err := s.Handle(b.Context(), "turn", turn)
		if err != nil {
			b.Fatal(err)
		}
		if tr.(*TurnResult).Event != nil {
			b.Fatal("the first request after resume folded anew")
		}
		if _, err := rawjson.Marshal(tr); err != nil {
			b.Fatal(err)
		}
	}
}
