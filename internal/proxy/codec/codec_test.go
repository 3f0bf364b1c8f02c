package codec

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/core/apply"
	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/rawjson"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// samples are request bodies the real clients sent to a fake model (see
// testdata/clients; the *-mcp ones are pretty-printed, long strings cut).
var samples = []struct {
	file string
	api  API
}{
	{"claude-basic.json", Messages},
	{"claude-mcp.json", Messages},
	{"codex-basic.json", Responses},
	{"codex-mcp.json", Responses},
	{"opencode-basic.json", Chat},
	{"opencode-mcp.json", Chat},
}

func readSample(t testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", "clients", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// view is the engine's reading of a decoded request: one line per block.
func view(r *Request) string {
	tr := block.NewTranscript()
	for _, m := range r.Messages {
		tr.Append(m)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "api %s model %q continued %v messages %d\n", r.API, r.Model, r.Continued, len(r.Messages))
	for _, bl := range tr.Blocks() {
		text := bl.Text
		if len(text) > 60 {
			text = text[:60] + "…"
		}
		_, replaceable := r.span(bl.Msg, bl.Part)
		fmt.Fprintf(&b, "m%d %s %s foldable=%v durable=%v replaceable=%v tool=%q %q\n",
			bl.Msg, bl.ID, bl.Kind, bl.Foldable(), block.Durable(bl.ID), replaceable, bl.ToolName, text)
	}
	return b.String()
}

// TestDecodeClientSamples: the engine's view of each real client's request,
// against a golden file: which blocks there are, which fold, their ids.
func TestDecodeClientSamples(t *testing.T) {
	for _, s := range samples {
		t.Run(s.file, func(t *testing.T) {
			r, err := Decode(s.api, readSample(t, s.file))
			if err != nil {
				t.Fatal(err)
			}
			got := view(r)
			path := filepath.Join("testdata", "golden", strings.TrimSuffix(s.file, ".json")+".txt")
			if *update {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from the golden file; run go test -update and review the diff\n%s", path, got)
			}
			// Every tool output of the samples is plain text but the MCP
			// tool search's tool_reference (Claude Code): the rest fold.
			for i, m := range r.Messages {
				b := block.Decode(m, i)
				if b.Role == "toolResult" && b.Blocks[0].Foldable() != (r.spans[i][0] >= 0) {
					t.Errorf("m%d: foldable %v but replaceable %v", i, b.Blocks[0].Foldable(), r.spans[i][0] >= 0)
				}
			}
		})
	}
}

// foldAll substitutes a digest naming its message into every replaceable
// tool result.
func foldAll(t testing.TB, r *Request) ([]byte, []folded) {
	var subs []apply.Subst
	var want []folded
	for i := range r.spans {
		for part := -1; part < len(r.parts[i]); part++ {
			sp, ok := r.span(i, part)
			if !ok {
				continue
			}
			d := fmt.Sprintf("[folded m%d p%d] \"quoted\" é \u2028 </tag>", i, part)
			subs = append(subs, apply.Subst{Msg: i, Part: part, Text: d})
			want = append(want, folded{i, part, d, sp})
		}
	}
	out, err := r.Apply(subs)
	if err != nil {
		t.Fatal(err)
	}
	return out, want
}

// folded is one substitution foldAll made.
type folded struct {
	msg, part int
	digest    string
	span      [2]int
}

// checkFolded: the folded body decodes to as many messages, each folded
// value reads as its digest (a thinking block as a text part), and every
// other message is the same.
func checkFolded(t testing.TB, api API, r *Request, out []byte, want []folded) {
	t.Helper()
	r2, err := Decode(api, out)
	if err != nil {
		t.Fatalf("folded body does not decode: %v", err)
	}
	if len(r2.Messages) != len(r.Messages) {
		t.Fatalf("%d messages after folding, %d before", len(r2.Messages), len(r.Messages))
	}
	changed := map[int]bool{}
	for _, w := range want {
		changed[w.msg] = true
		m := block.Decode(r2.Messages[w.msg], w.msg)
		got, kind := "", block.Other
		for _, b := range m.Blocks {
			if b.Part == w.part || w.part < 0 {
				got, kind = b.Text, b.Kind
				break
			}
		}
		if got != w.digest || w.part >= 0 && kind != block.Text {
			t.Fatalf("m%d p%d reads %s %q, want the digest", w.msg, w.part, kind, got)
		}
	}
	for i := range r.Messages {
		if !changed[i] && !bytes.Equal(r.Messages[i], r2.Messages[i]) {
			t.Fatalf("m%d changed:\n%s\n%s", i, r.Messages[i], r2.Messages[i])
		}
	}
}

// TestApplyChangesOnlyOutputs: folding every tool result leaves a valid
// body whose every other message reads the same, and whose bytes outside
// the outputs are the original's.
func TestApplyChangesOnlyOutputs(t *testing.T) {
	for _, s := range samples {
		t.Run(s.file, func(t *testing.T) {
			body := readSample(t, s.file)
			r, err := Decode(s.api, body)
			if err != nil {
				t.Fatal(err)
			}
			out, want := foldAll(t, r)
			if len(want) == 0 {
				t.Fatal("no tool result to fold in a sample with tool results")
			}
			if !rawjson.Valid(out) {
				t.Fatal("folded body is not JSON")
			}
			checkFolded(t, s.api, r, out, want)
			// Outside the spans, byte for byte.
			at, at2 := 0, 0
			for _, w := range want {
				n := w.span[0] - at
				if !bytes.Equal(body[at:w.span[0]], out[at2:at2+n]) {
					t.Fatalf("bytes before m%d's output differ", w.msg)
				}
				at2 += n + len(EditValue(w.part, w.digest))
				at = w.span[1]
			}
			if !bytes.Equal(body[at:], out[at2:]) {
				t.Fatal("bytes after the last output differ")
			}
		})
	}
}

// TestOpaqueOutputs: outputs that a string would lose something of never
// fold; plain ones do.
var opaqueCases = []struct {
	name string
	api  API
	body string
	fold bool
}{
	{"anthropic string", Messages, `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"out"}]}]}`, true},
	{"anthropic text blocks", Messages, `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}]}`, true},
	{"anthropic image", Messages, `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"image","source":{}}]}]}]}`, false},
	{"anthropic tool_reference", Messages, `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"tool_reference","tool_name":"x"}]}]}]}`, false},
	{"anthropic inner cache_control", Messages, `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]}]}]}`, false},
	{"anthropic duplicate content", Messages, `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a","content":"b"}]}]}`, false},
	{"anthropic no content", Messages, `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"}]}]}`, false},
	{"anthropic no id", Messages, `{"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, false},
	{"responses string", Responses, `{"input":[{"type":"function_call_output","call_id":"c1","output":"out"}]}`, true},
	{"responses input_text", Responses, `{"input":[{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"a"}]}]}`, true},
	{"responses image", Responses, `{"input":[{"type":"function_call_output","call_id":"c1","output":[{"type":"input_image","image_url":"data:"}]}]}`, false},
	{"responses custom", Responses, `{"input":[{"type":"custom_tool_call_output","call_id":"c1","output":"patched"}]}`, true},
	{"chat string", Chat, `{"messages":[{"role":"tool","tool_call_id":"c1","content":"out"}]}`, true},
	{"chat parts", Chat, `{"messages":[{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"out"}]}]}`, true},
	{"chat image part", Chat, `{"messages":[{"role":"tool","tool_call_id":"c1","content":[{"type":"image_url","image_url":{}}]}]}`, false},
}

func TestOpaqueOutputs(t *testing.T) {
	for _, c := range opaqueCases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Decode(c.api, []byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Messages) != 1 {
				t.Fatalf("%d messages", len(r.Messages))
			}
			b := block.Decode(r.Messages[0], 0).Blocks[0]
			if b.Kind != block.ToolResult || b.Foldable() != c.fold || (r.spans[0][0] >= 0) != c.fold {
				t.Fatalf("kind %v foldable %v replaceable %v, want fold %v", b.Kind, b.Foldable(), r.spans[0][0] >= 0, c.fold)
			}
			_, err = r.Apply([]apply.Subst{{Msg: 0, Part: -1, Text: "d"}})
			if (err == nil) != c.fold {
				t.Fatalf("Apply: %v, want ok=%v", err, c.fold)
			}
		})
	}
}

// TestToolNamesAndOrder: results take their tool's name from the call,
// Anthropic tool_result blocks come before the rest of their message, and
// consecutive Responses model items form one assistant message.
func TestToolNamesAndOrder(t *testing.T) {
	r, err := Decode(Messages, []byte(`{"messages":[
		{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a.go"},{"type":"text","text":"go on"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := view(r)
	// Signed thinking is anchored to the message's first tool_use, so it
	// may fold (into a text block); text after tool results is a note
	// within the cycle, not a user turn.
	for _, want := range []string{`m0 a:t1:p0 thinking foldable=true durable=true replaceable=true`, `m0 a:t1:p1 tool_call foldable=false durable=true replaceable=false tool="Bash" "Bash {\"command\":\"ls\"}"`, `m1 r:t1 tool_result foldable=true durable=true replaceable=true tool="Bash" "a.go"`, `m2 m2:s summary foldable=false durable=false replaceable=false tool="" "go on"`} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	r, err = Decode(Responses, []byte(`{"previous_response_id":"resp_1","input":[
		{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"xx"},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]},
		{"type":"function_call","call_id":"c1","name":"exec_command","arguments":"{\"cmd\":\"ls\"}"},
		{"type":"function_call_output","call_id":"c1","output":"a.go"},
		{"role":"user","content":"next"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got = view(r)
	if !r.Continued || len(r.Messages) != 3 {
		t.Fatalf("continued %v, %d messages:\n%s", r.Continued, len(r.Messages), got)
	}
	if !strings.Contains(got, `m1 r:c1 tool_result foldable=true durable=true replaceable=true tool="exec_command" "a.go"`) {
		t.Errorf("result:\n%s", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, c := range []struct {
		api  API
		body string
	}{
		{Messages, `[]`}, {Messages, `{}`}, {Messages, `{"messages":{}}`}, {Messages, `{"messages":[],"messages":[]}`},
		{Responses, `{"input":1}`}, {Chat, `not json`}, {API("x"), `{"messages":[{}]}`},
	} {
		if _, err := Decode(c.api, []byte(c.body)); err == nil {
			t.Errorf("%s %s: no error", c.api, c.body)
		}
	}
	r, err := Decode(Responses, []byte(`{"input":"just text"}`))
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("string input: %v %d", err, len(r.Messages))
	}
	r, _ = Decode(Chat, []byte(`{"messages":[{"role":"tool","tool_call_id":"c","content":"x"}]}`))
	for _, s := range [][]apply.Subst{{{Msg: 1, Part: -1}}, {{Msg: 0, Part: 0}}, {{Msg: 0, Part: -1}, {Msg: 0, Part: -1}}} {
		if _, err := r.Apply(s); err == nil {
			t.Errorf("Apply(%v): no error", s)
		}
	}
}

// FuzzDecodeApply: any body decodes without panicking; folding every
// replaceable output of a valid body leaves valid JSON with the same
// messages, the folded ones reading as their digests.
func FuzzDecodeApply(f *testing.F) {
	// Small seeds: with the 20-60 KB samples the fuzzer barely mutates.
	for i, c := range opaqueCases {
		f.Add(uint8(map[API]int{Messages: 0, Responses: 1, Chat: 2}[c.api]+3*i), []byte(c.body))
	}
	f.Add(uint8(0), []byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x\ud800"}]}]}`))
	f.Add(uint8(1), []byte(`{"input":[{"type":"function_call_output","call_id":"c","output":"\u0000"}]}`))
	f.Add(uint8(2), []byte(`{"messages":[{"role":"tool","tool_call_id":"c","content":"é"}]}`))
	f.Add(uint8(0), []byte(`{"model":"m","messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"a","signature":"s"},{"type":"redacted_thinking","data":"d"},{"type":"tool_use","id":"t1","name":"x","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"o"},{"type":"text","text":"n"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"b","signature":"s2"},{"type":"text","text":"done"}]}]}`))
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		api := []API{Messages, Responses, Chat}[which%3]
		r, err := Decode(api, body)
		if err != nil {
			return
		}
		out, want := foldAll(t, r)
		if !rawjson.Valid(body) {
			return
		}
		if !rawjson.Valid(out) {
			t.Fatalf("folded body is not JSON: %q", out)
		}
		checkFolded(t, api, r, out, want)
	})
}

