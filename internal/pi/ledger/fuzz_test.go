package ledger

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/registry"
)

// FuzzParse checks, for any input: Parse fails only with ErrNotSession;
// entries come in file order (several from one line when they are glued);
// every entry's Raw is the input's bytes at its Offset; every durable block
// in it is located by its own hash; and reading the input in two steps,
// cut anywhere, gives the same ledger as reading it at once.
func FuzzParse(f *testing.F) {
	// Seeds from the real files, without their long lines (the system
	// prompt, the 10 KB bash result): small inputs mutate faster.
	for _, name := range []string{"session-basic.jsonl", "session-truncated-bash-and-context-edit.jsonl"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		var seed []byte
		for _, line := range bytes.SplitAfter(data, []byte("\n")) {
			if len(line) < 800 {
				seed = append(seed, line...)
			}
		}
		f.Add(seed, uint16(len(seed)/2))
	}
	f.Add([]byte(hdr+`{"type":"message","id":"a","message":{"role":"toolResult","toolCallId":"c","content":"x"}}`+"\n"+
		`{"type":"context_edit","id":"b","targetId":"a","replacement":{"content":"y"}}`), uint16(100))
	f.Add([]byte(`{"type":"session"}x`+"\n"+`{"type":"session"}`+"\n"), uint16(18))
	f.Add([]byte("\n{\"type\":\"session\"}\r\n[1]\n{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"\\ud800\",\"timestamp\":1}}"), uint16(7))
	// A torn entry (a full disk) with the next one glued on.
	f.Add([]byte(hdr+`{"type":"message","id":"a","mess`+`{"type":"message","id":"b","message":{"role":"toolResult","toolCallId":"c","content":"x"}}`+"\n"), uint16(120))
	f.Fuzz(body)
}

func body(t *testing.T, data []byte, cut uint16) {
	l, err := Parse(data)
	if err != nil {
		if !errors.Is(err, ErrNotSession) {
			t.Fatalf("Parse error %v", err)
		}
	} else {
		check(t, l, data)
	}

	k := int(cut) % (len(data) + 1)
	l2, err2 := Parse(data[:k])
	if err2 != nil {
		return
	}
	err2 = l2.Append(data[l2.Offset():])
	if (err2 == nil) != (err == nil) {
		t.Fatalf("cut %d: Append error %v, Parse error %v", k, err2, err)
	}
	if err == nil {
		if a, b := snapshot(l2), snapshot(l); a != b {
			t.Fatalf("cut %d:\n%s\nwant\n%s", k, a, b)
		}
	}
}

func check(t *testing.T, l *Ledger, data []byte) {
	off := l.Offset()
	if off > int64(len(data)) || off > 0 && data[off-1] != '\n' {
		t.Fatalf("offset %d", off)
	}
	line, prev := 0, int64(-1)
	located := 0
	for _, e := range l.Entries() {
		// Entries glued on one line share it, in order.
		if e.Line < line || e.Offset <= prev || !bytes.Equal(data[e.Offset:e.Offset+int64(len(e.Raw))], e.Raw) {
			t.Fatalf("entry at line %d offset %d", e.Line, e.Offset)
		}
		line, prev = e.Line, e.Offset
		if e.Type != "message" || located > 20 {
			continue
		}
		for _, b := range block.Decode(e.Message, 0).Blocks {
			if !block.Durable(b.ID) {
				continue
			}
			located++
			f, err := l.Locate(b.ID, registry.Sum(b.Text))
			if err != nil || !f.Verified || f.Text != b.Text {
				t.Fatalf("Locate(%q): %v", b.ID, err)
			}
		}
	}
	l.Branch("")
	l.Leaf()
}
