package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// compaction returns the newest compaction entry of the session file.
func compaction(t *testing.T, env *Env) SessionEntry {
	t.Helper()
	sess := env.Sessions()
	if len(sess) == 0 {
		t.Fatal("no session file")
	}
	cs := sess[len(sess)-1].ByType("compaction")
	if len(cs) == 0 {
		t.Fatal("no compaction entry")
	}
	return cs[len(cs)-1]
}

var pointerRE = regexp.MustCompile(`\{#([0-9a-z]{6}) FOLDED\} bash · turn \d+`)

// checkDetCompaction asserts the deterministic compaction: no summary
// request reached the model, the summary holds the compacted span's ERROR
// lines and file paths, and a code from it recalls exact bytes after a
// restart.
func checkDetCompaction(t *testing.T, env *Env, script *recaller) {
	t.Helper()
	if n := len(SummaryRequests(env.Server.Requests())); n != 0 {
		t.Fatalf("%d tool-less summary requests reached the model", n)
	}
	c := compaction(t, env)
	if !strings.Contains(c.Summary, "(deterministic: no model wrote this)") {
		t.Fatalf("not a deterministic summary:\n%.300s", c.Summary)
	}
	for _, want := range []string{"ERROR: step 1 failed", "ERROR: step 2 failed", "gen.sh"} {
		if !strings.Contains(c.Summary, want) {
			t.Fatalf("summary lacks %q:\n%s", want, c.Summary)
		}
	}
	m := pointerRE.FindStringSubmatch(c.Summary)
	if m == nil {
		t.Fatalf("summary has no recovery pointer:\n%s", c.Summary)
	}
	code := m[1]
	// Find which step that code belongs to: the block is gone from live
	// history, so use the error line the summary pairs with it.
	errRE := regexp.MustCompile(`\[turn \d+ · \{#` + code + ` FOLDED\}\] ERROR: step (\d+) failed`)
	em := errRE.FindStringSubmatch(c.Summary)
	if em == nil {
		t.Fatalf("no error line tagged with %s:\n%s", code, c.Summary)
	}
	var step int
	fmt.Sscan(em[1], &step)
	res := env.Print(PrintOptions{Prompt: "RECALL " + code, Continue: true})
	res.Require(t)
	reqs := env.Server.Requests()
	out, ok := reqs[len(reqs)-1].ToolResult("call_recall_" + code)
	if !ok || !strings.Contains(out, "sha256 verified") || !strings.Contains(out, strings.TrimRight(env.GenOutput(step), "\n")) {
		t.Fatalf("recall of compacted code %s after a restart:\n%.400s", code, out)
	}
}

// TestDeterministicCompactionRPC: RPC {"type":"compact"} is answered with
// the deterministic summary.
func TestDeterministicCompactionRPC(t *testing.T) {
	script := &recaller{LongSession: &LongSession{Steps: 12, SkipRecall: true, SkipUnfold: true}}
	env := NewEnv(t, WithContextFold(t, Config{Script: script, Compaction: &Compaction{Enabled: false, ReserveTokens: 1000, KeepRecentTokens: 2000}, ContextWindow: 200_000}))
	rpc := env.StartRPC(RPCOptions{})
	rpc.Prompt("Run gen.sh for every step.")
	if rec := rpc.Compact(""); !strings.Contains(string(rec.Raw), `"success":true`) {
		t.Fatalf("compact: %s", rec.Raw)
	}
	rpc.Close()
	checkDetCompaction(t, env, script)
}

// TestDeterministicCompactionThreshold: Pi's automatic compaction (small
// reserve and keep-recent) is answered the same way.
func TestDeterministicCompactionThreshold(t *testing.T) {
	script := &recaller{LongSession: &LongSession{Steps: 30, SkipRecall: true, SkipUnfold: true}}
	// Folding keeps requests under Pi's threshold and cancels a threshold
	// compaction it can make unnecessary; hold it off so Pi's automatic
	// compaction fires: a reserve that leaves too little to keep ahead of
	// (the engine then keeps to its own budget), and the ladder profile
	// with an unreachable threshold.
	cfg := WithContextFold(t, Config{Script: script, ContextWindow: 24_000, Compaction: &Compaction{Enabled: true, ReserveTokens: 20_000, KeepRecentTokens: 3_000}})
	cfg.Env["CONTEXTFOLD_POLICY"] = "ladder"
	cfg.Env["CONTEXTFOLD_FOLD_AT"] = "1"
	cfg.Env["CONTEXTFOLD_BUDGET_FRACTION"] = "1"
	env := NewEnv(t, cfg)
	res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step."})
	res.Require(t)
	if len(env.Sessions()[0].ByType("compaction")) == 0 {
		t.Fatal("Pi never compacted")
	}
	checkDetCompaction(t, env, script)
}