// sameDecoding fails t when a and b differ in anything the proxy uses.
func sameDecoding(t testing.TB, a, b *Request) {
	t.Helper()
	if a.Model != b.Model || a.built != b.built || a.Tools != b.Tools || a.Continued != b.Continued || a.DropBlock != b.DropBlock || a.CacheKey != b.CacheKey {
		t.Fatalf("headers differ: model %q/%q built %q/%q tools %v/%v continued %v/%v drop_block %v/%v cache key %q/%q",
			a.Model, b.Model, a.built, b.built, a.Tools, b.Tools, a.Continued, b.Continued, a.DropBlock, b.DropBlock, a.CacheKey, b.CacheKey)
	}
	if len(a.Messages) != len(b.Messages) {
		t.Fatalf("%d messages vs %d", len(a.Messages), len(b.Messages))
	}
	if !slices.Equal(a.bps, b.bps) {
		t.Fatalf("breakpoints %v vs %v", a.bps, b.bps)
	}
	for i := range a.Messages {
		if !bytes.Equal(a.Messages[i], b.Messages[i]) {
			t.Fatalf("m%d differs:\n%s\n%s", i, a.Messages[i], b.Messages[i])
		}
		for part := -1; part < max(len(a.parts[i]), len(b.parts[i])); part++ {
			sa, oka := a.span(i, part)
			sb, okb := b.span(i, part)
			if oka != okb || oka && sa != sb {
				t.Fatalf("m%d p%d: span %v %v vs %v %v", i, part, sa, oka, sb, okb)
			}
		}
	}
}

