// Package config resolves context-fold's knobs: built-in default <
// <agentDir>/context-fold.json < CONTEXTFOLD_* environment. An invalid value
// is reported once and the next source down is used, so a typo never
// disables folding or changes it silently.
package config

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/contextfold/contextfold/internal/policy"
)

// Source says where an effective value came from.
type Source string

// Sources, in increasing precedence.
const (
	Default Source = "default"
	File    Source = "file"
	Env     Source = "env"
)

// Knob describes one setting.
type Knob struct {
	Key     string // key in context-fold.json
	Env     string // environment variable
	Default string
	Hint    string // valid values, for messages
	Meaning string
	parse   func(string) (float64, error)
	apply   func(*policy.Knobs, float64)
}

func fraction(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f > 1 {
		return 0, fmt.Errorf("want a number in (0, 1]")
	}
	return f, nil
}

func tokens(allowOff bool) func(string) (float64, error) {
	return func(s string) (float64, error) {
		s = strings.TrimSpace(strings.ToLower(s))
		if allowOff && s == "off" {
			return 0, nil
		}
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
			return 0, fmt.Errorf("want a token count ≥ 0")
		}
		return math.Floor(n), nil
	}
}

// Knobs is the table of every fold knob.
var Knobs = []Knob{
	{"foldAt", "CONTEXTFOLD_FOLD_AT", "0.45", "(0, 1]", "first fold when usage reaches this fraction of the window",
		fraction, func(k *policy.Knobs, v float64) { k.FoldAt = v }},
	{"foldStep", "CONTEXTFOLD_FOLD_STEP", "0.12", "(0, 1]", "a fold event must mask at least this fraction of the window",
		fraction, func(k *policy.Knobs, v float64) { k.FoldStep = v }},
	{"coldFoldAt", "CONTEXTFOLD_COLD_FOLD_AT", "0.25", "(0, 1]", "first-fold threshold while the session never had a live cache read",
		fraction, func(k *policy.Knobs, v float64) { k.ColdFoldAt = v }},
	{"budgetFraction", "CONTEXTFOLD_BUDGET_FRACTION", "0.75", "(0, 1]", "budget = min(budget cap, this × window); crossing it is an urgent fold",
		fraction, func(k *policy.Knobs, v float64) { k.BudgetFraction = v }},
	{"budgetCap", "CONTEXTFOLD_BUDGET_CAP", "200000", "tokens ≥ 0, or off", "absolute budget ceiling in tokens; 0/off disables",
		tokens(true), func(k *policy.Knobs, v float64) { k.BudgetCap = int(v) }},
	{"tail", "CONTEXTFOLD_TAIL", "20000", "tokens ≥ 0", "protected working tail in tokens (clamped to half the budget; the newest block is always protected)",
		tokens(false), func(k *policy.Knobs, v float64) { k.Tail = int(v) }},
}

// Value is one knob's effective value.
type Value struct {
	Key    string  `json:"key"`
	Env    string  `json:"env"`
	Value  float64 `json:"value"`
	Source Source  `json:"source"`
}

// Resolved is the effective configuration.
type Resolved struct {
	Knobs    policy.Knobs `json:"knobs"`
	Values   []Value      `json:"values"`
	Warnings []string     `json:"warnings,omitempty"`
}

// Resolve applies defaults, then the saved file's values, then the
// environment's, skipping (with a warning) any invalid value. file may be
// nil; env holds CONTEXTFOLD_* variables.
func Resolve(env map[string]string, file []byte) Resolved {
	var r Resolved
	saved := map[string]json.RawMessage{}
	if len(file) > 0 {
		if err := json.Unmarshal(file, &saved); err != nil {
			r.Warnings = append(r.Warnings, "context-fold.json is not a JSON object; ignoring it: "+err.Error())
			saved = map[string]json.RawMessage{}
		}
	}
	for _, k := range Knobs {
		v, _ := k.parse(k.Default)
		src := Default
		if raw, ok := saved[k.Key]; ok {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				s = string(raw)
			}
			if f, err := k.parse(s); err == nil {
				v, src = f, File
			} else {
				r.Warnings = append(r.Warnings, fmt.Sprintf("context-fold.json %s=%s is invalid (%s); using the default", k.Key, raw, k.Hint))
			}
		}
		if s, ok := env[k.Env]; ok {
			if f, err := k.parse(s); err == nil {
				v, src = f, Env
			} else {
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s=%q is invalid (%s); ignoring it", k.Env, s, k.Hint))
			}
		}
		k.apply(&r.Knobs, v)
		r.Values = append(r.Values, Value{Key: k.Key, Env: k.Env, Value: v, Source: src})
	}
	sort.Strings(r.Warnings)
	return r
}
