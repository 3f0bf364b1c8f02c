package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
	"github.com/contextfold/contextfold/internal/testsupport/testfs"
)

// stepper is a model that calls one tool per response for steps 1..Steps
// (bash "bash gen.sh <Offset+i>", or the lone tool of loneExtension),
// numbering its calls as some local model servers do: call_1 in every
// response (unless Unique). A user message "RECALL <code>" or "SEARCH <term>" gets one
// recall_folded call, then a final text. Every decision is read from the
// request, so retries and resumed sessions are answered alike.
type stepper struct {
	Steps, Offset int
	Tool          string // "bash" (the default) or "lone"
	// Unique numbers the calls call_<step> instead.
	Unique bool
}

func (s *stepper) Reply(req *fakellm.Request) fakellm.Reply {
	last := -1
	for i, m := range req.Messages {
		if m.Role == "user" {
			last = i
		}
	}
	prompt := ""
	if last >= 0 {
		prompt = strings.TrimSpace(req.Messages[last].Content)
	}
	var args map[string]any
	if code, ok := strings.CutPrefix(prompt, "RECALL "); ok {
		args = map[string]any{"codes": []string{code}}
	} else if term, ok := strings.CutPrefix(prompt, "SEARCH "); ok {
		args = map[string]any{"search": term}
	}
	if args != nil {
		for _, m := range req.Messages[last+1:] {
			for _, tc := range m.ToolCalls {
				if tc.Name == "recall_folded" {
					return fakellm.Reply{Text: "FINAL: recalled"}
				}
			}
		}
		b, _ := json.Marshal(args)
		return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "call_1", Name: "recall_folded", Arguments: b}}}
	}
	tool := s.Tool
	if tool == "" {
		tool = "bash"
	}
	n := 0
	for _, tc := range req.ToolCallsSeen() {
		if tc.Name == tool {
			n++
		}
	}
	if n >= s.Steps {
		return fakellm.Reply{Text: fmt.Sprintf("FINAL: done after %d steps", n)}
	}
	var b []byte
	if tool == "bash" {
		b, _ = json.Marshal(map[string]any{"command": GenCommand(s.Offset + n + 1)})
	} else {
		b, _ = json.Marshal(map[string]any{"step": s.Offset + n + 1})
	}
	id := "call_1"
	if s.Unique {
		id = fmt.Sprintf("call_%d", s.Offset+n+1)
	}
	return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: id, Name: tool, Arguments: b}}}
}

var stepErrRE = regexp.MustCompile(`ERROR: step (\d+) failed`)

// foldedSteps maps each code folded in req to the step whose output it
// folded, read from the error line its digest keeps.
func foldedSteps(t *testing.T, req *fakellm.Request) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range req.Messages {
		if m.Role != "tool" {
			continue
		}
		tag := regexp.MustCompile(`^\{#([0-9a-z]{6}) FOLDED\}`).FindStringSubmatch(m.Content)
		if tag == nil {
			continue
		}
		e := stepErrRE.FindStringSubmatch(m.Content)
		if e == nil {
			t.Fatalf("digest %s keeps no error line: %.200q", tag[1], m.Content)
		}
		step := 0
		fmt.Sscan(e[1], &step)
		if prev, dup := out[tag[1]]; dup && prev != step {
			t.Fatalf("code %s folds steps %d and %d", tag[1], prev, step)
		}
		out[tag[1]] = step
	}
	return out
}

// recallAnswer returns the raw tool-result message that answered the last
// recall_folded call in req.
func recallAnswer(t *testing.T, req *fakellm.Request) fakellm.Message {
	t.Helper()
	for i := len(req.Messages) - 1; i > 0; i-- {
		m := req.Messages[i]
		if m.Role != "tool" {
			continue
		}
		for _, tc := range req.Messages[i-1].ToolCalls {
			if tc.Name == "recall_folded" {
				return m
			}
		}
	}
	t.Fatal("no recall_folded answer in the request")
	return fakellm.Message{}
}

