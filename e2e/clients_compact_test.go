package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/proxy/foldstore"
	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// compactTurns and compactLines shape the compaction sessions: 40 shell
// turns of 80-line outputs (~6.6 KB, ~1,700 tokens each).
const (
	compactTurns = 40
	compactLines = 80
)

// compactions counts the client's compaction requests among reqs.
func compactions(reqs []fakellm.Recorded) int {
	n := 0
	for i := range reqs {
		if reqs[i].Status == 200 && fakellm.CompactionRequest(&reqs[i].Request) {
			n++
		}
	}
	return n
}

// TestClaudeCodeCompactionForgetsNothing: real Claude Code, its window set
// (CLAUDE_CODE_AUTO_COMPACT_WINDOW) where a 40-turn session compacts, and
// the proxy not told (its own window is the model's): Claude Code compacts
// its history through the proxy, and afterwards every tool output of the
// session is in the fold record byte for byte, the index appended to the
// summary names their codes, recall_folded by one of those codes answers
// the output, sha256-verified, and recall_folded search= finds the error
// lines of outputs from before the compaction.
func TestClaudeCodeCompactionForgetsNothing(t *testing.T) {
	c := withModel(claudeCode, "", map[string]string{"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000"})
	sess := fakellm.ClientSession{Turns: compactTurns, Lines: compactLines, Recall: true, Search: foldSearch}
	store := t.TempDir()
	r := runSession(t, c, runOpts{session: sess, proxy: true, store: store, mcp: true})
	if r.ExitCode != 0 || r.TimedOut {
		t.Fatalf("exit %d (timed out %v)\n--- stdout\n%s\n--- stderr\n%s", r.ExitCode, r.TimedOut, tail(r.Stdout, 3000), tail(r.Stderr, 3000))
	}
	for _, q := range r.Requests {
		if q.Status != 200 {
			t.Errorf("request %d answered %d: %v", q.Seq, q.Status, q.Error)
		}
	}
	n := compactions(r.Requests)
	if n == 0 {
		t.Fatal("Claude Code never compacted: nothing was tested")
	}
	files, err := foldstore.Files(store)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		t.Fatalf("%d conversation files: the conversation was not carried across the compaction", len(files))
	}
	contents, err := foldstore.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	// Every output in the record, byte for byte, or still live at the end.
	var last fakellm.Recorded
	for _, q := range r.Requests {
		if q.Status == 200 && !fakellm.CompactionRequest(&q.Request) && strings.Contains(string(q.Body), "recall_folded") {
			last = q
		}
	}
	recs := contents.Records()
	recorded, live := 0, 0
	for turn := 1; turn <= compactTurns; turn++ {
		marker := fakellm.ClientMarkerN(turn, compactLines)
		found := false
		for code, rec := range recs {
			tx, ok := contents.Texts[rec.ID]
			if ok && strings.Contains(tx.Text, marker) {
				found = true
				if !tx.Verified(&rec) {
					t.Errorf("turn %d (%s): the stored text fails its sha256", turn, code)
				}
			}
		}
		switch {
		case found:
			recorded++
		case strings.Contains(string(last.Body), marker):
			live++
		default:
			t.Errorf("turn %d: its output is neither in the fold record nor live in the last request", turn)
		}
	}
	// The recall by a code of the index, and the search.
	var recallID, searchID string
	for _, q := range r.Requests {
		for _, tc := range q.Reply.ToolCalls {
			switch {
			case strings.HasSuffix(tc.Name, "recall_folded") && strings.HasPrefix(string(tc.Arguments), `{"search":`):
				searchID = tc.ID
			case strings.HasSuffix(tc.Name, "recall_folded"):
				recallID = tc.ID
			}
		}
	}
	if recallID == "" || searchID == "" {
		t.Fatalf("the fake never called recall_folded by code and by search (%q, %q):\n%s", recallID, searchID, tail(r.Stdout, 2000))
	}
	var recall, search string
	for _, q := range r.Requests {
		for _, m := range q.Messages {
			switch {
			case m.Role == "tool" && m.ToolCallID == recallID && recall == "":
				recall = m.Content
			case m.Role == "tool" && m.ToolCallID == searchID && search == "":
				search = m.Content
			}
		}
	}
	verified := false
	for _, rec := range recs {
		if tx := contents.Texts[rec.ID]; strings.Contains(recall, tx.Text) && tx.Text != "" && strings.Contains(recall, "sha256 verified") {
			verified = true
		}
	}
	if !verified {
		t.Errorf("the recall by a code of the index did not answer a recorded output byte for byte:\n%s", tail(recall, 1500))
	}
	hits := 0
	for _, turn := range []int{1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19} {
		if strings.Contains(search, fmt.Sprintf("ERROR: turn %d step 30 ", turn)) {
			hits++
		}
	}
	if hits < 11 {
		t.Errorf("the search found the error lines of %d of the 11 outputs that hold %q:\n%s", hits, foldSearch, tail(search, 2000))
	}
	t.Logf("claude: %d compactions, %d requests; %d outputs in the fold record, %d live at the end; index %d bytes; search hit %d of 11",
		n, len(r.Requests), recorded, live, len(contents.Index), hits)
}

