package engine

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/apply"
	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/policy/ladder"
	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/core/risk"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

type turn struct {
	res      Result
	rendered [][]byte
}

// drive replays msgs as Pi would: one request before each assistant message
// (and one at the end), each shipping only the new messages.
func drive(t testing.TB, e *Engine, msgs [][]byte, window int, j Journal) []turn {
	t.Helper()
	var out []turn
	held := 0
	step := func(upto int) {
		res := e.Step(Request{Keep: held, Append: msgs[held:upto], Window: window}, j)
		held = upto
		if e.Len() != upto {
			t.Fatalf("engine holds %d messages, want %d", e.Len(), upto)
		}
		out = append(out, turn{res: res, rendered: e.Render()})
	}
	for i, m := range msgs {
		if bytes.Contains(m[:min(len(m), 30)], []byte(`"role":"assistant"`)) && i > 0 {
			step(i)
		}
	}
	step(len(msgs))
	return out
}

// longSession is a session of n tool calls with multi-KB outputs and buried
// ERROR lines; every fourth assistant message thinks first.
func longSession(n, lines int) *session {
	s := newSession().user("fix the build")
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		thinking := ""
		if i%4 == 0 {
			thinking = strings.Repeat(fmt.Sprintf("I should check step %d carefully. ", i), 40)
		}
		s.call(thinking, id)
		s.result(id, output(id, lines), i%7 == 3)
	}
	return s.text("done")
}

func TestFoldEventsAndFrozenPrefix(t *testing.T) {
	msgs := longSession(60, 80).msgs
	e := New(shipped())
	j := &memJournal{}
	turns := drive(t, e, msgs, 32_000, j)
	if len(j.events) < 2 {
		t.Fatalf("expected several fold events at 32k, got %d", len(j.events))
	}
	for k := 1; k < len(turns); k++ {
		prev, cur := turns[k-1], turns[k]
		if len(cur.rendered) < len(prev.rendered) {
			t.Fatalf("turn %d shrank", k)
		}
		if cur.res.Event != nil {
			continue
		}
		// Between fold events request k is a byte prefix of request k+1.
		p, c := request(prev.rendered), request(cur.rendered)
		if !bytes.HasPrefix(c, p[:len(p)-1]) {
			t.Fatalf("turn %d: request is not an append-only extension of turn %d", k, k-1)
		}
	}
	// Frozen bytes never change: every placement's text equals its record's digest.
	for _, l := range e.Layers() {
		for _, en := range l.Entries {
			rec, _ := e.Registry().Get(en.ID)
			if rec.Digest != en.Text || !strings.HasPrefix(en.Text, digest.Tag(rec.Code)) {
				t.Fatalf("layer %d entry %s drifted from its record", l.Seq, en.ID)
			}
		}
	}
}

func TestInvariantsOfRenderedMessages(t *testing.T) {
	msgs := longSession(40, 60).msgs
	e := New(shipped())
	drive(t, e, msgs, 20_000, &memJournal{})
	out := e.Render()
	if len(out) != len(msgs) {
		t.Fatalf("message count changed: %d → %d", len(msgs), len(out))
	}
	folded := 0
	for i := range msgs {
		orig, _ := rawjson.Object(msgs[i])
		got, err := rawjson.Object(out[i])
		if err != nil {
			t.Fatalf("message %d no longer valid JSON: %v", i, err)
		}
		for _, key := range []string{"role", "toolCallId", "toolName", "isError", "details", "timestamp", "responseId", "usage"} {
			a, _ := rawjson.Get(orig, key)
			b, _ := rawjson.Get(got, key)
			if !bytes.Equal(a, b) {
				t.Fatalf("message %d field %s changed: %s → %s", i, key, a, b)
			}
		}
		if bytes.Equal(msgs[i], out[i]) {
			continue
		}
		folded++
		tr := block.Linearize([][]byte{msgs[i]})
		tf := block.Linearize([][]byte{out[i]})
		for k, b := range tr.Blocks() {
			f := tf.Blocks()[k]
			switch b.Kind {
			case block.ToolCall, block.User, block.Text:
				if b.Text != f.Text {
					t.Fatalf("message %d: a %s block changed", i, b.Kind)
				}
			case block.ToolResult, block.Thinking:
				if b.Text != f.Text && !strings.HasPrefix(f.Text, digest.Tag(digest.Code(b.ID))) {
					t.Fatalf("message %d: folded %s does not start with its tag: %q", i, b.Kind, f.Text)
				}
			}
		}
		if bytes.Contains(msgs[i], []byte(`"thinkingSignature":"sig"`)) && !bytes.Contains(out[i], []byte(`"thinkingSignature":"sig"`)) {
			t.Fatalf("message %d lost its thinking signature", i)
		}
	}
	if folded == 0 {
		t.Fatal("nothing folded")
	}
}

