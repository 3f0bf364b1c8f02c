package block

import (
	"slices"
	"strings"
	"testing"
)

func TestDecodeIDsAndKinds(t *testing.T) {
	msgs := []string{
		`{"role":"user","content":"hello","timestamp":1780799122422}`,
		`{"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"ok"},{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls -la"}},{"type":"text","text":""},{"type":"future","x":1}],"responseId":"f2965ed9","timestamp":5}`,
		`{"role":"assistant","content":[{"type":"text","text":"no response id"}],"timestamp":1.7e12}`,
		`{"role":"assistant","content":[{"type":"text","text":"no anchor"}]}`,
		`{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"details":{"fullOutputPath":"/tmp/p.log"},"isError":true,"timestamp":6}`,
		`{"role":"toolResult","toolCallId":"c2","toolName":"read","content":[{"type":"text","text":"see"},{"type":"image","data":"AAAA","mimeType":"image/png"}],"isError":false,"timestamp":7}`,
		`{"role":"toolResult","content":[{"type":"text","text":"no id"}],"timestamp":8}`,
		`{"role":"bashExecution","command":"ls","output":"x","exitCode":0,"cancelled":false,"truncated":false,"timestamp":9}`,
		`{"role":"custom","customType":"note","content":"c","display":true,"timestamp":10}`,
		`{"role":"branchSummary","summary":"b","fromId":null,"timestamp":11}`,
		`{"role":"compactionSummary","summary":"s","tokensBefore":3,"timestamp":12}`,
		`{"role":"system","content":"prompt","timestamp":13}`,
		`{"role":"alien","content":"?","timestamp":14}`,
		`{"role":"user","content":[{"type":"text","text":"same ms"}],"timestamp":1780799122422}`,
		`not json at all`,
	}
	raws := make([][]byte, len(msgs))
	for i, m := range msgs {
		raws[i] = []byte(m)
	}
	tr := Linearize(raws)
	type want struct {
		id   string
		kind Kind
		text string
	}
	wants := []want{
		{"u:1780799122422", User, "hello"},
		{"a:f2965ed9:p0", Thinking, "hmm"},
		{"a:f2965ed9:p1", Text, "ok"},
		{"a:f2965ed9:p2", ToolCall, `bash {"command":"ls -la"}`},
		{"a:t1700000000000:p0", Text, "no response id"},
		{"m3:p0", Text, "no anchor"},
		{"r:c1", ToolResult, "a\nb"},
		{"r:c2", ToolResult, "see"},
		{"m6:r", ToolResult, "no id"},
		{"s:9", Summary, "Ran `ls`\nx"},
		{"s:10", Summary, "c"},
		{"s:11", Summary, "b"},
		{"s:12", Summary, "s"},
		{"m11:sys", System, "prompt"},
		{"m12:x", Other, "?"},
		{"m13:u:1780799122422", User, "same ms"},
		{"m14:x", Other, ""},
	}
	bs := tr.Blocks()
	if len(bs) != len(wants) {
		for _, b := range bs {
			t.Logf("%s %s %q", b.ID, b.Kind, b.Text)
		}
		t.Fatalf("%d blocks, want %d", len(bs), len(wants))
	}
	for i, w := range wants {
		b := bs[i]
		if b.ID != w.id || b.Kind != w.kind || b.Text != w.text {
			t.Errorf("block %d = %s %s %q, want %s %s %q", i, b.ID, b.Kind, b.Text, w.id, w.kind, w.text)
		}
		if b.Order != i {
			t.Errorf("block %d order %d", i, b.Order)
		}
	}
	if r, _ := tr.Lookup("r:c1"); !r.IsError || r.FullOutputPath != "/tmp/p.log" || r.ToolName != "bash" || !r.Foldable() {
		t.Errorf("tool result fields: %+v", r)
	}
	if r, _ := tr.Lookup("r:c2"); !r.Opaque || r.Foldable() {
		t.Error("a result with an image must never fold")
	}
	if bs[0].Turn != 1 || bs[len(bs)-2].Turn != 2 {
		t.Errorf("turns %d %d", bs[0].Turn, bs[len(bs)-2].Turn)
	}
	if tr.Message(14).Err == nil {
		t.Error("malformed message has no error")
	}
	for _, b := range bs {
		durable := Durable(b.ID)
		wantDurable := !strings.HasPrefix(b.ID, "m")
		if durable != wantDurable {
			t.Errorf("Durable(%s) = %v", b.ID, durable)
		}
	}
}

func TestSameInputSameIDsEveryRun(t *testing.T) {
	raw := [][]byte{[]byte(`{"role":"toolResult","toolCallId":"x","content":[],"timestamp":1}`), []byte(`{"role":"toolResult","toolCallId":"x","content":[],"timestamp":2}`)}
	a, b := Linearize(raw), Linearize(raw)
	for i := range a.Blocks() {
		if a.Blocks()[i].ID != b.Blocks()[i].ID {
			t.Fatal("ids differ between runs")
		}
	}
	if a.Blocks()[1].ID != DupID("r:x", "") {
		t.Fatalf("duplicate toolCallId got %s", a.Blocks()[1].ID)
	}
}

