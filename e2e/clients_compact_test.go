package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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

// compactAt is c set to compact its history once a request reaches about
// threshold tokens, and the environment that tells the proxy the same
// setting (as a shell exporting it to both would): Claude Code's
// CLAUDE_CODE_AUTO_COMPACT_WINDOW, Codex's model_auto_compact_token_limit
// in its config.toml (CODEX_HOME), opencode's model limits in its
// opencode.json (OPENCODE_CONFIG).
func compactAt(t *testing.T, c client, threshold int) (client, map[string]string) {
	switch c.name {
	case claudeCode.name:
		env := map[string]string{"CLAUDE_CODE_AUTO_COMPACT_WINDOW": strconv.Itoa(threshold + 33_000)}
		return withModel(c, "", env), env
	case codex.name:
		line := "model_auto_compact_token_limit = " + strconv.Itoa(threshold)
		home := t.TempDir()
		writeFile(t, filepath.Join(home, "config.toml"), line+"\n")
		prepare := c.prepare
		c.prepare = func(t *testing.T, d runDir, origin string, mcp []string) (map[string]string, []string) {
			e, args := prepare(t, d, origin, mcp)
			p := filepath.Join(e["CODEX_HOME"], "config.toml")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, p, line+"\n"+string(b))
			return e, args
		}
		return c, map[string]string{"CODEX_HOME": home}
	case opencode.name:
		limit := func(raw []byte) []byte {
			return regexp.MustCompile(`"context":\s*200000`).ReplaceAll(raw, []byte(`"context": `+strconv.Itoa(threshold+32_000)))
		}
		cfg := filepath.Join(t.TempDir(), "opencode.json")
		writeFile(t, cfg, `{"provider":{"fake":{"models":{"fake-model":{"limit":{"context":`+strconv.Itoa(threshold+32_000)+`,"output":32000}}}}}}`)
		prepare := c.prepare
		c.prepare = func(t *testing.T, d runDir, origin string, mcp []string) (map[string]string, []string) {
			e, args := prepare(t, d, origin, mcp)
			b, err := os.ReadFile(e["OPENCODE_CONFIG"])
			if err != nil {
				t.Fatal(err)
			}
			if out := limit(b); string(out) != string(b) {
				writeFile(t, e["OPENCODE_CONFIG"], string(out))
			} else {
				t.Fatalf("compactAt: no context limit in %s", b)
			}
			return e, args
		}
		return c, map[string]string{"OPENCODE_CONFIG": cfg}
	}
	t.Fatalf("compactAt: %s", c.name)
	return c, nil
}

// TestClientsCompactionForgetsNothing: each real client, set to compact
// its history where a 40-turn session reaches, and the proxy not told
// (its own window is the model's): the client compacts through the proxy,
// and afterwards every tool output of the session is in the fold record
// byte for byte (or still live in the last request), the conversation
// goes on in the same file, recall_folded by the first code the model
// sees (a digest's, else one the index appended to the summary names)
// answers a recorded output, sha256-verified, and
// recall_folded search= finds the error lines of outputs from before the
// compaction.
func TestClientsCompactionForgetsNothing(t *testing.T) {
	for _, cl := range []client{claudeCode, codex, opencode} {
		t.Run(cl.name, func(t *testing.T) {
			c, _ := compactAt(t, cl, 60_000)
			testCompactionForgetsNothing(t, c)
		})
	}
}

