package schedule

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/policy"
)

const window = 200_000

// session builds the view of a session after n requests: a user message,
// then per request an assistant text of 50 tokens and a tool result of
// result tokens that folds to 20. The newest tail tokens are protected, as
// the engine marks them; the newest result is held (first delivery).
func session(n, result, tail int) policy.View {
	v := policy.View{Window: window, Budget: window * 3 / 4, Knobs: policy.DefaultKnobs, Requests: n, TailTarget: tail}
	add := func(b policy.ViewBlock) {
		if b.FoldedTokens == 0 {
			b.FoldedTokens = b.Tokens
		}
		v.Blocks = append(v.Blocks, b)
		v.LiveTokens += b.Tokens
	}
	add(policy.ViewBlock{ID: "u:1", Kind: block.User, Tokens: 200, Durable: true})
	for i := 0; i < n; i++ {
		add(policy.ViewBlock{ID: fmt.Sprintf("a:%d:p0", i), Kind: block.Text, Tokens: 50, Durable: true})
		add(policy.ViewBlock{ID: fmt.Sprintf("r:c%d", i), Kind: block.ToolResult, Tokens: result, FoldedTokens: 20, Durable: true, Foldable: true})
	}
	v.Blocks[len(v.Blocks)-1].Held = true
	sum := 0
	v.ProtectFrom = len(v.Blocks)
	for i := len(v.Blocks) - 1; i >= 0 && sum < tail; i-- {
		sum += v.Blocks[i].Tokens
		v.Blocks[i].Protected = true
		v.ProtectFrom = i
	}
	return v
}

func ids(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("r:c%d", i))
	}
	return out
}

func unprotected(v *policy.View) []string {
	var out []string
	for _, b := range v.Blocks {
		if b.Kind == block.ToolResult && !b.Protected {
			out = append(out, b.ID)
		}
	}
	return out
}

func TestEconomicDecisions(t *testing.T) {
	tests := []struct {
		name    string
		v       func() policy.View
		fold    func(v *policy.View) []string
		trigger policy.Trigger
	}{
		{"a short session has nothing worth a cache break", func() policy.View { return session(5, 2_000, 20_000) }, nil, ""},
		{"a batch that does not yet repay its re-write waits", func() policy.View { return session(20, 2_000, 20_000) }, nil, ""},
		{"a batch past the economic size folds, outside the tail", func() policy.View { return session(40, 2_000, 20_000) }, unprotected, policy.Economic},
		{"a known-cold cache folds the same batch for free", func() policy.View {
			v := session(20, 2_000, 20_000)
			v.CacheCold = true
			return v
		}, unprotected, policy.Free},
		{"a cold cache still needs a worthwhile mass", func() policy.View {
			v := session(5, 500, 1_000)
			v.CacheCold = true
			return v
		}, nil, ""},
		{"a digest that is not smaller never folds", func() policy.View {
			v := session(40, 2_000, 20_000)
			for i := range v.Blocks {
				v.Blocks[i].FoldedTokens = v.Blocks[i].Tokens
			}
			return v
		}, nil, ""},
		{"held, frozen, undurable and unfoldable blocks are never asked for", func() policy.View {
			v := session(40, 2_000, 20_000)
			v.Blocks[2].Held = true
			v.Blocks[4].Frozen = true
			v.Blocks[6].Durable = false
			v.Blocks[8].Foldable = false
			return v
		}, func(v *policy.View) []string {
			out := unprotected(v)
			return out[4:]
		}, policy.Economic},
	}
	for _, tt := range tests {
		v := tt.v()
		d := Economic{}.Conduct(&v)
		var want []string
		if tt.fold != nil {
			want = tt.fold(&v)
		}
		if !reflect.DeepEqual(d.Fold, want) || d.Trigger != tt.trigger || d.IntoTail {
			t.Errorf("%s: fold %v trigger %q intoTail %v, want %v %q (status %+v)", tt.name, d.Fold, d.Trigger, d.IntoTail, want, tt.trigger, d.Status)
		}
		if len(d.Fold) == 0 && !d.Status.OverBudget && d.Status.MaskableTokens > 0 && d.Status.StepTokens <= d.Status.MaskableTokens {
			t.Errorf("%s: waits with %d maskable, but reports folding at %d", tt.name, d.Status.MaskableTokens, d.Status.StepTokens)
		}
		again := tt.v()
		if d2 := (Economic{}).Conduct(&again); !reflect.DeepEqual(d, d2) {
			t.Errorf("%s: not deterministic", tt.name)
		}
	}
}

