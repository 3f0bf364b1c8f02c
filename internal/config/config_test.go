package config

import (
	"testing"

	"github.com/contextfold/contextfold/internal/policy"
)

func TestResolvePrecedence(t *testing.T) {
	r := Resolve(nil, nil)
	if r.Knobs != policy.DefaultKnobs || len(r.Warnings) != 0 {
		t.Fatalf("defaults: %+v %v", r.Knobs, r.Warnings)
	}
	r = Resolve(map[string]string{"CONTEXTFOLD_FOLD_AT": "0.3", "CONTEXTFOLD_TAIL": "abc", "CONTEXTFOLD_BUDGET_CAP": "off"},
		[]byte(`{"foldAt":0.6,"tail":5000,"foldStep":"0.2","coldFoldAt":7}`))
	want := policy.DefaultKnobs
	want.FoldAt, want.Tail, want.FoldStep, want.BudgetCap = 0.3, 5000, 0.2, 0
	if r.Knobs != want {
		t.Fatalf("knobs %+v, want %+v", r.Knobs, want)
	}
	if len(r.Warnings) != 2 {
		t.Fatalf("warnings %v", r.Warnings)
	}
	for _, v := range r.Values {
		switch v.Key {
		case "foldAt":
			if v.Source != Env {
				t.Errorf("foldAt source %s", v.Source)
			}
		case "tail":
			if v.Source != File {
				t.Errorf("tail source %s (invalid env must fall through to the file)", v.Source)
			}
		case "coldFoldAt":
			if v.Source != Default {
				t.Errorf("coldFoldAt source %s", v.Source)
			}
		}
	}
	if r := Resolve(nil, []byte(`[1]`)); len(r.Warnings) != 1 || r.Knobs != policy.DefaultKnobs {
		t.Fatalf("corrupt file: %+v", r)
	}
}