func TestFirstDeliveryAndTailAreHeld(t *testing.T) {
	s := newSession().user("go")
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("c%d", i)
		s.call("", id).result(id, output(id, 100), false)
	}
	// A parallel batch at the end: two results after the latest assistant.
	s.call("", "p1", "p2").result("p1", output("p1", 100), false).result("p2", output("p2", 100), false)
	e := New(shipped())
	res := e.Step(Request{Append: s.msgs, Window: 8_000}, &memJournal{})
	if res.Event == nil {
		t.Fatal("an over-budget session should fold")
	}
	for _, rec := range res.Event.Folds {
		if rec.ID == "r:p1" || rec.ID == "r:p2" {
			t.Fatalf("first-delivery result %s folded", rec.ID)
		}
	}
	// The newest block is always protected, even when it alone exceeds the tail.
	if e.Frozen("r:p2") || e.Frozen("r:p1") {
		t.Fatal("held results frozen")
	}
	// Once a later assistant response exists, they become ordinary candidates.
	s.text("looked at both")
	for i := 0; i < 6; i++ {
		id := fmt.Sprintf("d%d", i)
		s.call("", id).result(id, output(id, 100), false)
	}
	e.Step(Request{Keep: e.Len(), Append: s.msgs[e.Len():], Window: 8_000}, &memJournal{})
	if !e.Frozen("r:p1") {
		t.Fatal("a stale parallel result never folded")
	}
}

func TestJournalFailureRejectsWholeEvent(t *testing.T) {
	msgs := longSession(30, 80).msgs
	e := New(shipped())
	j := &memJournal{}
	drive(t, e, msgs[:40], 16_000, j)
	before := len(e.Placements())
	if before == 0 {
		t.Fatal("setup: expected an earlier fold")
	}
	layers, regs := len(e.Layers()), e.Registry().Len()
	j.fail = errDisk
	res := e.Step(Request{Keep: e.Len(), Append: msgs[40:], Window: 16_000, Reported: 15_000}, j)
	if res.Rejected == nil {
		t.Fatal("expected the event to be rejected")
	}
	if res.Event != nil || len(e.Layers()) != layers || e.Registry().Len() != regs {
		t.Fatal("a rejected event left state behind")
	}
	if len(res.Placements) != before {
		t.Fatalf("rejected turn placements %d, want only the %d already frozen", len(res.Placements), before)
	}
	j.fail = nil
	res = e.Step(Request{Keep: e.Len(), Window: 16_000, Reported: 15_000}, j)
	if res.Event == nil {
		t.Fatal("the event should commit once the journal works again")
	}
}

func TestCollisionDropsOnlyThatBlock(t *testing.T) {
	// r:call_179599 and r:call_362382 share the fold code h5a3uq.
	if digest.Code("r:call_179599") != digest.Code("r:call_362382") {
		t.Fatal("collision vector no longer collides")
	}
	s := newSession().user("go")
	for _, id := range []string{"call_179599", "call_1", "call_362382", "call_2", "call_3", "call_4"} {
		s.call("", id).result(id, output(id, 120), false)
	}
	s.text("ok")
	e := New(shipped())
	j := &memJournal{}
	res := e.Step(Request{Append: s.msgs, Window: 10_000}, j)
	if res.Event == nil {
		t.Fatal("no event")
	}
	if len(res.Collisions) != 1 || res.Collisions[0] != "r:call_362382" {
		t.Fatalf("collisions %v", res.Collisions)
	}
	if !e.Frozen("r:call_179599") || e.Frozen("r:call_362382") || !e.Frozen("r:call_1") {
		t.Fatal("collision handling folded the wrong blocks")
	}
	// The dropped block stays raw for the session, and folding keeps working.
	for i := 0; i < 8; i++ {
		id := fmt.Sprintf("more_%d", i)
		s.call("", id).result(id, output(id, 120), false)
	}
	s.text("ok")
	res = e.Step(Request{Keep: e.Len(), Append: s.msgs[e.Len():], Window: 10_000}, j)
	if res.Event == nil || e.Frozen("r:call_362382") {
		t.Fatal("after a collision, later events must still fold the rest and never the dropped block")
	}
}

