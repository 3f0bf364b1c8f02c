package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/engine"
	foldreg "github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/proxy/codec"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
	"github.com/contextfold/contextfold/internal/proxy/mcp"
	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// foldTurns and foldLines shape the folding sessions: 60 shell turns of
// 80-line outputs (~6.6 KB, under recall's whole-read cap; ~100k tokens in
// all), through a proxy folding for a window of foldWindow tokens, small
// enough that the first fold (at 45 % of it) comes with half the session
// still to repay its cache re-write.
const (
	foldTurns  = 60
	foldLines  = 80
	foldWindow = "100000"
)

var foldTag = regexp.MustCompile(`\{#([0-9a-z]+) FOLDED\}`)

// foldSearch is the term of the sessions' recall_folded search: the
// "ERROR:" lines of turns 1 and 10-19 (2 a turn at foldLines), well under
// the search's token cap even with another conversation's hits, so a sweep
// of every conversation would show them.
const foldSearch = "ERROR: turn 1"

// hitHeader is the header of one block's hits in a search answer.
var hitHeader = regexp.MustCompile(`=== ([0-9a-z]+) \(`)

// clientAPI is the route each client's conversations are stored under.
var clientAPI = map[string]codec.API{"claude": codec.Messages, "codex": codec.Responses, "opencode": codec.Chat}

