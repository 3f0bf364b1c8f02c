package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/proxy/foldstore"
	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// compactingScript calls Bash on every request, and answers a compaction
// request (Claude Code's prompt) with a summary.
func compactingScript() fakellm.Script {
	n := 0
	return fakellm.ScriptFunc(func(req *fakellm.Request) fakellm.Reply {
		if bytes.Contains(req.Body, compactionPrompts[0]) {
			return fakellm.Reply{Text: "Summary: the build ran; errors at steps 40 and 80."}
		}
		n++
		return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{Name: "Bash", Arguments: json.RawMessage(fmt.Sprintf(`{"command":"make step%d"}`, n))}}}
	})
}

// TestCompactionForgetsNothing: a Claude Code-like session through the
// folding proxy compacts its own history (its prompt appended to the last
// tool results), then goes on from the summary under the same session id.
// Every tool output of the history, folded or never, is recallable byte
// for byte from the store afterwards; the conversation after the
// compaction goes on in the same file, its fold events numbered on; and its
// summary message carries the index of what is recallable, with the codes
// of the outputs, the same bytes in every later request.
func TestCompactionForgetsNothing(t *testing.T) {
	fake, err := fakellm.Start(compactingScript(), fakellm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	var logs bytes.Buffer
	folder := testFolder(t, 40_000, slog.New(slog.NewTextHandler(&logs, nil)))
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	up := mustURL(t, fake.AnthropicURL())
	p, err := New(Config{Anthropic: up, OpenAI: up, Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()

	outputs := map[string]string{} // by tool_use id
	run := func(c *antClient, steps int) {
		for range steps {
			content, status, body := c.send(t, srv.URL)
			if status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			for _, b := range content {
				if bm := b.(map[string]any); bm["type"] == "tool_use" {
					id := bm["id"].(string)
					outputs[id] = output(len(outputs) + 1)
					c.add("user", map[string]any{"type": "tool_result", "tool_use_id": id, "content": outputs[id]})
				}
			}
		}
	}
	a := &antClient{model: "claude-opus-5-0-fake"}
	a.add("user", map[string]any{"type": "text", "text": "Run the build."})
	run(a, 30)
	before := len(fake.Requests())
	// The compaction request: the prompt rides with the last tool results.
	last := a.msgs[len(a.msgs)-1]
	last["content"] = append(last["content"].([]any), map[string]any{"type": "text", "text": string(compactionPrompts[0]) + ", paying close attention to the user's explicit requests."})
	if _, status, body := a.send(t, srv.URL); status != 200 {
		t.Fatalf("compaction request: %d %s", status, body)
	}
	b := &antClient{model: a.model}
	b.add("user", map[string]any{"type": "text", "text": string(continuedMarkers[0]) + ". The summary below covers the earlier portion of the conversation.\n\nSummary: the build ran."})
	run(b, 25)
	b.send(t, srv.URL) // the last output goes out too

	files, err := foldstore.Files(folder.store.(*foldstore.Store).Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		t.Fatalf("%d conversation files, want the one carried across the compaction", len(files))
	}
	if aliases, _ := filepath.Glob(filepath.Join(folder.store.(*foldstore.Store).Dir(), "*.alias")); len(aliases) != 1 {
		t.Errorf("%d aliases, want 1", len(aliases))
	}
	contents, err := foldstore.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	recs := contents.Records()
	byID := map[string]string{}
	for code, rec := range recs {
		byID[rec.ID] = code
	}
	missing := 0
	for id, out := range outputs {
		code, ok := byID["r:"+id]
		if !ok {
			missing++
			continue
		}
		rec := recs[code]
		if tx := contents.Texts[rec.ID]; tx.Text != out || !tx.Verified(&rec) {
			t.Errorf("%s (%s): the stored text is not the output", code, id)
		}
	}
	// The outputs after the compaction that never folded stay live; every
	// one before it has a record.
	afterLive := 0
	reqs := fake.Requests()
	lastBody := string(reqs[len(reqs)-1].Body)
	for id := range outputs {
		if _, ok := byID["r:"+id]; !ok && strings.Contains(lastBody, strings.Trim(js(outputs[id]), `"`)) {
			afterLive++
		}
	}
	if missing != afterLive {
		t.Errorf("%d outputs have no record, %d of them still live in the last request: the rest were lost", missing, afterLive)
	}
	if contents.Index == "" {
		t.Fatal("no index recorded")
	}
	// The index: after the summary, in every request after the compaction,
	// with the codes of the outputs from before it.
	first := reqs[before+1]
	var body struct {
		Messages []struct {
			Content json.RawMessage
		}
	}
	json.Unmarshal(first.Body, &body)
	if !strings.Contains(string(body.Messages[0].Content), "# "+indexTitle+" #1 ") {
		t.Fatalf("the first request after the compaction has no index in its summary message: %.300s", body.Messages[0].Content)
	}
	var blocks []struct{ Type, Text string }
	json.Unmarshal(body.Messages[0].Content, &blocks)
	if len(blocks) != 2 || !strings.HasPrefix(blocks[0].Text, string(continuedMarkers[0])) || blocks[1].Text != contents.Index {
		t.Errorf("summary message: want the summary, then the index as its own text block; got %d blocks", len(blocks))
	}
	for code := range recs {
		if recs[code].Seq <= 0 {
			t.Errorf("%s: no event", code)
		}
	}
	withCodes := 0
	for id := range outputs {
		if code, ok := byID["r:"+id]; ok && strings.Contains(contents.Index, code) {
			withCodes++
		}
	}
	if withCodes == 0 {
		t.Error("the index names no code")
	}
	at := bytes.Index(first.Body, []byte(strings.Trim(js(contents.Index), `"`)))
	for _, q := range reqs[before+2:] {
		if bytes.Index(q.Body, []byte(strings.Trim(js(contents.Index), `"`))) != at {
			t.Fatalf("request %d after the compaction does not carry the index where the first did", q.Seq)
		}
	}
	// Fold events after the compaction number on from those before it.
	seqs := map[int]bool{}
	for _, en := range contents.Entries {
		if seqs[en.Seq] && en.Seq > 0 {
			t.Errorf("event %d twice", en.Seq)
		}
		seqs[en.Seq] = true
	}
	st := proxyStatus(t, srv.URL)
	t.Logf("%d outputs, %d records, %d live at the end, %d codes in the index, %d entries; status %+v", len(outputs), len(recs), afterLive, withCodes, len(contents.Entries), st)
}
