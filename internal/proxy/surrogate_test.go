package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/proxy/foldstore"
	"github.com/contextfold/contextfold/internal/proxy/mcp"
)

// lone puts lone surrogates into every tool output of a body: a high one
// (half an emoji, as a JavaScript client leaves when it truncates), a low
// one, and a reversed pair. want is the output text as the client meant it
// (WTF-8, as rawjson reads such an escape).
var lone = []struct{ in, escaped, want string }{
	{"compiled module_7.o", `compiled module_7.o \ud83d`, "compiled module_7.o \xed\xa0\xbd"},
	{"compiled module_11.o", `compiled module_11.o \udc00`, "compiled module_11.o \xed\xb0\x80"},
	{"compiled module_13.o", `compiled module_13.o \udc00\ud800`, "compiled module_13.o \xed\xb0\x80\xed\xa0\x80"},
}

func withLone(s string, escaped bool) string {
	for _, l := range lone {
		to := l.want
		if escaped {
			to = l.escaped
		}
		s = strings.ReplaceAll(s, l.in, to)
	}
	return s
}

// TestLoneSurrogatesRecall: in each wire format, tool outputs holding lone
// surrogates fold, and every folded one reads back over MCP as the bytes
// the client sent, sha256-verified. Before, the store kept U+FFFD in their
// place while the sha256 was taken over the original, so every recall
// refused them as tampered.
func TestLoneSurrogatesRecall(t *testing.T) {
	for _, cl := range clients {
		t.Run(string(cl.api), func(t *testing.T) {
			up := newUpstream(t, "up", nil)
			dir := t.TempDir()
			base, stop := foldingFront(t, up, dir, 40_000)
			defer stop()
			for n := 1; n <= 30; n++ {
				send(t, base, cl.path, withLone(cl.body(n), true))
			}
			reqs := up.requests()
			last := reqs[len(reqs)-1].body
			if !strings.Contains(string(last), `\ud83d`) {
				t.Fatal("the lone surrogates did not reach the upstream as sent")
			}
			files, _ := foldstore.Files(dir)
			tools := mcp.Tools(dir)
			codes := 0
			for i, m := range codeRE.FindAllStringSubmatch(string(last), -1) {
				code := m[1]
				var pages []string
				k := 0
				for j, lines := range []string{"1-60", "61-120"} {
					args := `{"codes":["` + code + `"],"lines":"` + lines + `"}`
					id := fmt.Sprintf("toolu_%d_%d", i, j)
					if err := foldstore.NoteCall(files[0], foldstore.Call{ID: id, Name: "mcp__contextfold__recall_folded", Args: args, At: time.Now()}); err != nil {
						t.Fatal(err)
					}
					text, isErr := tools[0].Call(context.Background(), json.RawMessage(args), json.RawMessage(`{"claudecode/toolUseId":"`+id+`"}`))
					if isErr || !strings.Contains(text, "sha256 verified") {
						t.Fatalf("recall %s: %.300s", code, text)
					}
					if j == 0 {
						k = turnOf(t, text)
					}
					pages = append(pages, numberedBody(text))
				}
				want := strings.TrimSuffix(withLone(output(k), false), "\n")
				if got := strings.Join(pages, "\n"); got != want {
					t.Fatalf("recall %s (turn %d): %d bytes, want %d; first difference at %d", code, k, len(got), len(want), firstDiff(got, want))
				}
				codes++
			}
			if codes < 10 {
				t.Fatalf("only %d codes folded", codes)
			}
		})
	}
}

// turnOf reads the turn an output of output() belongs to.
func turnOf(t *testing.T, text string) int {
	t.Helper()
	i := strings.Index(text, "INFO: turn ")
	if i < 0 {
		t.Fatalf("no turn in %q", text)
	}
	k, err := strconv.Atoi(strings.Fields(text[i+len("INFO: turn "):])[0])
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// numberedBody joins the "<n>: <line>" lines of a lines= recall.
func numberedBody(text string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if i := strings.Index(l, ": "); i > 0 {
			if _, err := strconv.Atoi(l[:i]); err == nil {
				out = append(out, l[i+2:])
			}
		}
	}
	return strings.Join(out, "\n")
}

func firstDiff(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}
