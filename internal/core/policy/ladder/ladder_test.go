package ladder

import (
	"reflect"
	"testing"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/policy"
)

// view builds a 100k-window view whose blocks are tool results of the given
// sizes (each folds to 20 tokens), plus one protected tail block.
func view(sizes ...int) policy.View {
	v := policy.View{Window: 100_000, Budget: 75_000, Knobs: policy.DefaultKnobs}
	for i, n := range sizes {
		v.Blocks = append(v.Blocks, policy.ViewBlock{
			ID: "r:c" + string(rune('a'+i)), Kind: block.ToolResult, Tokens: n, FoldedTokens: 20,
			Durable: true, Foldable: true,
		})
		v.LiveTokens += n
	}
	v.Blocks = append(v.Blocks, policy.ViewBlock{ID: "u:1", Kind: block.User, Tokens: 100, FoldedTokens: 100, Durable: true, Protected: true})
	v.LiveTokens += 100
	v.ProtectFrom = len(v.Blocks) - 1
	return v
}

func TestConduct(t *testing.T) {
	tests := []struct {
		name    string
		v       func() policy.View
		fold    []string
		trigger policy.Trigger
	}{
		{"below threshold", func() policy.View { return view(20_000, 10_000) }, nil, ""},
		{"at threshold with a full step", func() policy.View { return view(20_000, 26_000) }, []string{"r:ca", "r:cb"}, policy.Threshold},
		{"at threshold but mass under one step", func() policy.View {
			v := view(5_000, 5_000)
			v.Reported = 50_000
			return v
		}, nil, ""},
		{"reported usage decides over the estimate", func() policy.View {
			v := view(10_000, 10_000)
			v.Reported = 46_000
			return v
		}, []string{"r:ca", "r:cb"}, policy.Threshold},
		{"cold session folds at 25 %", func() policy.View {
			v := view(14_000, 13_000)
			v.Cold = true
			return v
		}, []string{"r:ca", "r:cb"}, policy.Threshold},
		{"warm session at 27 % does not", func() policy.View { return view(14_000, 13_000) }, nil, ""},
		{"over budget is urgent regardless of step", func() policy.View {
			v := view(1_000)
			v.Reported = 80_000
			return v
		}, []string{"r:ca"}, policy.Cap},
		{"only maskable kinds and states", func() policy.View {
			v := view(30_000, 30_000, 30_000, 30_000, 30_000)
			v.Blocks[0].Kind = block.Text
			v.Blocks[1].Held = true
			v.Blocks[2].Frozen = true
			v.Blocks[3].Durable = false
			v.Blocks[4].Kind = block.Thinking
			return v
		}, []string{"r:ce"}, policy.Threshold},
		{"a digest that is not smaller never folds", func() policy.View {
			v := view(30_000, 30_000)
			v.Blocks[0].FoldedTokens = 30_000
			return v
		}, []string{"r:cb"}, policy.Threshold},
	}
	for _, tt := range tests {
		v := tt.v()
		d := Ladder{}.Conduct(&v)
		if !reflect.DeepEqual(d.Fold, tt.fold) || d.Trigger != tt.trigger {
			t.Errorf("%s: fold %v trigger %q, want %v %q (status %+v)", tt.name, d.Fold, d.Trigger, tt.fold, tt.trigger, d.Status)
		}
	}
}

func TestOverBudgetWithNothingToFoldSaysSo(t *testing.T) {
	v := view()
	v.Reported = 90_000
	d := Ladder{}.Conduct(&v)
	if len(d.Fold) != 0 || !d.Status.OverBudget || d.Status.Note == "" {
		t.Errorf("decision %+v", d)
	}
}
