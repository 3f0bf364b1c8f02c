package apply

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/contextfold/contextfold/internal/core/rawjson"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// vector is one shared golden case: the TypeScript adapter applies the same
// substitution to the parsed message and must produce Want byte for byte
// (extension/test/wire.test.ts reads this file).
type vector struct {
	Name    string          `json:"name"`
	Message json.RawMessage `json:"message"`
	Part    int             `json:"part"`
	Text    string          `json:"text"`
	Want    string          `json:"want"` // the exact JSON text
}

func TestSharedVectors(t *testing.T) {
	cases := []struct {
		name, msg string
		part      int
		text      string
	}{
		{"tool result, two parts", `{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"details":{"fullOutputPath":"/tmp/x.log","truncation":{"n":1}},"isError":false,"timestamp":1}`, -1, "{#0qq769 FOLDED} bash → 2 lines, ~5 tok · a"},
		{"tool result, escapes and unicode", `{"role":"toolResult","toolCallId":"c2","toolName":"read","content":[{"type":"text","text":"x"}],"isError":true,"timestamp":2}`, -1, "{#yxvg2g FOLDED} read → error, ~9 tok · <&> \"q\" \\ \t tab é😀 \u2028 \x01"},
		{"tool result, lone surrogate in digest", `{"role":"toolResult","toolCallId":"c3","content":[{"type":"text","text":"x"}],"isError":false,"timestamp":3}`, -1, "{#abcdef FOLDED} r → 1 line · bad \xed\xa0\x80 end"},
		{"thinking part loses its signature", `{"role":"assistant","content":[{"type":"thinking","thinking":"long thought","thinkingSignature":"sig=="},{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}}],"api":"anthropic-messages","usage":{"input":1},"stopReason":"toolUse","timestamp":4,"responseId":"r"}`, 0, "{#r5b61e FOLDED} thought · ~3 tok · long thought"},
		{"thinking part, signature first and redacted flag kept", `{"role":"assistant","content":[{"thinkingSignature":"s1","type":"thinking","thinking":"t","redacted":false}],"timestamp":6}`, 0, "{#aaaaaa FOLDED} thought"},
		{"thinking part, signature last", `{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"thinking","thinking":"t","thinkingSignature":"s2"}],"timestamp":7}`, 1, "{#bbbbbb FOLDED} thought"},
		{"text part in the middle", `{"role":"assistant","content":[{"type":"text","text":"one"},{"type":"text","text":"two","textSignature":"s"},{"type":"text","text":"three"}],"timestamp":5}`, 1, "D"},
	}
	var vs []vector
	for _, c := range cases {
		got, err := Rewrite([]byte(c.msg), c.part, c.text)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !rawjson.Valid(got) {
			t.Fatalf("%s: invalid JSON", c.name)
		}
		vs = append(vs, vector{Name: c.name, Message: json.RawMessage(c.msg), Part: c.part, Text: c.text, Want: string(got)})
	}
	out, err := rawjson.Marshal(vs)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "vectors.json")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update)", err)
	}
	if !bytes.Equal(out, want) {
		t.Fatal("shared apply vectors changed; review and run go test -update")
	}
}
