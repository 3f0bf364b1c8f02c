package service

import (
	"fmt"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// thinkingLog follows what fold events cost a preserved-thinking model:
// what each event invalidated by the engine's count, and what the provider
// then reported dropping. Pi records a provider's input_transformations on
// the assistant message of that response, as a diagnostic
// (anthropic_input_transformations, openai_input_transformations), and a
// provider lists every still-failing block again on every request, so the
// newest response's list is the current total.
type thinkingLog struct {
	events []thinkingEvent
	sum    engine.ThinkingCost
	// now is the number of dropped blocks in the newest response, -1 before
	// any response was seen.
	now int
}

// thinkingEvent is one fold event's thinking cost and the provider's
// answer to its request.
type thinkingEvent struct {
	seq    int
	cost   engine.ThinkingCost
	before int  // dropped in the response before the event
	after  int  // dropped in the response to the event's request
	seen   bool // after is known
	// replayed marks an event of an earlier run: its answer was not seen.
	replayed bool
}

func newThinkingLog() *thinkingLog { return &thinkingLog{now: -1} }

// event records a committed (or replayed) event's cost.
func (t *thinkingLog) event(seq int, c engine.ThinkingCost, replayed bool) {
	t.sum.Invalidated += c.Invalidated
	t.sum.Folded += c.Folded
	t.sum.Dropped += c.Dropped
	c.Lost = nil // the ids are the engine's; the log keeps counts
	if c.Invalidated == 0 && c.Folded == 0 && c.Dropped == 0 {
		return
	}
	t.events = append(t.events, thinkingEvent{seq: seq, cost: c, before: max(t.now, 0), seen: replayed, replayed: replayed})
}

// has reports whether the event seq is logged.
func (t *thinkingLog) has(seq int) bool {
	for _, e := range t.events {
		if e.seq == seq {
			return true
		}
	}
	return false
}

// observe reads the provider's drops from the newest assistant response
// among newly arrived messages (a resend from the start carries old ones
// too); a response that failed or was aborted reports nothing.
func (t *thinkingLog) observe(msgs [][]byte) {
	for i := len(msgs) - 1; i >= 0; i-- {
		n, ok := droppedThinking(msgs[i])
		if !ok {
			continue
		}
		if k := len(t.events) - 1; k >= 0 && !t.events[k].seen {
			t.events[k].after, t.events[k].seen = n, true
		}
		t.now = n
		return
	}
}

// droppedThinking counts the thinking blocks a provider reported dropping in
// an assistant message's diagnostics; ok is false for other messages.
func droppedThinking(raw []byte) (n int, ok bool) {
	// raw is valid: parseTurn validated the params whole, the ledger its lines.
	ms, err := rawjson.ObjectOfValid(raw)
	if err != nil {
		return 0, false
	}
	if role, _ := rawjson.Get(ms, "role"); string(role) != `"assistant"` {
		return 0, false
	}
	if stop, _ := rawjson.Get(ms, "stopReason"); string(stop) == `"error"` || string(stop) == `"aborted"` {
		return 0, false
	}
	diags, has := rawjson.Get(ms, "diagnostics")
	if !has {
		return 0, true
	}
	ds, err := rawjson.Array(diags)
	if err != nil {
		return 0, true
	}
	for _, d := range ds {
		dm, err := rawjson.Object(d)
		if err != nil {
			continue
		}
		typ, _ := rawjson.Get(dm, "type")
		if string(typ) != `"anthropic_input_transformations"` && string(typ) != `"openai_input_transformations"` {
			continue
		}
		det, _ := rawjson.Get(dm, "details")
		detm, err := rawjson.Object(det)
		if err != nil {
			continue
		}
		list, _ := rawjson.Get(detm, "transformations")
		ts, err := rawjson.Array(list)
		if err != nil {
			continue
		}
		for _, tr := range ts {
			tm, err := rawjson.Object(tr)
			if err != nil {
				continue
			}
			typ, _ := rawjson.Get(tm, "type")
			act, _ := rawjson.Get(tm, "action")
			if string(typ) == `"thinking_dropped"` || string(typ) == `"reasoning"` && string(act) == `"removed"` {
				n++
			}
		}
	}
	return n, true
}

// lines renders the status lines; none when no event touched thinking.
func (t *thinkingLog) lines() []string {
	if t.sum.IsZero() && t.now <= 0 {
		return nil
	}
	out := []string{fmt.Sprintf("thinking: fold events invalidated %d signed blocks: %d folded with the event, %d left to the provider (reasoning that must stay as produced, or opaque); the latest response reports %d dropped",
		t.sum.Invalidated, t.sum.Folded, t.sum.Dropped, max(t.now, 0))}
	for k := max(0, len(t.events)-3); k < len(t.events); k++ {
		e := t.events[k]
		got := "not answered yet"
		if e.replayed {
			got = "from an earlier run"
		} else if e.seen && e.after >= e.before {
			got = fmt.Sprintf("provider dropped +%d", e.after-e.before)
		} else if e.seen {
			got = fmt.Sprintf("provider drops %d (was %d)", e.after, e.before)
		}
		out = append(out, fmt.Sprintf("  event %d: invalidated %d, folded %d, expected dropped %d · %s", e.seq, e.cost.Invalidated, e.cost.Folded, e.cost.Dropped, got))
	}
	return out
}
