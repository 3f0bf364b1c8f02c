package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/contextfold/contextfold/internal/core/tokens"
	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// noCompaction keeps Pi's own compaction out of the folding tests: with a
// small test window, Pi's default 16k reserve would compact before every step.
var noCompaction = &Compaction{Enabled: false}

// foldedCalls maps each tool_call_id shown folded in req to its code.
func foldedCalls(req *fakellm.Request) map[string]string {
	out := map[string]string{}
	for _, tag := range FoldedTags(req) {
		if tag.ToolCallID != "" {
			out[tag.ToolCallID] = tag.Code
		}
	}
	return out
}

// TestFoldingInPrintMode drives a 40-step session with multi-KB outputs and
// buried ERROR lines through real Pi and checks the provider requests.
func TestFoldingInPrintMode(t *testing.T) {
	ls := &LongSession{Steps: 40}
	env := NewEnv(t, WithContextFold(t, Config{Script: ls, Compaction: noCompaction}))
	res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step, then report."})
	res.Require(t)
	reqs := ToolRequests(res.Requests)
	if len(reqs) < 41 {
		t.Fatalf("only %d requests", len(reqs))
	}

	// Folds happen, and every folded result keeps its tag and its ERROR line.
	foldedAt := -1
	for k := range reqs {
		calls := foldedCalls(&reqs[k].Request)
		if len(calls) > 0 && foldedAt < 0 {
			foldedAt = k
		}
		for callID, code := range calls {
			step, ok := StepOfCallID(callID)
			if !ok {
				continue
			}
			content, _ := reqs[k].ToolResult(callID)
			if !strings.HasPrefix(content, "{#"+code+" FOLDED}") {
				t.Fatalf("request %d: folded result %s does not start with its tag: %.80q", k, callID, content)
			}
			if want := fmt.Sprintf("ERROR: step %d failed", step); !strings.Contains(content, want) {
				t.Fatalf("request %d: folded %s lost its error line %q: %q", k, callID, want, content)
			}
		}
	}
	if foldedAt < 0 {
		t.Fatal("no request carried a folded block")
	}

	// Between fold events, request k is a byte prefix of request k+1: every
	// break must coincide with a new fold or an unfold.
	breaks := 0
	for k := 1; k < len(reqs); k++ {
		if err := CheckBytePrefix(&reqs[k-1].Request, &reqs[k].Request); err != nil {
			breaks++
			prev, cur := foldedCalls(&reqs[k-1].Request), foldedCalls(&reqs[k].Request)
			changed := len(prev) != len(cur)
			for id := range cur {
				if _, ok := prev[id]; !ok {
					changed = true
				}
			}
			if !changed {
				t.Fatalf("request %d broke the prefix without a fold event or unfold: %v", k, err)
			}
		}
	}
	sess := res.Session(t)
	events := 0
	for _, e := range sess.Custom("contextfold.fold") {
		if strings.Contains(string(e.Data), `"kind":"fold"`) {
			events++
			if strings.Contains(string(e.Data), "the quick brown fox") {
				t.Fatal("a fold record carries block content")
			}
		}
	}
	if events == 0 || breaks > events+len(ls.Unfolded()) {
		t.Fatalf("%d prefix breaks for %d fold events", breaks, events)
	}
	t.Logf("%d requests, first fold at %d, %d fold events, %d prefix breaks", len(reqs), foldedAt, events, breaks)

	ucall, last := checkRecallAndUnfold(t, env, ls, reqs)

	// A second run with -c repeats the folded bytes: every block folded in
	// the last request of the first run is byte-identical in the first
	// request of the resumed run, and the unfolded block stays raw.
	res2 := env.Print(PrintOptions{Prompt: "One more thing.", Continue: true})
	res2.Require(t)
	reqs2 := ToolRequests(res2.Requests)
	if len(reqs2) == 0 {
		t.Fatal("the resumed run sent nothing")
	}
	first := reqs2[0]
	if len(first.Messages) <= len(last.Messages) {
		t.Fatal("the resumed request lost history")
	}
	before := foldedCalls(&last.Request)
	if len(before) == 0 {
		t.Fatal("nothing folded at the end of the first run")
	}
	for i, m := range last.Messages {
		if _, ok := before[m.ToolCallID]; ok && string(first.Messages[i].Raw) != string(m.Raw) {
			t.Fatalf("folded message %d changed across the restart:\nbefore %.200s\nafter  %.200s", i, m.Raw, first.Messages[i].Raw)
		}
	}
	if got, _ := first.ToolResult(ucall); strings.Contains(got, "FOLDED}") {
		t.Fatal("the unfolded block was folded again after the restart")
	}
}