func TestUrgentEventMakesHeadroom(t *testing.T) {
	// A small window, so the budget binds: 24k budget, 12k tail.
	v := session(30, 1_000, 12_000)
	v.Window, v.Budget = 32_000, 24_000
	used := v.LiveTokens
	if used <= v.Budget {
		t.Fatalf("setup: %d not over the budget", used)
	}
	d := Economic{}.Conduct(&v)
	if d.Trigger != policy.Cap || !d.IntoTail {
		t.Fatalf("trigger %q intoTail %v", d.Trigger, d.IntoTail)
	}
	saved := 0
	folded := map[string]bool{}
	for _, id := range d.Fold {
		folded[id] = true
	}
	for _, b := range v.Blocks {
		if folded[b.ID] {
			saved += b.Tokens - b.FoldedTokens
			if b.Held {
				t.Fatalf("held block %s folded", b.ID)
			}
		}
	}
	target := int(float64(v.Budget) * (1 - Default.Headroom))
	if used-saved > target {
		t.Fatalf("urgent event leaves %d tokens, want at most %d (headroom %.2f)", used-saved, target, Default.Headroom)
	}
	// Into the tail only as far as needed, oldest first.
	last := v.Blocks[len(v.Blocks)-1]
	if folded[last.ID] {
		t.Fatal("the newest block folded")
	}
	prev := d.Fold[0]
	for _, id := range d.Fold[1:] {
		if id <= prev && len(id) <= len(prev) {
			t.Fatalf("fold order %v is not oldest first", d.Fold)
		}
		prev = id
	}
	if used-saved < target-1_000 {
		t.Fatalf("urgent event folded %d tokens past the headroom target %d", target-(used-saved), target)
	}
}

func TestUrgentEventsDoNotRecur(t *testing.T) {
	// Replay a steady session at a 32k window: each request adds a 1.5k
	// tool result. Folded blocks stay folded (frozen), as the engine keeps
	// them. Urgent events must leave room for many requests, not fold a
	// little on every request.
	const growth = 1_500
	frozen := map[string]bool{}
	var events []int
	for n := 1; n <= 120; n++ {
		v := session(n, growth, 12_000)
		v.Window, v.Budget = 32_000, 24_000
		v.LiveTokens = 0
		for i := range v.Blocks {
			b := &v.Blocks[i]
			if frozen[b.ID] {
				b.Frozen = true
				v.LiveTokens += b.FoldedTokens
				continue
			}
			v.LiveTokens += b.Tokens
		}
		d := Economic{}.Conduct(&v)
		for _, id := range d.Fold {
			frozen[id] = true
		}
		if len(d.Fold) > 0 {
			events = append(events, n)
		}
	}
	if len(events) == 0 {
		t.Fatal("no fold events")
	}
	minGap := int(Default.Headroom * 24_000 / growth / 2)
	for k := 1; k < len(events); k++ {
		if gap := events[k] - events[k-1]; gap < minGap {
			t.Fatalf("fold events at requests %v: gap %d under %d", events, gap, minGap)
		}
	}
	t.Logf("fold events at requests %v", events)
}

func TestOverBudgetWithNothingToFold(t *testing.T) {
	v := session(3, 30_000, 1_000)
	v.Window, v.Budget = 32_000, 24_000
	for i := range v.Blocks {
		v.Blocks[i].Foldable = false
	}
	d := Economic{}.Conduct(&v)
	if len(d.Fold) != 0 || !d.Status.OverBudget || d.Status.Note == "" {
		t.Fatalf("decision %+v", d)
	}
}

func TestProfiles(t *testing.T) {
	if _, ok := Profile("economic").(Economic); !ok {
		t.Fatal("economic profile")
	}
	if _, ok := Profile("unknown").(Economic); !ok {
		t.Fatal("unknown names select the default")
	}
	if _, ok := Profile("ladder").(Economic); ok {
		t.Fatal("ladder profile")
	}
}

// TestKeepTail: with KeepTail an urgent event folds only what lies outside
// the protected tail, even when that leaves the request over the budget.
func TestKeepTail(t *testing.T) {
	v := session(30, 1_000, 12_000)
	v.Window, v.Budget = 32_000, 24_000
	d := Economic{KeepTail: true}.Conduct(&v)
	if d.Trigger != policy.Cap || d.IntoTail || len(d.Fold) == 0 {
		t.Fatalf("trigger %q intoTail %v, %d folds", d.Trigger, d.IntoTail, len(d.Fold))
	}
	folded := map[string]bool{}
	for _, id := range d.Fold {
		folded[id] = true
	}
	for _, b := range v.Blocks {
		if b.Protected && folded[b.ID] {
			t.Fatalf("protected block %s folded", b.ID)
		}
	}
}