// totalCost prices a run at Anthropic's rates for Sonnet, as the fake
// accounted it: input $3, cache write $3.75, cache read $0.30 and output
// $15 per million tokens, every request counted (the client's compaction
// requests and their summaries included).
func totalCost(reqs []fakellm.Recorded) float64 {
	d := 0.0
	for _, q := range reqs {
		u := q.Usage
		d += (float64(u.Prompt-u.Cached-u.CacheWrite)*3 + float64(u.CacheWrite)*3.75 + float64(u.Cached)*0.30 + float64(u.Completion)*15) / 1e6
	}
	return d
}

// peakPrompt is the largest prompt of a run, in the fake's tokens.
func peakPrompt(reqs []fakellm.Recorded) int {
	n := 0
	for _, q := range reqs {
		n = max(n, q.Usage.Prompt)
	}
	return n
}

// TestClaudeCodeKeepsAheadOfItsCompaction: real Claude Code with its
// window set (CLAUDE_CODE_AUTO_COMPACT_WINDOW) where a direct run of the
// session compacts; the proxy, reading the same setting from its own
// environment, counts whole requests and folds so that Claude Code never
// compacts; and a long run (150 and 300 steps) costs no more than the
// direct one at Anthropic's prices, compactions and their summaries
// included.
func TestClaudeCodeKeepsAheadOfItsCompaction(t *testing.T) {
	for _, tc := range []struct {
		window string
		turns  int
	}{{"100000", 40}, {"200000", 150}, {"200000", 300}} {
		t.Run(fmt.Sprintf("%s/%d", tc.window, tc.turns), func(t *testing.T) {
			env := map[string]string{"CLAUDE_CODE_AUTO_COMPACT_WINDOW": tc.window}
			c := withModel(claudeCode, "", env)
			sess := fakellm.ClientSession{Turns: tc.turns, Lines: compactLines}
			direct := runSession(t, c, runOpts{session: sess})
			r := runSession(t, c, runOpts{session: sess, proxy: true, proxyEnv: env})
			for _, run := range []clientResult{direct, r} {
				if run.ExitCode != 0 || run.TimedOut || !strings.Contains(run.Stdout, fakellm.ClientFinal) {
					t.Fatalf("exit %d (timed out %v)\n--- stdout\n%s\n--- stderr\n%s", run.ExitCode, run.TimedOut, tail(run.Stdout, 3000), tail(run.Stderr, 3000))
				}
			}
			dn, pn := compactions(direct.Requests), compactions(r.Requests)
			st := thinkingStats(r.Requests)
			dc, pc := totalCost(direct.Requests), totalCost(r.Requests)
			t.Logf("window %s, %d turns: direct %d requests, %d compactions, peak %d tokens, $%.4f; via proxy %d requests, %d compactions, %d fold events, peak %d tokens, $%.4f (%.3f of direct)",
				tc.window, tc.turns, len(direct.Requests), dn, peakPrompt(direct.Requests), dc, len(r.Requests), pn, st.foldEvents, peakPrompt(r.Requests), pc, pc/dc)
			if dn == 0 {
				t.Fatal("the direct run never compacted: the threshold is not where the session reaches")
			}
			if pn > 0 {
				t.Errorf("Claude Code compacted %d times through the proxy", pn)
			}
			if st.foldEvents == 0 {
				t.Error("nothing folded")
			}
			// The cost condition holds where sessions are long (the 150- and
			// 300-step runs); at 100k the direct run's compactions leave it a
			// small context, and the figure is only reported.
			if tc.turns >= 150 && pc > dc {
				t.Errorf("the proxied run cost more: $%.4f against $%.4f", pc, dc)
			}
		})
	}
}