// checkRecallAndUnfold checks a LongSession run's phases 2 and 3:
// recall_folded returned the exact original bytes of the block it named,
// and unfold restored its block raw in the next request. It returns the
// unfolded block's call id and the run's last request.
func checkRecallAndUnfold(t *testing.T, env *Env, ls *LongSession, reqs []fakellm.Recorded) (string, fakellm.Recorded) {
	t.Helper()
	// recall_folded returned the exact original bytes of the block it named.
	if len(ls.Recalled()) == 0 {
		t.Fatal("the model never recalled")
	}
	code := ls.Recalled()[0]
	step := -1
	for k := range reqs {
		for callID, c := range foldedCalls(&reqs[k].Request) {
			if c == code {
				step, _ = StepOfCallID(callID)
			}
		}
	}
	if step < 0 {
		t.Fatalf("recalled code %s was never shown", code)
	}
	var recalled string
	for k := range reqs {
		if out, ok := reqs[k].ToolResult(RecallCallID); ok {
			recalled = out
			break
		}
	}
	want := env.GenOutput(step)
	if !strings.Contains(recalled, "✓ "+code) || !strings.Contains(recalled, "sha256 verified") || !strings.Contains(recalled, strings.TrimRight(want, "\n")) {
		t.Fatalf("recall of %s (step %d) did not return its exact bytes:\n%.400s", code, step, recalled)
	}

	// unfold restored the raw block in the next request.
	if len(ls.Unfolded()) == 0 {
		t.Fatal("the model never unfolded")
	}
	uc := ls.Unfolded()[0]
	var ucall string
	for k := range reqs {
		for callID, c := range foldedCalls(&reqs[k].Request) {
			if c == uc {
				ucall = callID
			}
		}
	}
	last := reqs[len(reqs)-1]
	if _, ok := last.ToolResult(UnfoldCallID); !ok {
		t.Fatal("the last request has no unfold result")
	}
	got, _ := last.ToolResult(ucall)
	ustep, _ := StepOfCallID(ucall)
	if strings.Contains(got, "FOLDED}") || strings.TrimRight(got, "\n") != strings.TrimRight(env.GenOutput(ustep), "\n") {
		t.Fatalf("unfolded block %s is not raw in the next request: %.120q", uc, got)
	}

	return ucall, last
}

// TestNothingFoldedMeansByteIdentical: loaded with nothing to fold, and with
// CONTEXTFOLD=0, Pi's provider requests equal Pi's without the extension.
func TestNothingFoldedMeansByteIdentical(t *testing.T) {
	run := func(cfg Config) [][]byte {
		env := NewEnv(t, cfg)
		res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step, then report."})
		res.Require(t)
		var out [][]byte
		for _, r := range res.Requests {
			out = append(out, env.Normalize(r.Body))
		}
		return out
	}
	base := Config{Script: &LongSession{Steps: 6, SkipRecall: true, SkipUnfold: true}, ContextWindow: 200_000, Compaction: noCompaction}
	raw := run(base)
	loaded := base
	loaded.Script = &LongSession{Steps: 6, SkipRecall: true, SkipUnfold: true}
	with := run(WithContextFold(t, loaded))
	off := base
	off.Script = &LongSession{Steps: 6, SkipRecall: true, SkipUnfold: true}
	off = WithContextFold(t, off)
	off.Env["CONTEXTFOLD"] = "0"
	disabled := run(off)
	if len(disabled) != len(raw) || len(with) != len(raw) {
		t.Fatalf("requests: raw %d, loaded %d, disabled %d", len(raw), len(with), len(disabled))
	}
	for k := range raw {
		if string(disabled[k]) != string(raw[k]) {
			t.Fatalf("CONTEXTFOLD=0: request %d differs from Pi without the extension", k)
		}
		// Loaded, the extension adds its two tools (and their prompt lines
		// in the system message); every conversation message is untouched.
		a, _ := DecodeMessages(raw[k])
		b, _ := DecodeMessages(with[k])
		if len(a) != len(b) {
			t.Fatalf("loaded: request %d has %d messages, want %d", k, len(b), len(a))
		}
		for i := 1; i < len(a); i++ {
			if string(a[i].Raw) != string(b[i].Raw) {
				t.Fatalf("loaded: request %d message %d differs:\n%s\n%s", k, i, a[i].Raw, b[i].Raw)
			}
		}
		if !strings.Contains(string(with[k]), `"name":"recall_folded"`) {
			t.Fatalf("loaded: request %d does not declare recall_folded", k)
		}
	}
	// What loading it costs every request: the two tools' declarations and
	// their lines in the system prompt. The README states the figure.
	added := tokens.Units(string(with[0])) - tokens.Units(string(raw[0]))
	want := readmeFigure(t, `the two tools' declarations and their lines in the system prompt add about ([0-9,]+) characters \(~([0-9,]+) tokens\)`)
	if added < want[0]*95/100 || added > want[0]*105/100 || tokens.EstimateUnits(added) < want[1]*95/100 || tokens.EstimateUnits(added) > want[1]*105/100 {
		t.Fatalf("loading adds %d characters (~%d tokens) to every request; the README says %d (~%d)", added, tokens.EstimateUnits(added), want[0], want[1])
	}
	t.Logf("loading adds %d characters (~%d tokens) to every request", added, tokens.EstimateUnits(added))
}

