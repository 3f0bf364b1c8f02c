package service

import (
	"encoding/json"
	"testing"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/pi/compaction"
)

// TestReportLimits: /context-fold report's lines are the last request's
// window, Pi's reserve for the model as its settings give it (-1 when its
// compaction is off) and the budget the engine folds to.
func TestReportLimits(t *testing.T) {
	for _, tc := range []struct {
		name       string
		compaction string
		reserve    int
	}{
		{"Pi's defaults", "", compaction.DefaultReserve},
		{"a reserve of its own", `{"reserveTokens":30000}`, 30_000},
		{"compaction off", `{"enabled":false}`, -1},
	} {
		c, _ := start(t)
		if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: t.TempDir()}, nil); err != nil {
			t.Fatal(err)
		}
		p := map[string]any{"keep": 0, "append": messages(3, ""), "window": 200_000}
		if tc.compaction != "" {
			p["compaction"] = json.RawMessage(tc.compaction)
		}
		if err := call(t, c, "turn", p, nil); err != nil {
			t.Fatal(err)
		}
		var got ReportLimits
		if err := call(t, c, "reportLimits", nil, &got); err != nil {
			t.Fatal(err)
		}
		want := ReportLimits{Window: 200_000, Reserve: tc.reserve, Budget: engine.Budget(policy.DefaultKnobs, 200_000, max(0, tc.reserve))}
		if got != want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, want)
		}
	}
}