func testCompactionForgetsNothing(t *testing.T, c client) {
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
	recall, search := toolAnswer(r, recallID), toolAnswer(r, searchID)
	verified := recalledVerified(contents, recall)
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
	t.Logf("%s: %d compactions, %d requests; %d outputs in the fold record, %d live at the end; index %d bytes; search hit %d of 11",
		c.name, n, len(r.Requests), recorded, live, len(contents.Index), hits)
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

// TestClientsKeepAheadOfTheirCompaction: each real client set to compact
// where a direct run of the session does (Claude Code at 100k and 200k,
// its threshold 67k and 167k; Codex and opencode at 60k); the proxy,
// reading the same setting from its own environment, counts whole
// requests and folds so that the client never compacts; and a long run
// (150 and 300 steps) costs no more than the direct one at Anthropic's
// prices, compactions and their summaries included.
func TestClientsKeepAheadOfTheirCompaction(t *testing.T) {
	for _, tc := range []struct {
		c                client
		threshold, turns int
	}{
		{claudeCode, 67_000, 40}, {claudeCode, 167_000, 150}, {claudeCode, 167_000, 300},
		{codex, 60_000, 40}, {opencode, 60_000, 40},
	} {
		t.Run(fmt.Sprintf("%s/%d/%d", tc.c.name, tc.threshold, tc.turns), func(t *testing.T) {
			c, env := compactAt(t, tc.c, tc.threshold)
			sess := fakellm.ClientSession{Turns: tc.turns, Lines: compactLines}
			long := tc.turns >= 150
			direct := runSession(t, c, runOpts{session: sess, long: long})
			r := runSession(t, c, runOpts{session: sess, proxy: true, proxyEnv: env, long: long})
			for _, run := range []clientResult{direct, r} {
				if run.ExitCode != 0 || run.TimedOut || !strings.Contains(run.Stdout, fakellm.ClientFinal) {
					t.Fatalf("exit %d (timed out %v)\n--- stdout\n%s\n--- stderr\n%s", run.ExitCode, run.TimedOut, tail(run.Stdout, 3000), tail(run.Stderr, 3000))
				}
			}
			dn, pn := compactions(direct.Requests), compactions(r.Requests)
			st := thinkingStats(r.Requests)
			dc, pc := totalCost(direct.Requests), totalCost(r.Requests)
			t.Logf("%s, threshold %d, %d turns: direct %d requests, %d compactions, peak %d tokens, $%.4f; via proxy %d requests, %d compactions, %d fold events, peak %d tokens, $%.4f (%.3f of direct)",
				tc.c.name, tc.threshold, tc.turns, len(direct.Requests), dn, peakPrompt(direct.Requests), dc, len(r.Requests), pn, st.foldEvents, peakPrompt(r.Requests), pc, pc/dc)
			if dn == 0 {
				t.Fatal("the direct run never compacted: the threshold is not where the session reaches")
			}
			if pn > 0 {
				t.Errorf("the client compacted %d times through the proxy", pn)
			}
			if st.foldEvents == 0 {
				t.Error("nothing folded")
			}
			// The cost condition holds where sessions are long (the 150- and
			// 300-step runs); in the short ones the direct run's compactions
			// leave it a small context, and the figure is only reported.
			if tc.turns >= 150 && pc > dc {
				t.Errorf("the proxied run cost more: $%.4f against $%.4f", pc, dc)
			}
		})
	}
}

// deferred is Claude Code with its MCP tools left deferred behind
// ToolSearch, as a user's configuration has them.
func deferred(c client) client {
	prepare := c.prepare
	c.prepare = func(t *testing.T, d runDir, origin string, mcp []string) (map[string]string, []string) {
		e, args := prepare(t, d, origin, mcp)
		delete(e, "ENABLE_TOOL_SEARCH")
		return e, args
	}
	return c
}

// TestClientsRecallDeferred: real Claude Code and Codex with
// context-fold's MCP tools deferred behind their tool search, as by
// default (Claude Code's ToolSearch, by name from the deferred list;
// Codex's tool_search, by keyword): the model loads them, then
// recall_folded answers a folded output byte for byte, sha256-verified,
// and search= finds the session's blocks. Claude Code shows the model the
// MCP server's instructions, which say how to load deferred tools.
func TestClientsRecallDeferred(t *testing.T) {
	// Codex defers them for the models of its catalog.
	for _, c := range []client{deferred(claudeCode), withModel(codex, "gpt-5.5", nil)} {
		t.Run(c.name, func(t *testing.T) { testRecallDeferred(t, c) })
	}
}

func testRecallDeferred(t *testing.T, c client) {
	sess := fakellm.ClientSession{Turns: foldTurns, Lines: foldLines, Recall: true, Search: foldSearch}
	store := t.TempDir()
	r := runSession(t, c, runOpts{session: sess, proxy: true, proxyArgs: []string{"-window", foldWindow}, store: store, mcp: true})
	if r.ExitCode != 0 || r.TimedOut || !strings.Contains(r.Stdout, fakellm.ClientFinal) || strings.Contains(r.Stdout, fakellm.ClientNoFold) {
		t.Fatalf("exit %d (timed out %v)\n--- stdout\n%s\n--- stderr\n%s", r.ExitCode, r.TimedOut, tail(r.Stdout, 3000), tail(r.Stderr, 3000))
	}
	var searchTool, recallID, searchID string
	for _, q := range r.Requests {
		for _, tc := range q.Reply.ToolCalls {
			switch {
			case tc.Name == "ToolSearch" || tc.Name == fakellm.ToolSearchCall:
				searchTool = string(tc.Arguments)
			case strings.HasSuffix(tc.Name, "recall_folded") && strings.HasPrefix(string(tc.Arguments), `{"search":`):
				searchID = tc.ID
			case strings.HasSuffix(tc.Name, "recall_folded"):
				recallID = tc.ID
			}
		}
	}
	instructed := false
	for _, q := range r.Requests {
		instructed = instructed || strings.Contains(string(q.Body), "load recall_folded and unfold with your tool search first")
	}
	switch {
	case instructed:
	case c.name == claudeCode.name:
		t.Error("the MCP server's instructions, which say how to load the deferred tools, never reached the model")
	default:
		t.Logf("%s does not show the model the MCP server's instructions", c.name)
	}
	if searchTool == "" || recallID == "" || searchID == "" {
		t.Fatalf("ToolSearch %q, recall %q, search %q: the model did not load the tools and call them", searchTool, recallID, searchID)
	}
	files, err := foldstore.Files(store)
	if err != nil || len(files) != 1 {
		t.Fatalf("%d conversation files (%v)", len(files), err)
	}
	contents, err := foldstore.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	recall, search := toolAnswer(r, recallID), toolAnswer(r, searchID)
	verified := recalledVerified(contents, recall)
	if !verified {
		t.Errorf("the recall did not answer a folded output byte for byte:\n%s", tail(recall, 1500))
	}
	if hits := hitHeader.FindAllStringSubmatch(search, -1); len(hits) == 0 {
		t.Errorf("the search found nothing:\n%s", tail(search, 1500))
	}
	t.Logf("%s, tools deferred: tool search %s, then recall and search answered (%d bytes, %d bytes)", c.name, searchTool, len(recall), len(search))
}

// longHeldRun is the variable that adds, to TestClaudeCodePreservedLongTurn,
// the run through the proxy holding its folds (about 90 s more).
const longHeldRun = "CONTEXTFOLD_E2E_HELD_RUN"

// TestClaudeCodePreservedLongTurn: real Claude Code on a preserved-thinking
// model (every reply thinks), one long turn of 150 steps with its window
// at 200k, run direct and through the proxy (and, with longHeldRun=1,
// through the proxy holding its folds, -drop-block=false): through the
// proxy it folds inside the turn without a rejected request, never
// compacts, and costs no more than the direct run, which compacts; the
// thinking each event costs is reported beside the least the rules allow.
func TestClaudeCodePreservedLongTurn(t *testing.T) {
	c, env := compactAt(t, claudeCode, 167_000)
	c = withModel(c, fakellm.PreservedClaude, map[string]string{"CLAUDE_CODE_TOASTY_THIMBLE": "0"})
	sess := fakellm.ClientSession{Turns: 150, Lines: compactLines, Thinking: true}
	direct := runSession(t, c, runOpts{session: sess, long: true})
	r := runSession(t, c, runOpts{session: sess, proxy: true, proxyEnv: env, long: true})
	runs := []clientResult{direct, r}
	var held clientResult
	if os.Getenv(longHeldRun) == "1" {
		held = runSession(t, c, runOpts{session: sess, proxy: true, proxyEnv: env, proxyArgs: []string{"-drop-block=false"}, long: true})
		runs = append(runs, held)
	}
	for _, run := range runs {
		if run.ExitCode != 0 || run.TimedOut || !strings.Contains(run.Stdout, fakellm.ClientFinal) {
			t.Fatalf("exit %d (timed out %v)\n--- stdout\n%s\n--- stderr\n%s", run.ExitCode, run.TimedOut, tail(run.Stdout, 3000), tail(run.Stderr, 3000))
		}
	}
	line := func(name string, run clientResult) thinkingRun {
		st := thinkingStats(run.Requests)
		rejected := 0
		for _, q := range run.Requests {
			if q.Status != 200 {
				rejected++
			}
		}
		t.Logf("%s: %d requests, %d rejected, %d compactions, %d fold events, thinking dropped at events %v (the least the rules allow %v), peak %d tokens, $%.4f",
			name, len(run.Requests), rejected, compactions(run.Requests), st.foldEvents, st.eventDrops, st.eventLeast, peakPrompt(run.Requests), totalCost(run.Requests))
		// The direct run has its own (a request after its compaction), and
		// so has the held one, which changes nothing Claude Code sends.
		if rejected > 0 && name == "through the proxy" {
			t.Errorf("%s: %d requests rejected", name, rejected)
		}
		return st
	}
	line("direct", direct)
	st := line("through the proxy", r)
	if len(runs) > 2 {
		line("through the proxy, folds held", held)
	}
	if compactions(direct.Requests) == 0 {
		t.Fatal("the direct run never compacted: the threshold is not where the session reaches")
	}
	if n := compactions(r.Requests); n > 0 || st.foldEvents == 0 {
		t.Errorf("through the proxy: %d compactions, %d fold events; want none, and folds", n, st.foldEvents)
	}
	for i := range st.eventDrops {
		if st.eventDrops[i] > st.eventLeast[i] {
			t.Errorf("fold event %d: the provider dropped %d thinking blocks, more than the current cycle's %d", i+1, st.eventDrops[i], st.eventLeast[i])
		}
	}
	if dc, pc := totalCost(direct.Requests), totalCost(r.Requests); pc > dc {
		t.Errorf("the proxied run cost more: $%.4f against $%.4f", pc, dc)
	}
}

// toolAnswer is the first answer to the tool call id that reached the
// upstream in a run ("" for none).
func toolAnswer(r clientResult, id string) string {
	for _, q := range r.Requests {
		for _, m := range q.Messages {
			if m.Role == "tool" && m.ToolCallID == id {
				return m.Content
			}
		}
	}
	return ""
}

// recalledVerified reports whether a recall answer holds, sha256-verified,
// the text of a block the conversation's record holds.
func recalledVerified(contents *foldstore.Contents, recall string) bool {
	for _, rec := range contents.Records() {
		if tx := contents.Texts[rec.ID]; tx.Text != "" && strings.Contains(recall, tx.Text) && strings.Contains(recall, "sha256 verified") {
			return true
		}
	}
	return false
}
