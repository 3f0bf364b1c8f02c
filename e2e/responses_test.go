package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// respReasoner makes a LongSession reason before every answer, so that on
// the Responses API each reply carries a reasoning item Pi must replay.
type respReasoner struct{ *LongSession }

// Reply implements fakellm.Script.
func (r respReasoner) Reply(req *fakellm.Request) fakellm.Reply {
	rep := r.LongSession.Reply(req)
	rep.Thinking = []string{fmt.Sprintf("Reasoning for request %d: run the next gen.sh step and check its output.", req.Seq)}
	return rep
}

// respInputItem is the part of a Responses input item the test reads.
type respInputItem struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	CallID  string `json:"call_id"`
	Summary []struct {
		Text string `json:"text"`
	} `json:"summary"`
	EncryptedContent string `json:"encrypted_content"`
}

// TestResponsesReasoningReplay runs a multi-step tool session in real Pi on
// the OpenAI Responses API with a reasoning model and thinking on, without
// context-fold: every request must pass the fake's strict replay rules, and
// every reasoning item Pi replays must be exactly the one the fake minted.
// Then it edits a reasoning summary in the session file and resumes: the
// fake rejects the replay and Pi reports the provider's error.
func TestResponsesReasoningReplay(t *testing.T) {
	t.Parallel()
	const steps = 5
	ls := &LongSession{Steps: steps, SkipRecall: true, SkipUnfold: true}
	env := NewEnv(t, Config{
		Script:     respReasoner{ls},
		Model:      "fakeresp/fake-gpt-reasoning",
		Args:       []string{"--thinking", "high"},
		Compaction: noCompaction,
	})
	res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step, then report."})
	res.Require(t)
	if !strings.Contains(res.Stdout, fmt.Sprintf("FINAL: done after %d steps", steps)) {
		t.Errorf("stdout %q", tail(res.Stdout, 500))
	}
	if len(res.Requests) != steps+1 {
		t.Fatalf("%d requests, want %d", len(res.Requests), steps+1)
	}

	type minted struct{ enc, text string }
	mints := map[string]minted{}
	replays, pairedCalls := 0, 0
	for _, rec := range res.Requests {
		if rec.API != fakellm.Responses || rec.Status != http.StatusOK || rec.Error != nil || len(rec.Dropped) != 0 {
			t.Fatalf("request %d: api %s status %d error %v dropped %v", rec.Seq, rec.API, rec.Status, rec.Error, rec.Dropped)
		}
		var body struct {
			Store     *bool    `json:"store"`
			Include   []string `json:"include"`
			Reasoning struct {
				Effort string `json:"effort"`
			} `json:"reasoning"`
		}
		if err := json.Unmarshal(rec.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Store == nil || *body.Store || body.Reasoning.Effort != "high" ||
			len(body.Include) != 1 || body.Include[0] != "reasoning.encrypted_content" {
			t.Fatalf("request %d: store %v include %v reasoning %+v", rec.Seq, body.Store, body.Include, body.Reasoning)
		}
		var items []respInputItem
		if err := json.Unmarshal(rec.MessagesJSON, &items); err != nil {
			t.Fatal(err)
		}
		for k, it := range items {
			switch it.Type {
			case "reasoning":
				m, ok := mints[it.ID]
				if !ok {
					t.Fatalf("request %d replays reasoning item %s the fake never minted", rec.Seq, it.ID)
				}
				if it.EncryptedContent != m.enc || len(it.Summary) != 1 || it.Summary[0].Text != m.text {
					t.Errorf("request %d: reasoning item %s replayed changed: %+v", rec.Seq, it.ID, it)
				}
				replays++
			case "function_call":
				// Pi keeps the fc_ item id, so the pairing rule applied.
				if !strings.HasPrefix(it.ID, "fc_") || k == 0 || items[k-1].Type != "reasoning" {
					t.Errorf("request %d: call %s (id %q) not replayed right after its reasoning", rec.Seq, it.CallID, it.ID)
				}
				pairedCalls++
			}
		}
		if len(rec.Signatures) != 1 || rec.Signatures[0] == "" || len(rec.Reply.Thinking) != 1 {
			t.Fatalf("request %d minted %d signatures for %d thinking blocks", rec.Seq, len(rec.Signatures), len(rec.Reply.Thinking))
		}
		mints[fmt.Sprintf("rs_%d_0", rec.Seq)] = minted{rec.Signatures[0], rec.Reply.Thinking[0]}
	}
	// Request k replays the k-1 earlier reasoning items and calls.
	if want := steps * (steps + 1) / 2; replays != want || pairedCalls != want {
		t.Errorf("%d reasoning replays and %d paired calls, want %d", replays, pairedCalls, want)
	}
	t.Logf("%d requests, %d reasoning items replayed and verified", len(res.Requests), replays)

	// Pi stored each reasoning item as its thinking block's signature.
	sess := res.Session(t)
	signed := 0
	for _, m := range sess.Messages("assistant") {
		var blocks []struct {
			Type              string `json:"type"`
			ThinkingSignature string `json:"thinkingSignature"`
		}
		json.Unmarshal(m.Content, &blocks)
		for _, b := range blocks {
			if b.Type == "thinking" && strings.Contains(b.ThinkingSignature, `"encrypted_content"`) {
				signed++
			}
		}
	}
	if signed != steps+1 {
		t.Errorf("session has %d signed thinking blocks, want %d", signed, steps+1)
	}

	// Tamper with one reasoning summary in the session and resume: the
	// replay no longer verifies, and Pi reports the 400.
	raw, err := os.ReadFile(sess.Path)
	if err != nil {
		t.Fatal(err)
	}
	const from, to = "Reasoning for request 2:", "Reasoning for request 2 (edited):"
	if !strings.Contains(string(raw), from) {
		t.Fatalf("session has no %q", from)
	}
	if err := os.WriteFile(sess.Path, []byte(strings.ReplaceAll(string(raw), from, to)), 0o644); err != nil {
		t.Fatal(err)
	}
	res = env.Print(PrintOptions{Prompt: "Report again.", Continue: true})
	if len(res.Requests) == 0 {
		t.Fatalf("resumed run sent no request; exit %d\n%s", res.ExitCode, tail(res.Stderr, 2000))
	}
	last := res.Requests[len(res.Requests)-1]
	const want = "The encrypted content for item rs_2_0 could not be verified."
	if last.Status != http.StatusBadRequest || last.Error == nil || !strings.HasPrefix(last.Error.Message, want) {
		t.Fatalf("resumed request: status %d error %v", last.Status, last.Error)
	}
	t.Logf("resumed run: exit %d, stderr %q", res.ExitCode, tail(strings.TrimSpace(res.Stderr), 300))
	if res.ExitCode == 0 || !strings.Contains(res.Stdout+res.Stderr, want) {
		t.Errorf("pi exited %d without reporting %q\n--- stdout\n%s\n--- stderr\n%s", res.ExitCode, want, tail(res.Stdout, 1500), tail(res.Stderr, 1500))
	}
}

// TestResponsesWithoutReasoning runs the same session where the model does
// not reason: a non-reasoning model, and a reasoning model with thinking
// off (--thinking off: Pi sends reasoning.effort "none"; Pi's default
// level for a reasoning model is medium). The script's thinking is not
// sent, and the replay carries no reasoning items.
func TestResponsesWithoutReasoning(t *testing.T) {
	t.Parallel()
	for model, args := range map[string][]string{
		"fakeresp/fake-gpt":           nil,
		"fakeresp/fake-gpt-reasoning": {"--thinking", "off"},
	} {
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			const steps = 3
			ls := &LongSession{Steps: steps, SkipRecall: true, SkipUnfold: true}
			env := NewEnv(t, Config{Script: respReasoner{ls}, Model: model, Args: args, Compaction: noCompaction})
			res := env.Print(PrintOptions{Prompt: "Run gen.sh for every step, then report."})
			res.Require(t)
			if len(res.Requests) != steps+1 {
				t.Fatalf("%d requests, want %d", len(res.Requests), steps+1)
			}
			for _, rec := range res.Requests {
				if rec.Status != http.StatusOK || len(rec.Reply.Thinking) != 0 || len(rec.Signatures) != 0 {
					t.Fatalf("request %d: status %d error %v thinking %q", rec.Seq, rec.Status, rec.Error, rec.Reply.Thinking)
				}
				if strings.Contains(string(rec.MessagesJSON), `"type":"reasoning"`) {
					t.Fatalf("request %d replays reasoning", rec.Seq)
				}
			}
			if got := len(res.Requests[steps].ToolCallsSeen()); got != steps {
				t.Errorf("last request replays %d calls, want %d", got, steps)
			}
		})
	}
}
