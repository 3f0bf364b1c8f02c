package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// Thinker makes a Script think before every answer: each reply carries one
// reasoning block, long enough to fold, naming the request it answers, so a
// digest's first line says which text it stands for (ThinkingText).
type Thinker struct {
	fakellm.Script
}

// ThinkingText is the reasoning Thinker produces for request seq.
func ThinkingText(seq int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Reasoning for request %d: decide the next step.", seq)
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&b, "\nconsideration %d of request %d: the output so far looks consistent", i, seq)
	}
	return b.String()
}

// Reply implements fakellm.Script.
func (t *Thinker) Reply(req *fakellm.Request) fakellm.Reply {
	r := t.Script.Reply(req)
	r.Thinking = append([]string{ThinkingText(req.Seq)}, r.Thinking...)
	return r
}

// Summary implements fakellm.Summarizer when the wrapped script does.
func (t *Thinker) Summary(req *fakellm.Request) string {
	if s, ok := t.Script.(fakellm.Summarizer); ok {
		return s.Summary(req)
	}
	return fakellm.DefaultSummaryText
}

// thoughtDigestRE finds a folded thinking block's digest in a request body
// (a text block, or Gemini's unsigned thought part, which Request.Text
// leaves out).
var thoughtDigestRE = regexp.MustCompile(`\{#([0-9a-z]{6}) FOLDED\} thought · ~\d+ tok · Reasoning for request (\d+):`)

// thinkingClasses are the model classes of each wire format Pi speaks that
// a strict fake serves: no thinking, thinking, preserved thinking.
var thinkingClasses = []struct {
	name, model string
	thinking    bool // --thinking high
	preserved   bool // thinking bound to its prefix, drop_block
	foldsThink  bool // signed thinking folds on this wire
}{
	{"anthropic/no-thinking", "fakeanth/fake-claude", false, false, false},
	{"anthropic/thinking", "fakeanth/fake-claude-thinking", true, false, true},
	{"anthropic/preserved", "fakeanth/" + fakellm.PreservedClaude, true, true, true},
	{"responses/no-reasoning", "fakeresp/fake-gpt", false, false, false},
	{"responses/reasoning", "fakeresp/fake-gpt-reasoning", true, false, false},
	{"responses/preserved", "fakeresp/fake-gpt-6.2-preserved", true, true, false},
	{"gemini/no-thinking", "fakegem/gemini-3-fake", false, false, false},
	{"gemini/thinking", "fakegem/gemini-3-fake-thinking", true, false, true},
}

// anthropicClasses are the thinkingClasses the Anthropic fake serves.
var anthropicClasses = thinkingClasses[:3]

// TestThinkingProvidersFoldSafely runs a 60-step session with thinking in
// real Pi against each strict fake, with the shipped schedule and the
// ladder profile: no request may be rejected, Pi exits 0, several fold
// events happen, thinking folds where its digest reaches the model, and on
// a preserved-thinking model the provider drops exactly the blocks the
// engine said each event must leave to it.
func TestThinkingProvidersFoldSafely(t *testing.T) {
	for _, c := range thinkingClasses {
		for _, profile := range []string{"default", "ladder"} {
			t.Run(c.name+"/"+profile, func(t *testing.T) {
				t.Parallel()
				ls := &LongSession{Steps: 60, SkipRecall: true, SkipUnfold: true}
				cfg := Config{Script: &Thinker{Script: ls}, Compaction: noCompaction, Model: c.model, ContextWindow: 48_000}
				if c.thinking {
					cfg.Args = []string{"--thinking", "high"}
				}
				cfg = WithContextFold(t, cfg)
				if profile == "ladder" {
					cfg.Env["CONTEXTFOLD_POLICY"] = "ladder"
				}
				env := NewEnv(t, cfg)
				res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step, then report."})
				checkProviderRun(t, env, res)
				events := foldEntries(t, env)
				if len(events) < 2 {
					t.Fatalf("%d fold events, want several", len(events))
				}
				thoughts := 0
				if c.thinking && !c.foldsThink {
					// Reasoning items travel opaque: nothing shows the text,
					// so nothing may fold it.
					for _, e := range events {
						for _, f := range e.Folds {
							if f.Kind == "thinking" {
								t.Fatalf("event %d folded thinking %s on a wire that sends it opaque", e.Seq, f.ID)
							}
						}
					}
				}
				for _, r := range ToolRequests(res.Requests) {
					thoughts = max(thoughts, len(thoughtDigestRE.FindAllString(string(r.Body), -1)))
				}
				if c.foldsThink && thoughts == 0 {
					t.Error("no thinking block folded")
				}
				if !c.thinking && thoughts > 0 {
					t.Error("thinking digests without thinking")
				}
				expected, invalidated := 0, 0
				for _, e := range events {
					if e.Thinking != nil {
						expected += e.Thinking.Dropped
						invalidated += e.Thinking.Invalidated
					}
				}
				dropped := droppedBlocks(res.Requests)
				t.Logf("%d requests, %d fold events, %d thinking digests in the last request, thinking invalidated %d, expected dropped %d, provider dropped %d distinct blocks",
					len(res.Requests), len(events), thoughts, invalidated, expected, len(dropped))
				if !c.preserved && (invalidated > 0 || len(dropped) > 0) {
					t.Errorf("model without prefix binding: %d invalidated, %d dropped", invalidated, len(dropped))
				}
				if c.preserved && len(dropped) != expected {
					t.Errorf("the provider dropped %d distinct thinking blocks, the engine expected %d: %v", len(dropped), expected, dropped)
				}
			})
		}
	}
}

