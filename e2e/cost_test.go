package e2e

import (
	"bytes"
	"testing"
)

// TestLongSessionCostsLessAgainstAnthropicsCache runs a 300-step session in
// real Pi against the strict Anthropic fake, whose prompt cache follows
// Anthropic's rules (reads only at cache_control breakpoints or up to 20
// blocks before one, at most four breakpoints, a minimum prefix), at a
// 100k window with Pi's default compaction settings: once with
// context-fold, once without. With it the session's input costs less, and
// after the first fold event Pi's three breakpoints carry a fourth, on the
// end of the frozen region, so each later event re-writes only what follows
// it.
func TestLongSessionCostsLessAgainstAnthropicsCache(t *testing.T) {
	if testing.Short() {
		t.Skip("a 300-step session, twice")
	}
	t.Parallel()
	type run struct {
		cost                float64
		read, write, input  int
		requests, fourMarks int
		events              int
	}
	do := func(fold bool) run {
		// 2 KB a step at a 100k window: the same shape as 4 KB at 200k, at
		// half the bytes for the fake to hash under -race.
		cfg := Config{Script: &LongSession{Steps: 300, SkipRecall: true, SkipUnfold: true}, Model: "fakeanth/fake-claude", ContextWindow: 100_000, GenLines: 20, Timeout: 8 * 60e9}
		if fold {
			cfg = WithContextFold(t, cfg)
		}
		env := NewEnv(t, cfg)
		res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step, then report."})
		checkProviderRun(t, env, res)
		var r run
		r.cost, r.read, r.write, r.input = anthropicInputCost(res.Requests)
		r.requests = len(res.Requests)
		for _, q := range res.Requests {
			if bytes.Count(q.Body, []byte(`"cache_control"`)) == 4 {
				r.fourMarks++
			}
		}
		if fold {
			r.events = len(foldEntries(t, env))
		}
		t.Logf("context-fold %v: %d requests, %d fold events, %d with four breakpoints; input %d, cache write %d, cache read %d tokens: cost %.0f token-units",
			fold, r.requests, r.events, r.fourMarks, r.input, r.write, r.read, r.cost)
		return r
	}
	with, without := do(true), do(false)
	t.Logf("input cost with context-fold %.0f, without %.0f (%.3f)", with.cost, without.cost, with.cost/without.cost)
	if with.events < 2 {
		t.Fatalf("%d fold events; the comparison needs at least two", with.events)
	}
	if with.fourMarks == 0 || without.fourMarks != 0 {
		t.Errorf("requests with four breakpoints: %d with context-fold (want some), %d without (want none)", with.fourMarks, without.fourMarks)
	}
	if with.cost >= without.cost {
		t.Errorf("context-fold costs more input: %.0f ≥ %.0f", with.cost, without.cost)
	}
}