func TestUnfoldIsStickyAndOnlyForFolded(t *testing.T) {
	msgs := longSession(30, 80).msgs
	e := New(shipped())
	j := &memJournal{}
	drive(t, e, msgs, 12_000, j)
	recs := e.Registry().All()
	if len(recs) < 3 {
		t.Fatal("setup: too few folds")
	}
	target := recs[0]
	neverFolded := digest.Code("r:call_29")
	res, err := e.Unfold([]string{digest.Tag(target.Code), neverFolded, "zzzzzz", "not a code"}, j)
	if err != nil {
		t.Fatal(err)
	}
	want := []UnfoldStatus{Released, NotFolded, NotFolded, NotFolded}
	for i, r := range res {
		if r.Status != want[i] {
			t.Errorf("code %d status %s, want %s", i, r.Status, want[i])
		}
	}
	if e.Frozen(target.ID) {
		t.Fatal("unfolded block still frozen")
	}
	again, _ := e.Unfold([]string{target.Code}, j)
	if again[0].Status != Already {
		t.Errorf("second unfold says %s", again[0].Status)
	}
	// Sticky: never re-folded, even under budget pressure.
	res2 := e.Step(Request{Keep: e.Len(), Window: 12_000, Reported: 11_999}, j)
	for _, p := range res2.Placements {
		if b := e.Transcript().MessageBlocks(p.Msg); b[0].ID == target.ID {
			t.Fatal("unfolded block re-folded")
		}
	}
	out := e.Render()
	b, _ := e.Live(target.ID)
	if !bytes.Equal(out[b.Msg], e.Transcript().Message(b.Msg).Raw) {
		t.Fatal("unfolded block not raw in the next request")
	}
}

func TestUnfoldJournalFailureChangesNothing(t *testing.T) {
	msgs := longSession(20, 80).msgs
	e := New(shipped())
	j := &memJournal{}
	drive(t, e, msgs, 10_000, j)
	code := e.Registry().All()[0].Code
	j.fail = errDisk
	if _, err := e.Unfold([]string{code}, j); err == nil {
		t.Fatal("expected an error")
	}
	if rec, _ := e.Registry().ByCode(code); !e.Frozen(rec.ID) {
		t.Fatal("failed unfold released the block")
	}
}

func TestReplayRebuildsSameBytes(t *testing.T) {
	msgs := longSession(40, 80).msgs
	a := New(shipped())
	j := &memJournal{}
	drive(t, a, msgs, 16_000, j)
	if _, err := a.Unfold([]string{a.Registry().All()[1].Code}, j); err != nil {
		t.Fatal(err)
	}
	b := New(shipped())
	if _, err := b.Replay(j.entries()); err != nil {
		t.Fatal(err)
	}
	b.Sync(0, msgs)
	ra, rb := request(a.Render()), request(b.Render())
	if !bytes.Equal(ra, rb) {
		t.Fatal("replayed engine renders different bytes")
	}
	if b.LastSeq() != a.LastSeq() {
		t.Fatalf("seq %d vs %d", b.LastSeq(), a.LastSeq())
	}
	// Replay honours voids: a voided event never applies.
	c := New(shipped())
	en := j.entries()
	en = append(en, VoidEntry(en[0].Seq))
	c.Replay(en)
	c.Sync(0, msgs)
	for _, rec := range en[0].Folds {
		if c.Frozen(rec.ID) {
			t.Fatal("voided event applied")
		}
	}
	if c.LastSeq() < a.LastSeq() {
		t.Fatal("a void must not lower the sequence floor")
	}
}

func TestResyncAfterDivergence(t *testing.T) {
	msgs := longSession(30, 80).msgs
	e := New(shipped())
	drive(t, e, msgs, 16_000, &memJournal{})
	placed := len(e.Placements())
	// A compaction-like rewrite: the first 20 messages replaced by one summary.
	summary := []byte(`{"role":"compactionSummary","summary":"earlier work","tokensBefore":1,"timestamp":1}`)
	rest := msgs[20:]
	e.Sync(0, append([][]byte{summary}, rest...))
	if e.Len() != len(rest)+1 {
		t.Fatal("resync length")
	}
	for _, p := range e.Placements() {
		if p.Msg >= e.Len() {
			t.Fatal("placement outside the held messages")
		}
		b := e.Transcript().MessageBlocks(p.Msg)
		if !e.Frozen(b[max(0, p.Part)].ID) && !e.Frozen(b[0].ID) {
			t.Fatal("placement on a block that is not frozen")
		}
	}
	if len(e.Placements()) >= placed {
		t.Fatal("placements for dropped messages survived")
	}
}

