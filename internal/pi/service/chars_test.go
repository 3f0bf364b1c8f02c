package service

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/tokens"
	"github.com/contextfold/contextfold/internal/pi/protocol"
)

// recallRaw calls recall and reads the answer's text as JavaScript would:
// a lone surrogate stays one (encoding/json would make it U+FFFD).
func recallRaw(t *testing.T, c *protocol.Conn, p RecallParams) (text string, isError bool) {
	t.Helper()
	var raw json.RawMessage
	if err := call(t, c, "recall", p, &raw); err != nil {
		t.Fatal(err)
	}
	ms, err := rawjson.Object(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		switch m.Key {
		case "text":
			if text, err = rawjson.Unquote(m.Value); err != nil {
				t.Fatal(err)
			}
		case "isError":
			isError = string(m.Value) == "true"
		}
	}
	return text, isError
}

// longLine is 30,000 units on one line: a pair across every 7,200-unit page
// boundary, lone surrogates, and the text on either side of them.
func longLine() string {
	var b strings.Builder
	b.WriteString("x")
	units := 1
	for units < 29_990 {
		b.WriteString("😀")
		units += 2
		if units%97 == 0 {
			b.WriteString("\xed\xa0\x80") // a lone high surrogate (WTF-8)
			units++
		}
	}
	for ; units < 30_000; units++ {
		b.WriteString("z")
	}
	return b.String()
}

// TestRecallPagesALongLineByChars: a folded tool result that is one
// 30,000-character line, which whole reads and line ranges clip, comes back
// byte for byte by chars= pages through the recall tool, each page found
// in the note before it. chars= reads the block the sha256 verified, not
// the tool's full-output file.
func TestRecallPagesALongLineByChars(t *testing.T) {
	c, _ := start(t)
	dir := t.TempDir()
	full := filepath.Join(dir, "pi-bash-full.log")
	os.WriteFile(full, []byte("the full output is another text\n"), 0o600)
	long := longLine()
	msgs := messages(30, full)
	msgs[2] = json.RawMessage(`{"role":"toolResult","toolCallId":"c0","toolName":"bash","content":[{"type":"text","text":` +
		rawjson.QuoteString(long) + `}],"details":{"fullOutputPath":` + rawjson.QuoteString(full) + `},"isError":false,"timestamp":11}`)
	file := sessionFile(t, dir, msgs)
	if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: dir, SessionFile: file}, nil); err != nil {
		t.Fatal(err)
	}
	if out := turn(t, c, 0, msgs, 16_000); out.Event == nil {
		t.Fatal("no fold")
	}
	code := digest.ScopedCode("s1", "r:c0")

	text, _ := recallRaw(t, c, RecallParams{Codes: []string{code}})
	if !strings.Contains(text, "sha256 verified") || !strings.Contains(text, "LONG LINE CLIPPED: line 1 is chars 1-30000; read it with chars=1-7200, then on") {
		t.Fatalf("whole read:\n%.300s", text)
	}
	// lines= and grep= read the full output file; chars= wins over both,
	// and reads the block.
	text, _ = recallRaw(t, c, RecallParams{Codes: []string{code}, Lines: "1-1"})
	if !strings.Contains(text, "1: the full output is another text") {
		t.Fatalf("lines=1-1:\n%.400s", text)
	}

	if tokens.Units(long) != 30_000 || !strings.Contains(long, "\xed\xa0\x80") {
		t.Fatal("the long line is not what the test needs")
	}
	var got strings.Builder
	next, pages, split := "1-7200", 0, 0
	for next != "" {
		text, isErr := recallRaw(t, c, RecallParams{Codes: []string{code}, Chars: next, Lines: "1-1", Grep: "x"})
		header, body, ok := strings.Cut(text, " ===\n")
		if isErr || !ok || !strings.Contains(header, "✓ "+code+" — bash · session file · sha256 verified · chars ") {
			t.Fatalf("chars=%s:\n%.300s", next, text)
		}
		if u := tokens.Units(body); u > 7200 || u == 0 {
			t.Fatalf("chars=%s: a page of %d units", next, u)
		}
		got.WriteString(body)
		first := strings.SplitN(header, "\n", 2)[0]
		if strings.Contains(first, "a surrogate pair is never split") {
			split++
		}
		_, next, _ = strings.Cut(first, " — next: chars=")
		if pages++; pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if got.String() != long {
		t.Fatalf("%d pages give %d bytes, want the %d folded bytes", pages, got.Len(), len(long))
	}
	if pages != 5 || split == 0 {
		t.Errorf("%d pages, %d ending before a pair: want 5, and a pair on a boundary", pages, split)
	}

	for _, spec := range []string{"abc", "5-2", "40"} {
		text, isErr := recallRaw(t, c, RecallParams{Codes: []string{code}, Chars: spec})
		if !isErr || !strings.Contains(text, `malformed chars="`+spec+`"`) || strings.Contains(text, "✓") {
			t.Fatalf("chars=%s: error %v\n%s", spec, isErr, text)
		}
	}
}