// seedOther writes, into the store at dir, another conversation of api that
// folded a block holding foldSearch, and returns its file, the block's code
// and a text found only in it. The store is closed again, so the proxy can
// open it.
func seedOther(t *testing.T, dir string, api codec.API) (path, code, marker string) {
	t.Helper()
	st, err := foldstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, _, err := st.Conversation(string(api), "", "another-conversation-seeded-by-the-test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const id = "r:call_seeded_in_another_conversation"
	marker = "SEEDED_IN_ANOTHER_CONVERSATION"
	text := "INFO: turn 1 step 1 ok\n" + foldSearch + " step 30 failed: " + marker + "\n"
	b, l := foldreg.Extent(text)
	ev := &engine.Event{Seq: 1, Trigger: "budget", Folds: []foldreg.Record{{ID: id, Code: digest.Code(id), Bytes: b, Lines: l, SHA256: foldreg.Sum(text), Tool: "Bash", Kind: "tool_result", Digest: "d"}}}
	if err := c.Commit(ev, func(string) (string, bool) { return text, true }); err != nil {
		t.Fatal(err)
	}
	return c.Path(), digest.Code(id), marker
}

// TestClientsFoldRecallUnfold: a scripted 60-turn session of each real
// client through the folding proxy, with context-fold's MCP server in the
// client's configuration and, in its store, another conversation that
// folded a block holding the term the session searches for. Digests reach
// the upstream; the client calls recall_folded through MCP and the model
// gets the folded output back byte for byte; recall_folded search= finds
// the session's own folded blocks and nothing of the other conversation;
// unfold makes the upstream see it raw on the next request; the client
// exits 0. The cached share and Anthropic-priced input cost are logged
// beside a direct run of the same script.
func TestClientsFoldRecallUnfold(t *testing.T) {
	for _, c := range []client{claudeCode, codex, opencode} {
		t.Run(c.name, func(t *testing.T) {
			sess := fakellm.ClientSession{Turns: foldTurns, Lines: foldLines, Recall: true, Search: foldSearch}
			direct := runSession(t, c, runOpts{session: sess})
			store := t.TempDir()
			other, otherCode, otherMarker := seedOther(t, store, clientAPI[c.name])
			r := runSession(t, c, runOpts{session: sess, proxy: true, proxyArgs: []string{"-window", foldWindow}, store: store, mcp: true})
			if r.ExitCode != 0 || r.TimedOut {
				t.Fatalf("exit %d (timed out %v)\n--- stdout\n%s\n--- stderr\n%s", r.ExitCode, r.TimedOut, tail(r.Stdout, 3000), tail(r.Stderr, 3000))
			}
			if strings.Contains(r.Stdout, fakellm.ClientNoFold) || !strings.Contains(r.Stdout, fakellm.ClientFinal) {
				t.Fatalf("the session did not recall and finish:\n%s", tail(r.Stdout, 3000))
			}
			// The recall, search and unfold calls, and the answers the
			// model got.
			var recallID, searchID, unfoldID, code string
			for _, q := range r.Requests {
				for _, tc := range q.Reply.ToolCalls {
					switch {
					case strings.HasSuffix(tc.Name, "recall_folded") && strings.HasPrefix(string(tc.Arguments), `{"search":`):
						searchID = tc.ID
					case strings.HasSuffix(tc.Name, "recall_folded"):
						recallID = tc.ID
						code = strings.Trim(strings.TrimPrefix(string(tc.Arguments), `{"codes":["`), `"]}`)
					case strings.HasSuffix(tc.Name, "unfold"):
						unfoldID = tc.ID
					}
				}
			}
			if recallID == "" || searchID == "" || unfoldID == "" || code == "" {
				t.Fatalf("the fake never called the three tools (recall %q, search %q, unfold %q)", recallID, searchID, unfoldID)
			}
			// The store holds the seeded conversation and the session's.
			files, err := foldstore.Files(store)
			if err != nil {
				t.Fatal(err)
			}
			var own []string
			for _, f := range files {
				if f != other {
					own = append(own, f)
				}
			}
			if len(own) != 1 || len(files) != 2 {
				t.Fatalf("fold record: %d files, %d of them not the seeded one", len(files), len(own))
			}
			contents, err := foldstore.ReadFile(own[0])
			if err != nil {
				t.Fatal(err)
			}
			rec, ok := contents.Records()[code]
			if !ok {
				t.Fatalf("code %s is not in the fold record", code)
			}
			original := contents.Texts[rec.ID].Text
			callID := strings.TrimPrefix(rec.ID, "r:")
			folds, recalled, rawAgain := 0, false, false
			digests := map[string]bool{} // the codes of the session's digests
			search := ""                 // the search answer the model got
			for _, q := range r.Requests {
				for _, m := range q.Messages {
					if m.Role != "tool" {
						continue
					}
					for _, sub := range foldTag.FindAllStringSubmatch(m.Content, -1) {
						folds++
						digests[sub[1]] = true
					}
					if m.ToolCallID == recallID && strings.Contains(m.Content, original) && strings.Contains(m.Content, "sha256 verified") {
						recalled = true
					}
					if m.ToolCallID == searchID && search == "" {
						search = m.Content
					}
				}
				if seq := requestAfter(r.Requests, unfoldID); seq != 0 && q.Seq >= seq {
					for _, m := range q.Messages {
						if m.Role == "tool" && m.ToolCallID == callID && m.Content == original {
							rawAgain = true
						}
					}
				}
			}
			if folds == 0 {
				t.Fatal("no digest reached the upstream")
			}
			if !recalled {
				t.Errorf("the recall answer the model got does not hold %s's output byte for byte", code)
			}
			if !rawAgain {
				t.Errorf("after unfold, %s's output never reached the upstream raw", code)
			}
			// The search swept the session's conversation only.
			records := contents.Records()
			hits, ownHits := 0, 0
			for _, sub := range hitHeader.FindAllStringSubmatch(search, -1) {
				hits++
				if _, ok := records[sub[1]]; !ok || !digests[sub[1]] {
					t.Errorf("search hit %s: in the session's fold record %v, among its digests %v", sub[1], ok, digests[sub[1]])
				} else {
					ownHits++
				}
			}
			switch {
			case search == "":
				t.Errorf("no answer to the search call %s reached the upstream", searchID)
			case strings.Contains(search, mcp.UnknownCaller):
				t.Errorf("the search could not be placed in its conversation:\n%s\n--- calls noted in the session's file: %+v", search, contents.Calls)
			case ownHits == 0:
				t.Errorf("the search found none of the session's folded blocks:\n%s", search)
			}
			if strings.Contains(search, otherCode) || strings.Contains(search, otherMarker) {
				t.Errorf("the search read the other conversation's block %s:\n%s", otherCode, search)
			}
			var noted []string
			for _, call := range contents.Calls {
				noted = append(noted, call.Name+" "+call.ID+" "+call.Args)
			}
			t.Logf("%s: search %q hit %d blocks, %d of them the session's (the other conversation's is %s): %s; calls noted in the session's file: %q",
				c.name, foldSearch, hits, ownHits, otherCode, searchSummary(search), noted)
			// The same script up to the recall: the proxied run's two more
			// requests (recall, unfold) are not in the direct one.
			n := len(direct.Requests)
			dc, dcost := cost(direct.Requests)
			pc, pcost := cost(r.Requests[:min(n, len(r.Requests))])
			t.Logf("%s: %d requests direct, %d via proxy (compared: the first %d); cached share %.1f%% → %.1f%%; input at Anthropic prices $%.4f → $%.4f",
				c.name, len(direct.Requests), len(r.Requests), n, 100*dc, 100*pc, dcost, pcost)
			if pcost > dcost {
				t.Errorf("the proxy made the run cost more: $%.4f vs $%.4f", pcost, dcost)
			}
		})
	}
}

// searchSummary is the summary line of a search answer (Codex puts its
// own lines before the tool's text), or "".
func searchSummary(answer string) string {
	for _, line := range strings.Split(answer, "\n") {
		if strings.Contains(line, "folded block") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// requestAfter is the Seq of the request that carries callID's result.
func requestAfter(reqs []fakellm.Recorded, callID string) int {
	for _, q := range reqs {
		for _, m := range q.Messages {
			if m.Role == "tool" && m.ToolCallID == callID {
				return q.Seq
			}
		}
	}
	return 0
}

// cost sums a run's input as the fake accounted it: the cached share of
// prompt tokens, and the price at Anthropic's rates for Sonnet (input $3,
// cache write $3.75, cache read $0.30 per million tokens).
func cost(reqs []fakellm.Recorded) (cached float64, dollars float64) {
	var prompt, read int
	for _, q := range reqs {
		u := q.Usage
		prompt += u.Prompt
		read += u.Cached
		dollars += (float64(u.Prompt-u.Cached-u.CacheWrite)*3 + float64(u.CacheWrite)*3.75 + float64(u.Cached)*0.30) / 1e6
	}
	if prompt > 0 {
		cached = float64(read) / float64(prompt)
	}
	return cached, dollars
}
