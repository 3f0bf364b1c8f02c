// Package schedule is the cost-aware fold schedule, the policy the hosts
// hand the engine by default.
//
// A fold event is worth doing only when the prompt-cache re-write it causes
// is repaid by the cheaper requests after it. The schedule prices the event
// on offer — every candidate outside the protected tail, folded at once so
// the fixed cost is paid once — and takes it when it pays:
//
//   - cost K: the request that carries the event re-writes, at the
//     cache-write price, everything from its earliest newly folded block to
//     the end, instead of reading it at the cache-read price; where the
//     provider caches only at marked breakpoints (Anthropic), from the
//     earlier of that block and the end of the frozen region the host
//     marks (View.Anchor);
//   - benefit: every later request reads the folded mass M fewer times, at
//     the cache-read price r, so the requests still to come, R, must repay
//     K: r·M·R > K. R is learned from the session so far: a session that
//     has run n requests is expected to run about n more (the Lindy
//     estimate, no constant tuned to a benchmark);
//   - timing: with a fixed cost per event and foldable mass growing by g
//     per request, cost per request is least when each event folds
//     sqrt(2·K·g/r) (the economic order quantity), so smaller batches wait.
//
// Superseded tool results (a file read since read again or changed, a
// command's output since the command ran again; see the engine) are
// candidates even inside the protected tail: they are stale, and the tail
// protects what the agent works with.
//
// Economic events also keep to an envelope (Envelope): none before the
// request uses Knobs.FoldAt of the window, none smaller than Knobs.FoldStep
// of it. Folding early and in small batches is cheapest but hides more of
// what the agent goes back to; the shipped default keeps the seed ladder's
// fidelity this way (BENCHMARKS.md).
//
// When the request would exceed the budget, an urgent event folds every
// candidate (superseded ones in the tail included), whatever the envelope
// says. The shipped default stops there (KeepTail); without KeepTail it
// reaches, oldest first, into the tail for the others until the context is
// Headroom under the budget, so that urgent events do not recur on every
// request (the newest block and results the model has not yet seen never
// fold). When the cache is known cold anyway (an idle gap, a model change),
// an event costs no extra re-write and any worthwhile batch folds.
//
// It is pure and deterministic, like every policy: the same view gives the
// same decision, and the engine still freezes each event's bytes for good.
package schedule

import (
	"math"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/policy/ladder"
)

// Profiles name the selectable fold policies: the cost-aware schedule (the
// default) and the seed design's fixed-threshold ladder, kept for
// comparison.
var Profiles = []string{"economic", "ladder"}

// Profile returns the policy a profile name selects; unknown names select
// the default.
func Profile(name string) policy.Policy {
	if name == "ladder" {
		return ladder.Ladder{}
	}
	return Default
}

// Economic is the cost-aware schedule. The zero value, with the default
// prices, is the cost-first schedule (no envelope, urgent events that reach
// into the tail); Default is the shipped setting.
type Economic struct {
	// PriceWrite and PriceRead are the cache write and read prices relative
	// to uncached input (Anthropic-style defaults 1.25 and 0.1).
	PriceWrite, PriceRead float64
	// MinMass is the least an event may save, as a fraction of the window
	// (default 0.02): smaller events are not worth a cache break.
	MinMass float64
	// Headroom is how far under the budget an urgent event folds, as a
	// fraction of the budget (default 0.5).
	Headroom float64
	// MinRemaining is the fewest requests still to come the estimate
	// assumes (default 2).
	MinRemaining int
	// KeepTail keeps urgent events out of the protected tail: they fold
	// only candidates outside it, and the request may stay over the budget
	// until the agent compacts. The shipped schedule keeps it: folding the
	// newest outputs hides what the next action uses most.
	KeepTail bool
	// Envelope holds economic events inside the seed ladder's thresholds:
	// none before the request uses Knobs.FoldAt of the window, and none
	// that folds less than Knobs.FoldStep of it. Folding early and in small
	// batches is cheapest, but hides more of what the agent goes back to;
	// inside the envelope the schedule hides no more than the ladder
	// (BENCHMARKS.md, fidelity as the constraint).
	Envelope bool
}

// KeepsTail implements policy.TailKeeper.
func (p Economic) KeepsTail() bool { return p.KeepTail }

// Default is the shipped setting: the cheapest of the family
// contextfold bench -sweep-fidelity searches that hides no more than the
// seed ladder on the tune halves of the bench set and of the generated
// sessions, at every window. Headroom and MinMass were chosen earlier
// (contextfold bench -sweep -half tune).
var Default = Economic{PriceWrite: 1.25, PriceRead: 0.1, MinMass: 0.02, Headroom: 0.5, MinRemaining: 2, KeepTail: true, Envelope: true}

func (p Economic) withDefaults() Economic {
	if p.PriceWrite == 0 {
		p.PriceWrite = Default.PriceWrite
	}
	if p.PriceRead == 0 {
		p.PriceRead = Default.PriceRead
	}
	if p.MinMass == 0 {
		p.MinMass = Default.MinMass
	}
	if p.Headroom == 0 {
		p.Headroom = Default.Headroom
	}
	if p.MinRemaining == 0 {
		p.MinRemaining = Default.MinRemaining
	}
	return p
}

func maskableKind(k block.Kind) bool { return k == block.ToolResult || k == block.Thinking }