// readmeFigure returns the numbers the README states in the sentence re
// matches (its line breaks read as spaces).
func readmeFigure(t *testing.T, re string) []int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(RepoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(re).FindStringSubmatch(strings.Join(strings.Fields(string(data)), " "))
	if m == nil {
		t.Fatalf("README.md states no figure matching %s", re)
	}
	var out []int
	for _, g := range m[1:] {
		n, _ := strconv.Atoi(strings.ReplaceAll(g, ",", ""))
		out = append(out, n)
	}
	return out
}

// TestFoldingKeepsMessageCount: the same script with and without folding
// sends the same number of requests with the same roles in each.
func TestFoldingKeepsMessageCount(t *testing.T) {
	roles := func(cfg Config) [][]string {
		env := NewEnv(t, cfg)
		res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step."})
		res.Require(t)
		var out [][]string
		for _, r := range ToolRequests(res.Requests) {
			out = append(out, Roles(r.Messages))
		}
		return out
	}
	mk := func() Config {
		return Config{Script: &LongSession{Steps: 30, SkipRecall: true, SkipUnfold: true}, Compaction: noCompaction}
	}
	raw := roles(mk())
	folded := roles(WithContextFold(t, mk()))
	if fmt.Sprint(raw) != fmt.Sprint(folded) {
		t.Fatalf("roles differ:\nraw    %v\nfolded %v", raw, folded)
	}
}

// killer wraps a script and kills the engine process once, when the session
// reaches a given step: the session must keep working.
type killer struct {
	fakellm.Script
	bin    string
	atStep int
	once   sync.Once
	killed int
}

func (k *killer) Reply(r *fakellm.Request) fakellm.Reply {
	if strings.Contains(r.Text(), fmt.Sprintf("ERROR: step %d failed", k.atStep)) {
		k.once.Do(func() { k.killed = killProcesses(k.bin) })
	}
	return k.Script.Reply(r)
}

// killProcesses SIGKILLs every process whose argv[0] is bin.
func killProcesses(bin string) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if argv0, _, _ := strings.Cut(string(cmd), "\x00"); argv0 == bin {
			var pid int
			fmt.Sscan(e.Name(), &pid)
			if killPid(pid) == nil {
				n++
			}
		}
	}
	return n
}

func TestEngineKilledMidSession(t *testing.T) {
	ls := &LongSession{Steps: 40, SkipRecall: true, SkipUnfold: true}
	k := &killer{Script: ls, bin: EngineBinary(t), atStep: 25}
	env := NewEnv(t, WithContextFold(t, Config{Script: k, Compaction: noCompaction}))
	res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step."})
	res.Require(t)
	if k.killed == 0 {
		t.Fatal("the engine was not running at step 25")
	}
	reqs := ToolRequests(res.Requests)
	if len(reqs) < 41 {
		t.Fatalf("the session stopped after %d requests", len(reqs))
	}
	if n := strings.Count(res.Stderr, "engine exited"); n != 1 {
		t.Fatalf("want one warning about the engine, got %d:\n%s", n, res.Stderr)
	}
	if len(foldedCalls(&reqs[len(reqs)-1].Request)) == 0 {
		t.Fatal("folds did not survive the engine's death")
	}
}