// checkProviderRun fails unless every request was answered 200 and Pi
// exited 0.
func checkProviderRun(t *testing.T, env *Env, res Result) {
	t.Helper()
	for _, r := range res.Requests {
		if r.Status != 200 {
			t.Fatalf("request %d answered %d: %v %s\nstderr: %s", r.Seq, r.Status, r.Error, r.ParseError, tail(res.Stderr, 1500))
		}
	}
	res.Require(t)
}

// FoldEntry is the data of one contextfold.fold entry of kind "fold".
type FoldEntry struct {
	Seq      int `json:"seq"`
	Thinking *struct {
		Invalidated int `json:"invalidated"`
		Folded      int `json:"folded"`
		Dropped     int `json:"dropped"`
	} `json:"thinking"`
	Folds []struct {
		ID   string `json:"id"`
		Code string `json:"code"`
		Kind string `json:"kind"`
	} `json:"folds"`
}

func foldEntries(t *testing.T, env *Env) []FoldEntry {
	t.Helper()
	var out []FoldEntry
	for _, s := range env.Sessions() {
		for _, e := range s.Custom("contextfold.fold") {
			var f struct {
				Kind string `json:"kind"`
				FoldEntry
			}
			if err := json.Unmarshal(e.Data, &f); err != nil {
				t.Fatal(err)
			}
			if f.Kind == "fold" {
				out = append(out, f.FoldEntry)
			}
		}
	}
	return out
}

// droppedBlocks returns the distinct thinking blocks the fake dropped over
// the run, each named by the request whose reasoning it held.
func droppedBlocks(reqs []fakellm.Recorded) map[int]bool {
	out := map[int]bool{}
	for _, r := range reqs {
		if len(r.Dropped) == 0 {
			continue
		}
		var body struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(r.Body, &body)
		for _, d := range r.Dropped {
			if m := regexp.MustCompile(`^rs_(\d+)_`).FindStringSubmatch(d.ID); m != nil {
				n, _ := strconv.Atoi(m[1]) // a Responses reasoning item, minted by request n
				out[n] = true
				continue
			}
			var i, j int
			fmt.Sscanf(d.Path, "messages.%d.content.%d", &i, &j)
			var blocks []struct {
				Thinking string `json:"thinking"`
			}
			json.Unmarshal(body.Messages[i].Content, &blocks)
			if m := regexp.MustCompile(`^Reasoning for request (\d+):`).FindStringSubmatch(blocks[j].Thinking); m != nil {
				n, _ := strconv.Atoi(m[1])
				out[n] = true
			}
		}
	}
	return out
}