// TestNativeCompactionStillAvailable: CONTEXTFOLD_COMPACT=native leaves
// compaction to Pi's model.
func TestNativeCompactionStillAvailable(t *testing.T) {
	script := &recaller{LongSession: &LongSession{Steps: 8, SkipRecall: true, SkipUnfold: true}}
	env := NewEnv(t, WithContextFold(t, Config{Script: script, Compaction: &Compaction{Enabled: false, ReserveTokens: 1000, KeepRecentTokens: 2000}, ContextWindow: 200_000}))
	env.Config.Env["CONTEXTFOLD_COMPACT"] = "native"
	rpc := env.StartRPC(RPCOptions{})
	rpc.Prompt("Run gen.sh for every step.")
	rpc.Compact("")
	rpc.Close()
	if len(SummaryRequests(env.Server.Requests())) != 1 {
		t.Fatal("native mode did not ask Pi's model for the summary")
	}
}

// openEnvelope lets a short session at a large window fold as the cost-first
// schedule did: a 10k tail, and no envelope to speak of.
var openEnvelope = map[string]string{"CONTEXTFOLD_TAIL": "10000", "CONTEXTFOLD_FOLD_AT": "0.01", "CONTEXTFOLD_FOLD_STEP": "0.01"}

// TestHandoffAndParentCodes: /fold-handoff in RPC mode writes the seed; once
// confirmed, the fresh session's first request carries it, and a code from
// the parent session resolves there.
func TestHandoffAndParentCodes(t *testing.T) {
	ls := &LongSession{Steps: 30, SkipRecall: true, SkipUnfold: true}
	script := &recaller{LongSession: ls}
	// Compaction only on request, keeping little, for the fresh session's
	// two compactions below; a small tail and an open envelope, so that
	// the parent folds many blocks in 30 steps.
	env := NewEnv(t, WithContextFold(t, Config{Script: script, Compaction: &Compaction{Enabled: false, ReserveTokens: 1000, KeepRecentTokens: 2000}, ContextWindow: 200_000, Env: openEnvelope}))
	var confirmed int
	rpc := env.StartRPC(RPCOptions{OnDialog: func(r UIRequest) UIResponse {
		if r.Method == "confirm" {
			confirmed++
			return UIConfirm(true)
		}
		return UICancel()
	}})
	rpc.Prompt("Run gen.sh for every step.")
	var code, callID string
	seen := map[string]bool{}
	var codes []string
	for _, r := range ToolRequests(env.Server.Requests()) {
		for id, c := range foldedCalls(&r.Request) {
			if code == "" {
				code, callID = c, id
			}
			if !seen[c] {
				seen[c] = true
				codes = append(codes, c)
			}
		}
	}
	if code == "" || len(codes) < 7 {
		t.Fatal("nothing folded in the parent session")
	}
	parentFile := env.Sessions()[0].Path
	before := len(env.Server.Requests())
	rpc.Prompt("/fold-handoff Finish the refactor of gen.sh and keep the ERROR lines")
	if confirmed != 1 {
		t.Fatalf("%d confirmations asked", confirmed)
	}
	if n := len(env.Server.Requests()); n != before {
		t.Fatalf("/fold-handoff sent %d model requests", n-before)
	}
	seedPath := ""
	for _, n := range rpc.Notifications() {
		if m := regexp.MustCompile(`\((/[^)]+handoff-[^)]+\.md)\)`).FindStringSubmatch(n.Message); m != nil {
			seedPath = m[1]
		}
	}
	if seedPath == "" {
		t.Fatalf("no notification names the seed: %+v", rpc.Notifications())
	}
	seed, err := os.ReadFile(seedPath)
	if err != nil || !strings.Contains(string(seed), "Finish the refactor of gen.sh and keep the ERROR lines") || !strings.Contains(string(seed), "Parent session: "+parentFile) {
		t.Fatalf("seed %s: %v\n%.400s", seedPath, err, seed)
	}
	// The fresh session: its first request carries the seed, and the
	// parent's code resolves from the parent session file.
	rpc.Prompt("RECALL " + code)
	reqs := env.Server.Requests()
	first := reqs[before]
	if !strings.Contains(first.Text(), "# Session handoff seed") || strings.Contains(first.Text(), "bash gen.sh 1\"") {
		t.Fatalf("the fresh session's first request does not carry the seed (or carries the old history)")
	}
	out, _ := reqs[len(reqs)-1].ToolResult("call_recall_" + code)
	step, _ := StepOfCallID(callID)
	if !strings.Contains(out, "parent session") || !strings.Contains(out, strings.TrimRight(env.GenOutput(step), "\n")) {
		t.Fatalf("parent code %s did not resolve:\n%.400s", code, out)
	}
	// Every compaction of the fresh session keeps the seed's goal verbatim.
	slices.Sort(codes)
	codes = slices.DeleteFunc(codes, func(c string) bool { return c == code })
	for i := 1; i <= 2; i++ {
		for k := 0; k < 3; k++ { // a new code each time: the script recalls a code once per context
			rpc.Prompt("RECALL " + codes[0])
			codes = codes[1:]
		}
		if rec := rpc.Compact(""); !strings.Contains(string(rec.Raw), `"success":true`) {
			t.Fatalf("compaction %d: %s", i, rec.Raw)
		}
	}
	rpc.Close()
	sess := env.Sessions()
	cs := sess[len(sess)-1].ByType("compaction")
	if len(cs) != 2 {
		t.Fatalf("%d compactions in the fresh session", len(cs))
	}
	for i, c := range cs {
		if !strings.Contains(c.Summary, "(verbatim from its handoff seed, 1 line)\nFinish the refactor of gen.sh and keep the ERROR lines\n") {
			t.Fatalf("compaction %d lost the seed's goal:\n%s", i+1, c.Summary)
		}
	}
}

