package callwatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// watch feeds chunks to a new Watcher, closes it and returns the calls it
// reported, in order.
func watch(f Format, stream bool, want func(string) bool, chunks [][]byte) []Call {
	var got []Call
	w := New(f, stream, want, func(c Call) { got = append(got, c) })
	for _, c := range chunks {
		if n, err := w.Write(c); n != len(c) || err != nil {
			panic(fmt.Sprintf("Write = %d, %v; want %d, nil", n, err, len(c)))
		}
	}
	w.Close()
	return got
}

// split cuts b at the given offsets (sorted, within b).
func split(b []byte, cuts []int) [][]byte {
	var out [][]byte
	prev := 0
	for _, c := range cuts {
		out = append(out, b[prev:c])
		prev = c
	}
	return append(out, b[prev:])
}

// chunkings returns b whole, in 1-byte chunks (when small enough), cut
// after every CR and LF, and cut at random points.
func chunkings(b []byte, seed uint64) map[string][][]byte {
	out := map[string][][]byte{"whole": {b}}
	if len(b) <= 1<<14 {
		ones := make([]int, 0, len(b))
		for i := 1; i < len(b); i++ {
			ones = append(ones, i)
		}
		out["bytes"] = split(b, ones)
	}
	var ends []int
	for i, c := range b {
		if (c == '\r' || c == '\n') && i+1 < len(b) {
			ends = append(ends, i+1)
		}
	}
	out["line-ends"] = split(b, ends)
	rng := rand.New(rand.NewPCG(seed, 7))
	for k := range 5 {
		var cuts []int
		for i := 1; i < len(b); i++ {
			if rng.IntN(max(len(b)/(k*4+2), 1)) == 0 {
				cuts = append(cuts, i)
			}
		}
		out[fmt.Sprintf("random%d", k)] = split(b, cuts)
	}
	return out
}

// checkAll checks that every chunking of body reports want.
func checkAll(t *testing.T, f Format, stream bool, wantName func(string) bool, body []byte, want []Call) {
	t.Helper()
	for name, chunks := range chunkings(body, uint64(len(body))) {
		got := watch(f, stream, wantName, chunks)
		if !sameCalls(got, want) {
			t.Errorf("%s chunking: got %s\nwant %s", name, show(got), show(want))
			return
		}
	}
}

// checkTruncated checks that a body cut anywhere reports a prefix of what
// the whole body reports: never an unfinished call, never different args.
func checkTruncated(t *testing.T, f Format, stream bool, wantName func(string) bool, body []byte) {
	t.Helper()
	full := watch(f, stream, wantName, [][]byte{body})
	step := max(1, len(body)/200)
	for n := 0; n < len(body); n += step {
		got := watch(f, stream, wantName, [][]byte{body[:n]})
		if len(got) > len(full) || !sameCalls(got, full[:len(got)]) {
			t.Fatalf("cut at %d of %d: got %s\nfull %s", n, len(body), show(got), show(full))
		}
	}
}

func sameCalls(a, b []Call) bool { return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b)) }

func show(cs []Call) string {
	var sb strings.Builder
	for _, c := range cs {
		args := c.Args
		if len(args) > 200 {
			args = args[:200] + fmt.Sprintf("…(%d bytes)", len(c.Args))
		}
		fmt.Fprintf(&sb, "\n  {ID:%q Name:%q Namespace:%q Args:%q}", c.ID, c.Name, c.Namespace, args)
	}
	if sb.Len() == 0 {
		return "none"
	}
	return sb.String()
}

func recallOnly(name string) bool { return name == "recall_folded" }

// gen makes response bodies with fakellm, one request at a time.
type gen struct {
	s    *fakellm.Server
	mu   sync.Mutex
	next fakellm.Reply
}

func newGen(t testing.TB, chunk int) *gen {
	g := &gen{}
	s, err := fakellm.Start(fakellm.ScriptFunc(func(*fakellm.Request) fakellm.Reply { return g.next }),
		fakellm.Options{ChunkBytes: chunk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	g.s = s
	return g
}

// body returns the raw body fakellm answers r with, in format f, and the
// tool calls as it sent them (ids and empty arguments filled in).
func (g *gen) body(t testing.TB, f Format, stream bool, r fakellm.Reply) ([]byte, []fakellm.ToolCall) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next = r
	var url string
	var req map[string]any
	user := []any{map[string]any{"role": "user", "content": "go"}}
	switch f {
	case Messages:
		url = g.s.AnthropicURL() + "/v1/messages"
		req = map[string]any{"model": "claude-test", "max_tokens": 4096, "stream": stream, "messages": user,
			"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024},
			"tools":    []any{map[string]any{"name": "recall_folded", "input_schema": map[string]any{"type": "object"}}}}
	case Responses:
		url = g.s.URL() + "/responses"
		req = map[string]any{"model": "fake-gpt-reasoning", "stream": stream, "store": false, "input": user,
			"reasoning": map[string]any{"effort": "high"}, "include": []string{"reasoning.encrypted_content"},
			"tools": []any{map[string]any{"type": "function", "name": "recall_folded", "parameters": map[string]any{"type": "object"}}}}
	case Chat:
		url = g.s.URL() + "/chat/completions"
		req = map[string]any{"model": "fake-model", "stream": stream, "messages": user,
			"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "recall_folded", "parameters": map[string]any{"type": "object"}}}}}
	}
	b, _ := json.Marshal(req)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%v %s: %v %s", f, url, err, body)
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") != stream {
		t.Fatalf("%v stream=%v: Content-Type %q", f, stream, ct)
	}
	reqs := g.s.Requests()
	return body, reqs[len(reqs)-1].Reply.ToolCalls
}

// expected is what a Watcher should report for calls sent in format f.
func expected(f Format, calls []fakellm.ToolCall, want func(string) bool) []Call {
	var out []Call
	for _, tc := range calls {
		if want != nil && !want(tc.Name) {
			continue
		}
		c := Call{ID: tc.ID, Name: tc.Name, Args: string(tc.Arguments)}
		if f == Responses {
			c.Namespace = tc.Namespace // only Responses carries it on the wire
		}
		out = append(out, c)
	}
	return out
}
