// Package config resolves context-fold's settings: built-in default <
// <agentDir>/context-fold.json < CONTEXTFOLD_* environment. An invalid value
// is reported once and the next source down is used, so a typo never
// disables folding or changes it silently. Edits made from the settings
// menu are written back to the file, keeping any key it does not manage.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/contextfold/contextfold/internal/lockfile"
	"github.com/contextfold/contextfold/internal/policy"
	"github.com/contextfold/contextfold/internal/schedule"
)

// FileName is the saved settings file in Pi's agent directory.
const FileName = "context-fold.json"

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
	Key     string   `json:"key"` // key in context-fold.json
	Env     string   `json:"env"` // environment variable
	Label   string   `json:"label"`
	Default string   `json:"default"`
	Hint    string   `json:"hint"` // valid values
	Meaning string   `json:"meaning"`
	Choices []string `json:"choices,omitempty"`
	// parse validates a value and returns its canonical text and number.
	parse func(string) (string, float64, error)
}

func fraction(s string) (string, float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f > 1 {
		return "", 0, errors.New("want a number in (0, 1]")
	}
	return strconv.FormatFloat(f, 'f', -1, 64), f, nil
}

func count(allowOff bool) func(string) (string, float64, error) {
	return func(s string) (string, float64, error) {
		s = strings.TrimSpace(strings.ToLower(s))
		if allowOff && s == "off" {
			return "off", 0, nil
		}
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
			return "", 0, errors.New("want a number ≥ 0")
		}
		n = math.Floor(n)
		if allowOff && n == 0 {
			return "off", 0, nil
		}
		return strconv.FormatFloat(n, 'f', -1, 64), n, nil
	}
}

// minutes accepts a fractional number of minutes ≥ 0, or off (0).
func minutes(s string) (string, float64, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "off" {
		return "off", 0, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", 0, errors.New("want minutes ≥ 0, or off")
	}
	if f == 0 {
		return "off", 0, nil
	}
	return strconv.FormatFloat(f, 'f', -1, 64), f, nil
}

func positive(s string) (string, float64, error) {
	t, n, err := count(false)(s)
	if err != nil || n <= 0 {
		return "", 0, errors.New("want a number > 0")
	}
	return t, n, nil
}

func choice(opts ...string) func(string) (string, float64, error) {
	return func(s string) (string, float64, error) {
		s = strings.TrimSpace(strings.ToLower(s))
		for i, o := range opts {
			if s == o {
				return o, float64(i), nil
			}
		}
		return "", 0, fmt.Errorf("want one of %s", strings.Join(opts, ", "))
	}
}

// Knobs is the table of every setting, in menu order. Label, Hint and
// Meaning are shown to the user as they are.
var Knobs = []Knob{
	{"policy", "CONTEXTFOLD_POLICY", "Fold policy", "economic", "economic or ladder", "economic: fold only when the cheaper requests after a fold repay the prompt-cache re-write it causes; ladder: fixed thresholds — fold once usage passes First fold at (a fraction of the context window), then whenever at least Fold step of the window can be folded", schedule.Profiles, choice(schedule.Profiles...)},
	{"foldAt", "CONTEXTFOLD_FOLD_AT", "First fold at", "0.45", "a number in (0, 1]", "ladder policy: fold once usage reaches this fraction of the context window", nil, fraction},
	{"foldStep", "CONTEXTFOLD_FOLD_STEP", "Fold step", "0.12", "a number in (0, 1]", "ladder policy: fold only when at least this fraction of the context window can be folded at once", nil, fraction},
	{"coldFoldAt", "CONTEXTFOLD_COLD_FOLD_AT", "Cold first fold at", "0.25", "a number in (0, 1]", "ladder policy: First fold at, while the provider has not yet served any of this session from its prompt cache", nil, fraction},
	{"budgetFraction", "CONTEXTFOLD_BUDGET_FRACTION", "Budget fraction", "0.75", "a number in (0, 1]", "budget = min(budget cap, this × context window); crossing it folds at once", nil, fraction},
	{"budgetCap", "CONTEXTFOLD_BUDGET_CAP", "Budget cap", "200000", "tokens ≥ 0, or off", "absolute budget in tokens; off disables", nil, count(true)},
	{"tail", "CONTEXTFOLD_TAIL", "Protected tail", "10000", "tokens ≥ 0", "the newest this many tokens of the conversation never fold (at most half the budget; the newest message always stays)", nil, count(false)},
	{"compact", "CONTEXTFOLD_COMPACT", "Hard compaction", "det", "det or native", "det: context-fold compacts without a model call, into a verbatim list of your messages, files, commands and errors; native: Pi's own LLM summary", []string{"det", "native"}, choice("det", "native")},
	{"cacheIdleMinutes", "CONTEXTFOLD_CACHE_IDLE_MINUTES", "Cache idle minutes", "30", "minutes ≥ 0, or off", "warn when the provider's prompt cache has probably expired after this long idle; 0/off disables (per provider in the file: providerCacheIdleMinutes)", nil, minutes},
	{"confirmColdPrompt", "CONTEXTFOLD_CONFIRM_COLD_PROMPT", "Confirm cold prompt", "off", "on or off", "ask before sending an interactive prompt that would rebill an expired cache", []string{"off", "on"}, choice("off", "on")},
	{"reconTokens", "CONTEXTFOLD_RECON_TOKENS", "Reset cost estimate", "18000", "tokens > 0", "what a fresh session started with /fold-handoff costs, for the status line's \"a fresh session would pay for itself\" estimate", nil, positive},
}

// Lookup returns the knob with key.
func Lookup(key string) (Knob, bool) {
	for _, k := range Knobs {
		if k.Key == key {
			return k, true
		}
	}
	return Knob{}, false
}