// TestOfflineToolsOnRealSessions runs contextfold inspect, recall and handoff
// on the session file real Pi wrote, and on a truncated copy.
func TestOfflineToolsOnRealSessions(t *testing.T) {
	ls := &LongSession{Steps: 30, SkipRecall: true, SkipUnfold: true}
	env := NewEnv(t, WithContextFold(t, Config{Script: ls, Compaction: noCompaction}))
	env.Print(PrintOptions{Prompt: "Run gen.sh for every step."}).Require(t)
	file := env.Sessions()[0].Path
	bin := EngineBinary(t)
	run := func(args ...string) (string, int) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return string(out), code
	}
	out, rc := run("inspect", "-json", file)
	var in struct {
		Codes  []struct{ Code, ID, Recall string } `json:"codes"`
		Masked int                                 `json:"tokensMasked"`
	}
	if rc != 0 || json.Unmarshal([]byte(out), &in) != nil || len(in.Codes) == 0 || in.Masked <= 0 {
		t.Fatalf("inspect (%d): %.400s", rc, out)
	}
	for _, c := range in.Codes {
		if c.Recall != "verified" {
			t.Fatalf("code %s recall %s", c.Code, c.Recall)
		}
	}
	c := in.Codes[0]
	step, _ := StepOfCallID(strings.TrimPrefix(c.ID, "r:"))
	out, rc = run("recall", file, c.Code)
	if rc != 0 || !strings.Contains(out, strings.TrimRight(env.GenOutput(step), "\n")) {
		t.Fatalf("recall (%d): %.400s", rc, out)
	}
	out, rc = run("recall", file, c.Code, "-grep", "ERROR")
	if rc != 0 || !strings.Contains(out, fmt.Sprintf("ERROR: step %d failed", step)) {
		t.Fatalf("recall -grep (%d): %s", rc, out)
	}
	out, rc = run("handoff", file, "-goal", "carry on")
	path := strings.TrimSpace(out)
	if rc != 0 || !strings.HasSuffix(path, ".md") {
		t.Fatalf("handoff (%d): %s", rc, out)
	}
	if seed, _ := os.ReadFile(path); !strings.Contains(string(seed), "carry on") {
		t.Fatal("handoff seed lacks the goal")
	}
	// A truncated final line (a crash mid-write) is skipped, not fatal.
	data, _ := os.ReadFile(file)
	trunc := file + ".trunc.jsonl"
	os.WriteFile(trunc, data[:len(data)-40], 0o644)
	if out, rc := run("inspect", trunc); rc != 0 || !strings.Contains(out, "last line truncated") {
		t.Fatalf("truncated file (%d): %s", rc, out)
	}
	// A file that is not a session is refused clearly.
	notSession := file + ".not.jsonl"
	os.WriteFile(notSession, []byte(`{"hello":"world"}`+"\n"), 0o644)
	if out, rc := run("inspect", notSession); rc == 0 || !strings.Contains(out, "not a Pi session") {
		t.Fatalf("not a session (%d): %s", rc, out)
	}
}

var _ = fakellm.DefaultSummaryText

