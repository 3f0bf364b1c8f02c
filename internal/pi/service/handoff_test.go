package service

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/compact"
	"github.com/contextfold/contextfold/internal/core/rawjson"
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

// TestHandoffKeepsEarlierSeeds: a second and third handoff of one session
// write handoff-<id>-2.md and -3.md; no seed is overwritten, and each result
// names its own file.
func TestHandoffKeepsEarlierSeeds(t *testing.T) {
	dir := t.TempDir()
	file := sessionFile(t, dir, messages(3, ""))
	c, _ := start(t)
	if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: dir, SessionFile: file}, nil); err != nil {
		t.Fatal(err)
	}
	seedDir := filepath.Join(dir, "context-fold", "s1")
	for i, goal := range []string{"first goal", "second goal", "first goal"} {
		var res HandoffResult
		if err := call(t, c, "handoff", HandoffParams{Goal: goal}, &res); err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(seedDir, "handoff-s1.md")
		if i > 0 {
			want = filepath.Join(seedDir, fmt.Sprintf("handoff-s1-%d.md", i+1))
		}
		if res.Path != want || res.Empty {
			t.Fatalf("handoff %d: path %q, want %q", i+1, res.Path, want)
		}
	}
	for name, goal := range map[string]string{"handoff-s1.md": "first goal", "handoff-s1-2.md": "second goal", "handoff-s1-3.md": "first goal"} {
		data, err := os.ReadFile(filepath.Join(seedDir, name))
		if err != nil || !strings.Contains(string(data), "## Goal for the next session\n\n"+goal+"\n") {
			t.Errorf("%s: %v\n%.300s", name, err, data)
		}
	}
}

// TestSeedGoalSurvivesCompaction: in a session started from a handoff seed,
// every compaction summary carries the seed's goal verbatim: the first and
// second from the session file's branch (which starts with the seed), a
// third without a session file from the summary Pi carries in.
func TestSeedGoalSurvivesCompaction(t *testing.T) {
	goal := "Finish the refactor of gen.sh and keep the ERROR lines"
	seed := compact.Seed(goal, "/sessions/parent.jsonl", nil, nil)
	msgs := append([]json.RawMessage{json.RawMessage(`{"role":"user","content":[{"type":"text","text":` + rawjson.QuoteString(seed) + `}],"timestamp":1}`)}, messages(12, "")[1:]...)
	dir := t.TempDir()
	file := sessionFile(t, dir, msgs)
	c, _ := start(t)
	if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: dir, SessionFile: file}, nil); err != nil {
		t.Fatal(err)
	}
	want := "\n## Goal this session was handed off with (verbatim from its handoff seed, 1 line)\n" + goal + "\n"
	prev := ""
	for i, cut := range [][2]int{{0, 7}, {7, 15}} {
		var res CompactResult
		p := CompactParams{Messages: msgs[cut[0]:cut[1]], FirstKeptID: fmt.Sprintf("e%07d", cut[1]), PreviousSummary: prev}
		if err := call(t, c, "compact", p, &res); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.Summary, want) || strings.Count(res.Summary, "## Goal this session") != 1 {
			t.Fatalf("compaction %d:\n%s", i+1, res.Summary)
		}
		call(t, c, "compacted", CompactedParams{OK: true}, nil)
		prev = res.Summary
	}
	c2, _ := start(t)
	call(t, c2, "open", OpenParams{SessionID: "s2"}, nil)
	var res CompactResult
	if err := call(t, c2, "compact", CompactParams{Messages: msgs[15:], PreviousSummary: prev}, &res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Summary, want) || strings.Count(res.Summary, "## Goal this session") != 1 {
		t.Fatalf("third compaction, from the carried summary:\n%s", res.Summary)
	}
}
