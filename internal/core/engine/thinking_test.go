package engine

import (
	"strconv"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/wire"
)

// thinkingSession builds n tool steps whose assistant messages think, from
// the given api, then returns the messages.
func thinkingSession(api, model string, n int) [][]byte {
	s := newSession().user("go")
	for i := 0; i < n; i++ {
		id := "c" + strconv.Itoa(i)
		s.resp++
		thought := strings.Repeat("I think step "+id+" needs a careful look at the output.\n", 30)
		s.msgs = append(s.msgs, []byte(`{"role":"assistant","content":[{"type":"thinking","thinking":`+rawjson.QuoteString(thought)+
			`,"thinkingSignature":"sig-`+id+`"},{"type":"toolCall","id":"`+id+`","name":"bash","arguments":{"command":"run"}}],"api":"`+api+
			`","provider":"p","model":"`+model+`","usage":{"input":1},"stopReason":"toolUse","timestamp":`+s.tick()+`,"responseId":"resp-`+strconv.Itoa(s.resp)+`"}`))
		s.result(id, output(id, 60), false)
	}
	return s.msgs
}

// foldAll is a policy that folds every candidate at once.
type foldAll struct{}

func (foldAll) Conduct(v *policy.View) policy.Decision {
	var d policy.Decision
	for i := range v.Blocks {
		if v.Blocks[i].Candidate() {
			d.Fold = append(d.Fold, v.Blocks[i].ID)
		}
	}
	return d
}

func foldedKinds(e *Engine) map[string]int {
	out := map[string]int{}
	for _, l := range e.Layers() {
		for _, en := range l.Entries {
			b, _ := e.Live(en.ID)
			out[b.Kind.String()]++
		}
	}
	return out
}

func TestThinkingFoldsOnlyWhereTheDigestReachesTheModel(t *testing.T) {
	cases := []struct {
		api      string
		thinking int // thinking blocks folded of 6 (the newest, the current cycle, never)
	}{
		{"anthropic-messages", 5},
		{"bedrock-converse-stream", 5},
		{"google-generative-ai", 5},
		{"openai-responses", 0},       // reasoning items are opaque
		{"openai-codex-responses", 0}, // the same
		{"openai-completions", 0},     // reasoning_details or a named field
		{"", 0},                       // unknown origin, signed
	}
	for _, c := range cases {
		e := New(Config{Policy: foldAll{}, Knobs: policy.Knobs{FoldAt: 0.01, FoldStep: 0.001, ColdFoldAt: 0.01, BudgetFraction: 0.75, Tail: 1}})
		msgs := thinkingSession(c.api, "m", 6)
		res := e.Step(Request{Append: msgs, Window: 200_000}, nil)
		if res.Event == nil {
			t.Fatalf("%s: no event", c.api)
		}
		if got := foldedKinds(e)["thinking"]; got != c.thinking {
			t.Errorf("%s: %d thinking blocks folded, want %d", c.api, got, c.thinking)
		}
		// A folded thinking part is sent unsigned; no other part is touched.
		for i, raw := range e.Render() {
			if strings.Contains(string(raw), "FOLDED} thought") && strings.Contains(string(raw), "thinkingSignature") {
				t.Errorf("%s: message %d keeps a signature under a digest: %s", c.api, i, raw)
			}
		}
	}
}

func TestCurrentCycleThinkingNeverFolds(t *testing.T) {
	msgs := thinkingSession("anthropic-messages", "m", 3)
	// An aborted retry after the last tool result: Pi does not send it, so
	// the cycle the request answers is still the third call's.
	aborted := `{"role":"assistant","content":[{"type":"thinking","thinking":"` + strings.Repeat("x", 900) + `","thinkingSignature":"s"}],"api":"anthropic-messages","provider":"p","model":"m","stopReason":"aborted","timestamp":9,"responseId":"ab"}`
	msgs = append(msgs, []byte(aborted))
	e := New(Config{Policy: foldAll{}, Knobs: policy.Knobs{FoldAt: 0.01, FoldStep: 0.001, ColdFoldAt: 0.01, BudgetFraction: 0.75, Tail: 1}})
	e.Step(Request{Append: msgs, Window: 200_000}, nil)
	for _, id := range []string{"a:resp-3:p0", "a:ab:p0"} {
		if e.Frozen(id) {
			t.Errorf("%s folded: the current tool-use cycle's thinking must come back as produced", id)
		}
	}
	if !e.Frozen("a:resp-2:p0") {
		t.Error("an earlier cycle's thinking did not fold")
	}
}