// TestFoldingInRPCMode runs the long session through Pi's RPC mode: folds
// reach the provider, and recall_folded returns the exact bytes.
func TestFoldingInRPCMode(t *testing.T) {
	ls := &LongSession{Steps: 40, SkipUnfold: true}
	env := NewEnv(t, WithContextFold(t, Config{Script: ls, Compaction: noCompaction}))
	rpc := env.StartRPC(RPCOptions{})
	rpc.Prompt("Run gen.sh for every step, then report.")
	rpc.Close()
	reqs := ToolRequests(env.Server.Requests())
	folded := 0
	for k := range reqs {
		folded = max(folded, len(foldedCalls(&reqs[k].Request)))
	}
	if folded == 0 {
		t.Fatal("no fold reached the provider in RPC mode")
	}
	if len(ls.Recalled()) == 0 {
		t.Fatal("no recall in RPC mode")
	}
	code := ls.Recalled()[0]
	var callID, out string
	for k := range reqs {
		for id, c := range foldedCalls(&reqs[k].Request) {
			if c == code {
				callID = id
			}
		}
		if o, ok := reqs[k].ToolResult(RecallCallID); ok {
			out = o
		}
	}
	step, _ := StepOfCallID(callID)
	if !strings.Contains(out, strings.TrimRight(env.GenOutput(step), "\n")) {
		t.Fatalf("RPC recall of %s did not return the exact bytes: %.300s", code, out)
	}
}

// TestPackageLoadsByPathAndInstall: the checkout is a Pi package; both
// `pi -e <checkout>` and `pi install <checkout>` load the extension.
func TestPackageLoadsByPathAndInstall(t *testing.T) {
	declares := func(reqs []fakellm.Recorded) bool {
		return len(reqs) > 0 && strings.Contains(string(reqs[0].Body), `"name":"recall_folded"`)
	}
	// -e <checkout>: Pi reads package.json's "pi" field.
	cfg := WithContextFold(t, Config{Script: &LongSession{Steps: 2, SkipRecall: true, SkipUnfold: true}})
	cfg.Extension = RepoRoot(t)
	env := NewEnv(t, cfg)
	res := env.Print(PrintOptions{Prompt: "go"})
	res.Require(t)
	if !declares(res.Requests) {
		t.Fatal("pi -e <checkout> did not load the extension")
	}

	// pi install <checkout>, then a run that loads nothing explicitly.
	cfg = WithContextFold(t, Config{Script: &LongSession{Steps: 2, SkipRecall: true, SkipUnfold: true}})
	cfg.Extension = ""
	env = NewEnv(t, cfg)
	install := env.command(context.Background(), []string{"install", RepoRoot(t)})
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("pi install: %v\n%s", err, out)
	}
	var args []string
	for _, a := range env.Args("text", "go") {
		if a != "--no-extensions" {
			args = append(args, a)
		}
	}
	cmd := env.command(context.Background(), args)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pi after install: %v\n%s", err, out)
	}
	if !declares(env.Server.Requests()) {
		t.Fatal("pi install <checkout> did not load the extension")
	}

	// Installed and -e on the same path: loaded once. -e on a second copy:
	// the tool names conflict at load (the README says both).
	n := env.Server.Len()
	cmd = env.command(context.Background(), append(args[:len(args)-1:len(args)-1], "-e", RepoRoot(t), "go"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pi installed + -e on the same path: %v\n%s", err, out)
	}
	if reqs := env.Server.Requests()[n:]; !declares(reqs) || strings.Count(string(reqs[0].Body), `"name":"recall_folded"`) != 1 {
		t.Fatal("installed + -e on the same path did not load the extension exactly once")
	}
	cp := t.TempDir()
	// The package's files: package.json, index.ts and the extension folder's
	// sources, whatever they are now.
	srcs, _ := filepath.Glob(filepath.Join(RepoRoot(t), "extension", "*.[tj]s"))
	pkgFiles := []string{"package.json", "index.ts"}
	for _, f := range srcs {
		pkgFiles = append(pkgFiles, filepath.Join("extension", filepath.Base(f)))
	}
	for _, f := range pkgFiles {
		data, err := os.ReadFile(filepath.Join(RepoRoot(t), f))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(cp, f)), 0o755)
		os.WriteFile(filepath.Join(cp, f), data, 0o644)
	}
	os.Symlink(filepath.Join(RepoRoot(t), "node_modules"), filepath.Join(cp, "node_modules"))
	cmd = env.command(context.Background(), append(args[:len(args)-1:len(args)-1], "-e", cp, "go"))
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "recall_folded") || !strings.Contains(strings.ToLower(string(out)), "conflict") {
		t.Fatalf("installed + -e on a second copy loaded without a conflict:\n%s", out)
	}
	t.Logf("a second copy: %s", strings.TrimSpace(string(out)))
}