// anthropicInputCost prices a run's input at Anthropic's rates: input 1,
// cache write 1.25, cache read 0.1 (per token).
func anthropicInputCost(reqs []fakellm.Recorded) (cost float64, read, write, input int) {
	for _, r := range reqs {
		u := r.Usage
		in := max(u.Prompt-u.Cached-u.CacheWrite, 0)
		read, write, input = read+u.Cached, write+u.CacheWrite, input+in
		cost += float64(in) + 1.25*float64(u.CacheWrite) + 0.1*float64(u.Cached)
	}
	return cost, read, write, input
}

// TestThinkingFoldCostAgainstTheCache: against the Anthropic fake's prompt
// cache, the same thinking session costs no more input with context-fold
// than without it, for each Anthropic model class.
func TestThinkingFoldCostAgainstTheCache(t *testing.T) {
	for _, c := range anthropicClasses {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			run := func(fold bool) (float64, Result) {
				ls := &LongSession{Steps: 60, SkipRecall: true, SkipUnfold: true}
				cfg := Config{Script: &Thinker{Script: ls}, Compaction: noCompaction, Model: c.model, ContextWindow: 48_000}
				if c.thinking {
					cfg.Args = []string{"--thinking", "high"}
				}
				if fold {
					cfg = WithContextFold(t, cfg)
				}
				env := NewEnv(t, cfg)
				res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step, then report."})
				checkProviderRun(t, env, res)
				cost, read, write, input := anthropicInputCost(res.Requests)
				t.Logf("fold=%v: %d requests, input %d, cache write %d, cache read %d tokens: cost %.0f token-units", fold, len(res.Requests), input, write, read, cost)
				return cost, res
			}
			with, _ := run(true)
			without, _ := run(false)
			t.Logf("%s: with context-fold %.0f, without %.0f (%.3f)", c.name, with, without, with/without)
			if with > without {
				t.Errorf("context-fold costs more input: %.0f > %.0f", with, without)
			}
		})
	}
}