// TestRepeatedCallIDsInPi: a local model server that numbers its calls
// call_1 in every response. Every repeated result folds under a code of
// its own (before, only the first call_1 folded and the rest stayed raw
// for the session), and each code recalls its own step's output from the
// session file, after a resume too.
func TestRepeatedCallIDsInPi(t *testing.T) {
	env := NewEnv(t, WithContextFold(t, Config{Script: &stepper{Steps: 24}, Compaction: noCompaction}))
	res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step."})
	res.Require(t)
	reqs := ToolRequests(res.Requests)
	steps := foldedSteps(t, &reqs[len(reqs)-1].Request)
	if len(steps) < 8 {
		t.Fatalf("%d of 24 outputs folded under distinct codes: %v", len(steps), steps)
	}
	var codes []string
	for code := range steps {
		codes = append(codes, code)
	}
	for _, code := range codes[:3] {
		r := env.Print(PrintOptions{Prompt: "RECALL " + code, Continue: true})
		r.Require(t)
		last := ToolRequests(r.Requests)
		answer := recallAnswer(t, &last[len(last)-1].Request)
		want := strings.TrimRight(env.GenOutput(steps[code]), "\n")
		if !strings.Contains(answer.Content, "sha256 verified") || !strings.Contains(answer.Content, want) {
			t.Fatalf("code %s (step %d) recalled:\n%.600s", code, steps[code], answer.Content)
		}
	}
}

// loneExtension registers the tool "lone": a log whose lines hold lone
// surrogates, half an emoji as a JavaScript tool leaves when it truncates
// a string.
const loneExtension = `export default function (pi) {
  pi.registerTool({
    name: "lone", label: "Lone", description: "Prints a build log for a step.",
    parameters: { type: "object", properties: { step: { type: "number" } }, required: ["step"] },
    async execute(_id, params) {
      let out = "";
      for (let n = 1; n <= 60; n++) {
        if (n === 30) out += "ERROR: step " + params.step + " failed\n";
        out += "[step " + params.step + "] line " + n + " half an emoji \ud83d, a low half \udc00, reversed \udc00\ud800, whole \ud83d\ude00\n";
      }
      return { content: [{ type: "text", text: out }], details: {} };
    },
  });
}
`

// TestLoneSurrogatesInPi: tool outputs holding lone surrogates fold, and
// recall_folded answers with the very code units the tool returned,
// verified against Pi's session file. (Pi's providers drop lone
// surrogates from everything they send, the tool's own output included, so
// the model reads the recall as it read the output.)
func TestLoneSurrogatesInPi(t *testing.T) {
	cfg := WithContextFold(t, Config{Script: &stepper{Steps: 20, Tool: "lone"}, Compaction: noCompaction})
	env := NewEnv(t, cfg)
	ext := filepath.Join(env.Root, "lone.js")
	env.writeFile(ext, loneExtension, 0o644)
	env.Config.Args = append(env.Config.Args, "-e", ext)
	res := env.Print(PrintOptions{Prompt: "Build every step."})
	res.Require(t)
	const lone = `half an emoji \ud83d, a low half \udc00, reversed \udc00\ud800, whole 😀`
	sess := res.Session(t)
	if raw, _ := os.ReadFile(sess.Path); !bytes.Contains(raw, []byte(lone)) {
		t.Fatal("the session file does not hold the tool's lone surrogates: the test tests nothing")
	}
	reqs := ToolRequests(res.Requests)
	steps := foldedSteps(t, &reqs[len(reqs)-1].Request)
	if len(steps) == 0 {
		t.Fatal("nothing folded")
	}
	for code, step := range steps {
		r := env.Print(PrintOptions{Prompt: "RECALL " + code, Continue: true})
		r.Require(t)
		// The resumed session replays the digests, lone surrogates and all:
		// the provider gets the same bytes as before.
		before, after := reqs[len(reqs)-1].Messages, ToolRequests(r.Requests)[0].Messages
		for i, m := range before {
			if m.Role == "tool" && strings.HasPrefix(m.Content, "{#") && !bytes.Equal(m.Raw, after[i].Raw) {
				t.Fatalf("a digest changed across the resume:\n%s\n%s", m.Raw, after[i].Raw)
			}
		}
		// The answer as Pi stored it: the code units recall returned.
		var answer []byte
		for _, e := range r.Session(t).Entries {
			if e.Message != nil && e.Message.Role == "toolResult" && bytes.Contains(e.Raw, []byte(`"toolName":"recall_folded"`)) {
				answer = e.Raw
			}
		}
		want := fmt.Sprintf(`[step %d] line 31 %s`, step, lone)
		if !bytes.Contains(answer, []byte("sha256 verified")) || !bytes.Contains(answer, []byte(want)) {
			t.Fatalf("code %s (step %d) recalled:\n%.600s", code, step, answer)
		}
		// And the model read it as the provider sends it.
		rr := ToolRequests(r.Requests)
		if got := recallAnswer(t, &rr[len(rr)-1].Request); !strings.Contains(got.Content, fmt.Sprintf("[step %d] line 31 half an emoji , a low half , reversed , whole 😀", step)) {
			t.Fatalf("the model read:\n%.600s", got.Content)
		}
		break
	}
}

