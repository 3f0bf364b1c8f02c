package trajectory

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedBench is the project's benchmark set, beside the checkout.
const sharedBench = "../../../../shared/bench"

// TestRealPiSessions reads the two raw Pi session files of the bench set and
// checks them against the bench set's own conversion of the same sessions,
// message by message: role, text, calls (id, name, arguments), result
// pairing and error flag. Both files are the early format without entry
// ids; one has two entries written on one line and a user bash run.
func TestRealPiSessions(t *testing.T) {
	dir := filepath.Join(sharedBench, "pi-sessions")
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		t.Skipf("%s absent", dir)
	}
	for raw, conv := range map[string]string{
		"large-session.jsonl": "pi-mono__large-session.jsonl",
		"session.jsonl":       "pi-mono__pr214-session.jsonl",
	} {
		t.Run(raw, func(t *testing.T) {
			got, err := Load(filepath.Join(dir, raw))
			if err != nil {
				t.Fatal(err)
			}
			want, err := Load(filepath.Join(sharedBench, "trajectories", "pi", conv))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d messages, the bench set has %d", len(got), len(want))
			}
			for i := range got {
				if g, w := canon(t, got[i]), canon(t, want[i]); g != w {
					t.Fatalf("message %d:\n got %.300s\nwant %.300s", i, g, w)
				}
			}
		})
	}
}

// canon is m as compact JSON, so messages compare whatever the spacing of
// their arguments.
func canon(t *testing.T, m Message) string {
	t.Helper()
	for k := range m.ToolCalls {
		var b bytes.Buffer
		if err := json.Compact(&b, m.ToolCalls[k].Arguments); err != nil {
			t.Fatalf("call %s: %v", m.ToolCalls[k].ID, err)
		}
		m.ToolCalls[k].Arguments = b.Bytes()
	}
	if m.ToolCalls == nil {
		m.ToolCalls = []Call{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