// growing returns the body of a Messages conversation after n tool turns,
// with its model named after the conversation when late.
func growing(n int, model string, late bool) []byte {
	var b strings.Builder
	if !late {
		fmt.Fprintf(&b, `{"model":%q,`, model)
	} else {
		b.WriteString("{")
	}
	b.WriteString(`"messages":[{"role":"user","content":"go"}`)
	for k := 1; k <= n; k++ {
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"thinking","thinking":"plan %d","signature":"sig%d"},{"type":"tool_use","id":"t%d","name":"tool%d","input":{"command":"make %d"}}]}`, k, k, k, k, k)
		fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"out %d"}`, k, k)
		if k == n {
			b.WriteString(`,{"type":"text","text":"note","cache_control":{"type":"ephemeral"}}`)
		}
		b.WriteString("]}")
	}
	b.WriteString(`],"tools":[{"name":"Bash"}]`)
	if late {
		fmt.Fprintf(&b, `,"model":%q`, model)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// TestDecodeAfterIsDecode: decoding a request against the previous one
// gives exactly what decoding it alone gives, as the conversation grows,
// when the newest message changes shape, and when the model changes (named
// before or after the conversation). Each tool result carries the name of
// its call, found among the calls of every earlier request.
func TestDecodeAfterIsDecode(t *testing.T) {
	for _, late := range []bool{false, true} {
		var prev *Request
		// More turns than a request's tool names chain over the earlier
		// ones' (maxNamesDepth) on each model.
		for n := 1; n <= 24; n++ {
			model := "claude-a"
			if n > 12 {
				model = "claude-b"
			}
			after := decodesAsAlone(t, Messages, growing(n, model, late), prev)
			if !bytes.Contains(after.Messages[1], []byte(`"model":"`+model+`"`)) {
				t.Fatalf("turn %d: assistant message built for another model: %s", n, after.Messages[1])
			}
			prev = after
		}
	}
}

// FuzzDecodeAfter: whatever the previous request was, decoding against it
// is decoding alone.
func FuzzDecodeAfter(f *testing.F) {
	f.Add(uint8(0), growing(2, "m", false), growing(3, "m", false))
	f.Add(uint8(0), growing(2, "m", true), growing(3, "n", true))
	f.Add(uint8(1), []byte(`{"input":[{"type":"reasoning","summary":[]},{"type":"function_call","call_id":"c","name":"x","arguments":"{}"}]}`),
		[]byte(`{"input":[{"type":"reasoning","summary":[]},{"type":"function_call","call_id":"c","name":"x","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"}]}`))
	f.Add(uint8(2), []byte(`{"messages":[{"role":"tool","tool_call_id":"c","content":"a"}]}`), []byte(`{"messages":[{"role":"tool","tool_call_id":"c","content":"ab"}]}`))
	f.Add(uint8(0), claudeLike(2, 2, ""), claudeLike(3, 3, "")) // the breakpoint moves on
	f.Add(uint8(0), claudeSized(2, 2, "", 200), claudeSized(3, 2, "x", 200))
	f.Fuzz(func(t *testing.T, which uint8, first, second []byte) {
		api := []API{Messages, Responses, Chat}[which%3]
		prev, err := Decode(api, first)
		if err != nil {
			prev = nil
		}
		alone, err := Decode(api, second)
		if err != nil {
			return
		}
		after, err := DecodeAfter(api, second, prev)
		if err != nil {
			t.Fatalf("decodes alone but not after: %v", err)
		}
		sameDecoding(t, alone, after)
		if prev == nil {
			return
		}
		// The request after prev shares its arrays, a second one after prev
		// copies them, and one after the first extends the chain.
		sibling, err := DecodeAfter(api, second, prev)
		if err != nil {
			t.Fatal(err)
		}
		next, err := DecodeAfter(api, first, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, pair := range [][2]*Request{{after, prev}, {sibling, prev}, {sibling, after}, {next, after}, {next, prev}, {prev, next}} {
			r, p := pair[0], pair[1]
			want := 0
			for want < min(len(r.Messages), len(p.Messages)) && bytes.Equal(r.Messages[want], p.Messages[want]) {
				want++
			}
			if got := r.SameMessages(p); got != want {
				t.Fatalf("SameMessages = %d, want %d", got, want)
			}
		}
	})
}

// TestDecodeAfterConcurrently: requests decoded against the same previous
// request at once (two conversations of one scope, a retry) share nothing
// they write (run with -race).
func TestDecodeAfterConcurrently(t *testing.T) {
	prev, err := Decode(Messages, growing(5, "m", false))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			_, err := DecodeAfter(Messages, growing(6+i, "m", false), prev)
			done <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestCallNames: a request's tool names, layered over the earlier
// requests', find every earlier call however many requests back, the
// newest name winning, also across the merges that bound the chain; an
// earlier request's names never change; and the merges copy each name a
// logarithmic number of times, not the whole map every few requests.
func TestCallNames(t *testing.T) {
	const requests = 2000 // two calls each
	var n *callNames
	again := 0 // the request that last named the call "again"
	copied := 0
	type snapshot struct {
		n *callNames
		i int
	}
	var snaps []snapshot
	for i := range requests {
		prev := n
		n = n.over()
		if prev != nil && n.base != prev {
			copied += len(n.base.own) // merged
		}
		n.set(fmt.Sprint("c", i), fmt.Sprint("tool", i))
		n.set(fmt.Sprint("d", i), fmt.Sprint("other", i))
		if i%5 == 0 {
			n.set("again", fmt.Sprint("tool", i))
			again = i
		}
		if n.depth > maxNamesDepth {
			t.Fatalf("request %d: a chain of %d layers", i, n.depth)
		}
		depth := 0
		for m := n.base; m != nil; m = m.base {
			depth++
		}
		if depth != n.depth {
			t.Fatalf("request %d: depth %d, but %d layers below", i, n.depth, depth)
		}
		for j := 0; j <= i; j += 1 + i/64 {
			if got, want := n.get(fmt.Sprint("c", j)), fmt.Sprint("tool", j); got != want {
				t.Fatalf("request %d: call c%d named %q, want %q", i, j, got, want)
			}
		}
		if got, want := n.get(fmt.Sprint("d", i)), fmt.Sprint("other", i); got != want {
			t.Fatalf("request %d: its own call d%d named %q, want %q", i, i, got, want)
		}
		if got, want := n.get("again"), fmt.Sprint("tool", again); got != want {
			t.Fatalf("request %d: a call id named twice is %q, want the newest %q", i, got, want)
		}
		if got := n.get("unknown"); got != "" {
			t.Fatalf("an unknown call is named %q", got)
		}
		if i%97 == 0 {
			snaps = append(snaps, snapshot{n, i})
		}
	}
	for _, sn := range snaps {
		if got := sn.n.get(fmt.Sprint("c", sn.i+1)); got != "" {
			t.Fatalf("request %d's names gained a later call: %q", sn.i, got)
		}
		for j := 0; j <= sn.i; j++ {
			if got, want := sn.n.get(fmt.Sprint("c", j)), fmt.Sprint("tool", j); got != want {
				t.Fatalf("request %d's names changed: c%d is %q, want %q", sn.i, j, got, want)
			}
		}
	}
	// 4,000 names: a log-structured merge copies each about log2(4,000),
	// 12, times at most; flattening every 8 requests copied 500,000.
	if limit := 2 * requests * 16; copied > limit {
		t.Errorf("merges copied %d names, want at most %d", copied, limit)
	}
	t.Logf("merges copied %d names for %d", copied, 2*requests)
}

// decodesAsAlone decodes body against prev, fails t where that differs
// from decoding it alone, and returns it.
func decodesAsAlone(t testing.TB, api API, body []byte, prev *Request) *Request {
	t.Helper()
	alone, err := Decode(api, body)
	if err != nil {
		t.Fatal(err)
	}
	after, err := DecodeAfter(api, body, prev)
	if err != nil {
		t.Fatal(err)
	}
	sameDecoding(t, alone, after)
	return after
}

// atOnce decodes each of bodies against base at once (run with -race) and
// checks that each decodes as alone.
func atOnce(t *testing.T, api API, base *Request, bodies [][]byte) {
	t.Helper()
	got := make([]*Request, len(bodies))
	errs := make([]error, len(bodies))
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = DecodeAfter(api, bodies[i], base)
		}()
	}
	wg.Wait()
	for i, r := range got {
		want, err := Decode(api, bodies[i])
		if err != nil || errs[i] != nil {
			t.Fatalf("request %d: %v, %v", i, err, errs[i])
		}
		sameDecoding(t, want, r)
	}
}

// TestDecodeAfterExtendsInPlace: a request that only appends to the
// previous one extends its arrays in place, and decodes as it would alone;
// so does every earlier request after later ones extended it, one decoded
// again against an earlier request, and each of several requests decoded
// against the same previous one at once (run with -race). A caller's
// append to Messages cannot write where a later request extends.
func TestDecodeAfterExtendsInPlace(t *testing.T) {
	const turns = 30
	bodies := make([][]byte, turns+1)
	for n := 1; n <= turns; n++ {
		bodies[n] = chatBody(n, 100)
	}
	reqs := make([]*Request, turns+1)
	inPlace := 0
	for n := 1; n <= turns; n++ {
		r, err := DecodeAfter(Chat, bodies[n], reqs[n-1])
		if err != nil {
			t.Fatal(err)
		}
		if p := reqs[n-1]; p != nil && &r.room[0] == &p.room[0] {
			inPlace++
		}
		if cap(r.Messages) != len(r.Messages) {
			t.Fatalf("turn %d: Messages has room past its end (len %d, cap %d)", n, len(r.Messages), cap(r.Messages))
		}
		reqs[n] = r
	}
	if inPlace < turns/2 {
		t.Fatalf("%d of %d requests extended the previous one in place", inPlace, turns-1)
	}
	alone := func(n int) *Request {
		r, err := Decode(Chat, bodies[n])
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for n := 1; n <= turns; n++ {
		sameDecoding(t, alone(n), reqs[n])
	}
	// with appends: a body that appends a message of its own to body n.
	with := func(n int, text string) []byte {
		b := bodies[n]
		i := bytes.LastIndex(b, []byte(`],"model"`))
		return append(append(append([]byte(nil), b[:i]...), `,{"role":"user","content":"`+text+`"}`...), b[i:]...)
	}
	// base: a request extended in place whose arrays have room past it,
	// where another request extending it in place would write.
	base := 0
	for n := 1; n < turns; n++ {
		if cap(reqs[n].room) > len(reqs[n].room) && &reqs[n+1].room[0] == &reqs[n].room[0] {
			base = n
			break
		}
	}
	if base == 0 {
		t.Fatal("no request was extended in place with room to spare")
	}
	// Decoded again against base, extended already: a copy.
	decodesAsAlone(t, Chat, with(base, "again"), reqs[base])
	for n := 1; n <= turns; n++ {
		sameDecoding(t, alone(n), reqs[n])
	}
	// Several at once against a request with room that none extended yet
	// (a copy, so it has room), each appending its own message.
	fresh, err := DecodeAfter(Chat, bodies[base+1], reqs[base-1])
	if err != nil {
		t.Fatal(err)
	}
	if cap(fresh.room) == len(fresh.room) || &fresh.room[0] == &reqs[base-1].room[0] {
		t.Fatal("a request decoded against one extended already did not get arrays of its own with room")
	}
	var bodiesAtOnce [][]byte
	for i := range 6 {
		bodiesAtOnce = append(bodiesAtOnce, with(base+1, fmt.Sprint("at once ", i)))
	}
	atOnce(t, Chat, fresh, bodiesAtOnce)
	sameDecoding(t, alone(base+1), fresh)
}

// TestDecodeAfterRepeatsLargeMembers: a large member value the previous
// request had, repeated, ends where it ends without being parsed again;
// the request still decodes as it does alone, also when a large number
// grows (not self-delimiting, so never taken as repeated), when the tools
// change, and when a repeated value is followed by bytes that break the
// body.
func TestDecodeAfterRepeatsLargeMembers(t *testing.T) {
	tools := `[` + strings.Repeat(`{"name":"t","input_schema":{"type":"object"}},`, 30) + `{"name":"Bash"}]`
	digits := strings.Repeat("7", 600)
	body := func(n int, tools, num string) []byte {
		b := growing(n, "m", false)
		i := bytes.LastIndex(b, []byte(`,"tools":`))
		return []byte(string(b[:i]) + `,"system":"` + strings.Repeat("s", 700) + `","tools":` + tools + `,"pad":` + num + `}`)
	}
	prevBody := body(3, tools, digits)
	prev, err := Decode(Messages, prevBody)
	if err != nil {
		t.Fatal(err)
	}
	if len(prev.large) != 2 {
		t.Fatalf("remembered %d large values, want the system prompt and the tools", len(prev.large))
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"repeated", body(4, tools, digits)},
		{"a large number grows", body(4, tools, digits+"9")},
		{"no tools", body(4, `[]`, digits)},
		{"other tools", body(4, strings.Replace(tools, `"Bash"`, `"Read"`, 1), digits)},
		{"broken after the tools", body(4, tools+`x`, digits)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alone, errAlone := Decode(Messages, tc.body)
			after, errAfter := DecodeAfter(Messages, tc.body, prev)
			if (errAlone == nil) != (errAfter == nil) {
				t.Fatalf("alone: %v; after the previous request: %v", errAlone, errAfter)
			}
			if errAlone == nil {
				sameDecoding(t, alone, after)
			}
		})
	}
}

