package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/contextfold/contextfold/internal/core/policy"
)

func TestResolvePrecedence(t *testing.T) {
	r := Resolve(nil, nil)
	if r.Knobs != policy.DefaultKnobs || len(r.Warnings) != 0 || r.Compact != "det" || r.IdleMinutes != 30 || r.ConfirmCold || r.ReconTokens != 18000 {
		t.Fatalf("defaults: %+v", r)
	}
	if r.Policy != "economic" {
		t.Fatalf("default policy %q", r.Policy)
	}
	if r := Resolve(map[string]string{"CONTEXTFOLD_POLICY": "Ladder"}, nil); r.Policy != "ladder" {
		t.Fatalf("CONTEXTFOLD_POLICY=Ladder gives %q", r.Policy)
	}
	if r := Resolve(map[string]string{"CONTEXTFOLD_POLICY": "greedy"}, nil); r.Policy != "economic" || len(r.Warnings) != 1 {
		t.Fatalf("an unknown policy keeps the default with a warning: %+v", r)
	}
	if len(r.Values) != len(Knobs) {
		t.Fatal("every knob has an effective value")
	}
	r = Resolve(map[string]string{"CONTEXTFOLD_FOLD_AT": "0.3", "CONTEXTFOLD_TAIL": "abc", "CONTEXTFOLD_BUDGET_CAP": "off", "CONTEXTFOLD_COMPACT": "NATIVE"},
		[]byte(`{"foldAt":0.6,"tail":5000,"foldStep":"0.2","coldFoldAt":7,"confirmColdPrompt":"on","providerCacheIdleMinutes":{"anthropic":5,"bad":"x"},"_comment":"kept"}`))
	want := policy.DefaultKnobs
	want.FoldAt, want.Tail, want.FoldStep, want.BudgetCap = 0.3, 5000, 0.2, 0
	if r.Knobs != want || r.Compact != "native" || !r.ConfirmCold {
		t.Fatalf("resolved %+v", r)
	}
	if len(r.Warnings) != 3 { // CONTEXTFOLD_TAIL, coldFoldAt, providerCacheIdleMinutes "bad"
		t.Fatalf("warnings %q", r.Warnings)
	}
	src := map[string]Source{}
	for _, v := range r.Values {
		src[v.Key] = v.Source
	}
	if src["foldAt"] != Env || src["tail"] != File || src["coldFoldAt"] != Default || src["compact"] != Env {
		t.Fatalf("sources %v (an invalid env value falls through to the file)", src)
	}
	if r.IdleFor("anthropic") != 5 || r.IdleFor("openai") != 30 {
		t.Fatal("per-provider idle minutes")
	}
	r = Resolve(map[string]string{"CONTEXTFOLD_CACHE_IDLE_MINUTES": "off"}, []byte(`{"providerCacheIdleMinutes":{"anthropic":5}}`))
	if r.IdleFor("anthropic") != 0 {
		t.Fatal("the environment overrides every provider")
	}
	if r := Resolve(nil, []byte(`[1]`)); len(r.Warnings) != 1 || r.Knobs != policy.DefaultKnobs {
		t.Fatalf("corrupt file: %+v", r)
	}
}

func TestSaveKeepsUnknownKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	os.WriteFile(path, []byte(`{"_comment":"mine","tail":1000}`), 0o644)
	if err := Save(path, "foldAt", "0.3", ""); err != nil {
		t.Fatal(err)
	}
	if err := Save(path, "compact", "native", ""); err != nil {
		t.Fatal(err)
	}
	if err := Save(path, "cacheIdleMinutes", "5", "anthropic"); err != nil {
		t.Fatal(err)
	}
	if err := Save(path, "tail", "default", ""); err != nil {
		t.Fatal(err)
	}
	if err := Save(path, "foldAt", "7", ""); err == nil || !strings.Contains(err.Error(), "not a valid value") {
		t.Fatalf("invalid value accepted: %v", err)
	}
	data, _ := os.ReadFile(path)
	var doc map[string]any
	json.Unmarshal(data, &doc)
	if doc["_comment"] != "mine" || doc["foldAt"] != 0.3 || doc["compact"] != "native" || doc["tail"] != nil {
		t.Fatalf("file %s", data)
	}
	r := Resolve(nil, data)
	if r.Knobs.FoldAt != 0.3 || r.IdleFor("anthropic") != 5 || r.Compact != "native" {
		t.Fatalf("round trip %+v", r)
	}
}

// TestSaveConcurrent: sessions saving at once keep every key each wrote.
func TestSaveConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent", FileName)
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := Save(path, "cacheIdleMinutes", "7", fmt.Sprintf("p%d", i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Per map[string]float64 `json:"providerCacheIdleMinutes"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Per) != 24 {
		t.Fatalf("%d of 24 providers saved: %s", len(doc.Per), data)
	}
}

// TestMeaningsInUserTerms: no internal design vocabulary in what the menu
// shows.
func TestMeaningsInUserTerms(t *testing.T) {
	for _, k := range Knobs {
		for _, word := range []string{"seed", "ledger", "block", "layer", "digest", "registry", "recon", "index "} {
			if text := strings.ToLower(k.Label + " " + k.Hint + " " + k.Meaning); strings.Contains(text, word) {
				t.Errorf("%s: %q in %q", k.Key, word, text)
			}
		}
	}
}
