package seedindex

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/block"
)

func TestExtract(t *testing.T) {
	text := "$ go test ./...\n--- FAIL: TestParse (0.00s)\n    parse_test.go:42: got 7, want 9\nFAIL\tgithub.com/acme/widget/internal/parse\t0.012s\nsee /srv/app/main.go and ./cmd/tool/run.sh; version 1.22.3 commit 9f8e7d6c5b4a\nfunc parseHeaderV2(maxLen int) bool\n"
	f := Extract(text)
	wantErrors := []string{"--- FAIL: TestParse (0.00s)", "FAIL\tgithub.com/acme/widget/internal/parse\t0.012s"}
	if !reflect.DeepEqual(f.Errors, wantErrors) {
		t.Errorf("errors %q", f.Errors)
	}
	for _, want := range []string{"parse_test.go", "github.com/acme/widget/internal/parse", "/srv/app/main.go", "./cmd/tool/run.sh"} {
		if !contains(f.Files, want) {
			t.Errorf("files %q lack %q", f.Files, want)
		}
	}
	for _, want := range []string{"TestParse", "1.22.3", "parseHeaderV2", "maxLen"} {
		if !contains(f.Identifiers, want) {
			t.Errorf("identifiers %q lack %q", f.Identifiers, want)
		}
	}
	for _, not := range []string{"func", "error", "version", "and", "FAIL", "9f8e7d6c5b4a", "012s"} {
		if contains(f.Identifiers, not) {
			t.Errorf("identifiers include %q", not)
		}
	}
}

// TestIdentifiersFromNoisyLogs: in output full of numbers — timestamps,
// PIDs, durations, byte counts, hashes, UUIDs, addresses, a JWT — only names
// and codes are identifiers, each verbatim from the text.
func TestIdentifiersFromNoisyLogs(t *testing.T) {
	text := `2026-05-13T10:22:31.123Z INFO  [worker-3] pid=48213 request_id=9f8e7d6c5b4a3f21 took 1532ms bytes=1048576
2026-05-13T10:22:31.456Z ERROR [worker-3] pid=48213 handleUpload failed: context deadline exceeded after 30.002s (sent 524288 of 1048576 bytes)
trace 550e8400-e29b-41d4-a716-446655440000 peer 192.168.10.24:8443 heap 0x7ffd5e8c rss 734003200 gc 12.5ms
Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0
commit 4bf92f3577b34da6a3ce929d0e0e4736 at 1715595751 (deadbeef, DEADBEEF1, c0ffee42)
go version 1.22.3 linux/amd64; node v22.19.0
error[E0308]: mismatched types in parse_header (TS2345 in src/index.ts)
MAX_RETRIES=5 exceeded in UploadWorker.retryWithBackoff; sha256 mismatch
Hello World: ERROR FAIL OK PASS 100% done in 3m2s
`
	f := Extract(text)
	want := []string{"request_id", "handleUpload", "1.22.3", "amd64", "v22.19.0", "E0308", "parse_header", "TS2345", "MAX_RETRIES", "UploadWorker", "retryWithBackoff", "sha256"}
	if !reflect.DeepEqual(f.Identifiers, want) {
		t.Errorf("identifiers\n got %q\nwant %q", f.Identifiers, want)
	}
	for _, id := range f.Identifiers {
		if !strings.Contains(text, id) {
			t.Errorf("%q is not in the text", id)
		}
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	tr := block.Linearize([][]byte{
		[]byte(`{"role":"user","content":"Fix the parser\nthen rerun","timestamp":1}`),
		[]byte(`{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"go test ./internal/parse\necho done"}}],"responseId":"r1","timestamp":2}`),
		[]byte(`{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":"--- FAIL: TestParse\nparse.go:12: boom","isError":true,"timestamp":3}`),
		[]byte(`{"role":"assistant","content":[{"type":"toolCall","id":"c2","name":"read","arguments":{"path":"internal/parse/parse.go"}}],"responseId":"r2","timestamp":4}`),
		[]byte(`{"role":"toolResult","toolCallId":"c2","toolName":"read","content":"package parse\nfunc ParseHeader() {}","isError":false,"timestamp":5}`),
	})
	build := func() []byte {
		var in Input
		in.Seq, in.Trigger, in.Usage = 3, "threshold", Usage{Tokens: 100, Window: 1000, Fraction: 0.1}
		in.Calls = map[string]*block.Block{}
		bs := tr.Blocks()
		for i := range bs {
			b := &bs[i]
			switch b.Kind {
			case block.ToolCall:
				in.Calls[b.CallID] = b
			case block.User:
				in.Users = append(in.Users, b)
			case block.ToolResult:
				in.Masked = append(in.Masked, Masked{Block: b, Facts: Extract(b.Text), Span: Span{ID: b.ID, Code: "x"}})
			}
		}
		out, _ := json.Marshal(Build(in))
		return out
	}
	a, b := build(), build()
	if string(a) != string(b) {
		t.Fatal("same input, different records")
	}
	var r Record
	json.Unmarshal(a, &r)
	if !reflect.DeepEqual(r.Commands, []string{"go test ./internal/parse"}) {
		t.Errorf("commands %q", r.Commands)
	}
	if !contains(r.Files, "internal/parse/parse.go") || !contains(r.Files, "./internal/parse") || !contains(r.Files, "parse.go") {
		t.Errorf("files %q", r.Files)
	}
	if !reflect.DeepEqual(r.Errors, []string{"--- FAIL: TestParse"}) {
		t.Errorf("errors %q", r.Errors)
	}
	if len(r.UserMessages) != 1 || r.UserMessages[0].FirstLine != "Fix the parser" {
		t.Errorf("user lines %+v", r.UserMessages)
	}
	if len(r.Spans) != 2 || r.Kind != "fold-index" || r.V != 1 {
		t.Errorf("record %+v", r)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add("see ./a/b.go 1.2.3 FAIL x\nERROR y")
	f.Fuzz(func(t *testing.T, s string) {
		x := Extract(s)
		if len(x.Files) > MaxFiles || len(x.Errors) > MaxErrors || len(x.Identifiers) > MaxIdentifiers {
			t.Fatal("caps exceeded")
		}
	})
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