// claudeLike is a Messages body after n tool turns as Claude Code sends
// it: the newest tool result carries the cache breakpoint, after its
// content, and the breakpoint moves on with the next turn. tag marks
// turns after from, so that bodies can append different turns.
func claudeLike(n, from int, tag string) []byte { return claudeSized(n, from, tag, 0) }

// claudeSized is claudeLike with outputs of about size bytes: lines of
// text, each escaped newline a stop for a JSON scanner, as real outputs.
func claudeSized(n, from int, tag string, size int) []byte {
	line := "INFO: step ok - compiled module.o (padding padding padding)\n"
	pad := strings.Repeat(line, size/len(line))
	var b strings.Builder
	b.WriteString(`{"model":"claude-x","messages":[{"role":"user","content":"go"}`)
	for k := 1; k <= n; k++ {
		out := fmt.Sprint("out ", k, "\n", pad)
		if size == 0 {
			out = fmt.Sprint("out ", k)
		}
		if k > from {
			out += " " + tag
		}
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"thinking","thinking":"plan %d","signature":"sig%d"},{"type":"tool_use","id":"t%d","name":"tool%d","input":{"command":"make %d"}}]}`, k, k, k, k, k)
		fmt.Fprintf(&b, `,{"role":"user","content":[{"tool_use_id":"t%d","type":"tool_result","content":%q,"is_error":false`, k, out)
		if k == n {
			b.WriteString(`,"cache_control":{"type":"ephemeral"}`)
		}
		b.WriteString("}]}")
	}
	b.WriteString(`],"system":[{"type":"text","text":"You are a test agent."}],"tools":[{"name":"Bash"}],"stream":true}`)
	return []byte(b.String())
}

// TestDecodeAfterRedecodesInPlace: a Claude Code request rewrites the
// previous request's last item (its breakpoint moves on); where that item
// decodes to the same messages, the request still extends the previous
// one's arrays in place, and every request decodes as it does alone, also
// after later ones extended it. Bodies whose rewritten item decodes to
// other messages (growing: a note leaves), and several requests at once
// against one (-race), each appending turns of its own, decode as alone.
func TestDecodeAfterRedecodesInPlace(t *testing.T) {
	const turns = 30
	for _, tc := range []struct {
		name    string
		body    func(n int) []byte
		inPlace bool
	}{
		{"breakpoint after the content", func(n int) []byte { return claudeLike(n, n, "") }, true},
		{"a note leaves the rewritten item", func(n int) []byte { return growing(n, "m", false) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs := make([]*Request, turns+1)
			inPlace := 0
			for n := 1; n <= turns; n++ {
				r, err := DecodeAfter(Messages, tc.body(n), reqs[n-1])
				if err != nil {
					t.Fatal(err)
				}
				if p := reqs[n-1]; p != nil && &r.room[0] == &p.room[0] {
					inPlace++
				}
				reqs[n] = r
			}
			if got := inPlace >= turns/2; got != tc.inPlace {
				t.Fatalf("%d of %d requests extended the previous one in place", inPlace, turns-1)
			}
			for n := 1; n <= turns; n++ {
				alone, err := Decode(Messages, tc.body(n))
				if err != nil {
					t.Fatal(err)
				}
				sameDecoding(t, alone, reqs[n])
			}
		})
	}
	t.Run("thinking moved within a rewritten item", func(t *testing.T) {
		// The same assistant message, its thinking block two bytes later.
		head := `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":[`
		turn := `{"type":"thinking","thinking":"plan","signature":"sig"},{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}`
		prevBody := []byte(head + turn + `],"tools":[{"name":"Bash"}]}`)
		body := []byte(head + "  " + turn + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}],"tools":[{"name":"Bash"}]}`)
		prev, err := Decode(Messages, prevBody)
		if err != nil {
			t.Fatal(err)
		}
		after := decodesAsAlone(t, Messages, body, prev)
		if sp, ok := after.span(1, 0); !ok || !bytes.HasPrefix(body[sp[0]:], []byte(`{"type":"thinking"`)) {
			t.Fatalf("the thinking block is not a part of its own: %v %v", sp, ok)
		}
	})
	t.Run("fewer messages than the previous one", func(t *testing.T) {
		// b rewrites a's last item without its note: a's note slot lies
		// past b's end, where c, extending b in place, writes.
		a, err := Decode(Messages, growing(5, "m", false))
		if err != nil {
			t.Fatal(err)
		}
		noteless := bytes.Replace(growing(5, "m", false), []byte(`,{"type":"text","text":"note","cache_control":{"type":"ephemeral"}}`), nil, 1)
		b := decodesAsAlone(t, Messages, noteless, a)
		decodesAsAlone(t, Messages, growing(6, "m", false), b)
		// c extended b: a and b are still what they were.
		for _, x := range []struct {
			body []byte
			r    *Request
		}{{growing(5, "m", false), a}, {noteless, b}} {
			alone, err := Decode(Messages, x.body)
			if err != nil {
				t.Fatal(err)
			}
			sameDecoding(t, alone, x.r)
		}
	})
	t.Run("at once", func(t *testing.T) {
		base, err := Decode(Messages, claudeLike(10, 10, ""))
		if err != nil {
			t.Fatal(err)
		}
		var bodies [][]byte
		for i := range 6 {
			bodies = append(bodies, claudeLike(12, 10, fmt.Sprint("at once ", i)))
		}
		atOnce(t, Messages, base, bodies)
		alone, _ := Decode(Messages, claudeLike(10, 10, ""))
		sameDecoding(t, alone, base)
	})
}

// TestBreakpointLeft: the previous request's last item, back without the
// cache breakpoint Claude Code moved off it, is not decoded again when that
// cannot change what it decodes to, and is in every other case; either
// way each request decodes as it does alone, and so does the one after it.
func TestBreakpointLeft(t *testing.T) {
	const (
		cc  = `,"cache_control":{"type":"ephemeral"}`
		out = `"line one\nline two"`
	)
	result := func(id, members string) string {
		return `{"tool_use_id":"` + id + `","type":"tool_result","content":` + out + members + `}`
	}
	user := func(blocks ...string) string {
		return `{"role":"user","content":[` + strings.Join(blocks, ",") + `]}`
	}
	call := func(ids ...string) string {
		var parts []string
		for _, id := range ids {
			parts = append(parts, `{"type":"tool_use","id":"`+id+`","name":"Bash","input":{"command":"make"}}`)
		}
		return `{"role":"assistant","content":[` + strings.Join(parts, ",") + `]}`
	}
	body := func(items ...string) []byte {
		return []byte(`{"model":"claude-x","messages":[{"role":"user","content":"go"},` + strings.Join(items, ",") + `],"stream":true}`)
	}
	text := `{"type":"text","text":"note"`
	for _, tc := range []struct {
		name       string
		calls      []string
		prev, next string // the item before and after the breakpoint moved
		left       bool   // decoding it again is spared
	}{
		{"Claude Code's order", []string{"t1"}, user(result("t1", `,"is_error":false`+cc)), user(result("t1", `,"is_error":false`)), true},
		{"with a ttl", []string{"t1"}, user(result("t1", `,"cache_control":{"type":"ephemeral","ttl":"1h"}`)), user(result("t1", "")), true},
		{"on the last of two results", []string{"t1", "t2"}, user(result("t1", ""), result("t2", cc)), user(result("t1", ""), result("t2", "")), true},
		{"on the first of two results", []string{"t1", "t2"}, user(result("t1", cc), result("t2", "")), user(result("t1", ""), result("t2", "")), false},
		{"before the output", []string{"t1"}, user(`{"tool_use_id":"t1","type":"tool_result"` + cc + `,"content":` + out + `}`), user(result("t1", "")), false},
		{"on a text block after the results", []string{"t1"}, user(result("t1", ""), text+cc+`}`), user(result("t1", ""), text+`}`), false},
		{"inside the output", []string{"t1"}, user(`{"tool_use_id":"t1","type":"tool_result","content":[{"type":"text","text":"a"` + cc + `}]}`), user(`{"tool_use_id":"t1","type":"tool_result","content":[{"type":"text","text":"a"}]}`), false},
		{"another member taken off", []string{"t1"}, user(result("t1", `,"is_error":false`)), user(result("t1", "")), false},
		{"with spaces", []string{"t1"}, user(result("t1", `, "cache_control": {"type": "ephemeral"}`)), user(result("t1", "")), false},
		{"the output changed too", []string{"t1"}, user(result("t1", cc)), user(`{"tool_use_id":"t1","type":"tool_result","content":"line one"}`), false},
		{"an error result", []string{"t1"}, user(result("t1", `,"is_error":true`+cc)), user(result("t1", `,"is_error":true`)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			turn := call(tc.calls...)
			prev, err := Decode(Messages, body(turn, tc.prev))
			if err != nil {
				t.Fatal(err)
			}
			before := breakpointsLeft.Load()
			next := decodesAsAlone(t, Messages, body(turn, tc.next, call("t9"), user(result("t9", cc))), prev)
			if left := breakpointsLeft.Load() > before; left != tc.left {
				t.Errorf("decoding the item again spared: %v, want %v", left, tc.left)
			}
			// What the next request is decoded against holds the item's
			// end and messages right.
			decodesAsAlone(t, Messages, body(turn, tc.next, call("t9"), user(result("t9", "")), call("t10"), user(result("t10", cc))), next)
		})
	}
}

// TestDecodeAfterRedecodedNames: the tool names a request knows are those
// of its own calls. When an item of the previous request that named a call
// is decoded again because it changed, a result that cites the old call
// does not keep the old name (the previous request's last item reused for a
// moved breakpoint included), in every format.
func TestDecodeAfterRedecodedNames(t *testing.T) {
	messages := func(id, name, cc string) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"go"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"` + id + `","name":"` + name + `","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"out"` + cc + `}]}],"tools":[{"name":"x"}]}`)
	}
	chat := func(id string) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"go"},` +
			`{"role":"assistant","content":"","tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"bash","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"t1","content":"out"}],"tools":[{"type":"function"}]}`)
	}
	responses := func(id string) []byte {
		return []byte(`{"model":"m","input":[{"type":"message","role":"user","content":"go"},` +
			`{"type":"function_call","call_id":"` + id + `","name":"exec","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"t1","output":"out"}],"tools":[{"type":"function"}]}`)
	}
	// As messages("t1", "Bash", breakpoint), but with a text of the same
	// length in place of the call.
	named := messages("t1", "Bash", `,"cache_control":{"type":"ephemeral"}`)
	call := []byte(`{"type":"tool_use","id":"t1","name":"Bash","input":{}}`)
	text := []byte(`{"type":"text","text":""}`)
	text = append(text[:len(text)-2], append(bytes.Repeat([]byte("x"), len(call)-len(text)), text[len(text)-2:]...)...)
	unnamed := bytes.Replace(named, call, text, 1)
	for _, tc := range []struct {
		name       string
		api        API
		prev, next []byte
	}{
		{"Messages: the call's id changed", Messages, messages("t1", "Bash", ""), messages("t2", "Bash", "")},
		{"Messages: the call's name changed, the breakpoint moved", Messages, messages("t1", "Bash", `,"cache_control":{"type":"ephemeral"}`), messages("t1", "Grep", "")},
		{"Messages: a call named where there was none, the breakpoint moved", Messages, unnamed, messages("t1", "Bash", "")},
		{"Chat Completions: the call's id changed", Chat, chat("t1"), chat("t2")},
		{"Responses: the call's id changed", Responses, responses("t1"), responses("t2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev, err := Decode(tc.api, tc.prev)
			if err != nil {
				t.Fatal(err)
			}
			decodesAsAlone(t, tc.api, tc.next, prev)
		})
	}
}

// FuzzToolResultLit: a tool result message carrying its output's literal
// as it came decodes in the engine (block.Decode) to the same blocks as
// the message carrying the literal quoted afresh from its text.
func FuzzToolResultLit(f *testing.F) {
	for _, s := range []string{`"ok"`, `"a\nb\tc \"q\" \\ \/"`, `"\u00e9\u0000\u001f"`, `"é ✓ 😀"`, `"\ud800 lone"`, `"\ud83d\ude00"`, `""`, `"\u2028"`} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, lit []byte, isError bool) {
		if !rawjson.Valid(lit) || !utf8.Valid(lit) {
			return
		}
		text, err := rawjson.Unquote(lit) // a string literal alone, as a member's value is
		if err != nil {
			return
		}
		for _, opaque := range []bool{false, true} {
			got := block.Decode(toolResultLit("call_1", "bash", lit, isError, opaque), 3)
			want := block.Decode(toolResultMsg("call_1", "bash", text, isError, opaque), 3)
			if got.Err != nil || want.Err != nil || !reflect.DeepEqual(got.Blocks, want.Blocks) || got.Role != want.Role {
				t.Fatalf("literal %q (opaque %v):\n got %+v %v\nwant %+v %v", lit, opaque, got.Blocks, got.Err, want.Blocks, want.Err)
			}
		}
	})
}

