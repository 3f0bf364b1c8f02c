package service

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHandoffBeforeTheFirstMessage: Pi writes the session file with the
// first assistant message, so /fold-handoff before it finds no file; that,
// a file with no messages, and a --no-session session with no entries are
// all an answer ("nothing to hand off yet"), not a failure, and write
// nothing.
func TestHandoffBeforeTheFirstMessage(t *testing.T) {
	dir := t.TempDir()
	header := filepath.Join(dir, "header-only.jsonl")
	os.WriteFile(header, []byte(`{"type":"session","version":3,"id":"s1","timestamp":"2026-12-02T00:00:00.000Z","cwd":"/w"}`+"\n"), 0o644)
	for _, tc := range []struct {
		name string
		open OpenParams
	}{
		{"no session file yet", OpenParams{SessionID: "s1", SessionDir: dir, SessionFile: filepath.Join(dir, "not-yet-written.jsonl")}},
		{"a session file without messages", OpenParams{SessionID: "s1", SessionDir: dir, SessionFile: header}},
		{"no session and no entries", OpenParams{SessionID: "s1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := start(t)
			if err := call(t, c, "open", tc.open, nil); err != nil {
				t.Fatal(err)
			}
			var res HandoffResult
			if err := call(t, c, "handoff", HandoffParams{Goal: "ship it"}, &res); err != nil {
				t.Fatalf("handoff failed: %v", err)
			}
			if !res.Empty || res.Text != "nothing to hand off yet: this session has no messages" || res.Path != "" || res.Seed != "" {
				t.Fatalf("result %+v", res)
			}
			if _, err := os.Stat(filepath.Join(dir, "context-fold")); err == nil {
				t.Fatal("a handoff of nothing wrote a file")
			}
		})
	}
}