// TestCompactionFallsBackToPi: when the deterministic compaction cannot run
// (here, no engine), Pi's own compaction runs instead.
func TestCompactionFallsBackToPi(t *testing.T) {
	script := &recaller{LongSession: &LongSession{Steps: 6, SkipRecall: true, SkipUnfold: true}}
	env := NewEnv(t, WithContextFold(t, Config{Script: script, Compaction: &Compaction{Enabled: false, ReserveTokens: 1000, KeepRecentTokens: 2000}, ContextWindow: 200_000}))
	env.Config.Env["CONTEXTFOLD_BIN"] = "/nonexistent/contextfold"
	rpc := env.StartRPC(RPCOptions{})
	rpc.Prompt("Run gen.sh for every step.")
	if rec := rpc.Compact(""); !strings.Contains(string(rec.Raw), `"success":true`) {
		t.Fatalf("compact: %s", rec.Raw)
	}
	res := rpc.Close()
	if len(SummaryRequests(env.Server.Requests())) != 1 {
		t.Fatal("Pi's own compaction did not run")
	}
	_ = res
}

// TestHandoffHeadlessPrintsPath: in print mode /fold-handoff writes the seed
// and prints its path; no model request is made.
func TestHandoffHeadlessPrintsPath(t *testing.T) {
	env := NewEnv(t, WithContextFold(t, Config{Script: &LongSession{Steps: 6, SkipRecall: true, SkipUnfold: true}, Compaction: noCompaction}))
	env.Print(PrintOptions{Prompt: "Run gen.sh for every step."}).Require(t)
	before := len(env.Server.Requests())
	res := env.Print(PrintOptions{Prompt: "/fold-handoff ship it", Continue: true})
	res.Require(t)
	if len(env.Server.Requests()) != before {
		t.Fatal("/fold-handoff made a model request")
	}
	// Pi routes an extension's process.stdout to stderr in print mode, so
	// its own answer keeps stdout.
	m := regexp.MustCompile(`(/\S+/handoff-[^/\s]+\.md)`).FindStringSubmatch(res.Stdout + res.Stderr)
	if m == nil {
		t.Fatalf("no path printed: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	seed, err := os.ReadFile(m[1])
	if err != nil || !strings.HasPrefix(string(seed), "# Session handoff seed") || !strings.Contains(string(seed), "ship it") {
		t.Fatalf("seed %s: %v", m[1], err)
	}
	// A second handoff keeps the first seed and names its own file.
	res = env.Print(PrintOptions{Prompt: "/fold-handoff ship it again", Continue: true})
	res.Require(t)
	second := strings.TrimSuffix(m[1], ".md") + "-2.md"
	if !strings.Contains(res.Stdout+res.Stderr, second) {
		t.Fatalf("second handoff does not name %s: stdout %q stderr %q", second, res.Stdout, res.Stderr)
	}
	if again, _ := os.ReadFile(m[1]); string(again) != string(seed) {
		t.Fatal("the second handoff overwrote the first seed")
	}
	if s2, _ := os.ReadFile(second); !strings.Contains(string(s2), "ship it again") {
		t.Fatalf("second seed %s lacks its goal", second)
	}
}

// TestHandoffBeforeTheFirstMessage: Pi writes the session file with the
// first assistant message, so /fold-handoff before any message has nothing
// to hand off. Interactively (RPC) that is an info answer, no warning and no
// dialog; headless it is printed; no seed is written and no model request
// is made either way.
func TestHandoffBeforeTheFirstMessage(t *testing.T) {
	const want = "nothing to hand off yet: this session has no messages"
	env := NewEnv(t, WithContextFold(t, Config{Script: &LongSession{Steps: 3, SkipRecall: true, SkipUnfold: true}, Compaction: noCompaction}))
	dialogs := 0
	rpc := env.StartRPC(RPCOptions{OnDialog: func(r UIRequest) UIResponse {
		dialogs++
		return UICancel()
	}})
	rpc.Prompt("/fold-handoff ship it")
	rpc.Close()
	var infos int
	var said []string
	for _, n := range rpc.Notifications() {
		said = append(said, n.NotifyType+": "+n.Message)
		switch {
		case n.NotifyType == "info" && n.Message == want:
			infos++
		case n.NotifyType == "warning" || n.NotifyType == "error" || strings.Contains(n.Message, "handoff"):
			t.Errorf("unexpected notification: %s %q", n.NotifyType, n.Message)
		}
	}
	if infos != 1 || dialogs != 0 {
		t.Fatalf("%d info answers (want 1), %d dialogs (want 0): %q", infos, dialogs, said)
	}
	res := env.Print(PrintOptions{Prompt: "/fold-handoff ship it"})
	res.Require(t)
	if !strings.Contains(res.Stdout+res.Stderr, want) || strings.Contains(res.Stdout+res.Stderr, "failed") {
		t.Fatalf("headless: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if n := len(env.Server.Requests()); n != 0 {
		t.Fatalf("%d model requests", n)
	}
	filepath.WalkDir(env.SessionDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "handoff-") {
			t.Errorf("a seed was written: %s", p)
		}
		return nil
	})
}