func TestPolicySuppliedTagsAreStripped(t *testing.T) {
	s := newSession().user("go")
	for i := 0; i < 6; i++ {
		id := fmt.Sprintf("c%d", i)
		s.call("", id).result(id, output(id, 100), false)
	}
	s.text("ok")
	pol := fixedPolicy{ids: []string{"r:c0"}, body: "{#aaaaaa FOLDED} custom body {#bbbbbb FOLDED}"}
	e := New(Config{Policy: pol})
	res := e.Step(Request{Append: s.msgs, Window: 10_000}, nil)
	if res.Event == nil {
		t.Fatal("no event")
	}
	want := digest.Tag(digest.Code("r:c0")) + " custom body"
	if got := res.Event.Folds[0].Digest; got != want {
		t.Fatalf("digest %q, want %q", got, want)
	}
}

type fixedPolicy struct {
	ids      []string
	body     string
	intoTail bool
}

func (p fixedPolicy) Conduct(*policy.View) policy.Decision {
	d := policy.Decision{Fold: p.ids, Trigger: policy.Threshold, IntoTail: p.intoTail}
	if p.body != "" {
		d.Digests = map[string]string{}
		for _, id := range p.ids {
			d.Digests[id] = p.body
		}
	}
	return d
}

// TestIntoTailIsGated: the engine folds protected-tail blocks only for a
// decision that asks to reach into the tail, and never the newest block or
// a first-delivery result, whatever a policy asks.
func TestIntoTailIsGated(t *testing.T) {
	s := newSession().user("go")
	var ids []string
	for i := 0; i < 12; i++ {
		id := fmt.Sprintf("c%d", i)
		s.call("", id).result(id, output(id, 100), false)
		ids = append(ids, "r:"+id)
	}
	s.text("read them all")
	s.call("", "new").result("new", output("new", 100), false) // first delivery
	ids = append(ids, "r:new")
	for _, intoTail := range []bool{false, true} {
		e := New(Config{Policy: fixedPolicy{ids: ids, intoTail: intoTail}, Knobs: policy.Knobs{BudgetFraction: 0.75, Tail: 3_000}})
		res := e.Step(Request{Append: s.msgs, Window: 100_000}, &memJournal{})
		if res.Event == nil {
			t.Fatal("no event")
		}
		folded := map[string]bool{}
		for _, f := range res.Event.Folds {
			folded[f.ID] = true
		}
		if folded["r:new"] {
			t.Fatal("a first-delivery result folded")
		}
		tailFolded := folded["r:c11"] // the newest results sit in the 3k tail
		if tailFolded != intoTail || !folded["r:c0"] {
			t.Fatalf("intoTail=%v: folded %v", intoTail, folded)
		}
	}
}

func TestBadInputPassesThrough(t *testing.T) {
	big := strings.Repeat("x", 50<<20) + "\nERROR: at the very end"
	s := newSession().user("go").call("", "dup").result("dup", output("a", 200), false).
		call("", "dup").result("dup", output("b", 200), false).
		result("orphan", output("orphan", 200), false).
		call("", "big").result("big", big, false).text("ok")
	bad := [][]byte{
		[]byte(`{"role":"user","content":`),                       // 9: malformed JSON
		[]byte(`{"role":"robot","content":"beep","timestamp":5}`), // 10: unknown role
		[]byte(`{"role":"toolResult","toolCallId":"u8","content":[{"type":"text","text":"bad ` + "\xff\xfe" + ` bytes ERROR` + strings.Repeat(`\nfiller line`, 100) + `"}],"isError":false,"timestamp":6}`),
		[]byte(`{"role":"toolResult","content":[{"type":"text","text":"no call id"}],"timestamp":7}`), // 12: missing id
		[]byte(`[]`), []byte(`null`), []byte(`{}`), // 13-15
	}
	msgs := append(append([][]byte{}, s.msgs...), bad...)
	tail := newSession()
	tail.ts = 1_800_000_000_000
	for i := 0; i < 12; i++ {
		id := fmt.Sprintf("t%d", i)
		tail.call("", id).result(id, output(id, 300), false)
	}
	msgs = append(msgs, tail.msgs...)
	fp := fixedPolicy{ids: []string{"r:dup", "m4:r:dup", "m9:x", "r:big", "r:orphan", "r:u8", "m12:r", "m10:x", "u:1790000001000", "r:t0"}}
	e := New(Config{Policy: fp})
	res := e.Step(Request{Append: msgs, Window: 128_000}, nil)
	out := e.Render()
	if len(out) != len(msgs) {
		t.Fatalf("message count changed: %d → %d", len(msgs), len(out))
	}
	for _, i := range []int{0, 1, 3, 4, 6, 8, 9, 10, 12, 13, 14, 15} {
		if !bytes.Equal(out[i], msgs[i]) {
			t.Errorf("message %d changed: %.80s", i, out[i])
		}
	}
	folded := map[string]bool{}
	for _, f := range res.Event.Folds {
		folded[f.ID] = true
	}
	// The first owner of a duplicated id folds; the duplicate is positional and never does.
	if !folded["r:dup"] || folded["m4:r:dup"] {
		t.Errorf("duplicate ids: folded %v", folded)
	}
	for _, id := range []string{"r:big", "r:orphan", "r:u8", "r:t0"} {
		if !folded[id] {
			t.Errorf("%s did not fold: %v", id, folded)
		}
	}
	for _, id := range []string{"u:1790000001000", "m12:r", "m10:x", "m9:x"} {
		if folded[id] {
			t.Errorf("%s folded", id)
		}
	}
	rec, _ := e.Registry().Get("r:big")
	if rec == nil || !strings.Contains(rec.Digest, "ERROR: at the very end") {
		t.Fatalf("50 MB output lost its error line: %+v", rec)
	}
	if rec.Bytes != len(big) || rec.SHA256 != registry.Sum(big) {
		t.Error("50 MB output extent or sha wrong")
	}
	u8, _ := e.Registry().Get("r:u8")
	if u8 == nil || !strings.Contains(u8.Digest, "bad \uFFFD\uFFFD bytes ERROR") {
		t.Errorf("invalid UTF-8 not read as U+FFFD: %+v", u8)
	}
}