// TestToolResultMessageOneAllocation: a tool result message is built in
// the one buffer its head makes (a 9 KB output is not copied again to
// grow it), whether its text is quoted afresh or its literal is kept.
func TestToolResultMessageOneAllocation(t *testing.T) {
	text := strings.Repeat("INFO: step ok\n", 700)
	lit := rawjson.Quote(nil, text)
	for _, opaque := range []bool{false, true} {
		if n := testing.AllocsPerRun(20, func() { toolResultLit("call_001", "bash", lit, true, opaque) }); n != 1 {
			t.Errorf("literal, opaque %v: %v allocations", opaque, n)
		}
		if n := testing.AllocsPerRun(20, func() { toolResultMsg("call_001", "bash", text, true, opaque) }); n != 1 {
			t.Errorf("quoted, opaque %v: %v allocations", opaque, n)
		}
	}
}

// TestMarkSpan: a breakpoint goes on a tool result block as its last
// member, with the value given, leaving valid JSON with one breakpoint
// more; Breakpoints counts them and returns the last one's value, and
// names inside strings are not breakpoints.
func TestMarkSpan(t *testing.T) {
	const ttl = `{"type":"ephemeral","ttl":"1h"}`
	body := `{"model":"m","system":[{"type":"text","text":"s","cache_control":` + ttl + `}],"messages":[` +
		`{"role":"user","content":"go \"cache_control\": is text"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}},{"type":"tool_use","id":"t2","name":"Bash","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"one"},{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"two"}],"is_error":true}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t3","name":"Bash","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t3","content":"three","cache_control":{"type":"ephemeral"}}]}]}`
	r, err := Decode(Messages, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if n, last := r.Breakpoints(); n != 2 || string(last) != `{"type":"ephemeral"}` {
		t.Fatalf("Breakpoints = %d, %s", n, last)
	}
	results := map[string]int{}
	for i, m := range r.Messages {
		for _, id := range []string{"t1", "t2", "t3"} {
			if bytes.Contains(m, []byte(`"toolCallId":"`+id+`"`)) {
				results[id] = i
			}
		}
	}
	for _, tc := range []struct {
		id, want string
	}{
		{"t1", `{"type":"tool_result","tool_use_id":"t1","content":"one","cache_control":` + ttl + `}`},
		{"t2", `{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"two"}],"is_error":true,"cache_control":` + ttl + `}`},
		{"t3", ""}, // already carries one
	} {
		sp, err := r.MarkSpan(results[tc.id], []byte(ttl))
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: marked a block that carries a breakpoint", tc.id)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
		segs, _ := Splice(r.Body(), []Span{sp})
		out := bytes.Join(segs, nil)
		if !rawjson.Valid(out) || !bytes.Contains(out, []byte(tc.want)) {
			t.Errorf("%s: %s", tc.id, out)
		}
		again, err := Decode(Messages, out)
		if err != nil {
			t.Fatal(err)
		}
		if n, last := again.Breakpoints(); n != 3 || string(last) != `{"type":"ephemeral"}` {
			t.Errorf("%s: %d breakpoints after the mark, the last %s", tc.id, n, last)
		}
	}
	if _, err := r.MarkSpan(0, []byte(ttl)); err == nil {
		t.Error("marked a user message")
	}
	if other, _ := Decode(Chat, []byte(`{"messages":[{"role":"tool","tool_call_id":"c","content":"x"}]}`)); other != nil {
		if n, _ := other.Breakpoints(); n != 0 {
			t.Errorf("a Chat body has %d breakpoints", n)
		}
		if _, err := other.MarkSpan(0, []byte(ttl)); err == nil {
			t.Error("marked a Chat body")
		}
	}
}

// FuzzMarkSpan: on any valid Messages body, a mark placed on any message
// leaves valid JSON with exactly one breakpoint more, or is refused.
func FuzzMarkSpan(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x" , "is_error" : false }]}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":"x","tool_use_id":"t1","cache_control":{"type":"ephemeral"}}]}]}`))
	f.Add(growing(3, "m", false))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Decode(Messages, body)
		if err != nil || !rawjson.Valid(body) {
			return
		}
		n, _ := r.Breakpoints()
		for m := range r.Messages {
			sp, err := r.MarkSpan(m, []byte(`{"type":"ephemeral"}`))
			if err != nil {
				continue
			}
			segs, _ := Splice(r.Body(), []Span{sp})
			out := bytes.Join(segs, nil)
			if !rawjson.Valid(out) {
				t.Fatalf("m%d: marked body is not JSON: %q", m, out)
			}
			if got := bytes.Count(out, cacheControlKey); got != bytes.Count(body, cacheControlKey)+1 {
				t.Fatalf("m%d: %d breakpoints after the mark, %d before", m, got, n)
			}
		}
	})
}

// TestBindSpan: the binding goes into a thinking object that is on and
// says nothing of binding, and nowhere else; the body it makes is valid
// JSON carrying drop_block, and Binds finds it among other spans.
func TestBindSpan(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"go"}]`
	for _, tc := range []struct {
		name, body string
		api        API
		want       string // the thinking object after the insertion; "": none
	}{
		{"adaptive", `{"model":"m",` + msgs + `,"thinking":{"type":"adaptive","display":"updates"}}`, Messages,
			`{"type":"adaptive","display":"updates","block_binding":{"prefix_mismatch_behavior":"drop_block"}}`},
		{"enabled, spaced", `{"thinking": { "type" : "enabled", "budget_tokens": 31999 } ,` + msgs + `}`, Messages,
			`{ "type" : "enabled", "budget_tokens": 31999 ,"block_binding":{"prefix_mismatch_behavior":"drop_block"}}`},
		{"the client's own binding", `{` + msgs + `,"thinking":{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"reject"}}}`, Messages, ""},
		{"thinking off", `{` + msgs + `,"thinking":{"type":"disabled"}}`, Messages, ""},
		{"duplicate type", `{` + msgs + `,"thinking":{"type":"adaptive","type":"disabled"}}`, Messages, ""},
		{"not an object", `{` + msgs + `,"thinking":"adaptive"}`, Messages, ""},
		{"no thinking", `{` + msgs + `}`, Messages, ""},
		{"chat", `{` + msgs + `,"thinking":{"type":"adaptive"}}`, Chat, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Decode(tc.api, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			sp, ok := r.BindSpan()
			if tc.want == "" {
				if ok {
					t.Fatalf("BindSpan = %+v, want none", sp)
				}
				return
			}
			if !ok {
				t.Fatal("BindSpan: none")
			}
			other := Span{Start: 1, End: 1, Value: []byte(`"x":1,`)}
			spans := []Span{other, sp}
			if !Binds(spans) || Binds(spans[:1]) {
				t.Fatalf("Binds(%v) wrong", spans)
			}
			segs, _ := Splice(r.Body(), spans)
			out := bytes.Join(segs, nil)
			var got struct{ Thinking json.RawMessage }
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			if string(got.Thinking) != tc.want {
				t.Errorf("thinking = %s\nwant       %s", got.Thinking, tc.want)
			}
			again, err := Decode(tc.api, out)
			if err != nil || !again.DropBlock {
				t.Errorf("the bound body does not ask for drop_block (%v)", err)
			}
			if _, ok := again.BindSpan(); ok {
				t.Error("a bound body would be bound again")
			}
		})
	}
}
