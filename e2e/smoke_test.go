package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// These smoke tests run real Pi without the context-fold extension. They pin
// down the harness and the Pi behaviour the context-fold tests build on.

const longPrompt = "Run gen.sh for every step and report which steps failed."

// TestSmokePrintLongSession runs the scripted long session (40 gen.sh steps,
// no recall/unfold) in print mode and checks the conversation step by step.
func TestSmokePrintLongSession(t *testing.T) {
	t.Parallel()
	const steps = 40
	script := &LongSession{Steps: steps, SkipRecall: true, SkipUnfold: true}
	env := NewEnv(t, Config{
		Script:        script,
		ContextWindow: 1_000_000, // no threshold compaction for this check
		Compaction:    &Compaction{Enabled: false},
	})
	res := env.Print(PrintOptions{Prompt: longPrompt})
	res.Require(t)
	t.Logf("print run: %s, %d requests", res.Duration, len(res.Requests))

	if len(res.Requests) < steps+1 {
		t.Fatalf("%d requests, want >= %d", len(res.Requests), steps+1)
	}
	if n := len(SummaryRequests(res.Requests)); n != 0 {
		t.Errorf("%d tool-less requests with compaction off", n)
	}
	if !strings.Contains(res.Stdout, "FINAL: done after 40 steps") {
		t.Errorf("stdout %q", res.Stdout)
	}
	for k, rec := range res.Requests {
		if rec.Status != 200 || !rec.HasTool("bash") {
			t.Fatalf("request %d: status %d tools %v", k+1, rec.Status, rec.Tools)
		}
		if got := CountRole(rec.Messages, "tool"); got != k {
			t.Errorf("request %d has %d tool results, want %d", k+1, got, k)
		}
	}
	// The last request carries all 40 outputs, each exactly gen.sh's output
	// with its buried ERROR line, under the tool-call id the script chose.
	last := res.Requests[len(res.Requests)-1]
	for i := 1; i <= steps; i++ {
		out, ok := last.ToolResult(GenCallID(i))
		if !ok {
			t.Fatalf("no tool result for %s; tool-call ids were rewritten?", GenCallID(i))
		}
		if want := env.GenOutput(i); out != want {
			t.Errorf("step %d output differs from gen.sh output:\n got %q\nwant %q", i, tail(out, 200), tail(want, 200))
		}
		if !strings.Contains(out, fmt.Sprintf("\nERROR: step %d failed\n", i)) {
			t.Errorf("step %d: no ERROR line", i)
		}
	}
	if n := len(env.GenOutput(1)); n < 3000 {
		t.Errorf("gen.sh output is only %d bytes", n)
	}
	// Without an extension Pi only appends: every request is a byte prefix
	// of the next (what a provider prompt cache needs).
	for _, err := range PrefixBreaks(res.Requests) {
		t.Error(err)
	}
	// The computed usage reports that shared prefix as cached.
	if u := res.Requests[steps].Usage; u.Cached == 0 || u.Cached+u.CacheWrite != u.Prompt {
		t.Errorf("usage of the last request %+v", u)
	}

	sess := res.Session(t)
	if got := len(sess.Messages("toolResult")); got != steps {
		t.Errorf("session has %d toolResult messages, want %d", got, steps)
	}
	if sess.Header.Cwd != env.WorkDir {
		t.Errorf("session cwd %q, want %q", sess.Header.Cwd, env.WorkDir)
	}
}

