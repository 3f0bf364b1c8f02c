package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/pi/config"
)

// TestOpenWarnsAboutSettings: what the adapter shows from open — a bad
// value with the value used instead, a misspelled variable and key with a
// guess — one line per cause, none for an empty variable.
func TestOpenWarnsAboutSettings(t *testing.T) {
	client, _ := start(t)
	agent := t.TempDir()
	os.WriteFile(filepath.Join(agent, config.FileName), []byte(`{"tail":"-5","foldAt":0.3,"foldSetp":0.2}`), 0o644)
	tial := "CONTEXTFOLD_" + "TIAL"
	var res OpenResult
	if err := call(t, client, "open", OpenParams{SessionID: "s1", AgentDir: agent, Env: map[string]string{
		"CONTEXTFOLD_TAIL": "abc", tial: "8000", "CONTEXTFOLD_POLICY": "", "CONTEXTFOLD_BIN": "/x",
	}}, &res); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`CONTEXTFOLD_TAIL="abc" and context-fold.json "tail": "-5" are invalid (want tokens ≥ 0); using the default 20000`,
		`context-fold.json "foldSetp" is not a context-fold setting; ignoring it — did you mean "foldStep"?`,
		tial + ` is not a context-fold variable; ignoring it — did you mean CONTEXTFOLD_TAIL?`,
	}
	if strings.Join(res.Warnings, "\n") != strings.Join(want, "\n") {
		t.Fatalf("open warnings:\n%s\nwant:\n%s", strings.Join(res.Warnings, "\n"), strings.Join(want, "\n"))
	}

	// A corrupt file: a plain message with its path and the position.
	path := filepath.Join(agent, config.FileName)
	os.WriteFile(path, []byte("{\"tail\": 5,}"), 0o644)
	res = OpenResult{}
	call(t, client, "open", OpenParams{SessionID: "s1", AgentDir: agent}, &res)
	if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], path+" is not valid JSON (line 1, column 12: ") || strings.Contains(res.Warnings[0], "map[") {
		t.Fatalf("corrupt file: %q", res.Warnings)
	}
	// A directory in its place.
	os.Remove(path)
	os.Mkdir(path, 0o755)
	res = OpenResult{}
	call(t, client, "open", OpenParams{SessionID: "s1", AgentDir: agent}, &res)
	if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], path+" is a directory") {
		t.Fatalf("directory: %q", res.Warnings)
	}
}

// TestSetSaysEnvOverrides: the settings menu's rows and the confirmation
// of a save say when an environment variable keeps the effective value.
func TestSetSaysEnvOverrides(t *testing.T) {
	client, _ := start(t)
	agent := t.TempDir()
	env := map[string]string{"CONTEXTFOLD_TAIL": "8000"}
	if err := call(t, client, "open", OpenParams{SessionID: "s1", AgentDir: agent, Env: env}, nil); err != nil {
		t.Fatal(err)
	}
	var set SetResult
	if err := call(t, client, "set", SetParams{Key: "tail", Value: "12000"}, &set); err != nil {
		t.Fatal(err)
	}
	if set.Message != "Protected tail saved: 12000 — but CONTEXTFOLD_TAIL=8000 overrides it in this session; the saved value applies once it is unset" || set.Level != "warning" {
		t.Fatalf("set: %q (%s)", set.Message, set.Level)
	}
	var view ConfigView
	call(t, client, "config", nil, &view)
	rows := map[string]string{}
	for _, v := range view.Values {
		rows[v.Key] = v.Row
	}
	if rows["tail"] != "Protected tail (tail): 8000 (CONTEXTFOLD_TAIL overrides saved 12000)" {
		t.Fatalf("tail row %q", rows["tail"])
	}
	if err := call(t, client, "set", SetParams{Key: "foldAt", Value: "0.30"}, &set); err != nil {
		t.Fatal(err)
	}
	if set.Message != "First fold at saved: 0.3 (applies to future folds)" || set.Level != "info" {
		t.Fatalf("set: %q (%s)", set.Message, set.Level)
	}
	// A corrupt file is not overwritten, in plain words.
	os.WriteFile(filepath.Join(agent, config.FileName), []byte(`[1]`), 0o644)
	err := call(t, client, "set", SetParams{Key: "foldAt", Value: "0.4"}, &set)
	if err == nil || !strings.Contains(err.Error(), "is not a JSON object of settings (it holds a list); not overwriting it, so First fold at is not saved") {
		t.Fatalf("set over a corrupt file: %v", err)
	}
}