func TestPreservedThinkingEventFoldsWhatItInvalidates(t *testing.T) {
	knobs := policy.DefaultKnobs
	knobs.Tail = 6000 // several steps stay in the tail
	for _, c := range []struct {
		name    string
		model   wire.Model
		bound   bool
		dropped int
	}{
		{"marked by Pi", wire.Model{API: "anthropic-messages", Provider: "p", ID: "m", MidConvoEffort: true}, true, 1},
		{"ordinary thinking", wire.Model{API: "anthropic-messages", Provider: "p", ID: "m"}, false, 0},
	} {
		e := New(Config{Policy: foldOldest{n: 2}, Knobs: knobs})
		msgs := thinkingSession("anthropic-messages", "m", 12)
		res := e.Step(Request{Append: msgs, Window: 200_000, Model: c.model}, nil)
		if res.Event == nil {
			t.Fatalf("%s: no event", c.name)
		}
		th := res.Event.Thinking
		if !c.bound {
			if !th.IsZero() {
				t.Errorf("%s: thinking cost %+v on a model without prefix binding", c.name, th)
			}
			continue
		}
		// The policy folded the two oldest candidates; every signed thinking
		// block after the first of them is invalidated: those of steps 2..12.
		if th.Invalidated != 11 || th.Dropped != c.dropped || th.Folded != th.Invalidated-th.Dropped {
			t.Errorf("%s: thinking cost %+v, want 11 invalidated, %d dropped", c.name, th, c.dropped)
		}
		if e.Frozen("a:resp-12:p0") {
			t.Errorf("%s: the current cycle's thinking folded", c.name)
		}
		if !e.Frozen("a:resp-11:p0") {
			t.Errorf("%s: invalidated thinking inside the tail did not fold", c.name)
		}
	}
}

// foldOldest folds the n oldest candidates.
type foldOldest struct{ n int }

func (p foldOldest) Conduct(v *policy.View) policy.Decision {
	var d policy.Decision
	for i := range v.Blocks {
		if len(d.Fold) < p.n && v.Blocks[i].Candidate() {
			d.Fold = append(d.Fold, v.Blocks[i].ID)
		}
	}
	return d
}

func TestStrippedThinkingNeverFolds(t *testing.T) {
	// Two user turns: on a last-turn-only Claude the first turn's thinking
	// is stripped by the provider (free), so it stays; the second turn's
	// folds but for the open cycle's.
	msgs := thinkingSession("anthropic-messages", "claude-haiku-4-5", 4)
	second := thinkingSession("anthropic-messages", "claude-haiku-4-5", 4)
	s := newSession()
	s.ts += 1_000_000
	s.user("next")
	for _, raw := range second[1:] {
		msgs = append(msgs, []byte(strings.Replace(strings.Replace(string(raw), `"responseId":"resp-`, `"responseId":"t2-`, 1), `"id":"c`, `"id":"d`, 1)))
	}
	msgs = append(msgs[:9:9], append([][]byte{s.msgs[0]}, msgs[9:]...)...)
	for _, model := range []string{"claude-haiku-4-5", "claude-opus-4-5"} {
		e := New(Config{Policy: foldAll{}, Knobs: policy.Knobs{FoldAt: 0.01, FoldStep: 0.001, ColdFoldAt: 0.01, BudgetFraction: 0.75, Tail: 1}})
		e.Step(Request{Append: msgs, Window: 200_000, Model: wire.Model{API: "anthropic-messages", Provider: "p", ID: model}}, nil)
		firstTurn := e.Frozen("a:resp-1:p0")
		secondTurn := e.Frozen("a:t2-2:p0")
		if strip := model == "claude-haiku-4-5"; firstTurn == strip || !secondTurn {
			t.Errorf("%s: first turn's thinking folded %v, second turn's %v", model, firstTurn, secondTurn)
		}
	}
}

