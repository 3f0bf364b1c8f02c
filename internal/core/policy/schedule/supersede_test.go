package schedule

import (
	"reflect"
	"slices"
	"testing"

	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/policy/ladder"
)

// protectedResults returns the ids of the tool results in the tail that
// may fold (not held), oldest first.
func protectedResults(v *policy.View) []int {
	var out []int
	for i, b := range v.Blocks {
		if b.Protected && b.Foldable && !b.Held {
			out = append(out, i)
		}
	}
	return out
}

func TestSupersededInTheTailFolds(t *testing.T) {
	// A batch past the economic size folds everything outside the tail;
	// a superseded result inside the tail joins it, the rest of the tail
	// stays.
	v := session(40, 2_000, 20_000)
	tail := protectedResults(&v)
	if len(tail) < 3 {
		t.Fatalf("setup: %d results in the tail", len(tail))
	}
	sup := tail[1]
	v.Blocks[sup].Superseded, v.Blocks[sup].SupersededBy = true, v.Blocks[tail[2]].ID
	d := Economic{}.Conduct(&v)
	want := append(unprotected(&v), v.Blocks[sup].ID)
	if !reflect.DeepEqual(d.Fold, want) || d.Trigger != policy.Economic || d.IntoTail {
		t.Fatalf("fold %v trigger %q intoTail %v, want %v", d.Fold, d.Trigger, d.IntoTail, want)
	}
	// Without the mark the tail block stays.
	v2 := session(40, 2_000, 20_000)
	if d := (Economic{}).Conduct(&v2); slices.Contains(d.Fold, v.Blocks[sup].ID) {
		t.Fatalf("an unsuperseded tail block folded: %v", d.Fold)
	}
	// The ladder folds it too, once it folds at all (past its 45 % mark).
	v3 := session(50, 2_000, 20_000)
	v3.Blocks[sup].Superseded = true
	if d := (ladder.Ladder{}).Conduct(&v3); !slices.Contains(d.Fold, v3.Blocks[sup].ID) {
		t.Fatalf("the ladder left the superseded tail block: %v", d.Fold)
	}
}

func TestSupersededWaitsForAWorthwhileBatch(t *testing.T) {
	// A superseded result alone does not force an event: the batching
	// logic is unchanged, it only adds to the mass on offer.
	v := session(5, 2_000, 20_000)
	for _, i := range protectedResults(&v) {
		v.Blocks[i].Superseded = true
	}
	if d := (Economic{}).Conduct(&v); len(d.Fold) != 0 {
		t.Fatalf("a short session folded %v", d.Fold)
	}
}

func TestUrgentEventTakesSupersededFirst(t *testing.T) {
	// Over the budget with nothing outside the tail: the urgent event
	// takes the superseded tail results before reaching oldest first into
	// the tail for the others.
	v := session(30, 1_000, 12_000)
	v.Window, v.Budget = 32_000, 24_000
	for i := range v.Blocks {
		if !v.Blocks[i].Protected && v.Blocks[i].Foldable {
			v.Blocks[i].Frozen = true // folded before
		}
	}
	v.LiveTokens = 0
	for _, b := range v.Blocks {
		if b.Frozen {
			v.LiveTokens += b.FoldedTokens
		} else {
			v.LiveTokens += b.Tokens
		}
	}
	// Lift usage over the budget without changing the blocks.
	v.Reported = v.Budget + 1
	tail := protectedResults(&v)
	if len(tail) < 6 {
		t.Fatalf("setup: %d results in the tail", len(tail))
	}
	newest := tail[len(tail)-2] // the newest foldable one (the last is held)
	v.Blocks[newest].Superseded = true
	d := Economic{}.Conduct(&v)
	if d.Trigger != policy.Cap || len(d.Fold) == 0 {
		t.Fatalf("decision %+v", d)
	}
	if d.Fold[0] != v.Blocks[newest].ID {
		t.Fatalf("fold %v: the superseded block %s is not taken first", d.Fold, v.Blocks[newest].ID)
	}
	if !d.IntoTail {
		t.Fatalf("the event needed other tail blocks but does not reach into the tail: %v", d.Fold)
	}
	// With enough superseded mass the event does not reach further: with
	// a headroom of 10 % of the budget, four superseded results suffice.
	for _, i := range tail[:4] {
		v.Blocks[i].Superseded = true
	}
	v.Blocks[newest].Superseded = false
	d = Economic{Headroom: 0.1}.Conduct(&v)
	var want []string
	for _, i := range tail[:4] {
		want = append(want, v.Blocks[i].ID)
	}
	if d.IntoTail || !reflect.DeepEqual(d.Fold, want) {
		t.Fatalf("fold %v intoTail %v: want the superseded tail results %v only", d.Fold, d.IntoTail, want)
	}
}