// TestHandoffWithRepeatedCallIDs: a parent and the session its handoff
// seed starts both number their calls call_1. The parent's codes, listed
// in the seed, recall the parent's blocks in the fresh session (before,
// the fresh session's own blocks answered to the same codes), its own
// codes its own blocks, and every code a search there names recalls the
// block the hit is in.
func TestHandoffWithRepeatedCallIDs(t *testing.T) {
	parent := &stepper{Steps: 20}
	env := NewEnv(t, WithContextFold(t, Config{Script: parent, Compaction: noCompaction}))
	res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step."})
	res.Require(t)
	reqs := ToolRequests(res.Requests)
	parentSteps := foldedSteps(t, &reqs[len(reqs)-1].Request)
	if len(parentSteps) < 4 {
		t.Fatalf("the parent folded %d outputs", len(parentSteps))
	}
	h := env.Print(PrintOptions{Prompt: "/fold-handoff keep going", Continue: true})
	h.Require(t)
	m := regexp.MustCompile(`(/\S+/handoff-[^/\s]+\.md)`).FindStringSubmatch(h.Stdout + h.Stderr)
	if m == nil {
		t.Fatalf("no seed path printed: %q %q", h.Stdout, h.Stderr)
	}
	seed, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	// The fresh session: the seed as its first message, steps 101 on.
	parent.Offset = 100
	res = env.Print(PrintOptions{Prompt: string(seed)})
	res.Require(t)
	reqs = ToolRequests(res.Requests)
	childSteps := foldedSteps(t, &reqs[len(reqs)-1].Request)
	if len(childSteps) < 4 {
		t.Fatalf("the fresh session folded %d outputs", len(childSteps))
	}
	recallIn := func(code string) fakellm.Message {
		t.Helper()
		r := env.Print(PrintOptions{Prompt: "RECALL " + code, Continue: true})
		r.Require(t)
		rr := ToolRequests(r.Requests)
		return recallAnswer(t, &rr[len(rr)-1].Request)
	}
	n := 0
	for code, step := range parentSteps {
		if !strings.Contains(string(seed), code) {
			continue // the seed lists what fits its budget
		}
		answer := recallIn(code)
		if !strings.Contains(answer.Content, "parent session") || !strings.Contains(answer.Content, strings.TrimRight(env.GenOutput(step), "\n")) {
			t.Fatalf("parent code %s (step %d) in the fresh session:\n%.600s", code, step, answer.Content)
		}
		if n++; n == 2 {
			break
		}
	}
	if n == 0 {
		t.Fatal("the seed lists none of the parent's codes")
	}
	for code, step := range childSteps {
		answer := recallIn(code)
		if strings.Contains(answer.Content, "parent session") || !strings.Contains(answer.Content, strings.TrimRight(env.GenOutput(step), "\n")) {
			t.Fatalf("own code %s (step %d):\n%.600s", code, step, answer.Content)
		}
		break
	}
	r := env.Print(PrintOptions{Prompt: "SEARCH failed", Continue: true})
	r.Require(t)
	rr := ToolRequests(r.Requests)
	search := recallAnswer(t, &rr[len(rr)-1].Request).Content
	hits := regexp.MustCompile(`=== ([0-9a-z]{6}) \(.*\n\d+: ERROR: step (\d+) failed`).FindAllStringSubmatch(search, -1)
	if len(hits) == 0 {
		t.Fatalf("search found nothing:\n%.600s", search)
	}
	for _, h := range hits {
		step := 0
		fmt.Sscan(h[2], &step)
		if childSteps[h[1]] != step {
			t.Fatalf("search names %s for step %d, which the fresh session folded as %v", h[1], step, childSteps)
		}
	}
}

// fillAt fills fs once the model is at step from of its session: every
// write Pi and context-fold make to the session directory then fails with
// ENOSPC.
type fillAt struct {
	fakellm.Script
	fs   *testfs.FS
	from int
	done bool
}

func (f *fillAt) Reply(req *fakellm.Request) fakellm.Reply {
	n := 0
	for _, tc := range req.ToolCallsSeen() {
		if tc.Name == "bash" {
			n++
		}
	}
	if n >= f.from && !f.done {
		f.fs.Fill()
		f.done = true
	}
	return f.Script.Reply(req)
}