// TestApplyMatchesTypeScriptShape pins the exact bytes of a substitution: the
// TypeScript adapter builds {...m, content:[{type:"text",text}]} and
// {...part, text|thinking} (a thinking part without its thinkingSignature,
// which binds the original text); JSON.stringify of those is this.
func TestApplyMatchesTypeScriptShape(t *testing.T) {
	tr := []byte(`{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"details":{"fullOutputPath":"/tmp/x"},"isError":false,"timestamp":1}`)
	got, err := apply.Rewrite(tr, -1, "{#0qq769 FOLDED} bash → 2 lines <&> \u2028")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"{#0qq769 FOLDED} bash → 2 lines <&> ` + "\u2028" + `"}],"details":{"fullOutputPath":"/tmp/x"},"isError":false,"timestamp":1}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	as := []byte(`{"role":"assistant","content":[{"type":"thinking","thinking":"long","thinkingSignature":"s"},{"type":"toolCall","id":"c1","name":"bash","arguments":{}}],"responseId":"r"}`)
	got, err = apply.Rewrite(as, 0, "D")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"role":"assistant","content":[{"type":"thinking","thinking":"D"},{"type":"toolCall","id":"c1","name":"bash","arguments":{}}],"responseId":"r"}` {
		t.Fatalf("assistant rewrite %s", got)
	}
	if _, err := apply.Rewrite(as, 1, "D"); err == nil {
		t.Fatal("a tool call must never be rewritten")
	}
}

// errorLinesVisible checks docs/DESIGN.md §8.6 on one folded block: every
// distinct error line of the text is shown in the digest (verbatim, clipped
// to a prefix, or in a counted group of its shape: digest.ShowLines), or is
// among the flagged lines the digest says it omitted.
func errorLinesVisible(t testing.TB, text, dig string) {
	t.Helper()
	if digest.IsBounded(dig) {
		// A bounded first delivery lists every distinct error line whole, or
		// says exactly how many it does not show.
		var lines []string
		seen := map[string]bool{}
		for _, l := range risk.Lines(text, risk.Error) {
			if line := tokens.Trim(l.Text); line != "" && !seen[line] {
				seen[line] = true
				lines = append(lines, line)
			}
		}
		missing := 0
		for _, sh := range digest.ShowLines(dig, lines) {
			if sh != digest.Whole {
				missing++
			}
		}
		omitted := 0
		if k := strings.Index(dig, "\n… "); k >= 0 {
			for _, l := range strings.Split(dig[k+1:], "\n") {
				var n int
				if _, err := fmt.Sscanf(l, "… %d more distinct error line", &n); err == nil {
					omitted += n
				}
			}
		}
		if missing > omitted {
			t.Fatalf("bounded view %q: %d error lines neither shown whole nor counted (%d counted)", dig, missing, omitted)
		}
		return
	}
	// Every flagged line shown whole or counted, every count exact.
	if err := digest.VerifyRisk(text, strings.Split(dig, "\n")[1:]); err != nil {
		t.Fatalf("digest %q: %v", dig, err)
	}
}

func TestBenchReplay(t *testing.T) {
	files := benchFiles(t)
	for _, prof := range []struct {
		name string
		pol  policy.Policy
	}{{"schedule", schedule.Economic{}}, {"ladder", ladder.Ladder{}}} {
		t.Run(prof.name, func(t *testing.T) { benchReplay(t, files, prof.pol) })
	}
}

func benchReplay(t *testing.T, files []string, pol policy.Policy) {
	for _, window := range []int{128_000, 32_000} {
		events, folds := 0, 0
		for _, f := range files {
			msgs := loadPi(t, f)
			e := New(Config{Policy: pol})
			j := &memJournal{}
			turns := drive(t, e, msgs, window, j)
			for k := 1; k < len(turns); k++ {
				if turns[k].res.Event != nil {
					continue
				}
				p, c := request(turns[k-1].rendered), request(turns[k].rendered)
				if !bytes.HasPrefix(c, p[:len(p)-1]) {
					t.Fatalf("%s @%d: turn %d broke the prefix without a fold event", f, window, k)
				}
			}
			for _, ev := range j.events {
				events++
				for _, rec := range ev.Folds {
					folds++
					b, ok := e.Live(rec.ID)
					if !ok {
						t.Fatalf("%s: folded block %s not live", f, rec.ID)
					}
					if registry.Sum(b.Text) != rec.SHA256 {
						t.Fatalf("%s: %s not recoverable byte-exact", f, rec.ID)
					}
					if b.Kind == block.ToolResult {
						errorLinesVisible(t, b.Text, rec.Digest)
					}
				}
			}
		}
		t.Logf("window %d: %d trajectories, %d fold events, %d folded blocks", window, len(files), events, folds)
		if events == 0 {
			t.Fatalf("no fold events at window %d", window)
		}
	}
}

// TestChangedFrozenBlockGoesRaw covers docs/EDGES.md #6: a folded block whose content
// later changes (a context_edit) must not be covered by the old digest.
func TestChangedFrozenBlockGoesRaw(t *testing.T) {
	msgs := longSession(30, 80).msgs
	e := New(shipped())
	j := &memJournal{}
	drive(t, e, msgs, 12_000, j)
	rec := e.Registry().All()[0]
	b, _ := e.Live(rec.ID)
	edited := make([][]byte, len(msgs))
	copy(edited, msgs)
	edited[b.Msg] = newSession().result(strings.TrimPrefix(rec.ID, "r:"), "[edited by another extension]", false).msgs[0]
	e2 := New(shipped())
	e2.Replay(j.entries())
	e2.Sync(0, edited)
	out := e2.Render()
	if !bytes.Equal(out[b.Msg], edited[b.Msg]) {
		t.Fatalf("the old digest covered changed content: %s", out[b.Msg])
	}
	if e2.Frozen(rec.ID) && len(e2.Placements()) == len(e.Placements()) {
		t.Fatal("placement kept for a changed block")
	}
	res := e2.Step(Request{Keep: e2.Len(), Window: 12_000, Reported: 11_900}, nil)
	for _, p := range res.Placements {
		if p.Msg == b.Msg {
			t.Fatal("a changed block was refolded under its old id")
		}
	}
}

// TestPrepareDigestsAheadWithoutChangingDecisions: digests computed between
// requests are the ones a request would compute, so Prepare changes timing,
// never bytes.
func TestPrepareDigestsAheadWithoutChangingDecisions(t *testing.T) {
	msgs := longSession(40, 80).msgs
	a, b := New(shipped()), New(shipped())
	ja, jb := &memJournal{}, &memJournal{}
	held := 0
	for i := 1; i <= len(msgs); i++ {
		if i < len(msgs) && !bytes.Contains(msgs[i][:30], []byte(`"assistant"`)) {
			continue
		}
		a.Step(Request{Keep: held, Append: msgs[held:i], Window: 16_000}, ja)
		b.Step(Request{Keep: held, Append: msgs[held:i], Window: 16_000}, jb)
		held = i
		n := 0
		for b.Prepare(3) {
			n++
		}
	}
	if !bytes.Equal(request(a.Render()), request(b.Render())) || len(ja.events) != len(jb.events) || len(ja.events) == 0 {
		t.Fatal("preparing digests ahead changed what folded")
	}
	if b.Prepare(10) {
		t.Fatal("Prepare reports work left after finishing")
	}
	for k := range b.meta {
		if bl := b.tr.Blocks()[k]; bl.Foldable() && block.Durable(bl.ID) && !b.meta[k].done && b.meta[k].frozen == nil {
			t.Fatalf("block %s not prepared", bl.ID)
		}
	}
}

// TestRoleCountsFollowSync: the role counts buildView reads match a walk
// over the transcript after every append and every cut, including a cut
// past the newest user message and one back to nothing.
func TestRoleCountsFollowSync(t *testing.T) {
	s := newSession().user("go")
	for i := range 6 {
		id := fmt.Sprintf("c%d", i)
		s.call("", id).result(id, "ok", false)
		if i%2 == 1 {
			s.user(fmt.Sprintf("more %d", i))
		}
	}
	s.text("done")
	msgs := s.msgs
	e := New(shipped())
	held := 0
	for _, step := range []struct{ keep, upTo int }{
		{0, 3}, {3, 5}, {5, 9}, {9, len(msgs)},
		{7, 8}, // cut the newest user message off, then one message back
		{2, 4}, // a cut to before the first tool result
		{0, 1}, // back to the first user message alone
		{0, 0}, // nothing
		{0, len(msgs)},
		{len(msgs) - 1, len(msgs)},
	} {
		if step.keep > held {
			t.Fatalf("bad table: keep %d > held %d", step.keep, held)
		}
		e.Sync(step.keep, msgs[step.keep:step.upTo])
		held = step.upTo
		want := roleCounts{lastUser: -1}
		for i := range e.tr.Len() {
			switch e.tr.Message(i).Role {
			case "assistant":
				want.assistants++
			case "user":
				want.lastUser = i
			}
		}
		if e.tr.Len() != held || e.roles != want {
			t.Fatalf("after Sync(%d, %d messages): %d messages, roles %+v, want %+v", step.keep, step.upTo-step.keep, e.tr.Len(), e.roles, want)
		}
	}
}

// TestAnchorEndsTheFrozenRegion: each request names as its anchor the newest
// tool result the previous request sent folded, so the anchor moves only
// when an event froze more, and what precedes it is byte-identical between
// events (the prefix a breakpoint there caches).
func TestAnchorEndsTheFrozenRegion(t *testing.T) {
	msgs := longSession(60, 80).msgs
	e := New(shipped())
	turns := drive(t, e, msgs, 32_000, &memJournal{})
	anchored := 0
	for k, cur := range turns {
		want := -1
		if k > 0 {
			for _, p := range turns[k-1].res.Placements {
				if p.Part == -1 {
					want = max(want, p.Msg)
				}
			}
		}
		got := -1
		if cur.res.Anchor != nil {
			got = cur.res.Anchor.Msg
			if cur.res.Anchor.Kind != block.ToolResult || cur.res.Anchor.CallID == "" {
				t.Fatalf("turn %d: anchor %+v is not a tool result with a call id", k, cur.res.Anchor)
			}
			anchored++
		}
		if got != want {
			t.Fatalf("turn %d: anchor at message %d, want %d (the newest result the previous request sent folded)", k, got, want)
		}
		if k > 0 && got >= 0 && turns[k-1].res.Event == nil && turns[k-1].res.Anchor != nil && turns[k-1].res.Anchor.Msg != got {
			t.Fatalf("turn %d: anchor moved from %d to %d without an event", k, turns[k-1].res.Anchor.Msg, got)
		}
		if k > 0 && got >= 0 && !bytes.Equal(request(turns[k-1].rendered[:got+1]), request(cur.rendered[:got+1])) {
			t.Fatalf("turn %d: the prefix up to the anchor changed", k)
		}
	}
	if anchored < len(turns)/2 {
		t.Fatalf("only %d of %d requests had an anchor", anchored, len(turns))
	}
}

// TestFoldableKeepsToTheTail: what the engine tells an agent about to
// compact counts only what the policy's urgent events would fold: every
// foldable result for a policy that reaches into the protected tail, and
// only those before the tail for one that keeps it (the shipped default),
// as the window and reserve frame the tail.
func TestFoldableKeepsToTheTail(t *testing.T) {
	s := newSession().user("go")
	for i := range 30 {
		id := fmt.Sprintf("c%d", i)
		s.call("", id).result(id, output(id, 60), false)
	}
	const window, reserve = 64_000, 16_384
	into := New(Config{Policy: schedule.Economic{}})
	keeps := New(shipped())
	for _, e := range []*Engine{into, keeps} {
		e.Sync(0, s.msgs)
	}
	all, outside := into.Foldable(window, reserve), keeps.Foldable(window, reserve)
	_, tail := keeps.frame(window, reserve)
	if tail <= 0 || outside <= 0 || outside >= all {
		t.Fatalf("foldable %d reaching into the tail, %d keeping a %d-token tail: want 0 < kept < all", all, outside, tail)
	}
	// Exactly the savings of the results before the tail.
	blocks := keeps.tr.Blocks()
	from := protectFromFunc(len(blocks), func(k int) int { return blocks[k].Tokens }, tail)
	want := 0
	for k := 0; k < from; k++ {
		if b := &blocks[k]; b.Kind == block.ToolResult {
			want += b.Tokens - keeps.ensureMeta(k).tokens
		}
	}
	if outside != want {
		t.Errorf("foldable %d, want %d (the results before block %d)", outside, want, from)
	}
	// A window with no tail to speak of: both count everything.
	if a, b := into.Foldable(0, 0), keeps.Foldable(0, 0); a != b {
		t.Errorf("with no frame: %d and %d", a, b)
	}
}

// TestOverheadCountsAgainstTheWindow: a request's system prompt and tool
// declarations (Request.Overhead) count with its messages: the same
// messages that stay under the budget alone fold once the overhead is
// added, and the policy sees the sum.
func TestOverheadCountsAgainstTheWindow(t *testing.T) {
	msgs := longSession(30, 80).msgs // ~40k tokens: under the envelope's 45 % alone
	for _, tc := range []struct {
		overhead int
		folds    bool
	}{{0, false}, {40_000, true}} {
		e := New(shipped())
		j := &memJournal{}
		res := e.Step(Request{Append: msgs, Window: 100_000, Overhead: tc.overhead}, j)
		if got := res.Event != nil; got != tc.folds {
			t.Errorf("overhead %d: event %v, want %v (status %+v)", tc.overhead, got, tc.folds, res.Status)
		}
		if tc.overhead > 0 && res.Status.UsageFraction*100_000 < float64(tc.overhead) {
			t.Errorf("overhead %d: the policy saw %.3f of the window, less than the overhead alone", tc.overhead, res.Status.UsageFraction)
		}
	}
}

// TestSmallBlocksAndOwnAnswersStayWhole: a result whose digest would save
// almost nothing (an edit's one-line acknowledgement) and context-fold's
// own answers (recall_folded, unfold: copies of blocks that have codes)
// never fold, so no code is minted for nothing or for a copy of a code.
func TestSmallBlocksAndOwnAnswersStayWhole(t *testing.T) {
	s := newSession().user("fix the build")
	var small, own, large []string
	for i := 0; i < 60; i++ {
		id := fmt.Sprintf("call_%d", i)
		s.call("", id)
		switch i % 3 {
		case 0:
			s.result(id, output(id, 80), false)
			large = append(large, "r:"+id)
		case 1:
			s.result(id, fmt.Sprintf("Successfully replaced text in src/widget_%d.go.", i), false)
			small = append(small, "r:"+id)
		case 2:
			name := []string{"recall_folded", "mcp__contextfold__recall_folded", "unfold"}[i%9/3]
			s.resultNamed(id, name, "✓ abc123 — bash · session file · sha256 verified\n=== abc123 ===\n"+output(id, 40), false)
			own = append(own, "r:"+id)
		}
	}
	e := New(shipped())
	drive(t, e, s.text("done").msgs, 32_000, &memJournal{})
	folded := func(id string) bool { _, ok := e.Registry().Get(id); return ok }
	n := 0
	for _, id := range large {
		if folded(id) {
			n++
		}
	}
	if n == 0 {
		t.Fatal("nothing folded: the test exercises nothing")
	}
	for _, id := range append(small, own...) {
		if folded(id) {
			rec, _ := e.Registry().Get(id)
			t.Errorf("%s folded (%d bytes to %q)", id, rec.Bytes, rec.Digest)
		}
	}
}

func TestWorth(t *testing.T) {
	for _, c := range []struct {
		tokens, folded int
		want           bool
	}{
		{45, 41, false},    // the 180-byte answer folded to 164 bytes
		{100, 60, false},   // saves 40: under the floor
		{100, 40, true},    // saves 60, 60 %
		{1000, 800, false}, // saves 200 but only 20 %
		{1000, 700, true},
	} {
		if got := policy.Worth(c.tokens, c.folded); got != c.want {
			t.Errorf("Worth(%d, %d) = %v, want %v", c.tokens, c.folded, got, c.want)
		}
	}
}