// TestRepeatedCallIDs: a local model server that numbers its calls afresh
// in every response repeats call ids; each repeat of a tool result (or a
// thinking part) gets an id anchored on its own content, so it can fold;
// a repeat of the same content, and any other kind, is positional.
func TestRepeatedCallIDs(t *testing.T) {
	msgs := []string{
		`{"role":"assistant","responseId":"r1","content":[{"type":"thinking","thinking":"plan"},{"type":"toolCall","id":"call_1","name":"bash","arguments":{}}],"timestamp":1}`,
		`{"role":"toolResult","toolCallId":"call_1","content":"first","timestamp":2}`,
		`{"role":"assistant","responseId":"r1","content":[{"type":"thinking","thinking":"again"},{"type":"toolCall","id":"call_1","name":"bash","arguments":{}}],"timestamp":3}`,
		`{"role":"toolResult","toolCallId":"call_1","content":"second","timestamp":4}`,
		`{"role":"toolResult","toolCallId":"call_1","content":"second","timestamp":5}`,
		`{"role":"user","content":"u","timestamp":6}`,
		`{"role":"user","content":"u","timestamp":6}`,
	}
	var raws [][]byte
	for _, m := range msgs {
		raws = append(raws, []byte(m))
	}
	var ids []string
	for _, b := range Linearize(raws).Blocks() {
		ids = append(ids, b.ID)
	}
	want := []string{"a:r1:p0", "a:r1:p1", "r:call_1", DupID("a:r1:p0", "again"), "m2:a:r1:p1", DupID("r:call_1", "second"), "m4:" + DupID("r:call_1", "second"), "u:6", "m6:u:6"}
	if !slices.Equal(ids, want) {
		t.Fatalf("ids\n%q\nwant\n%q", ids, want)
	}
	for _, id := range want {
		base, sum, ok := BaseID(id)
		if isDup := strings.Contains(id, "#") && !strings.HasPrefix(id, "m"); ok != isDup || ok && (!strings.HasPrefix(id, base+"#") || len(sum) != 8) {
			t.Errorf("BaseID(%q) = %q, %q, %v", id, base, sum, ok)
		}
	}
	for _, id := range []string{"r:x#e3b0c44", "r:x#E3B0C442", "m1:r:x#e3b0c442", "r:x#e3b0c4420"} {
		if _, _, ok := BaseID(id); ok {
			t.Errorf("BaseID(%q) took it for a DupID", id)
		}
	}
}

func TestTruncateReleasesOwnership(t *testing.T) {
	tr := NewTranscript()
	tr.Append([]byte(`{"role":"user","content":"a","timestamp":1}`))
	tr.Append([]byte(`{"role":"toolResult","toolCallId":"x","content":"b","timestamp":2}`))
	tr.Truncate(1)
	if _, ok := tr.Lookup("r:x"); ok {
		t.Fatal("truncated id still owned")
	}
	m := tr.Append([]byte(`{"role":"toolResult","toolCallId":"x","content":"c","timestamp":3}`))
	_ = m
	if b, ok := tr.Lookup("r:x"); !ok || b.Text != "c" || b.Msg != 1 {
		t.Fatalf("re-appended block: %+v", b)
	}
	if len(tr.Blocks()) != 2 {
		t.Fatalf("%d blocks", len(tr.Blocks()))
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"n","arguments":{"a":1}}],"timestamp":1}`))
	f.Add([]byte(`{"role":"toolResult","toolCallId":"c","content":[{"type":"text","text":"\ud800"}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		tr := NewTranscript()
		tr.Append(raw)
		tr.Append(raw)
		if tr.Len() != 2 {
			t.Fatal("message count")
		}
		seen := map[string]bool{}
		for _, b := range tr.Blocks() {
			if Durable(b.ID) && seen[b.ID] {
				t.Fatalf("durable id %s owned twice", b.ID)
			}
			seen[b.ID] = true
		}
	})
}

// TestTextOf: a content's text is a string's value, or its text parts
// joined by newlines; any other part makes it opaque.
func TestTextOf(t *testing.T) {
	for _, tc := range []struct {
		raw, text string
		opaque    bool
	}{
		{`"plain"`, "plain", false},
		{`"two\nlines \u00e9"`, "two\nlines é", false},
		{`[{"type":"text","text":"one"}]`, "one", false},
		{`[{"type":"text","text":"a\tb"},{"type":"text","text":"c"}]`, "a\tb\nc", false},
		{`[{"type":"text","text":"a"},{"type":"text","text":""},{"type":"text","text":"c"}]`, "a\n\nc", false},
		{`[{"type":"image","data":"x"},{"type":"text","text":"after"}]`, "after", true},
		{`[{"type":"text","text":"before"},{"type":"image","data":"x"}]`, "before", true},
		{`[]`, "", false},
		{`42`, "", false},
	} {
		text, opaque := textOf([]byte(tc.raw))
		if text != tc.text || opaque != tc.opaque {
			t.Errorf("textOf(%s) = %q, %v; want %q, %v", tc.raw, text, opaque, tc.text, tc.opaque)
		}
	}
}
