package service

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/testsupport/pisession"
)

// offlineSession folds msgs through a live service, lets act call tools on
// it (nil for none), and writes a Pi session file holding msgs and every
// entry the adapter persisted, as Pi would. edit, when not nil, rewrites
// the messages written: a session file tampered with after the fold.
func offlineSession(t *testing.T, msgs []json.RawMessage, act func(call func(method string, params, out any)), edit func([]json.RawMessage)) string {
	t.Helper()
	c, ad := start(t)
	dir := t.TempDir()
	if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: dir}, nil); err != nil {
		t.Fatal(err)
	}
	if out := turn(t, c, 0, msgs, 16_000); out.Event == nil {
		t.Fatal("no fold")
	}
	if act != nil {
		act(func(method string, params, out any) {
			if err := call(t, c, method, params, out); err != nil {
				t.Fatal(err)
			}
		})
	}
	written := append([]json.RawMessage{}, msgs...)
	if edit != nil {
		edit(written)
	}
	f := pisession.New("s1")
	for _, m := range written {
		f.Message(m)
	}
	ad.mu.Lock()
	for _, e := range ad.entries {
		f.Custom(CustomType, e)
	}
	ad.mu.Unlock()
	p := filepath.Join(dir, "session.jsonl")
	if err := f.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOfflineSearchWarnsOfUnverifiedLines: a session file whose folded
// block was edited after the fold. Its text, in the file and in the
// history replayed from it, is not the folded bytes: recall by code and
// search both refuse it and say why (docs/EDGES.md #24: every route verifies the
// same way), and no line of it reads as the folded bytes.
func TestOfflineSearchWarnsOfUnverifiedLines(t *testing.T) {
	file := offlineSession(t, messages(30, ""), nil, func(m []json.RawMessage) {
		m[2] = json.RawMessage(strings.Replace(string(m[2]), "step 0 failed", "step 0 passed after all", 1))
	})
	svc, err := Offline(file)
	if err != nil {
		t.Fatal(err)
	}
	tampered, clean := digest.ScopedCode("s1", "r:c0"), digest.ScopedCode("s1", "r:c1")
	res, err := svc.Recall(RecallParams{Search: "passed after all"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Text, "passed after all\n") || strings.Contains(res.Text, "76: ") ||
		!strings.Contains(res.Text, tampered+" — not searched: the session file's text for #"+tampered+" failed the fold-time sha256 check") {
		t.Fatalf("search over a tampered block:\n%s", res.Text)
	}
	// A verified block says so; the answer says which block it could not
	// search, and flags no line as unverified.
	res, _ = svc.Recall(RecallParams{Search: "step 1 failed"})
	if strings.Contains(res.Text, "UNVERIFIED") || !strings.Contains(res.Text, "⚠ "+tampered+" — not searched") || !strings.Contains(res.Text, "=== "+clean+" (bash · session file) — sha256 verified ===") {
		t.Fatalf("search over a verified block:\n%s", res.Text)
	}
	// Both routes agree: recall by code and by code plus search warn too.
	for _, p := range []RecallParams{{Codes: []string{tampered}}, {Codes: []string{tampered}, Search: "passed"}} {
		res, _ = svc.Recall(p)
		if !strings.Contains(res.Text, "failed the fold-time sha256 check") {
			t.Fatalf("recall %+v:\n%s", p, res.Text)
		}
	}
}

// TestInspectShowsUnfoldedBlocks: a block the agent unfolded is listed as
// unfolded, not folded, and masks no tokens.
func TestInspectShowsUnfoldedBlocks(t *testing.T) {
	code := digest.ScopedCode("s1", "r:c0")
	msgs := messages(30, "")
	folded := offlineSession(t, msgs, nil, nil)
	unfolded := offlineSession(t, msgs, func(call func(string, any, any)) {
		var res ToolResult
		call("unfold", UnfoldParams{Codes: []string{code}}, &res)
	}, nil)
	inspect := func(file string) (*Inspection, string) {
		svc, err := Offline(file)
		if err != nil {
			t.Fatal(err)
		}
		in := svc.Inspect()
		var sb strings.Builder
		WriteInspection(&sb, in)
		return in, sb.String()
	}
	before, _ := inspect(folded)
	in, text := inspect(unfolded)
	var line string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "{#"+code+" FOLDED}") {
			line = l
		}
	}
	if !strings.Contains(line, " unfolded ") || strings.Contains(line, " folded ") {
		t.Errorf("the unfolded block's line: %q", line)
	}
	if n := strings.Count(text, " folded "); n != len(in.Codes)-1 {
		t.Errorf("%d blocks listed folded, want %d:\n%s", n, len(in.Codes)-1, text)
	}
	var c InspectCode
	for _, x := range in.Codes {
		if x.Code == code {
			c = x
		}
	}
	if !c.Unfolded || len(in.Unfolded) != 1 || in.Unfolded[0] != code || !strings.Contains(text, "unfolded by the agent: ["+code+"]") {
		t.Errorf("inspection: %+v, unfolded %v", c, in.Unfolded)
	}
	if in.Masked >= before.Masked || in.Events[0].Masked != in.Masked {
		t.Errorf("masked %d after the unfold, %d before", in.Masked, before.Masked)
	}
}