// TestSmokeRPCCompact drives Pi over RPC: one prompt, then a manual
// compaction with a tiny keepRecentTokens. The fake sees Pi's tool-less
// summary request, and the next prompt carries the summary.
func TestSmokeRPCCompact(t *testing.T) {
	t.Parallel()
	script := &LongSession{Steps: 3}
	env := NewEnv(t, Config{
		Script:     script,
		Compaction: &Compaction{Enabled: true, KeepRecentTokens: 10},
	})
	rpc := env.StartRPC(RPCOptions{})

	var state struct {
		SessionFile string `json:"sessionFile"`
		Model       struct {
			ID string `json:"id"`
		} `json:"model"`
	}
	if err := json.Unmarshal(rpc.GetState(), &state); err != nil {
		t.Fatal(err)
	}
	if state.Model.ID != "fake-model" {
		t.Errorf("get_state model %q", state.Model.ID)
	}

	recs := rpc.Prompt(longPrompt)
	if recs[len(recs)-1].Type != "agent_settled" {
		t.Fatalf("prompt ended with %s", recs[len(recs)-1].Raw)
	}
	if n := env.Server.Len(); n != 4 {
		t.Errorf("%d requests after the prompt, want 4 (3 steps + answer)", n)
	}

	comp := rpc.Compact("keep it short")
	if !comp.Success {
		t.Fatalf("compact failed: %s", comp.Raw)
	}
	var cr struct {
		Summary          string `json:"summary"`
		FirstKeptEntryID string `json:"firstKeptEntryId"`
		TokensBefore     int    `json:"tokensBefore"`
	}
	json.Unmarshal(comp.Data, &cr)
	sums := SummaryRequests(env.Server.Requests())
	if len(sums) != 1 {
		t.Fatalf("%d tool-less requests, want 1", len(sums))
	}
	sum := sums[0]
	if !sum.ToolLess() || !strings.Contains(sum.Text(), "keep it short") {
		t.Errorf("summary request text %q", tail(sum.Text(), 300))
	}
	if !strings.Contains(cr.Summary, "[longsession progress: steps=3 ") || cr.TokensBefore == 0 {
		t.Errorf("compaction result %s", comp.Data)
	}

	entries := rpc.GetEntries()
	var compactions int
	for _, e := range entries {
		if e.Type == "compaction" {
			compactions++
		}
	}
	if compactions != 1 {
		t.Errorf("%d compaction entries", compactions)
	}

	// The next prompt starts from the summary; the script reads its progress
	// marker and answers at once instead of restarting at step 1.
	before := env.Server.Len()
	rpc.Prompt("Anything else?")
	after := env.Server.Requests()[before:]
	if len(after) != 1 || !strings.Contains(after[0].Text(), "compacted into the following summary") ||
		!strings.Contains(after[0].Reply.Text, "FINAL") {
		t.Errorf("after compaction: %d requests; first text %q", len(after), tail(after[0].Text(), 400))
	}

	res := rpc.Close()
	if res.ExitCode != 0 {
		t.Errorf("rpc exit %d\n%s", res.ExitCode, tail(res.Stderr, 2000))
	}
	if len(res.Sessions) != 1 || len(res.Sessions[0].ByType("compaction")) != 1 {
		t.Errorf("sessions after close: %d", len(res.Sessions))
	}
	if state.SessionFile != "" && res.Sessions[0].Path != state.SessionFile {
		t.Errorf("session file %q, get_state said %q", res.Sessions[0].Path, state.SessionFile)
	}
}

// probeExtension is a tiny Pi extension that exercises the RPC extension-UI
// sub-protocol: /probe-ui asks three dialogs and reports the answers (and an
// environment variable passed through Config.Env) in a notification.
const probeExtension = `export default function (pi) {
  pi.registerCommand("probe-ui", {
    description: "e2e probe",
    handler: async (args, ctx) => {
      const ok = await ctx.ui.confirm("Probe?", "confirm me");
      const pick = await ctx.ui.select("Pick one", ["a", "b"]);
      const text = await ctx.ui.input("Type", "placeholder");
      ctx.ui.notify("probe ok=" + ok + " pick=" + pick + " text=" + text + " env=" + process.env.CONTEXTFOLD_PROBE, "warning");
    },
  });
}
`

// TestSmokeRPCDialogs loads a probe extension with -e and answers its
// dialogs through RPCOptions.OnDialog.
func TestSmokeRPCDialogs(t *testing.T) {
	t.Parallel()
	env := NewEnv(t, Config{Env: map[string]string{"CONTEXTFOLD_PROBE": "passed"}})
	env.Config.Extension = filepath.Join(env.Root, "probe-ext.js")
	if err := os.WriteFile(env.Config.Extension, []byte(probeExtension), 0o644); err != nil {
		t.Fatal(err)
	}
	rpc := env.StartRPC(RPCOptions{OnDialog: func(u UIRequest) UIResponse {
		switch u.Method {
		case "confirm":
			return UIConfirm(true)
		case "select":
			return UIValue(u.Options[1])
		}
		return UIValue("typed")
	}})
	from := rpc.Mark()
	recs := rpc.Prompt("/probe-ui")
	if len(recs) != 1 || !strings.Contains(string(recs[0].Data), `"handled"`) {
		t.Errorf("prompt records %s", recs[0].Raw)
	}
	rpc.WaitFrom(from, "notify", func(r Record) bool {
		return r.Type == "extension_ui_request" && strings.Contains(string(r.Raw), `"notify"`)
	})
	var methods []string
	for _, u := range rpc.UIRequests() {
		methods = append(methods, u.Method)
	}
	if strings.Join(methods, ",") != "confirm,select,input,notify" {
		t.Errorf("ui methods %v", methods)
	}
	n := rpc.Notifications()
	if len(n) != 1 || n[0].Message != "probe ok=true pick=b text=typed env=passed" || n[0].NotifyType != "warning" {
		t.Errorf("notifications %+v", n)
	}
	if env.Server.Len() != 0 {
		t.Errorf("a handled command reached the model: %d requests", env.Server.Len())
	}
	if res := rpc.Close(); res.ExitCode != 0 {
		t.Errorf("exit %d\n%s", res.ExitCode, res.Stderr)
	}
}

