package engine

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

// At a 32k window the budget is 24,000 tokens, the bounded cap 3,000.
const (
	ovWindow = 32_000
	ovBudget = 24_000
	ovCap    = ovBudget / boundedShare
)

// bigOutput is about tok tokens of numbered lines with a failure buried in
// the middle.
func bigOutput(tag string, tok int) string {
	var b strings.Builder
	for i := 1; b.Len() < tok*tokens.CharsPerToken; i++ {
		if i == 500 {
			fmt.Fprintf(&b, "panic: %s: index out of range [7] with length 3\n", tag)
			continue
		}
		fmt.Fprintf(&b, "%s %06d the quick brown fox jumps over the lazy dog\n", tag, i)
	}
	return b.String()
}

// sent returns the token cost of the request the engine renders.
func sent(e *Engine) int {
	n := 0
	for _, b := range block.Linearize(e.Render()).Blocks() {
		n += b.Tokens
	}
	return n
}

func TestOversizedResultIsBoundedAndFrozen(t *testing.T) {
	huge := bigOutput("c1", 40_000)
	s := newSession().user("run the suite").call("", "c0").result("c0", "ok", false).
		call("", "c1").result("c1", huge, false)
	e := New(shipped())
	j := &memJournal{}
	res := e.Step(Request{Append: s.msgs, Window: ovWindow}, j)
	if res.Rejected != nil || res.Event == nil || res.Event.Trigger != policy.Oversize || len(res.Event.Folds) != 1 {
		t.Fatalf("want one oversize event: %+v", res)
	}
	rec := res.Event.Folds[0]
	if rec.ID != "r:c1" || rec.SHA256 != registry.Sum(huge) || !strings.HasPrefix(rec.Digest, digest.Tag(rec.Code)+" bash → ") {
		t.Fatalf("record: %+v", rec)
	}
	if !strings.Contains(rec.Digest, "panic: c1: index out of range [7] with length 3") {
		t.Fatal("the buried failure is not in the bounded view")
	}
	if got := sent(e); got > ovBudget || tokens.Block(rec.Digest) > ovCap {
		t.Fatalf("request is %d tokens (budget %d), view %d (cap %d)", got, ovBudget, tokens.Block(rec.Digest), ovCap)
	}
	if !e.Frozen("r:c1") || len(j.events) != 1 {
		t.Fatal("the bounded view is not committed and frozen")
	}
	// The original is what recall verifies against: the live block's bytes.
	if b, ok := e.Live("r:c1"); !ok || registry.Sum(b.Text) != rec.SHA256 || b.Text != huge {
		t.Fatal("the live block no longer holds the original bytes")
	}
	first := request(e.Render())

	// The next request keeps the bounded view byte for byte.
	s.call("", "c2").result("c2", "done", false)
	res = e.Step(Request{Keep: e.Len(), Append: s.msgs[e.Len():], Window: ovWindow}, j)
	if res.Event != nil {
		t.Fatalf("no event expected: %+v", res.Event)
	}
	next := request(e.Render())
	if !bytes.HasPrefix(next, first[:len(first)-1]) {
		t.Fatal("the request after the bounded delivery is not an append-only extension")
	}

	// A replay of the journal rebuilds the same frozen bytes.
	r := New(shipped())
	if _, err := r.Replay(j.entries()); err != nil {
		t.Fatal(err)
	}
	r.Sync(0, s.msgs)
	if !bytes.Equal(request(r.Render()), next) {
		t.Fatal("replayed state renders different bytes")
	}

	// Unfold works as for any folded block: raw again, for good.
	out, err := e.Unfold([]string{rec.Code}, j)
	if err != nil || out[0].Status != Released {
		t.Fatalf("unfold: %v %+v", err, out)
	}
	e.Step(Request{Keep: e.Len(), Window: ovWindow}, j)
	if !bytes.Contains(request(e.Render()), []byte("c1 000499 the quick brown fox")) {
		t.Fatal("unfold did not restore the original")
	}
}

func TestNormalHeldResultsGoOutWhole(t *testing.T) {
	// docs/EDGES.md #16: a fresh result that fits reaches the model whole, even one
	// larger than the bounded cap.
	fresh := bigOutput("c1", ovCap*3)
	s := newSession().user("go").call("", "c1").result("c1", fresh, false)
	e := New(shipped())
	res := e.Step(Request{Append: s.msgs, Window: ovWindow}, &memJournal{})
	if res.Event != nil || e.Frozen("r:c1") || !bytes.Contains(request(e.Render()), []byte(`c1 000499`)) {
		t.Fatalf("a result that fits was not delivered whole: %+v", res.Event)
	}
	// So is one that fits once older results fold: the policy makes room.
	s = newSession().user("go")
	for i := 0; i < 6; i++ {
		id := fmt.Sprintf("h%d", i)
		s.call("", id).result(id, output(id, 200), false)
	}
	s.call("", "c1").result("c1", bigOutput("c1", ovBudget/2-1000), false)
	e = New(shipped())
	res = e.Step(Request{Append: s.msgs, Window: ovWindow}, &memJournal{})
	if e.Frozen("r:c1") || res.Event == nil || res.Event.Trigger == policy.Oversize {
		t.Fatalf("want the history folded and the result whole: %+v", res.Event)
	}
	if got := sent(e); got > ovBudget {
		t.Fatalf("request is %d tokens", got)
	}
}

