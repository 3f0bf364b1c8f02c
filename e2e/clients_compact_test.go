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