// TestThinkingRecallResumeCompactHandoff: with thinking on, a folded block
// (a thinking block where thinking folds, else a tool result) recalls
// byte-exact after a restart with -c, after the script unfolded one; the
// resumed session compacts deterministically and hands off, and the parent's
// code still resolves, all without a rejected request.
func TestThinkingRecallResumeCompactHandoff(t *testing.T) {
	var classes []int
	for i, c := range thinkingClasses {
		if c.thinking {
			classes = append(classes, i)
		}
	}
	for _, ci := range classes {
		c := thinkingClasses[ci]
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			script := &recaller{LongSession: &LongSession{Steps: 60, SkipRecall: true, SkipUnfold: true}}
			cfg := WithContextFold(t, Config{Script: &Thinker{Script: script}, Compaction: &Compaction{Enabled: false, ReserveTokens: 1000, KeepRecentTokens: 2000},
				Model: c.model, ContextWindow: 48_000, Args: []string{"--thinking", "high"}})
			env := NewEnv(t, cfg)
			res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step, then report."})
			checkProviderRun(t, env, res)
			last := res.Requests[len(res.Requests)-1]
			// Two folded blocks: thinking where thinking folds, else tool
			// results; one to unfold, one to recall.
			type pick struct{ code, want string }
			var picks []pick
			if c.foldsThink {
				for _, m := range thoughtDigestRE.FindAllStringSubmatch(string(last.Body), -1) {
					seq, _ := strconv.Atoi(m[2])
					picks = append(picks, pick{m[1], ThinkingText(seq)})
				}
			} else {
				for id, cd := range foldedCalls(&last.Request) {
					if step, ok := StepOfCallID(id); ok {
						picks = append(picks, pick{cd, strings.TrimRight(env.GenOutput(step), "\n")})
					}
				}
			}
			if len(picks) < 2 {
				t.Fatalf("%d folded blocks in the last request", len(picks))
			}
			// Unfold one after a restart: its whole text is back in the
			// next request (and, for thinking, sent as the model produced it).
			u := env.Print(PrintOptions{Prompt: "UNFOLD " + picks[0].code, Continue: true})
			checkProviderRun(t, env, u)
			after := u.Requests[len(u.Requests)-1]
			out, _ := after.ToolResult("call_unfold_" + picks[0].code)
			if !strings.Contains(out, picks[0].code) {
				t.Fatalf("unfold %s: %.300s", picks[0].code, out)
			}
			if warned := strings.Contains(out, "binds its reasoning"); warned != c.preserved {
				t.Errorf("unfold on %s: prefix-binding note %v, want %v:\n%s", c.name, warned, c.preserved, out)
			}
			raw, _ := json.Marshal(picks[0].want)
			if !strings.Contains(string(after.Body), string(raw[1:len(raw)-1])) {
				t.Fatalf("unfolded %s is not back whole in the next request", picks[0].code)
			}
			code, want := picks[1].code, picks[1].want
			r2 := env.Print(PrintOptions{Prompt: "RECALL " + code, Continue: true})
			checkProviderRun(t, env, r2)
			out, ok := r2.Requests[len(r2.Requests)-1].ToolResult("call_recall_" + code)
			if !ok || !strings.Contains(out, "sha256 verified") || !strings.Contains(out, want) {
				t.Fatalf("recall of %s after -c:\n%.600s", code, out)
			}
			// Resume over RPC, compact deterministically, hand off.
			before := env.Server.Len()
			rpc := env.StartRPC(RPCOptions{Args: []string{"-c", "--thinking", "high"}, OnDialog: func(r UIRequest) UIResponse {
				if r.Method == "confirm" {
					return UIConfirm(true)
				}
				return UICancel()
			}})
			// The status, rebuilt from the replayed fold entries, reports what
			// the events cost a preserved model's reasoning.
			rpc.Prompt("/context-fold status")
			status := ""
			for _, n := range rpc.Notifications() {
				if strings.HasPrefix(n.Message, "context-fold: ") {
					status = n.Message
				}
			}
			if has := strings.Contains(status, "thinking: fold events invalidated"); has != c.preserved {
				t.Errorf("status on %s: thinking line %v, want %v:\n%s", c.name, has, c.preserved, status)
			}
			if rec := rpc.Compact(""); !strings.Contains(string(rec.Raw), `"success":true`) {
				t.Fatalf("compact: %s", rec.Raw)
			}
			rpc.Prompt("/fold-handoff continue the gen.sh report")
			rpc.Prompt("RECALL " + code)
			rpc.Close()
			reqs := env.Server.Requests()[before:]
			if len(reqs) == 0 {
				t.Fatal("no request after the handoff")
			}
			for _, r := range reqs {
				if r.Status != 200 {
					t.Fatalf("after resume: request %d answered %d: %v", r.Seq, r.Status, r.Error)
				}
			}
			if n := len(SummaryRequests(reqs)); n != 0 {
				t.Errorf("%d summary requests: compaction was not deterministic", n)
			}
			det := false
			for _, sf := range env.Sessions() {
				for _, c := range sf.ByType("compaction") {
					det = det || strings.Contains(c.Summary, "(deterministic: no model wrote this)")
				}
			}
			if !det {
				t.Error("no deterministic compaction summary")
			}
			if !strings.Contains(reqs[0].Text(), "# Session handoff seed") {
				t.Error("the handed-off session did not start from the seed")
			}
			out, _ = reqs[len(reqs)-1].ToolResult("call_recall_" + code)
			if !strings.Contains(out, want) {
				t.Errorf("the parent's code %s did not resolve after the handoff:\n%.400s", code, out)
			}
		})
	}
}

// TurnSession runs Steps gen.sh calls per user prompt, then answers with a
// final text; step numbers continue across prompts.
type TurnSession struct{ Steps int }

// Reply implements fakellm.Script.
func (s *TurnSession) Reply(req *fakellm.Request) fakellm.Reply {
	total, sinceUser := 0, 0
	for _, m := range req.Messages {
		if m.Role == "user" && m.Content != "" {
			sinceUser = 0
		}
		for _, tc := range m.ToolCalls {
			if tc.Name == "bash" {
				total++
				sinceUser++
			}
		}
	}
	if sinceUser >= s.Steps {
		return fakellm.Reply{Text: fmt.Sprintf("FINAL: %d steps", total)}
	}
	args, _ := json.Marshal(map[string]string{"command": GenCommand(total + 1)})
	return fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: GenCallID(total + 1), Name: "bash", Arguments: args}}}
}

