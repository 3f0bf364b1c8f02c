package service

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/recall"
	"github.com/contextfold/contextfold/internal/pi/indexfile"
)

// TestCompactionIndexSkipsOwnAnswers: the compaction's seed-index record
// takes no error lines, files or identifiers from recall_folded results
// (the tool's own answers); the blocks they copy are indexed where they are.
func TestCompactionIndexSkipsOwnAnswers(t *testing.T) {
	c, _ := start(t)
	dir := t.TempDir()
	call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: dir}, nil)
	answer := recall.RenderRecall(nil, []recall.Failure{{Code: "ghi789", Message: recall.Unavailable(recall.WhyMismatch("ghi789"))}}, []string{"{#zzzzzz FOLDED}"})
	msgs := append(messages(2, ""),
		json.RawMessage(`{"role":"assistant","content":[{"type":"toolCall","id":"rc","name":"recall_folded","arguments":{"codes":["ghi789"]}}],"responseId":"rrc","timestamp":90}`),
		json.RawMessage(`{"role":"toolResult","toolCallId":"rc","toolName":"recall_folded","content":[{"type":"text","text":`+rawjson.QuoteString(answer)+`}],"isError":true,"timestamp":91}`))
	var res CompactResult
	if err := call(t, c, "compact", CompactParams{Messages: msgs}, &res); err != nil {
		t.Fatal(err)
	}
	rs, _, err := indexfile.Open(indexfile.Dir(dir, "s1")).Read()
	if err != nil || len(rs) != 1 {
		t.Fatalf("%d records: %v", len(rs), err)
	}
	r := rs[0]
	if strings.Join(r.Errors, "\n") != "ERROR: step 0 failed\nERROR: step 1 failed" {
		t.Errorf("errors %q", r.Errors)
	}
	if ids := strings.Join(r.Identifiers, " "); strings.Contains(ids, "ghi789") || strings.Contains(ids, "zzzzzz") {
		t.Errorf("identifiers from the recall answer: %q", r.Identifiers)
	}
	if strings.Contains(res.Summary, "ghi789") || strings.Contains(res.Summary, "recall unavailable") {
		t.Errorf("summary:\n%s", res.Summary)
	}
}
