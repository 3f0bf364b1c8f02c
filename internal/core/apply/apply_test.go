package apply

import (
	"bytes"
	"testing"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/rawjson"
)

func TestPlanGates(t *testing.T) {
	tr := block.Linearize([][]byte{
		[]byte(`{"role":"user","content":"u","timestamp":1}`),
		[]byte(`{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"x"},{"type":"toolCall","id":"c","name":"n","arguments":{}}],"responseId":"r","timestamp":2}`),
		[]byte(`{"role":"toolResult","toolCallId":"c","content":[{"type":"text","text":"out"}],"timestamp":3}`),
		[]byte(`{"role":"toolResult","toolCallId":"i","content":[{"type":"image","data":"A","mimeType":"image/png"}],"timestamp":4}`),
		[]byte(`{"role":"toolResult","toolCallId":"c","content":[{"type":"text","text":"dup"}],"timestamp":5}`),
	})
	ops := map[string]string{"u:1": "U", "a:r:p0": "T", "a:r:p1": "X", "a:r:p2": "C", "r:c": "R", "r:i": "I", "m4:r:c": "D", "r:none": "N", "r:empty": ""}
	got := Plan(tr, ops)
	want := []Subst{{Msg: 1, Part: 0, Text: "T"}, {Msg: 2, Part: -1, Text: "R"}}
	if len(got) != len(want) {
		t.Fatalf("plan %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("plan %+v, want %+v", got, want)
		}
	}
	out, errs := Transcript(tr, ops)
	if len(errs) != 0 || len(out) != 5 {
		t.Fatal(errs)
	}
	if !bytes.Equal(out[0], tr.Message(0).Raw) || !bytes.Equal(out[3], tr.Message(3).Raw) || !bytes.Equal(out[4], tr.Message(4).Raw) {
		t.Fatal("an unfoldable message changed")
	}
}

func TestRewriteAddsMissingContent(t *testing.T) {
	got, err := Rewrite([]byte(`{"role":"toolResult","toolCallId":"c"}`), -1, "D")
	if err != nil || string(got) != `{"role":"toolResult","toolCallId":"c","content":[{"type":"text","text":"D"}]}` {
		t.Fatalf("%s %v", got, err)
	}
	got, err = Rewrite([]byte(`{}`), -1, "D")
	if err != nil || string(got) != `{"content":[{"type":"text","text":"D"}]}` {
		t.Fatalf("%s %v", got, err)
	}
}

// FuzzRewrite: a rewrite yields valid JSON with every other member's bytes
// unchanged, or an error and no change.
func FuzzRewrite(f *testing.F) {
	f.Add([]byte(`{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"thinking","thinking":"b"}]}`), 1, "new")
	f.Add([]byte(`{"role":"toolResult","content":[],"x":{"y":[1,2]}}`), -1, "\xed\xa0\x80")
	f.Fuzz(func(t *testing.T, raw []byte, part int, text string) {
		part = part%4 - 1
		out, err := Rewrite(raw, part, text)
		if err != nil {
			return
		}
		if !rawjson.Valid(out) {
			t.Fatalf("invalid JSON from %q", raw)
		}
		a, _ := rawjson.Object(raw)
		b, err := rawjson.Object(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range a {
			if m.Key == "content" {
				continue
			}
			v, ok := rawjson.Get(b, m.Key)
			if w, _ := rawjson.Get(a, m.Key); !ok || !bytes.Equal(v, w) {
				t.Fatalf("member %q changed", m.Key)
			}
		}
	})
}

func TestUnsign(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"type":"thinking","thinking":"t","thinkingSignature":"s"}`, `{"type":"thinking","thinking":"t"}`},
		{`{"thinkingSignature":"s","type":"thinking"}`, `{"type":"thinking"}`},
		{`{ "thinkingSignature" : "s" , "type":"thinking" }`, `{ "type":"thinking" }`},
		{`{"type":"thinking" , "thinkingSignature" : {"a":[1,"}"]} }`, `{"type":"thinking" }`},
		{`{"thinkingSignature":"a","thinkingSignature":"b","type":"thinking"}`, `{"type":"thinking"}`},
		{`{"thinkingSignature":"s"}`, `{}`},
		{`{"type":"thinking"}`, `{"type":"thinking"}`},
	}
	for _, c := range cases {
		got, err := unsign([]byte(c.in))
		if err != nil || string(got) != c.want || !rawjson.Valid(got) {
			t.Errorf("unsign(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
}
