package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/fakellm"
	"github.com/contextfold/contextfold/internal/foldstore"
)

// foldTurns and foldLines shape the folding sessions: 60 shell turns of
// 80-line outputs (~6.6 KB, under recall's whole-read cap; ~100k tokens in
// all), through a proxy folding for a window of foldWindow tokens.
const (
	foldTurns  = 60
	foldLines  = 80
	foldWindow = "200000"
)

var foldTag = regexp.MustCompile(`\{#([0-9a-z]+) FOLDED\}`)

// TestClientsFoldRecallUnfold: a scripted 40-turn session of each real
// client through the folding proxy, with context-fold's MCP server in the
// client's configuration. Digests reach the upstream; the client calls
// recall_folded through MCP and the model gets the folded output back
// byte for byte; unfold makes the upstream see it raw on the next request;
// the client exits 0. The cached share and Anthropic-priced input cost are
// logged beside a direct run of the same script.
func TestClientsFoldRecallUnfold(t *testing.T) {
	for _, c := range []client{claudeCode, codex, opencode} {
		t.Run(c.name, func(t *testing.T) {
			sess := fakellm.ClientSession{Turns: foldTurns, Lines: foldLines, Recall: true}
			direct := runSession(t, c, runOpts{session: sess})
			store := t.TempDir()
			r := runSession(t, c, runOpts{session: sess, proxy: true, proxyArgs: []string{"-window", foldWindow}, store: store, mcp: true})
			if r.ExitCode != 0 || r.TimedOut {
				t.Fatalf("exit %d (timed out %v)\n--- stdout\n%s\n--- stderr\n%s", r.ExitCode, r.TimedOut, tail(r.Stdout, 3000), tail(r.Stderr, 3000))
			}
			if strings.Contains(r.Stdout, fakellm.ClientNoFold) || !strings.Contains(r.Stdout, fakellm.ClientFinal) {
				t.Fatalf("the session did not recall and finish:\n%s", tail(r.Stdout, 3000))
			}
			// The recall and unfold calls, and the answers the model got.
			var recallID, unfoldID, code string
			for _, q := range r.Requests {
				for _, tc := range q.Reply.ToolCalls {
					switch {
					case strings.HasSuffix(tc.Name, "recall_folded"):
						recallID = tc.ID
						code = strings.Trim(strings.TrimPrefix(string(tc.Arguments), `{"codes":["`), `"]}`)
					case strings.HasSuffix(tc.Name, "unfold"):
						unfoldID = tc.ID
					}
				}
			}
			if recallID == "" || unfoldID == "" || code == "" {
				t.Fatalf("the fake never called both tools (recall %q, unfold %q)", recallID, unfoldID)
			}
			files, err := foldstore.Files(store)
			if err != nil || len(files) != 1 {
				t.Fatalf("fold record: %v, %d files", err, len(files))
			}
			contents, err := foldstore.ReadFile(files[0])
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
			for _, q := range r.Requests {
				for _, m := range q.Messages {
					if m.Role != "tool" {
						continue
					}
					folds += len(foldTag.FindAllString(m.Content, -1))
					if m.ToolCallID == recallID && strings.Contains(m.Content, original) && strings.Contains(m.Content, "sha256 verified") {
						recalled = true
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