// Conduct implements policy.Policy.
func (p Economic) Conduct(v *policy.View) policy.Decision {
	p = p.withDefaults()
	used := v.Used()
	st := policy.Status{LiveTokens: v.LiveTokens, Budget: v.Budget}
	if v.Window > 0 {
		st.UsageFraction = round3(float64(used) / float64(v.Window))
	}
	for i := range v.Blocks {
		if b := &v.Blocks[i]; b.Kind == block.User || b.Protected && !b.Superseded || b.Held {
			st.IrreducibleFloor += b.Tokens
		}
	}
	n := len(v.Blocks)
	if n == 0 {
		return policy.Decision{Status: st}
	}
	remaining := float64(max(v.Requests, p.MinRemaining))
	minMass := int(p.MinMass * float64(v.Window))
	rendered := func(b *policy.ViewBlock) int {
		if b.Frozen {
			return b.FoldedTokens
		}
		return b.Tokens
	}

	overBudget := used > v.Budget
	st.OverBudget = overBudget

	// The event on offer: every candidate outside the tail, and every
	// superseded result inside it. Folding them all at once batches the
	// event's fixed cost, the re-write of everything after the earliest of
	// them.
	running, suffix, mass, foldable := 0, 0, 0, 0
	earliest := -1
	var ids []string
	for i := n - 1; i >= 0; i-- {
		b := &v.Blocks[i]
		running += rendered(b)
		if maskableKind(b.Kind) {
			foldable += b.Tokens
		}
		if s, ok := candidate(v, i, false); ok {
			mass += s
			earliest, suffix = i, running
			ids = append(ids, b.ID)
		}
	}
	st.MaskableTokens = mass
	reverse(ids) // oldest first

	if overBudget {
		// Urgent: fold down to Headroom under the budget so the next urgent
		// event is many requests away; reach into the tail, oldest first,
		// only if the candidates outside it and the superseded results
		// inside it (all already on offer) cannot get there.
		target := int(float64(v.Budget) * (1 - p.Headroom))
		saved := mass
		intoTail := false
		for i := 0; i < n && used-saved > target && !p.KeepTail; i++ {
			if !v.Blocks[i].Protected || v.Blocks[i].Superseded {
				continue
			}
			if s, ok := candidate(v, i, true); ok {
				ids = append(ids, v.Blocks[i].ID)
				saved += s
				intoTail = true
			}
		}
		if len(ids) == 0 {
			st.Note = "over budget: nothing left to fold (messages, tool calls and the newest results are the floor)"
			return policy.Decision{Status: st}
		}
		st.LiveTokens = v.LiveTokens - saved
		return policy.Decision{Fold: ids, Trigger: policy.Cap, Status: st, IntoTail: intoTail}
	}
	if earliest < 0 {
		return policy.Decision{Status: st}
	}
	if p.Envelope && float64(used) < v.Knobs.FoldAt*float64(v.Window) {
		st.FoldAt = v.Knobs.FoldAt
		return policy.Decision{Status: st}
	}
	// The event's extra cost K: re-write the (now smaller) suffix instead of
	// reading it. Nothing extra when the cache is cold anyway. A provider
	// that caches only at marked breakpoints serves the event's request up
	// to the anchor at most: the suffix starts after it.
	if v.Anchored && earliest > v.Anchor+1 {
		for i := v.Anchor + 1; i < earliest; i++ {
			suffix += rendered(&v.Blocks[i])
		}
	}
	cost := p.PriceWrite*float64(suffix-mass) - p.PriceRead*float64(suffix)
	trigger := policy.Economic
	if v.CacheCold {
		cost, trigger = 0, policy.Free
	}
	// The mass an event needs, the largest of: a worthwhile size; enough
	// that the requests still to come repay K (each reads mass fewer
	// tokens); and the batch that minimises cost per request — with a
	// fixed cost K per event and foldable mass growing by g per request,
	// folding once the mass reaches sqrt(2·K·g/r) (the economic order
	// quantity).
	need := float64(minMass)
	if p.Envelope {
		need = max(need, v.Knobs.FoldStep*float64(v.Window))
	}
	if cost > 0 {
		g := float64(foldable) / remaining // foldable tokens per request so far
		need = max(need, cost/(p.PriceRead*remaining), math.Sqrt(2*cost*g/p.PriceRead))
	}
	st.StepTokens = int(math.Ceil(need))
	if float64(mass) < need {
		return policy.Decision{Status: st}
	}
	st.LiveTokens = v.LiveTokens - mass
	st.MaskableTokens = 0
	return policy.Decision{Fold: ids, Trigger: trigger, Status: st}
}

// candidate reports whether block i may fold in an event, and how many
// tokens folding it saves: a tool result or thinking that is durable,
// foldable, not held, not yet frozen, not the newest block, outside the
// protected tail unless superseded (or intoTail), and whose digest saves
// enough (policy.Worth).
func candidate(v *policy.View, i int, intoTail bool) (int, bool) {
	b := &v.Blocks[i]
	if !maskableKind(b.Kind) || !b.Durable || !b.Foldable || b.Held || b.Frozen || i == len(v.Blocks)-1 {
		return 0, false
	}
	if b.Protected && !intoTail && !b.Superseded {
		return 0, false // superseded results are stale: the tail does not protect them
	}
	if f := v.Folded(i); policy.Worth(b.Tokens, f) {
		return b.Tokens - f, true
	}
	return 0, false
}

// Offer returns the indexes in v.Blocks of the event the schedule has on
// offer, oldest first (every candidate outside the tail and every
// superseded result inside it), with what folding each saves: what an
// economic event folds when it pays.
func Offer(v *policy.View) (ks, saves []int) {
	for i := range v.Blocks {
		if s, ok := candidate(v, i, false); ok {
			ks, saves = append(ks, i), append(saves, s)
		}
	}
	return ks, saves
}

func reverse(s []string) {
	for a, b := 0, len(s)-1; a < b; a, b = a+1, b-1 {
		s[a], s[b] = s[b], s[a]
	}
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
