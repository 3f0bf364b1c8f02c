package bench

import "sort"

// The fixed tune/test split: within each family, traces sorted by name
// alternate between the halves, the first to Tune. Policies are tuned on
// Tune and reported on Test and on the whole set, so a setting that only
// fits the sessions it was chosen on shows up as a gap between the halves.
const (
	Tune = 0
	Test = 1
)

// HalfNames names the halves in reports.
var HalfNames = [2]string{"tune", "test"}

// Halves assigns every trace to Tune or Test.
func Halves(traces []*Trace) map[*Trace]int {
	byFamily := map[string][]*Trace{}
	for _, t := range traces {
		byFamily[t.Family] = append(byFamily[t.Family], t)
	}
	out := make(map[*Trace]int, len(traces))
	for _, ts := range byFamily {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
		for i, t := range ts {
			out[t] = i % 2
		}
	}
	return out
}

// Half returns the traces of one half, in their original order.
func Half(traces []*Trace, half int) []*Trace {
	h := Halves(traces)
	var out []*Trace
	for _, t := range traces {
		if h[t] == half {
			out = append(out, t)
		}
	}
	return out
}