// TestLastTurnThinkingStaysRaw: a Claude that keeps only the last turn's
// thinking strips earlier turns' thinking itself, for free; context-fold
// never folds a block once its turn has ended (a digest would only add
// billed tokens) and still folds the current turn's, over three prompts
// resumed with -c. (Measured: never folding thinking on such a model costs
// 0.4 % more here, 288,032 against 286,783 token-units.)
func TestLastTurnThinkingStaysRaw(t *testing.T) {
	run := func(fold bool) (float64, []fakellm.Recorded, []int) {
		cfg := Config{Script: &Thinker{Script: &TurnSession{Steps: 20}}, Compaction: noCompaction, Model: "fakeanth/fake-claude-haiku-4-5",
			ContextWindow: 48_000, Args: []string{"--thinking", "high"}}
		if fold {
			cfg = WithContextFold(t, cfg)
		}
		env := NewEnv(t, cfg)
		var starts []int // seq of each prompt's first request
		for p := 0; p < 3; p++ {
			starts = append(starts, env.Server.Len()+1)
			res := env.Print(PrintOptions{Prompt: fmt.Sprintf("Prompt %d: run the next gen.sh steps.", p+1), Continue: p > 0})
			checkProviderRun(t, env, res)
		}
		cost, _, _, _ := anthropicInputCost(env.Server.Requests())
		return cost, env.Server.Requests(), starts
	}
	with, reqs, starts := run(true)
	without, _, _ := run(false)
	t.Logf("last-turn-only Claude, 3 prompts × 20 steps: input cost with context-fold %.0f, without %.0f (%.3f)", with, without, with/without)
	if with > without {
		t.Errorf("context-fold costs more: %.0f > %.0f", with, without)
	}
	turnOf := func(seq int) int {
		t := 0
		for i, s := range starts {
			if seq >= s {
				t = i
			}
		}
		return t
	}
	folded := 0
	seen := map[int]bool{}
	for _, r := range reqs {
		for _, m := range thoughtDigestRE.FindAllStringSubmatch(string(r.Body), -1) {
			n, _ := strconv.Atoi(m[2])
			if seen[n] {
				continue // frozen since it folded
			}
			seen[n] = true
			folded++
			if turnOf(n) < turnOf(r.Seq) {
				t.Fatalf("request %d (prompt %d) first folds thinking from prompt %d, which the provider strips for free", r.Seq, turnOf(r.Seq)+1, turnOf(n)+1)
			}
		}
	}
	if folded == 0 {
		t.Error("the current turn's thinking never folded")
	}
}

// TestBindingWithoutDropBlockNeverRejected: a Claude that checks thinking
// prefixes but that Pi does not mark, so no drop_block is sent: a fold that
// left the open cycle's signed thinking behind would be a 400, so events
// wait for a user turn, where every invalidated block folds and none is
// dropped. Three prompts of 20 steps, resumed with -c.
func TestBindingWithoutDropBlockNeverRejected(t *testing.T) {
	cfg := WithContextFold(t, Config{Script: &Thinker{Script: &TurnSession{Steps: 20}}, Compaction: noCompaction,
		Model: "fakeanth/claude-fable-5-2-fake-unmarked", ContextWindow: 48_000, Args: []string{"--thinking", "high"}})
	env := NewEnv(t, cfg)
	for p := 0; p < 3; p++ {
		res := env.Print(PrintOptions{Prompt: fmt.Sprintf("Prompt %d: run the next gen.sh steps.", p+1), Continue: p > 0})
		checkProviderRun(t, env, res)
	}
	for _, r := range env.Server.Requests() {
		if strings.Contains(string(r.Body), "block_binding") {
			t.Fatal("Pi sent block_binding to an unmarked model; the test needs one it does not")
		}
	}
	events := foldEntries(t, env)
	if len(events) == 0 {
		t.Fatal("no fold event")
	}
	for _, e := range events {
		if e.Thinking != nil && e.Thinking.Dropped > 0 {
			t.Errorf("event %d left %d signed blocks to a provider that rejects them", e.Seq, e.Thinking.Dropped)
		}
	}
	t.Logf("%d requests, %d fold events, none rejected", env.Server.Len(), len(events))
}
