// Package ladder is the discrete fold ladder: fixed thresholds, the
// "ladder" profile a host may choose instead of the cost-aware schedule.
//
// Folding happens in discrete events, never continuously, because any change
// to history moves bytes and invalidates the provider's cached prefix: an
// event pays that once and its bytes then stay frozen. An event fires when
// usage has passed the first-fold threshold (FoldAt of the window, ColdFoldAt
// while the session never had a live cache read) and the maskable mass is
// worth at least one ladder step (FoldStep of the window), or, regardless of
// both, when usage crosses the budget. Only stale tool results and thinking
// fold; the engine's view already marks the protected tail, first-delivery
// results and unfolded blocks as off limits. Superseded results fold even
// inside the tail (policy.ViewBlock.Candidate).
package ladder

import (
	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/policy"
)

// Ladder is the fold ladder policy. The zero value is ready to use.
type Ladder struct{}

// KeepsTail implements policy.TailKeeper: the ladder never folds inside
// the protected tail.
func (Ladder) KeepsTail() bool { return true }

// Conduct implements policy.Policy.
func (Ladder) Conduct(v *policy.View) policy.Decision {
	k := v.Knobs
	used := v.Used()
	frac := 0.0
	if v.Window > 0 {
		frac = float64(used) / float64(v.Window)
	}
	foldAt := k.FoldAt
	if v.Cold {
		foldAt = min(k.ColdFoldAt, k.FoldAt)
	}
	overCap := v.LiveTokens > v.Budget || (v.Reported > 0 && v.Reported > v.Budget)
	step := int(k.FoldStep * float64(v.Window))
	st := policy.Status{
		UsageFraction: round3(frac),
		FoldAt:        round3(foldAt),
		StepTokens:    step,
		LiveTokens:    v.LiveTokens,
		Budget:        v.Budget,
		OverBudget:    overCap,
	}
	for i := range v.Blocks {
		if b := &v.Blocks[i]; b.Kind == block.User || b.Protected && !b.Superseded || b.Held {
			st.IrreducibleFloor += b.Tokens
		}
	}
	if !overCap && !(v.Window > 0 && frac >= foldAt) {
		return policy.Decision{Status: st} // below every threshold: no digest needed
	}
	var ids []string
	savings := 0
	for i := range v.Blocks {
		b := &v.Blocks[i]
		if !b.Candidate() || (b.Kind != block.ToolResult && b.Kind != block.Thinking) {
			continue
		}
		if f := v.Folded(i); policy.Worth(b.Tokens, f) {
			ids = append(ids, b.ID)
			savings += b.Tokens - f
		}
	}
	st.MaskableTokens = savings
	threshold := v.Window > 0 && frac >= foldAt && savings >= step
	if !overCap && !threshold {
		return policy.Decision{Status: st}
	}
	if len(ids) == 0 || savings <= 0 {
		st.Note = "over budget: nothing left to fold (the tail and user messages are the floor)"
		return policy.Decision{Status: st}
	}
	trigger := policy.Threshold
	if overCap && !threshold {
		trigger = policy.Cap
	}
	st.MaskableTokens = 0
	st.LiveTokens = v.LiveTokens - savings
	return policy.Decision{Fold: ids, Trigger: trigger, Status: st}
}

func round3(x float64) float64 {
	return float64(int64(x*1000+0.5)) / 1000
}
