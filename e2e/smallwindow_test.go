package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/policy"
	picompaction "github.com/contextfold/contextfold/internal/pi/compaction"
	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// summarySystemPrompt starts the system prompt of Pi's compaction request.
const summarySystemPrompt = "You are a context summarization assistant"

// TestSmallWindowDefaultCompaction runs a long tool-using session at small
// context windows with Pi's DEFAULT compaction settings (on, reserve 16384,
// keepRecentTokens 20000): without folding the raw context passes Pi's
// threshold (window − reserve) several times, so Pi would compact again and
// again. With context-fold the engine keeps every request ReplyMargin under
// that threshold, so folds reach the model and Pi never compacts.
//
// At 32k the results are gen.sh's 4 KB (about 950 tokens each), and 60
// steps pass the threshold dozens of times. At 64k, 60 such steps would pass
// it only once, so that row runs 95 steps of 6 KB (about 1,450 tokens): Pi
// alone compacts that session 4 times (fewer, longer requests than 4 KB
// steps would need, which keeps the row fast under -race). Pi also checks
// before each request, on its last usage plus the new raw results (chars/4),
// before the context hook folds them: with 10 KB results (about 2,350
// tokens, more than ReplyMargin) that estimate crosses the threshold while
// every request sent stayed under it, and the engine cancels that
// compaction because folding makes the room (the third row).
func TestSmallWindowDefaultCompaction(t *testing.T) {
	t.Parallel()
	rows := []struct {
		name   string
		window int
		// compaction is what the harness writes into settings.json: nil
		// writes no "compaction" key at all; the other row spells Pi's
		// defaults out. Both must be Pi's defaults.
		compaction      *Compaction
		steps, genLines int
	}{
		{"32k", 32_000, nil, 60, 40},
		{"64k", 64_000, &Compaction{Enabled: true, ReserveTokens: picompaction.DefaultReserve, KeepRecentTokens: picompaction.DefaultKeepRecent}, 95, 60},
		{"32k, 10 KB results", 32_000, nil, 45, 100},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			ls := &LongSession{Steps: row.steps, SkipRecall: true, SkipUnfold: true}
			env := NewEnv(t, WithContextFold(t, Config{Script: ls, ContextWindow: row.window, Compaction: row.compaction, GenLines: row.genLines}))
			checkDefaultCompactionSettings(t, env)
			res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step, then report."})
			res.Require(t)

			reserve, keep := picompaction.DefaultReserve, picompaction.DefaultKeepRecent
			threshold := row.window - reserve
			budget := min(int(float64(row.window)*policy.DefaultKnobs.BudgetFraction), threshold-engine.ReplyMargin)
			tail := min(policy.DefaultKnobs.Tail, budget/2)

			all := res.Requests
			reqs := ToolRequests(all)
			if len(reqs) < row.steps+1 {
				t.Fatalf("%d tool requests for %d steps", len(reqs), row.steps)
			}
			if !strings.Contains(res.Stdout, fmt.Sprintf("FINAL: done after %d steps", row.steps)) {
				t.Fatalf("the session did not finish: stdout %q", tail3k(res.Stdout))
			}

			// The counterfactual first, from the steps alone (it must not
			// depend on what folding or compaction did): each gen.sh step
			// adds its assistant call and its result, as first sent (raw: the
			// newest result is held), to a context that starts with the
			// first request (system prompt, tools, user prompt).
			var steps []int // per step, the tokens it adds as the fake counts them
			seen := map[string]bool{}
			for k := range reqs {
				msgs := reqs[k].Messages
				for i, m := range msgs {
					if _, ok := StepOfCallID(m.ToolCallID); !ok || m.Role != "tool" || seen[m.ToolCallID] {
						continue
					}
					seen[m.ToolCallID] = true
					if strings.Contains(m.Content, " FOLDED}") {
						t.Errorf("request %d: %s is folded the first time it is sent", k, m.ToolCallID)
					}
					n := len(m.Raw) + 1
					if i > 0 && msgs[i-1].Role == "assistant" {
						n += len(msgs[i-1].Raw) + 1
					}
					steps = append(steps, n/4)
				}
			}
			base := reqs[0].Usage.Prompt + reqs[0].Usage.Completion
			rawPeak, wouldCompact := simulatePiCompaction(base, steps, threshold, keep)
			if len(steps) != row.steps || wouldCompact < 3 {
				t.Fatalf("%d steps seen; without folding Pi would compact only %d times (raw peak %d, threshold %d): the session is too short to prove anything",
					len(steps), wouldCompact, rawPeak, threshold)
			}

			// Folds happened and reached the model, and were recorded.
			peak, peakAt, folds := 0, -1, 0
			for k := range reqs {
				if used := reqs[k].Usage.Prompt + reqs[k].Usage.Completion; used > peak {
					peak, peakAt = used, k
				}
				folds = max(folds, len(foldedCalls(&reqs[k].Request)))
			}
			if folds == 0 {
				t.Error("no {#code FOLDED} digest reached the model")
			}
			sess := res.Session(t)
			events := 0
			for _, e := range sess.Custom("contextfold.fold") {
				if strings.Contains(string(e.Data), `"kind":"fold"`) {
					events++
				}
			}
			if events == 0 {
				t.Error("no fold event in the session file")
			}

			// Every request, summary requests included, stayed at or under
			// Pi's threshold, as the fake counts it (prompt + reply): Pi
			// compacts once the last response's context tokens pass it.
			over := 0
			for k := range all {
				if used := all[k].Usage.Prompt + all[k].Usage.Completion; used > threshold {
					if over++; over <= 5 {
						t.Errorf("request seq %d: %d tokens (prompt %d + reply %d) > threshold %d",
							all[k].Seq, used, all[k].Usage.Prompt, all[k].Usage.Completion, threshold)
					}
				}
			}
			if over > 5 {
				t.Errorf("... %d requests over the threshold in all", over)
			}

			// No compaction while foldable mass remained. For each
			// compaction (the session file is the ground truth; context-fold
			// may answer it without a summary request), the request before
			// it must have had nothing unfolded beyond the held tail. With
			// few-KB results none is expected at all.
			compactions := sess.ByType("compaction")
			summaries := 0
			for _, r := range SummaryRequests(all) {
				if len(r.Messages) > 0 && strings.HasPrefix(r.Messages[0].Content, summarySystemPrompt) {
					summaries++
				}
			}
			withMass := 0
			for i, c := range compactions {
				k := assistantsBefore(sess, c.ID) - 1
				var used int
				var left []string
				if k >= 0 && k < len(reqs) {
					used = reqs[k].Usage.Prompt + reqs[k].Usage.Completion
					left = unfoldedBeyondTail(&reqs[k].Request, tail)
				}
				if len(left) > 0 {
					withMass++
				}
				if i < 5 {
					t.Errorf("Pi compacted (entry %s, tokensBefore %d) after tool request %d (%d tokens, threshold %d); %d results unfolded beyond the %d-token tail: %v",
						c.ID, c.TokensBefore, k, used, threshold, len(left), tail, left)
				}
			}
			if len(compactions) > 0 {
				t.Errorf("%d compactions (%d with foldable mass left, %d summarization requests reached the model)", len(compactions), withMass, summaries)
			} else if summaries > 0 {
				t.Errorf("%d summarization requests reached the model without a compaction entry", summaries)
			}
			t.Logf("window %d: threshold %d, budget %d; %d requests (%d tool), %d fold events, up to %d results folded; "+
				"peak request %d tokens (request %d), %d under the threshold; raw peak %d; Pi alone would compact %d times (simulated); compactions %d; run %s",
				row.window, threshold, budget, len(all), len(reqs), events, folds,
				peak, peakAt, threshold-peak, rawPeak, wouldCompact, len(compactions), res.Duration.Round(100_000_000))
		})
	}
}

