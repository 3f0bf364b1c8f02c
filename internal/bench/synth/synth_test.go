package synth

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/bench/trajectory"
)

// TestSessionsAreDeterministic: the same seed and index give the same
// session; another index another one.
func TestSessionsAreDeterministic(t *testing.T) {
	a, b := Session(1, 3), Session(1, 3)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two sessions")
	}
	if reflect.DeepEqual(a, Session(1, 4)) {
		t.Fatal("two indexes gave the same session")
	}
}

var numberedLine = regexp.MustCompile(`^ {0,5}\d+→`)

// TestSessionsHaveClaudeCodesShapes replays each generated session's tools
// against its own files: every call is answered by the next message, reads
// print N→ lines, every Edit's old_string occurs exactly once in the file
// as it then is, and a good share of edits copy from a read far back.
func TestSessionsHaveClaudeCodesShapes(t *testing.T) {
	for i := 0; i < 6; i++ {
		ms := Session(30, i)
		var calls, edits, farEdits, greps, failing, passing int
		files := map[string]string{} // path → content, from reads and edits
		readAt := map[string]int{}   // path → message index of its last read
		for k, m := range ms {
			if m.Role != "assistant" || len(m.ToolCalls) == 0 {
				continue
			}
			calls++
			c := m.ToolCalls[0]
			if k+1 >= len(ms) || ms[k+1].Role != "toolResult" || *ms[k+1].ToolCallID != c.ID || *ms[k+1].ToolName != c.Name {
				t.Fatalf("session %d: call %s at %d is not answered by the next message", i, c.ID, k)
			}
			out := ms[k+1].Text
			var args map[string]any
			if err := json.Unmarshal(c.Arguments, &args); err != nil {
				t.Fatal(err)
			}
			switch c.Name {
			case "Read":
				var lines []string
				for _, l := range strings.Split(out, "\n") {
					if !numberedLine.MatchString(l) {
						t.Fatalf("session %d: a Read line without its number: %q", i, l)
					}
					lines = append(lines, l[strings.Index(l, "→")+len("→"):])
				}
				p := args["file_path"].(string)
				files[p] = strings.Join(lines, "\n")
				readAt[p] = k
			case "Edit":
				edits++
				p, old := args["file_path"].(string), args["old_string"].(string)
				content, ok := files[p]
				if !ok {
					t.Fatalf("session %d: an edit of %s, never read", i, p)
				}
				if n := strings.Count(content, old); n != 1 {
					t.Fatalf("session %d: old_string occurs %d times in %s as it is at message %d", i, n, p, k)
				}
				files[p] = strings.Replace(content, old, args["new_string"].(string), 1)
				if k-readAt[p] >= 50 {
					farEdits++
				}
			case "Grep":
				greps++
			case "Bash":
				if ms[k+1].IsError {
					failing++
				} else if strings.Contains(out, " passed in ") {
					passing++
				}
			}
		}
		if calls < 40 || edits < 10 || greps == 0 || failing == 0 || passing == 0 {
			t.Fatalf("session %d: %d calls, %d edits, %d greps, %d failing and %d passing test runs", i, calls, edits, greps, failing, passing)
		}
		if farEdits == 0 {
			t.Errorf("session %d: no edit copies from a read 50 or more messages back", i)
		}
		if _, err := trajectory.Read(strings.NewReader(jsonl(t, ms))); err != nil {
			t.Fatalf("session %d does not read back as a trajectory: %v", i, err)
		}
	}
}

func jsonl(t *testing.T, ms []trajectory.Message) string {
	var b strings.Builder
	for _, m := range ms {
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(raw)
		b.WriteByte('\n')
	}
	return b.String()
}