// TestFullDiskInPi: Pi's session directory fills up in the middle of a
// session (a real tmpfs). Pi exits at its own first failed write (it cannot
// keep a session it cannot record); a fold event whose records could not
// be written is never sent; the session resumes once there is room, folding
// goes on, and every code the model ever saw reads back from the session
// file, verified.
func TestFullDiskInPi(t *testing.T) {
	fs := testfs.Tmpfs(t, 4<<20)
	script := &fillAt{Script: &stepper{Steps: 36, Unique: true}, fs: fs, from: 12}
	env := NewEnv(t, WithContextFold(t, Config{Script: script, Compaction: noCompaction}))
	env.SessionDir, env.Torn = fs.Dir, true
	res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step."})
	if !script.done || res.ExitCode == 0 {
		t.Fatalf("the disk filled %v, pi exited %d: the test tests nothing", script.done, res.ExitCode)
	}
	fs.Free()
	res = env.Print(PrintOptions{Prompt: "Go on.", Continue: true})
	res.Require(t)
	seen := map[string]bool{}
	for _, r := range ToolRequests(env.Server.Requests()) {
		for code := range foldedSteps(t, &r.Request) {
			seen[code] = true
		}
	}
	sessions := env.Sessions()
	if len(sessions) != 1 {
		t.Fatalf("%d session files", len(sessions))
	}
	t.Logf("%d requests, %d codes sent, %d torn lines in the session file", len(env.Server.Requests()), len(seen), sessions[0].Torn)
	if len(seen) < 8 {
		t.Fatalf("%d codes sent", len(seen))
	}
	for code := range seen {
		out, err := exec.Command(EngineBinary(t), "recall", sessions[0].Path, code).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "sha256 verified") {
			t.Errorf("code %s was sent but does not recall from the session file: %v\n%.300s", code, err, out)
		}
	}
}

// fillBetween fills fs while the model is at steps [from, to).
type fillBetween struct {
	fakellm.Script
	fs       *testfs.FS
	from, to int
	full     bool
	codes    [2]int // codes the provider saw when the disk filled, and when it was freed
	seen     map[string]bool
}

func (f *fillBetween) Reply(req *fakellm.Request) fakellm.Reply {
	n := 0
	for _, tc := range req.ToolCallsSeen() {
		if tc.Name == "bash" {
			n++
		}
	}
	for _, m := range req.Messages {
		if tag := regexp.MustCompile(`^\{#([0-9a-z]{6}) FOLDED\}`).FindStringSubmatch(m.Content); tag != nil {
			f.seen[tag[1]] = true
		}
	}
	switch {
	case n >= f.from && n < f.to && !f.full:
		f.fs.Fill()
		f.full, f.codes[0] = true, len(f.seen)
	case n >= f.to && f.full:
		f.codes[1] = len(f.seen)
		f.fs.Free()
		f.full = false
	}
	return f.Script.Reply(req)
}

// TestFullDiskContextFoldFilesInPi: only context-fold's own files (the
// seed index, under the session directory) are on the filesystem that
// fills up: Pi goes on, fold events whose records cannot be written are
// rejected whole (no new code reaches the provider while it is full, and
// no fold record of theirs is left in the session file), and folding
// resumes once there is room.
func TestFullDiskContextFoldFilesInPi(t *testing.T) {
	script := &fillBetween{Script: &stepper{Steps: 46, Unique: true}, from: 24, to: 34, seen: map[string]bool{}}
	env := NewEnv(t, WithContextFold(t, Config{Script: script, Compaction: noCompaction}))
	own := filepath.Join(env.SessionDir, "context-fold")
	if err := os.MkdirAll(own, 0o755); err != nil {
		t.Fatal(err)
	}
	fs := testfs.TmpfsAt(t, own, 1<<20)
	script.fs = fs
	res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step."})
	res.Require(t)
	if script.full {
		fs.Free()
	}
	t.Logf("codes sent: %d when the disk filled, %d when it was freed, %d in all", script.codes[0], script.codes[1], len(script.seen))
	if script.codes[1] != script.codes[0] {
		t.Errorf("%d new codes reached the provider while context-fold could not record them", script.codes[1]-script.codes[0])
	}
	if len(script.seen) == script.codes[1] {
		t.Error("folding did not resume once there was room")
	}
	if script.codes[0] == 0 || !strings.Contains(res.Stderr, "rejected") {
		t.Errorf("nothing folded before the disk filled (%d codes), or no fold event was refused while it was full: the test tests less than it should\n%s", script.codes[0], tail(res.Stderr, 1000))
	}
	sess := res.Session(t)
	recorded := 0
	for _, e := range sess.Custom("contextfold.fold") {
		recorded += strings.Count(string(e.Data), `"code":"`)
	}
	if recorded != len(script.seen) {
		t.Errorf("%d fold records in the session file for %d codes sent", recorded, len(script.seen))
	}
	for code := range script.seen {
		out, err := exec.Command(EngineBinary(t), "recall", sess.Path, code).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "sha256 verified") {
			t.Errorf("code %s was sent but does not recall: %v\n%.300s", code, err, out)
		}
	}
}
