package bench

import (
	"math"
	"testing"

	"github.com/contextfold/contextfold/internal/core/policy"
)

// TestOptimumIsOptimal: on the first requests of each bundled sample
// trace, with a small tail so that blocks are on offer early, the dynamic
// program's timing costs exactly the least of every possible timing,
// enumerated, with and without a price on hidden references.
func TestOptimumIsOptimal(t *testing.T) {
	knobs := policy.DefaultKnobs
	knobs.Tail = 500
	tried := 0
	for _, tr := range loadDir(t, "../../testdata/trajectories") {
		for _, lambda := range []float64{0, 3_000} {
			m, ok := Optimum{Knobs: knobs, Reserve: PiReserve, Lambda: lambda}.model(tr, 200_000)
			if !ok {
				t.Fatalf("%s: no model", tr.Name)
			}
			m.k = min(m.k, 12)
			offered := 0
			for k := 0; k < m.k; k++ {
				if m.newAt[k] != math.MaxInt {
					offered++
				}
			}
			if offered < 3 {
				continue
			}
			tried++
			events, ok := m.best()
			if !ok {
				t.Fatalf("%s: no feasible timing at 200k", tr.Name)
			}
			got, ok := m.cost(events)
			if !ok {
				t.Fatalf("%s: the chosen timing does not fit", tr.Name)
			}
			least := math.Inf(1)
			for mask := 0; mask < 1<<m.k; mask++ {
				ev := map[int]bool{}
				for k := 0; k < m.k; k++ {
					if mask&(1<<k) != 0 {
						ev[k] = true
					}
				}
				if c, ok := m.cost(ev); ok {
					least = min(least, c)
				}
			}
			if math.Abs(got-least) > 1e-6*least {
				t.Errorf("%s λ=%v: the program's timing %v costs %.1f, the least of all timings %.1f", tr.Name, lambda, events, got, least)
			}
			if none, _ := m.cost(nil); lambda == 0 && got > none {
				t.Errorf("%s: the optimum %.1f costs more than never folding %.1f", tr.Name, got, none)
			}
		}
	}
	if tried < 2 {
		t.Fatalf("only %d traces had blocks on offer in their first requests", tried)
	}
}