// Value is one knob's effective value.
type Value struct {
	Knob
	Value  string  `json:"value"`
	Number float64 `json:"-"`
	Source Source  `json:"source"`
}

// Resolved is the effective configuration.
type Resolved struct {
	Knobs        policy.Knobs       `json:"knobs"`
	Policy       string             `json:"policy"`
	Compact      string             `json:"compact"`
	IdleMinutes  float64            `json:"cacheIdleMinutes"`
	ProviderIdle map[string]float64 `json:"providerCacheIdleMinutes,omitempty"`
	ConfirmCold  bool               `json:"confirmColdPrompt"`
	ReconTokens  int                `json:"reconTokens"`
	Values       []Value            `json:"values"`
	Warnings     []string           `json:"warnings,omitempty"`
}

// IdleFor returns the idle interval for a provider (the environment
// overrides every provider's saved value).
func (r *Resolved) IdleFor(provider string) float64 {
	for _, v := range r.Values {
		if v.Key == "cacheIdleMinutes" && v.Source == Env {
			return r.IdleMinutes
		}
	}
	if m, ok := r.ProviderIdle[provider]; ok {
		return m
	}
	return r.IdleMinutes
}

// Resolve applies defaults, then the saved file's values, then the
// environment's, skipping (with a warning) any invalid value.
func Resolve(env map[string]string, file []byte) Resolved {
	r := Resolved{ProviderIdle: map[string]float64{}}
	saved := map[string]json.RawMessage{}
	if len(file) > 0 {
		if err := json.Unmarshal(file, &saved); err != nil {
			r.Warnings = append(r.Warnings, FileName+" is not a JSON object; ignoring it: "+err.Error())
			saved = map[string]json.RawMessage{}
		}
	}
	for _, k := range Knobs {
		text, num, _ := k.parse(k.Default)
		src := Default
		if raw, ok := saved[k.Key]; ok {
			if t, n, err := k.parse(rawText(raw)); err == nil {
				text, num, src = t, n, File
			} else {
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s %s=%s is invalid (want %s); using the default", FileName, k.Key, raw, k.Hint))
			}
		}
		if s, ok := env[k.Env]; ok {
			if t, n, err := k.parse(s); err == nil {
				text, num, src = t, n, Env
			} else {
				r.Warnings = append(r.Warnings, fmt.Sprintf("%s=%q is invalid (want %s); ignoring it", k.Env, s, k.Hint))
			}
		}
		r.apply(k.Key, text, num)
		r.Values = append(r.Values, Value{Knob: k, Value: text, Number: num, Source: src})
	}
	if raw, ok := saved["providerCacheIdleMinutes"]; ok {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) == nil {
			k, _ := Lookup("cacheIdleMinutes")
			for p, v := range m {
				if _, n, err := k.parse(rawText(v)); err == nil && strings.TrimSpace(p) != "" {
					r.ProviderIdle[p] = n
				}
			}
		}
	}
	sort.Strings(r.Warnings)
	return r
}

func rawText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func (r *Resolved) apply(key, text string, n float64) {
	switch key {
	case "foldAt":
		r.Knobs.FoldAt = n
	case "foldStep":
		r.Knobs.FoldStep = n
	case "coldFoldAt":
		r.Knobs.ColdFoldAt = n
	case "budgetFraction":
		r.Knobs.BudgetFraction = n
	case "budgetCap":
		r.Knobs.BudgetCap = int(n)
	case "tail":
		r.Knobs.Tail = int(n)
	case "policy":
		r.Policy = text
	case "compact":
		r.Compact = text
	case "cacheIdleMinutes":
		r.IdleMinutes = n
	case "confirmColdPrompt":
		r.ConfirmCold = text == "on"
	case "reconTokens":
		r.ReconTokens = int(n)
	}
}

// Save writes one knob to the settings file at path, atomically, keeping
// every key it does not manage. value "" or "default" removes the saved
// value. With provider set, cacheIdleMinutes is saved for that provider.
func Save(path, key, value, provider string) error {
	k, ok := Lookup(key)
	if !ok {
		return fmt.Errorf("unknown setting %q", key)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// Two sessions saving at once must not lose each other's keys.
	unlock, err := lockfile.Lock(path)
	if err != nil {
		return err
	}
	defer unlock()
	doc := map[string]json.RawMessage{}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if len(strings.TrimSpace(string(data))) > 0 {
			if err := json.Unmarshal(data, &doc); err != nil {
				return fmt.Errorf("%s is not a JSON object; not overwriting it: %w", path, err)
			}
		}
	}
	remove := value == "" || strings.EqualFold(value, "default")
	var enc json.RawMessage
	if !remove {
		text, n, err := k.parse(value)
		if err != nil {
			return fmt.Errorf("%s: %q is not a valid value (want %s)", k.Label, value, k.Hint)
		}
		if k.Choices != nil || text == "off" {
			enc, _ = json.Marshal(text)
		} else {
			enc, _ = json.Marshal(n)
		}
	}
	if provider != "" && key == "cacheIdleMinutes" {
		per := map[string]json.RawMessage{}
		if raw, ok := doc["providerCacheIdleMinutes"]; ok {
			json.Unmarshal(raw, &per)
		}
		if remove {
			delete(per, provider)
		} else {
			per[provider] = enc
		}
		if len(per) == 0 {
			delete(doc, "providerCacheIdleMinutes")
		} else {
			doc["providerCacheIdleMinutes"], _ = json.Marshal(per)
		}
	} else if remove {
		delete(doc, key)
	} else {
		doc[key] = enc
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
		return err
	}
	return lockfile.Replace(tmp, path)
}
