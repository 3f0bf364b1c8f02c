package engine

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/bench/trajectory"
	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// messagesFrom turns fuzz bytes into a message array: chunks separated by
// 0x00, each chunk's first byte choosing a shape, the rest its text.
func messagesFrom(data []byte) [][]byte {
	s := newSession()
	var out [][]byte
	call := 0
	for _, chunk := range bytes.Split(data, []byte{0}) {
		if len(chunk) == 0 {
			continue
		}
		text := string(chunk[1:])
		switch chunk[0] % 8 {
		case 0:
			s.user(text)
		case 1:
			call++
			s.call(text, fmt.Sprint("c", call))
		case 2:
			s.result(fmt.Sprint("c", call), text, chunk[0]&0x80 != 0)
		case 3:
			s.result(fmt.Sprint("c", call-int(chunk[0]>>4)), text, false) // maybe a duplicate or an orphan
		case 4:
			s.text(text)
		case 5:
			s.msgs = append(s.msgs, chunk[1:]) // arbitrary bytes as a message
		case 6:
			s.msgs = append(s.msgs, []byte(`{"role":`+rawjson.QuoteString(text)+`,"content":"x","timestamp":1}`))
		case 7:
			call++
			s.call("", fmt.Sprint("c", call), fmt.Sprint("p", call))
			s.result(fmt.Sprint("p", call), text+"\nERROR parallel", false)
		}
	}
	out = append(out, s.msgs...)
	return out
}

// randomPolicy folds a random subset of all block ids (valid or not) with
// random supplied bodies, some carrying forged tags.
type randomPolicy struct{ r *rand.Rand }

func (p randomPolicy) Conduct(v *policy.View) policy.Decision {
	var d policy.Decision
	if len(v.Blocks) == 0 || p.r.Intn(3) == 0 {
		return d
	}
	d.Digests = map[string]string{}
	for _, b := range v.Blocks {
		if p.r.Intn(2) == 0 {
			d.Fold = append(d.Fold, b.ID)
			if p.r.Intn(4) == 0 {
				d.Digests[b.ID] = "{#abcdef FOLDED} forged"
			}
		}
	}
	d.Fold = append(append(d.Fold, "r:nonexistent", "u:0"), d.Fold...) // repeats and strangers
	return d
}

func addSeeds(f *testing.F) {
	f.Add([]byte("\x00go\x00\x01think\x00\x02out\nERROR x\x00\x04done\x00\x05{bad\x00\x06robot\x00\x07par"), int64(1))
	files, _ := trajectory.Find(sampleDir())
	for _, path := range files {
		ms, err := trajectory.Load(path)
		if err != nil {
			continue
		}
		var b bytes.Buffer
		for i, m := range ms {
			if i > 40 {
				break
			}
			kind := map[string]byte{"user": 0, "assistant": 1, "toolResult": 2}[m.Role]
			b.WriteByte(0)
			b.WriteByte(kind)
			b.WriteString(m.Text[:min(len(m.Text), 2000)])
		}
		f.Add(b.Bytes(), int64(len(ms)))
	}
}

func sampleDir() string {
	if d := os.Getenv("CONTEXTFOLD_BENCH"); d != "" {
		return d + "/trajectories/swe-agent"
	}
	return "../../../testdata/trajectories"
}

// FuzzEngine drives random sessions through random fold plans and checks the
// invariants: no panic, message count unchanged, tool pairs intact, each id
// at most once, frozen bytes identical turn over turn, and every error line
// of a folded result visible in its digest.
func FuzzEngine(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, seed int64) {
		msgs := messagesFrom(data)
		r := rand.New(rand.NewSource(seed))
		e := New(Config{Policy: randomPolicy{r}})
		j := &memJournal{}
		frozenBytes := map[int][]byte{} // message index → its bytes since it carried a frozen fold
		held := 0
		for held < len(msgs) {
			next := min(len(msgs), held+1+r.Intn(4))
			if r.Intn(8) == 0 {
				j.fail = errDisk
			} else {
				j.fail = nil
			}
			res := e.Step(Request{Keep: held, Append: msgs[held:next], Window: 1000 + r.Intn(50_000), Reported: r.Intn(60_000)}, j)
			held = next
			out := e.Render()
			if len(out) != held {
				t.Fatalf("message count %d, want %d", len(out), held)
			}
			ids := map[string]bool{}
			for _, p := range res.Placements {
				b := blockAt(e.Transcript(), p)
				if b == nil || ids[b.ID] {
					t.Fatalf("placement %+v duplicated or unresolved", p)
				}
				ids[b.ID] = true
			}
			for i := range out {
				checkPair(t, msgs[i], out[i])
			}
			for k, b := range frozenBytes {
				if k < len(out) && !bytes.Equal(out[k], b) && !unfoldedIn(e, k) {
					t.Fatalf("frozen message %d changed between turns", k)
				}
			}
			for _, p := range res.Placements {
				frozenBytes[p.Msg] = out[p.Msg]
			}
			if res.Event != nil {
				for _, rec := range res.Event.Folds {
					b, _ := e.Live(rec.ID)
					if b.Kind == block.ToolResult && !strings.Contains(rec.Digest, " forged") {
						errorLinesVisible(t, b.Text, rec.Digest)
					}
					if strings.Contains(rec.Digest, "{#abcdef") {
						t.Fatal("a forged tag survived")
					}
				}
			}
			if r.Intn(10) == 0 && e.Registry().Len() > 0 {
				all := e.Registry().All()
				e.Unfold([]string{all[r.Intn(len(all))].Code}, j)
			}
		}
	})
}

func blockAt(tr *block.Transcript, p Placement) *block.Block {
	if p.Msg >= tr.Len() {
		return nil
	}
	for _, b := range tr.MessageBlocks(p.Msg) {
		if b.Part == p.Part {
			return &b
		}
	}
	return nil
}

func unfoldedIn(e *Engine, msg int) bool {
	for _, b := range e.Transcript().MessageBlocks(msg) {
		if e.Unfolded(b.ID) {
			return true
		}
	}
	return false
}

// checkPair asserts a rendered message kept its identity: role, tool call
// id/name/isError, and every tool call part byte-identical.
func checkPair(t *testing.T, in, out []byte) {
	t.Helper()
	if bytes.Equal(in, out) {
		return
	}
	a, err := rawjson.Object(in)
	if err != nil {
		t.Fatalf("a malformed message was rewritten: %q", in)
	}
	b, err := rawjson.Object(out)
	if err != nil {
		t.Fatalf("rewrite produced invalid JSON: %q", out)
	}
	for _, k := range []string{"role", "toolCallId", "toolName", "isError", "timestamp", "responseId"} {
		x, _ := rawjson.Get(a, k)
		y, _ := rawjson.Get(b, k)
		if !bytes.Equal(x, y) {
			t.Fatalf("field %s changed", k)
		}
	}
	ta := block.Linearize([][]byte{in}).Blocks()
	tb := block.Linearize([][]byte{out}).Blocks()
	for i := range ta {
		if ta[i].Kind == block.ToolCall && (i >= len(tb) || ta[i].Text != tb[i].Text) {
			t.Fatal("a tool call changed")
		}
	}
}