func TestOversizedByTheFloor(t *testing.T) {
	// Under half the budget, but the user's own text (which never folds)
	// leaves no room for it whole: rule (b).
	s := newSession().user(strings.Repeat("spec text that never folds ", 16_000*4/27)).
		call("", "c1").result("c1", bigOutput("c1", 10_000), false)
	e := New(shipped())
	res := e.Step(Request{Append: s.msgs, Window: ovWindow}, &memJournal{})
	if res.Event == nil || !e.Frozen("r:c1") {
		t.Fatalf("want the result bounded: %+v", res)
	}
	if got := sent(e); got > ovBudget {
		t.Fatalf("request is %d tokens", got)
	}
	// The rule reads the blocks, not the reported usage: a stale estimate
	// (one that still counts what a compaction removed) takes no result's
	// first whole delivery away.
	s = newSession().user("go").call("", "c1").result("c1", bigOutput("c1", 10_000), false)
	e = New(shipped())
	res = e.Step(Request{Append: s.msgs, Window: ovWindow, Reported: 30_000}, &memJournal{})
	if e.Frozen("r:c1") {
		t.Fatalf("a stale reported figure bounded a result that fits: %+v", res.Event)
	}
}

func TestParallelHeldResults(t *testing.T) {
	// Three results of 40 %, 35 % and 30 % of the budget: each under half,
	// together over. The largest is bounded; the two others fit whole.
	s := newSession().user("go").call("", "p0", "p1", "p2").
		result("p0", bigOutput("p0", ovBudget*30/100), false).
		result("p1", bigOutput("p1", ovBudget*40/100), false).
		result("p2", bigOutput("p2", ovBudget*35/100), false)
	e := New(shipped())
	res := e.Step(Request{Append: s.msgs, Window: ovWindow}, &memJournal{})
	if res.Event == nil || len(res.Event.Folds) != 1 || res.Event.Folds[0].ID != "r:p1" {
		t.Fatalf("want only the largest bounded: %+v", res.Event)
	}
	if got := sent(e); got > ovBudget {
		t.Fatalf("request is %d tokens", got)
	}
	// Each over half the budget: all three bounded, in message order, in one event.
	s = newSession().user("go").call("", "q0", "q1", "q2").
		result("q0", bigOutput("q0", ovBudget*6/10), false).
		result("q1", bigOutput("q1", ovBudget*7/10), false).
		result("q2", bigOutput("q2", ovBudget*6/10), false)
	e = New(shipped())
	res = e.Step(Request{Append: s.msgs, Window: ovWindow}, &memJournal{})
	if res.Event == nil || len(res.Event.Folds) != 3 || res.Event.Folds[0].ID != "r:q0" || res.Event.Folds[2].ID != "r:q2" {
		t.Fatalf("want all three bounded in one event: %+v", res.Event)
	}
	if got := sent(e); got > ovBudget {
		t.Fatalf("request is %d tokens", got)
	}
}

func TestOversizedWithAPolicyEvent(t *testing.T) {
	// A history over the budget and an oversized result: one event folds
	// both, and the policy judged the request with the result bounded.
	s := newSession().user("go")
	for i := 0; i < 12; i++ {
		id := fmt.Sprintf("h%d", i)
		s.call("", id).result(id, output(id, 300), false)
	}
	s.call("", "c1").result("c1", bigOutput("c1", 30_000), false)
	e := New(shipped())
	res := e.Step(Request{Append: s.msgs, Window: ovWindow}, &memJournal{})
	if res.Event == nil || res.Event.Trigger == policy.Oversize || !e.Frozen("r:c1") || !e.Frozen("r:h0") {
		t.Fatalf("want one event with the history and the bounded result: %+v", res.Event)
	}
	if got := sent(e); got > ovBudget {
		t.Fatalf("request is %d tokens", got)
	}
}

func TestOversizedJournalFailure(t *testing.T) {
	// A journal failure rejects the event like any other (docs/DESIGN.md §7): the
	// result goes out whole this request, and the next one bounds it.
	s := newSession().user("go").call("", "c1").result("c1", bigOutput("c1", 40_000), false)
	e := New(shipped())
	res := e.Step(Request{Append: s.msgs, Window: ovWindow}, &memJournal{fail: errDisk})
	if res.Rejected == nil || e.Frozen("r:c1") {
		t.Fatalf("want a rejected event: %+v", res)
	}
	res = e.Step(Request{Keep: e.Len(), Window: ovWindow}, &memJournal{})
	if res.Event == nil || !e.Frozen("r:c1") || res.Event.Seq != 2 {
		t.Fatalf("the retry should commit with a fresh seq: %+v", res.Event)
	}
}

func TestPausedDoesNotBound(t *testing.T) {
	s := newSession().user("go").call("", "c1").result("c1", bigOutput("c1", 40_000), false)
	e := New(shipped())
	if res := e.Step(Request{Append: s.msgs, Window: ovWindow, Paused: true}, &memJournal{}); res.Event != nil {
		t.Fatal("a paused request folded")
	}
}

// TestNoPolicyNoFold: an engine its host gave no policy folds nothing, not
// even a result too large to send whole; it only replays and reads back.
func TestNoPolicyNoFold(t *testing.T) {
	huge := bigOutput("c1", 40_000)
	s := newSession().user("run the suite").call("", "c0").result("c0", "ok", false).
		call("", "c1").result("c1", huge, false)
	e := New(Config{})
	j := &memJournal{}
	if res := e.Step(Request{Append: s.msgs, Window: ovWindow}, j); res.Event != nil || len(j.events) != 0 || e.Frozen("r:c1") {
		t.Fatalf("an engine without a policy folded: %+v", res.Event)
	}
	e.SetPolicy(shipped().Policy)
	if res := e.Step(Request{Keep: len(s.msgs), Window: ovWindow}, j); res.Event == nil || res.Event.Trigger != policy.Oversize {
		t.Fatalf("with the schedule handed over, want the oversize event: %+v", res.Event)
	}
}
