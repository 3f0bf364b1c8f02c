package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// piSessionsFolder lays out a folder as Pi writes its sessions (one folder
// per working directory, <timestamp>_<id>.jsonl in each), with what else
// lands there: context-fold's seed index, a file that is no session, an
// empty one, and a file that is not .jsonl. It returns the folder.
func piSessionsFolder(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "sessions")
	a, b := filepath.Join(root, "--home-u-a--"), filepath.Join(root, "--home-u-b--")
	copyFile(t, "../../internal/pi/ledger/testdata/session-basic.jsonl", filepath.Join(a, "2026-12-01T10-00-00-000Z_0b7e1f1c-0000-4000-8000-000000000001.jsonl"))
	copyFile(t, "../../internal/pi/ledger/testdata/session-custom-compaction.jsonl", filepath.Join(b, "2026-12-02T10-00-00-000Z_0b7e1f1c-0000-4000-8000-000000000002.jsonl"))
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(a, "context-fold", "0b7e1f1c-0000-4000-8000-000000000001", "seed-index.jsonl"), `{"v":1,"seq":1,"files":["a.go"]}`+"\n")
	write(filepath.Join(b, "junk.jsonl"), `{"event":"build","ok":true}`+"\n")
	write(filepath.Join(b, "empty.jsonl"), "")
	write(filepath.Join(root, "notes.txt"), "not read\n")
	return root
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBenchOnPiSessionsFolder: bench replays the folder Pi writes, nested
// per working directory, and skips what is not a session with one note
// (how many, and why); a file named itself that is no session still fails.
// It stopped at context-fold's own seed-index.jsonl.
func TestBenchOnPiSessionsFolder(t *testing.T) {
	root := piSessionsFolder(t)
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "-quiet", "-json", "-window", "32000", root}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep struct {
		Traces int `json:"traces"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Traces != 2 {
		t.Fatalf("replayed %d sessions (%v), want the 2 Pi sessions", rep.Traces, err)
	}
	note := strings.ReplaceAll(errb.String(), root, "<sessions>")
	golden(t, "bench-pi-sessions.golden", []byte(note))
	if strings.Count(note, "\n") != 1 {
		t.Errorf("want one note line, got:\n%s", note)
	}

	// Named itself, a file that is no session is an error, as before.
	errb.Reset()
	if code := run([]string{"bench", "-quiet", "-window", "32000", filepath.Join(root, "--home-u-b--", "junk.jsonl")}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "unknown session format") {
		t.Errorf("a named junk file: exit %d, %s", code, errb.String())
	}
}

// TestBenchWithoutArguments: in a checkout bench replays its sample;
// anywhere else it is a usage error naming Pi's sessions folder (it failed
// on the missing testdata/trajectories).
func TestBenchWithoutArguments(t *testing.T) {
	agent := t.TempDir()
	t.Setenv("PI_CODING_AGENT_DIR", agent)
	for _, tc := range []struct {
		name, dir string
		code      int
		stderr    string
	}{
		{"outside a checkout", t.TempDir(), 2, "contextfold bench: name the sessions to replay, e.g. Pi's: contextfold bench " + filepath.Join(agent, "sessions") +
			" (testdata/trajectories, the default, is only in a checkout) (run 'contextfold bench -h' for usage)\n"},
		{"in a checkout", "../..", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(tc.dir)
			var out, errb bytes.Buffer
			code := run([]string{"bench", "-quiet", "-json", "-window", "32000", "-half", "tune"}, &out, &errb)
			if code != tc.code || errb.String() != tc.stderr {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, errb.String(), tc.code, tc.stderr)
			}
			if code == 0 && !strings.Contains(out.String(), `"traces"`) {
				t.Fatalf("no report:\n%.300s", out.String())
			}
		})
	}
}