// recaller answers a user message "RECALL <code>" with one recall_folded
// call and "UNFOLD <code>" with one unfold call, each then a final text;
// everything else goes to the wrapped session.
type recaller struct {
	*LongSession
	n int
}

func (r *recaller) Reply(req *fakellm.Request) fakellm.Reply {
	var last fakellm.Message
	for _, m := range req.Messages {
		if m.Role == "user" {
			last = m
		}
	}
	if code, ok := strings.CutPrefix(strings.TrimSpace(last.Content), "RECALL "); ok {
		id := "call_recall_" + code
		if _, done := req.ToolResult(id); !done {
			args, _ := json.Marshal(map[string]any{"codes": []string{code}})
			return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: id, Name: "recall_folded", Arguments: args}}}
		}
		return fakellm.Reply{Text: "FINAL: recalled " + code}
	}
	if code, ok := strings.CutPrefix(strings.TrimSpace(last.Content), "UNFOLD "); ok {
		id := "call_unfold_" + code
		if _, done := req.ToolResult(id); !done {
			args, _ := json.Marshal(map[string]any{"codes": []string{code}})
			return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: id, Name: "unfold", Arguments: args}}}
		}
		return fakellm.Reply{Text: "FINAL: unfolded " + code}
	}
	return r.LongSession.Reply(req)
}

// TestRecallAfterCompactionAndRestart: a code folded before Pi's own
// compaction still recalls its exact bytes from the session file, after the
// compaction and again after a restart with -c.
func TestRecallAfterCompactionAndRestart(t *testing.T) {
	ls := &LongSession{Steps: 30, SkipRecall: true, SkipUnfold: true}
	script := &recaller{LongSession: ls}
	env := NewEnv(t, WithContextFold(t, Config{Script: script, Compaction: &Compaction{Enabled: true, ReserveTokens: 1000, KeepRecentTokens: 2000}, ContextWindow: 200_000}))
	// The ladder profile at a tiny threshold folds the early results before
	// the compaction (the default schedule would wait for a larger batch).
	env.Config.Env["CONTEXTFOLD_POLICY"] = "ladder"
	env.Config.Env["CONTEXTFOLD_FOLD_AT"] = "0.02"
	env.Config.Env["CONTEXTFOLD_FOLD_STEP"] = "0.01"
	rpc := env.StartRPC(RPCOptions{})
	rpc.Prompt("Run gen.sh for every step.")
	var code, callID string
	for _, r := range ToolRequests(env.Server.Requests()) {
		for id, c := range foldedCalls(&r.Request) {
			if s, ok := StepOfCallID(id); ok && s <= 3 && code == "" {
				code, callID = c, id
			}
		}
	}
	if code == "" {
		t.Fatal("no early block folded")
	}
	step, _ := StepOfCallID(callID)
	want := strings.TrimRight(env.GenOutput(step), "\n")
	if rec := rpc.Compact(""); !strings.Contains(string(rec.Raw), `"success":true`) {
		t.Fatalf("compaction failed: %s", rec.Raw)
	}
	rpc.Prompt("RECALL " + code)
	rpc.Close()
	check := func(when string) {
		reqs := env.Server.Requests()
		last := reqs[len(reqs)-1]
		if _, live := last.ToolResult(callID); live {
			t.Fatalf("%s: the folded block is still in context; the test proves nothing", when)
		}
		out, ok := last.ToolResult("call_recall_" + code)
		if !ok || !strings.Contains(out, "sha256 verified") || !strings.Contains(out, want) {
			t.Fatalf("%s: recall of %s did not return its exact bytes:\n%.400s", when, code, out)
		}
	}
	check("after compaction")
	res := env.Print(PrintOptions{Prompt: "RECALL " + code, Continue: true})
	res.Require(t)
	check("after a restart")
}