// checkDefaultCompactionSettings fails unless the sandbox's settings.json
// leaves Pi's compaction at its defaults: no "compaction" key, or one that
// says exactly enabled, reserve 16384, keepRecentTokens 20000.
func checkDefaultCompactionSettings(t *testing.T, env *Env) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.AgentDir, "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]json.RawMessage
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	c, ok := s["compaction"]
	if !ok {
		return
	}
	var got map[string]any
	json.Unmarshal(c, &got)
	want := map[string]any{"enabled": true, "reserveTokens": float64(16_384), "keepRecentTokens": float64(20_000)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("settings.json compaction %s is not Pi's defaults", c)
	}
}

// simulatePiCompaction replays the raw (never folded) session as Pi alone
// would run it and returns the raw context's peak and how often Pi would
// compact: the context starts at base tokens and grows by steps[i] per
// step; whenever it passes the threshold, Pi replaces everything before its
// cut point (the newest steps worth at least keepRecent tokens stay) with a
// summary. Checked against real Pi without the extension on these very
// sessions: at 32k Pi compacted 39 times (simulated 47), at 64k 4 times
// (simulated 4).
func simulatePiCompaction(base int, steps []int, threshold, keepRecent int) (peak, compactions int) {
	const summaryTokens = 300      // the fake's summary in Pi's wrapper
	ctx, cut, raw := base, 0, base // steps before cut are summarized away
	for i, n := range steps {
		ctx += n
		raw += n
		peak = max(peak, raw)
		if ctx <= threshold {
			continue
		}
		compactions++
		kept, c := 0, i+1
		for c > cut && kept < keepRecent {
			c--
			kept += steps[c]
		}
		if c > cut {
			ctx = base + summaryTokens + kept
			cut = c
		}
	}
	return peak, compactions
}

// assistantsBefore counts the assistant messages before entry id in the
// session file: the number of model replies Pi had when it compacted.
func assistantsBefore(s SessionFile, id string) int {
	n := 0
	for _, e := range s.Entries {
		if e.ID == id {
			break
		}
		if e.Type == "message" && e.Message != nil && e.Message.Role == "assistant" {
			n++
		}
	}
	return n
}

// unfoldedBeyondTail lists the tool results of req that are raw although
// they are older than the protected tail (the newest results worth up to
// tail tokens): foldable mass that was left.
func unfoldedBeyondTail(req *fakellm.Request, tail int) []string {
	var out []string
	held := 0
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "tool" || strings.Contains(m.Content, " FOLDED}") {
			continue
		}
		held += len(m.Raw) / 4
		if held > tail {
			out = append(out, fmt.Sprintf("%s (%d tokens)", m.ToolCallID, len(m.Raw)/4))
		}
	}
	return out
}

func tail3k(s string) string { return tail(s, 3000) }
