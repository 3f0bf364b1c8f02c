package trajectory

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the .want.jsonl files")

// TestReaders converts each hand-made fixture and compares the messages,
// one canonical JSON line each, with its .want.jsonl file. The fixtures hold
// what each reader must get right:
//   - claude-code: an assistant streamed as four lines sharing one message
//     id with a tool result between them, a subagent (sidechain) exchange, a
//     repeated line, an interrupted call with text beside its result, an
//     image, a synthetic API-error message, a compact boundary, redacted
//     thinking;
//   - codex: base instructions, a developer message and injected context,
//     reasoning and parallel function calls with their outputs (one a
//     failing exit code), apply_patch, local_shell_call, an output with no
//     call, a compacted line, a call left unanswered, event_msg duplicates;
//   - pi-branch: a current-format session with a branch (the abandoned
//     "cast it" path must be gone), thinking, a multi-part error result, an
//     aborted empty assistant, a user bash run, custom, label, context_edit
//     and compaction entries, a final unanswered call;
//   - bench: the benchmark format, text-action arguments included.
func TestReaders(t *testing.T) {
	for _, tc := range []struct {
		file   string
		format Format
	}{
		{"claude-code.jsonl", FormatClaudeCode},
		{"codex.jsonl", FormatCodex},
		{"pi-branch.jsonl", FormatPi},
		{"bench.jsonl", FormatBench},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ms, f, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			if f != tc.format {
				t.Fatalf("format %s, want %s", f, tc.format)
			}
			var got bytes.Buffer
			for _, m := range ms {
				got.WriteString(canon(t, m))
				got.WriteByte('\n')
			}
			want := strings.TrimSuffix(path, ".jsonl") + ".want.jsonl"
			if *update {
				if err := os.WriteFile(want, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			w, err := os.ReadFile(want)
			if err != nil {
				t.Fatal(err)
			}
			gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(w), "\n")
			for i := 0; i < len(gl) || i < len(wl); i++ {
				var g, w string
				if i < len(gl) {
					g = gl[i]
				}
				if i < len(wl) {
					w = wl[i]
				}
				if g != w {
					t.Fatalf("message %d:\n got %s\nwant %s", i+1, g, w)
				}
			}
			// Load gives the same messages from the file.
			lm, err := Load(path)
			if err != nil || len(lm) != len(ms) {
				t.Fatalf("Load: %d messages, %v", len(lm), err)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       Format
		err        string
	}{
		{"empty", "\n\n", FormatBench, ""},
		{"bench", `{"role":"user","text":"hi","toolCalls":[],"toolCallId":null,"toolName":null,"isError":false}`, FormatBench, ""},
		{"pi header", `{"type":"session","id":"x","timestamp":"t","cwd":"/"}`, FormatPi, ""},
		{"claude after snapshots", `{"type":"summary","summary":"s","leafUuid":"u"}` + "\n" +
			`{"type":"file-history-snapshot","messageId":"m","snapshot":{},"isSnapshotUpdate":false}` + "\n" +
			`{"type":"user","uuid":"u","sessionId":"s","message":{"role":"user","content":"hi"}}`, FormatClaudeCode, ""},
		{"claude title only", `{"type":"summary","summary":"s","leafUuid":"u"}`, FormatClaudeCode, ""},
		{"codex", `{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}`, FormatCodex, ""},
		{"codex early", `{"id":"x","timestamp":"t","instructions":null}` + "\n" + `{"record_type":"state"}` + "\n" +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}`, FormatCodex, ""},
		{"unknown object", `{"hello":"world"}`, "", "unknown session format"},
		{"not an object", `[1,2,3]`, "", "line 1: not a JSON object"},
		{"malformed", "{\"role\":\"user\"}\n{oops\n{\"role\":\"user\"}\n", "", "line 2:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Detect([]byte(tc.data))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				if strings.Contains(tc.err, "format") && !strings.Contains(err.Error(), "Codex rollout") {
					t.Fatalf("error %q does not list the formats accepted", err)
				}
				return
			}
			if err != nil || f != tc.want {
				t.Fatalf("got %s, %v; want %s", f, err, tc.want)
			}
		})
	}
}

// TestLoadNamesTheFile checks an unknown format's error names the file and
// the formats accepted.
func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.jsonl")
	if err := os.WriteFile(path, []byte(`{"note":"not a session"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "Claude Code session") {
		t.Fatalf("error %v", err)
	}
}

// TestCutOffLastLine reads a session whose last write was cut short: the
// partial line is dropped, and a partial line before the end is an error.
func TestCutOffLastLine(t *testing.T) {
	full, err := os.ReadFile(filepath.Join("testdata", "codex.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	cut := bytes.LastIndex(full, []byte(`You're welcome."}]}}`))
	ms, _, err := Parse(full[:cut])
	if err != nil {
		t.Fatal(err)
	}
	all, _, _ := Parse(full)
	if len(ms) != len(all)-1 {
		t.Fatalf("%d messages, want %d", len(ms), len(all)-1)
	}
	lines := bytes.SplitAfter(full, []byte("\n"))
	lines[9] = append(lines[9][:len(lines[9])/2:len(lines[9])/2], '\n')
	if _, _, err := Parse(bytes.Join(lines, nil)); err == nil || !strings.Contains(err.Error(), "line 10") {
		t.Fatalf("error %v, want one at line 10", err)
	}
}

// TestFindAndPairing checks Find takes every format and leaves pi-sessions
// out unless asked for it, and that an orphan result loads as a user message.
func TestFindAndPairing(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a/x.jsonl", "pi-sessions/y.jsonl", "b/z.txt"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Find(dir)
	if err != nil || len(got) != 1 || filepath.Base(got[0]) != "x.jsonl" {
		t.Fatalf("Find %v, %v", got, err)
	}
	got, err = Find(filepath.Join(dir, "pi-sessions"))
	if err != nil || len(got) != 1 || filepath.Base(got[0]) != "y.jsonl" {
		t.Fatalf("Find pi-sessions %v, %v", got, err)
	}
	ms := pairResults([]Message{
		{Role: "assistant", ToolCalls: []Call{{ID: "a"}}},
		{Role: "toolResult", ToolCallID: str("a"), Text: "ok"},
		{Role: "toolResult", ToolCallID: str("a"), Text: "again"},
		{Role: "toolResult", Text: "no id"},
	})
	if ms[1].Role != "toolResult" || ms[2].Role != "user" || ms[2].Text != "again" || ms[3].Role != "user" {
		t.Fatalf("paired %+v", ms)
	}
}

// FuzzLoad feeds Load any bytes: it must return messages or an error, and
// what it returns must convert for the bench.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"claude-code.jsonl", "codex.jsonl", "pi-branch.jsonl", "bench.jsonl"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		lines := bytes.SplitAfter(data, []byte("\n"))
		f.Add(bytes.Join(lines[:len(lines)/2], nil))
	}
	f.Add([]byte(`{"type":"session"}` + "\n" + `{"type":"message","id":"a","parentId":"a","message":{"role":"assistant","content":"x"}}`))
	f.Add([]byte(`{"type":"user","uuid":"u","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image"}]}]}}`))
	f.Add([]byte("{}{}\n[]"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "s.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ms, err := Load(path)
		if err != nil {
			if ms != nil {
				t.Fatalf("messages with an error: %v", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		ToPi(ms)
	})
}