// TestSmokeDeterministicBodies runs the same print session in two sandboxes
// and shows that the request bodies are byte-identical once the sandbox
// paths (cwd and Pi's install dir in the system prompt) are normalized.
func TestSmokeDeterministicBodies(t *testing.T) {
	t.Parallel()
	run := func() Result {
		env := NewEnv(t, Config{
			Script:     &LongSession{Steps: 8, SkipRecall: true, SkipUnfold: true},
			Compaction: &Compaction{Enabled: false},
		})
		res := env.Print(PrintOptions{Prompt: longPrompt})
		res.Require(t)
		return res
	}
	a, b := run(), run()
	if len(a.Requests) != len(b.Requests) {
		t.Fatalf("%d vs %d requests", len(a.Requests), len(b.Requests))
	}
	for i := range a.Requests {
		ra, rb := a.Requests[i].Body, b.Requests[i].Body
		if bytes.Equal(ra, rb) {
			t.Errorf("request %d: raw bodies are equal; expected the sandbox paths to differ", i+1)
		}
		na, nb := a.Env.Normalize(ra), b.Env.Normalize(rb)
		if !bytes.Equal(na, nb) {
			off := commonPrefixLen(na, nb)
			t.Errorf("request %d differs after normalizing at byte %d:\n a: %q\n b: %q", i+1, off, excerpt(na, off, 160), excerpt(nb, off, 160))
		}
	}
	checkNoSandboxPaths(t, a)
}

// TestSmokeAutoCompactionBaseline runs the 40-step session with the 24000
// token window and Pi's default compaction settings. Once the context
// outgrows keepRecentTokens (20000) Pi compacts before every further step;
// the script must still run each step exactly once and finish. The counts
// are the baseline context-fold is measured against.
func TestSmokeAutoCompactionBaseline(t *testing.T) {
	t.Parallel()
	const steps = 40
	env := NewEnv(t, Config{Script: &LongSession{Steps: steps}})
	res := env.Print(PrintOptions{Prompt: longPrompt})
	res.Require(t)
	sums := SummaryRequests(res.Requests)
	t.Logf("print run: %s, %d requests, %d compaction requests", res.Duration, len(res.Requests), len(sums))
	if len(sums) == 0 {
		t.Error("no compaction request with a 24000-token window")
	}
	if !strings.Contains(res.Stdout, "FINAL: done after 40 steps") {
		t.Errorf("stdout %q", res.Stdout)
	}
	issued := map[int]int{}
	for _, rec := range res.Requests {
		for _, tc := range rec.Reply.ToolCalls {
			if i, ok := StepOfCallID(tc.ID); ok {
				issued[i]++
			}
		}
	}
	for i := 1; i <= steps; i++ {
		if issued[i] != 1 {
			t.Errorf("step %d issued %d times", i, issued[i])
		}
	}
	if got := len(res.Session(t).ByType("compaction")); got != len(sums) {
		t.Errorf("%d compaction entries for %d summary requests", got, len(sums))
	}
}

// checkNoSandboxPaths fails if a normalized body still names the sandbox.
func checkNoSandboxPaths(t *testing.T, r Result) {
	t.Helper()
	for _, rec := range r.Requests {
		if n := r.Env.Normalize(rec.Body); bytes.Contains(n, []byte(r.Env.Root)) {
			t.Errorf("request %d still contains %s", rec.Seq, r.Env.Root)
		}
	}
}

var _ fakellm.Script = (*LongSession)(nil)
var _ fakellm.Summarizer = (*LongSession)(nil)
