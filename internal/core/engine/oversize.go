package engine

import (
	"sort"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/policy"
)

// First-delivery tool results are held: the model sees each one whole once
// before it may fold (docs/EDGES.md #16). One result can be too large for that: a
// 229k-token bash output cannot be sent whole at a 200k window by any
// policy, and the provider rejects the request, which ends the session. Such
// an oversized result is delivered as a bounded view instead
// (digest.BoundedLines), committed in this request's fold event like any
// fold: frozen, recorded with the original's sha256 so that recall_folded
// returns it byte-exact, and released by unfold.
//
// The rule, with budget the request's fold budget and cap = max(budget/8,
// digest.MinBoundedTokens) the bounded view's size cap: a first-delivery
// tool result larger than cap is oversized when
//
//	(a) it alone takes more than half the budget, so that one result never
//	    takes over the window; or
//	(b) sending it whole would pass the budget even with every other fold
//	    candidate folded: the request's other blocks, candidates at their
//	    folded cost, frozen ones at their frozen cost, the rest (user text,
//	    calls, the current cycle's thinking, other held results) whole, plus
//	    this result whole, exceed the budget.
//
// Both are judged on the blocks alone, not on the provider-reported usage:
// that figure is an estimate that can be stale (right after a compaction it
// still counts what the compaction removed), and a stale figure must not
// take a result's first whole delivery away. The system prompt it would add
// lies in the quarter of the window the budget leaves free.
//
// Parallel results are judged largest first (then oldest), each against the
// others as already decided, so the fewest results lose their first whole
// delivery. Results at or under the cap are never bounded: the view would
// not be smaller.

// boundedShare is the budget's share a bounded view may take: 1/8, so a
// bounded result leaves the rest of the window to the session, and several
// parallel ones still fit.
const boundedShare = 8

// oversized is one first-delivery result this request bounds.
type oversized struct {
	k      int    // block index
	text   string // the bounded view, tag first
	tokens int    // its cost
}

// boundedCap is the size cap of a bounded view at a budget.
func boundedCap(budget int) int { return max(budget/boundedShare, digest.MinBoundedTokens) }

// oversize returns the first-delivery tool results of this request that are
// too large to deliver whole (the rule above), with their bounded views, and
// lowers the view's usage figures to what the request costs with them
// bounded: the policy then judges the request that will actually be sent,
// and does not fold the whole history to make room for a result that is not
// sent whole anyway.
func (e *Engine) oversize(v *policy.View) []oversized {
	limit := boundedCap(v.Budget)
	var big []int
	for k := range v.Blocks {
		vb := &v.Blocks[k]
		if vb.Kind == block.ToolResult && vb.Held && !vb.Frozen && vb.Durable && vb.Foldable &&
			vb.Tokens > limit && !e.unfolded[vb.ID] && !e.rejected[vb.ID] {
			big = append(big, k)
		}
	}
	if len(big) == 0 {
		return nil
	}
	sort.SliceStable(big, func(a, b int) bool { return v.Blocks[big[a]].Tokens > v.Blocks[big[b]].Tokens })
	// floor is the request with every candidate folded and this result
	// whole; computed only when the request as it stands passes the budget,
	// since folded costs are never larger and digests are built lazily.
	floor, floorKnown, savedSoFar := 0, false, 0
	var out []oversized
	for _, k := range big {
		vb := &v.Blocks[k]
		over := vb.Tokens > v.Budget/2
		if !over && v.LiveTokens > v.Budget {
			if !floorKnown {
				floor = e.foldedFloor(v) - savedSoFar
				floorKnown = true
			}
			over = floor > v.Budget
		}
		if !over {
			continue
		}

		b := &e.tr.Blocks()[k]
		text := digest.Bounded(e.Code(b.ID), b.ToolName, b.Text, b.IsError, b.Tokens, limit)
		cost := e.cfg.Cost(text)
		if cost >= b.Tokens {
			continue // not smaller: deliver it whole
		}
		out = append(out, oversized{k: k, text: text, tokens: cost})
		saved := b.Tokens - cost
		savedSoFar += saved
		floor -= saved // the next result is judged with this one bounded
		v.LiveTokens -= saved
		if v.Reported > 0 {
			v.Reported = max(0, v.Reported-saved)
		}
	}
	// Message order: the event's records and the seed index list blocks in
	// the order they appear.
	sort.Slice(out, func(a, b int) bool { return out[a].k < out[b].k })
	return out
}

// foldedFloor is the blocks' cost with every fold candidate at its folded
// cost (never more than its full cost) and frozen blocks at their frozen
// cost; everything else, held results included, counts whole. The newest
// block never folds, so it counts whole too.
func (e *Engine) foldedFloor(v *policy.View) int {
	n := len(v.Blocks)
	sum := 0
	for k := range v.Blocks {
		vb := &v.Blocks[k]
		switch {
		case vb.Frozen:
			sum += vb.FoldedTokens
		case vb.Durable && vb.Foldable && !vb.Held && k != n-1:
			sum += min(vb.Tokens, v.Folded(k))
		default:
			sum += vb.Tokens
		}
	}
	return sum
}