func TestNoOpenCycleAtAUserTurn(t *testing.T) {
	msgs := thinkingSession("anthropic-messages", "m", 3)
	e := New(Config{Policy: foldAll{}, Knobs: policy.Knobs{FoldAt: 0.01, FoldStep: 0.001, ColdFoldAt: 0.01, BudgetFraction: 0.75, Tail: 1}})
	e.Step(Request{Append: append(msgs, []byte(`{"role":"user","content":"next","timestamp":5}`)), Window: 200_000}, nil)
	if !e.Frozen("a:resp-3:p0") {
		t.Error("after a new user message the newest assistant's thinking belongs to a closed cycle and may fold")
	}
}

func TestBindingWithoutDropWaitsForAUserTurn(t *testing.T) {
	knobs := policy.DefaultKnobs
	knobs.Tail = 6000
	// A Claude that checks prefixes but to which Pi sends no drop_block:
	// leaving the open cycle's signed thinking behind a fold is a 400.
	model := wire.Model{API: "anthropic-messages", Provider: "p", ID: "claude-fable-5-1"}
	e := New(Config{Policy: foldOldest{n: 2}, Knobs: knobs})
	msgs := thinkingSession("anthropic-messages", "claude-fable-5-1", 12)
	res := e.Step(Request{Append: msgs, Window: 200_000, Model: model}, nil)
	if res.Event != nil || !strings.Contains(res.Status.Note, "held until the next user message") {
		t.Fatalf("event %+v, note %q: a fold inside an open cycle must wait", res.Event, res.Status.Note)
	}
	// Nothing folds before the user turn, so a compaction must not give way.
	if f := e.Foldable(0, 0); f != 0 {
		t.Errorf("Foldable = %d while the event waits; Pi's compaction would be cancelled for nothing", f)
	}
	res = e.Step(Request{Keep: len(msgs), Append: [][]byte{[]byte(`{"role":"user","content":"next","timestamp":5}`)}, Window: 200_000, Model: model}, nil)
	if res.Event == nil {
		t.Fatal("no event at the user turn")
	}
	if th := res.Event.Thinking; th.Dropped != 0 || th.Invalidated != 11 || th.Folded != 11 {
		t.Errorf("at a user turn: %+v, want every invalidated block folded, none dropped", th)
	}
	// Marked by Pi (drop_block): the same fold goes ahead mid-cycle.
	e2 := New(Config{Policy: foldOldest{n: 2}, Knobs: knobs})
	model.MidConvoEffort = true
	if res := e2.Step(Request{Append: msgs, Window: 200_000, Model: model}, nil); res.Event == nil || res.Event.Thinking.Dropped != 1 {
		t.Errorf("with drop_block: %+v", res.Event)
	}
}

func TestEmptySignedThinkingStillCounts(t *testing.T) {
	// The open cycle's thinking has no text (omitted display): it cannot
	// fold, and a binding provider without drop_block would reject a fold
	// before it, so the event still waits.
	msgs := thinkingSession("anthropic-messages", "claude-fable-5-1", 12)
	last := len(msgs) - 2 // the newest assistant message
	a := string(msgs[last])
	i := strings.Index(a, `"thinking":"`) + len(`"thinking":"`)
	j := strings.Index(a, `","thinkingSignature"`)
	msgs[last] = []byte(a[:i] + a[j:])
	knobs := policy.DefaultKnobs
	knobs.Tail = 6000
	e := New(Config{Policy: foldOldest{n: 2}, Knobs: knobs})
	res := e.Step(Request{Append: msgs, Window: 200_000, Model: wire.Model{API: "anthropic-messages", Provider: "p", ID: "claude-fable-5-1"}}, nil)
	if res.Event != nil {
		t.Fatalf("folded before an empty signed thinking block of the open cycle: %+v", res.Event.Thinking)
	}
	if b, ok := e.Live("a:resp-12:p0"); !ok || b.Foldable() || !b.Signed {
		t.Errorf("empty signed thinking: %+v, %v", b, ok)
	}
}
