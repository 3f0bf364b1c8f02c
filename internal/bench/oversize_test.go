package bench

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/bench/trajectory"
)

// hugeResult is a trace whose sixth tool result alone is about 230k tokens,
// more than a 200k window: the session that motivated bounded views.
func hugeResult() *Trace {
	ms := []trajectory.Message{{Role: "user", Text: "find the flaky test"}}
	for i := 0; i < 8; i++ {
		id := fmt.Sprintf("c%d", i)
		ms = append(ms, trajectory.Message{Role: "assistant", Text: "run", ToolCalls: []trajectory.Call{{ID: id, Name: "bash", Arguments: []byte(`{"command":"x"}`)}}})
		var b strings.Builder
		if i == 5 {
			for k := 0; b.Len() < 230_000*4; k++ {
				if k%20_000 == 7_000 {
					fmt.Fprintf(&b, "--- FAIL: TestFlaky/run_%d (0.03s)\n", k)
					continue
				}
				fmt.Fprintf(&b, "=== RUN   TestFlaky/run_%d: iteration %06d of the stress loop\n", k, k)
			}
		} else {
			for k := 0; k < 40; k++ {
				fmt.Fprintf(&b, "%s line %03d of output, padded to a realistic width\n", id, k)
			}
		}
		ms = append(ms, trajectory.Message{Role: "toolResult", Text: b.String(), ToolCallID: &id, ToolName: strPtr("bash")})
	}
	ms = append(ms, trajectory.Message{Role: "assistant", Text: "done"})
	return Prepare("huge-result", "test", ms, DefaultSystemTokens)
}

func TestOversizedResultReplaysAt200k(t *testing.T) {
	tr := hugeResult()
	biggest := 0
	for i := range tr.Msgs {
		biggest = max(biggest, tr.Tokens[i])
	}
	if biggest < 229_000 {
		t.Fatalf("the huge result is %d tokens", biggest)
	}
	const window = 200_000
	raw := Price(Raw{}.Replay(tr, window, nil).Requests, window, 0)
	if raw.OverWindow == 0 {
		t.Fatal("raw should not fit a 200k window")
	}
	// Pi's compaction cannot help either: it keeps the newest turn, and the
	// result is in it.
	if rc := Price(RawCompaction{}.Replay(tr, window, nil).Requests, window, 0); rc.OverWindow == 0 {
		t.Fatal("raw+pi-compaction should not fit a 200k window")
	}
	for _, p := range []ContextFold{
		DefaultPolicies()[5].(ContextFold),
		DefaultPolicies()[7].(ContextFold),
	} {
		r := p.Replay(tr, window, nil)
		u := Price(r.Requests, window, 0)
		if u.OverWindow != 0 || r.Bounded != 1 {
			t.Fatalf("%s: %d requests over the window, %d bounded", p.Name(), u.OverWindow, r.Bounded)
		}
		if r.Recoverable != r.Folded || r.FoldErrVisible != r.FoldErrTotal || r.FoldErrTotal == 0 {
			t.Fatalf("%s: %d/%d recoverable, %d/%d error lines visible", p.Name(), r.Recoverable, r.Folded, r.FoldErrVisible, r.FoldErrTotal)
		}
		// The bench's Pi compacts once before that request all the same: Pi's
		// own estimate counts the new result raw.
		t.Logf("%s: peak %d, %d events, %d compactions; raw: %d over the window", p.Name(), u.Peak, r.Events, r.Compactions, raw.OverWindow)
	}
}
