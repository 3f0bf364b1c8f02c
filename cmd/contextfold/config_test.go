package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCommand: contextfold config prints the settings the Pi
// extension would use from this shell, each with its source, reading the
// settings file in PI_CODING_AGENT_DIR and the CONTEXTFOLD_* environment;
// -json prints the same values; -h names -json.
func TestConfigCommand(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "context-fold.json"), []byte(`{"tail":12000,"policy":"ladder"}`), 0o644)
	t.Setenv("PI_CODING_AGENT_DIR", dir)
	t.Setenv("CONTEXTFOLD_FOLD_AT", "0.3")
	var out, errb bytes.Buffer
	if code := run([]string{"config"}, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	for _, want := range []string{
		"file: " + filepath.Join(dir, "context-fold.json") + " · ",
		"tail = 12000", "file · Protected tail",
		"foldAt = 0.3", "environment CONTEXTFOLD_FOLD_AT · First fold at",
		"policy = ladder",
		"foldStep = 0.12", "default · Fold step",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "ignored") {
		t.Errorf("under the ladder policy nothing is ignored:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"config", "-json"}, &out, &errb); code != 0 {
		t.Fatalf("-json: exit %d", code)
	}
	var doc struct {
		Values []struct{ Key, Value, Source string }
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range doc.Values {
		got[v.Key] = v.Value + "/" + v.Source
	}
	if got["tail"] != "12000/file" || got["foldAt"] != "0.3/env" || got["foldStep"] != "0.12/default" {
		t.Fatalf("-json values: %v", got)
	}
	out.Reset()
	if code := run([]string{"config", "-h"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "-json") {
		t.Fatalf("-h: exit %d\n%s", code, out.String())
	}
}