// TestAnchoredPricing: where the provider caches only at marked breakpoints,
// an event re-writes from the end of the frozen region the host marks, or,
// with no mark, from the system prompt on: the schedule prices it so, and
// waits for a bigger batch when the re-write is bigger.
func TestAnchoredPricing(t *testing.T) {
	// n requests; the oldest 40 results folded in an earlier event, their
	// calls' 1,000-token texts (which never fold) left as they were.
	build := func(n int, anchored bool, anchor int) policy.View {
		v := session(n, 2_000, 20_000)
		v.Anchored, v.Anchor = anchored, anchor
		for i := range v.Blocks {
			b := &v.Blocks[i]
			if i > 80 {
				break
			}
			switch b.Kind {
			case block.ToolResult:
				b.Frozen = true
				v.LiveTokens -= b.Tokens - b.FoldedTokens
			case block.Text:
				v.LiveTokens += 1_000 - b.Tokens
				b.Tokens, b.FoldedTokens = 1_000, 1_000
			}
		}
		return v
	}
	mk := func(anchored bool, anchor int) policy.View { return build(80, anchored, anchor) }
	frozenEnd := 80 // the 40th result: blocks are u, then (text, result) pairs
	if b := mk(false, -1).Blocks[frozenEnd]; !b.Frozen || b.ID != "r:c39" {
		t.Fatalf("setup: block %d is %+v", frozenEnd, b)
	}
	need := func(v policy.View) (int, policy.Decision) {
		d := Economic{}.Conduct(&v)
		return d.Status.StepTokens, d
	}
	prefix, _ := need(mk(false, -1))
	marked, _ := need(mk(true, frozenEnd))
	unmarked, _ := need(mk(true, -1))
	if marked < prefix || marked > prefix*11/10 {
		t.Errorf("marked frozen end: event needs %d, want about the prefix model's %d", marked, prefix)
	}
	if unmarked <= marked*12/10 {
		t.Errorf("no mark: event needs %d, want well over the marked %d (it re-writes the frozen head too)", unmarked, marked)
	}
	// Somewhere in between, the same batch folds with the mark and waits without it.
	for n := 41; n <= 200; n++ {
		with, without := build(n, true, frozenEnd), build(n, true, -1)
		dw, dwo := Economic{}.Conduct(&with), Economic{}.Conduct(&without)
		if len(dwo.Fold) > 0 && len(dw.Fold) == 0 {
			t.Fatalf("n=%d: folds without the mark but waits with it", n)
		}
		if len(dw.Fold) > 0 && len(dwo.Fold) == 0 {
			t.Logf("n=%d: folds with the mark, waits without it", n)
			return
		}
	}
	t.Error("no session size where the mark lets an event pay that would not otherwise")
}

// TestEnvelope: the shipped default folds only inside the seed ladder's
// thresholds (no event before Knobs.FoldAt of the window, none smaller than
// Knobs.FoldStep of it), except when a request would pass the budget; and
// then it folds only outside the protected tail.
func TestEnvelope(t *testing.T) {
	// 60 requests of 2,000-token results: ~123k tokens, 61 % of the window;
	// 20k tail.
	big := func() policy.View { return session(60, 2_000, 20_000) }
	tests := []struct {
		name    string
		v       func() policy.View
		fold    func(v *policy.View) []string
		trigger policy.Trigger
	}{
		{"past fold-at with a step's worth: folds outside the tail", big, unprotected, policy.Economic},
		{"under fold-at: waits, however well it would pay", func() policy.View {
			v := big()
			v.Knobs.FoldAt = 0.7
			return v
		}, nil, ""},
		{"less than a step on offer: waits", func() policy.View {
			v := big()
			v.Knobs.FoldStep = 0.6
			return v
		}, nil, ""},
		{"a cold cache still keeps to the envelope", func() policy.View {
			v := big()
			v.Knobs.FoldAt = 0.7
			v.CacheCold = true
			return v
		}, nil, ""},
		{"over the budget: folds under fold-at, and only outside the tail", func() policy.View {
			v := big()
			v.Knobs.FoldAt = 0.9
			v.Budget = 100_000
			return v
		}, unprotected, policy.Cap},
	}
	for _, tt := range tests {
		v := tt.v()
		d := Default.Conduct(&v)
		var want []string
		if tt.fold != nil {
			want = tt.fold(&v)
		}
		if !reflect.DeepEqual(d.Fold, want) || d.Trigger != tt.trigger || d.IntoTail {
			t.Errorf("%s: fold %v trigger %q intoTail %v, want %v %q (status %+v)", tt.name, d.Fold, d.Trigger, d.IntoTail, want, tt.trigger, d.Status)
		}
		// Without the envelope the same view folds (or, over budget,
		// reaches into the tail): the envelope is what held it.
		free := Default
		free.Envelope, free.KeepTail = false, false
		again := tt.v()
		if d2 := free.Conduct(&again); len(d2.Fold) == 0 {
			t.Errorf("%s: folds nothing even without the envelope", tt.name)
		}
	}
	if !Default.KeepsTail() || (Economic{}).KeepsTail() {
		t.Error("KeepsTail does not report KeepTail")
	}
}
