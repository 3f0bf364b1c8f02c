// Package config resolves context-fold's settings: built-in default <
// <agentDir>/context-fold.json < CONTEXTFOLD_* environment. An invalid value
// is reported once, naming the value used instead, and the next source down
// is used, so a typo never disables folding or changes it silently; an
// unknown key or CONTEXTFOLD_* variable is reported once too, with the
// nearest known name. Edits made from the settings menu are written back to
// the file, keeping any key it does not manage.
package config

import (
	"bytes"
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
	"unicode/utf8"

	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/pi/lockfile"
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
	// Only names the one fold policy that reads this setting ("" for
	// every policy); under another it is kept but ignored.
	Only string `json:"only,omitempty"`
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
	{"policy", "CONTEXTFOLD_POLICY", "Fold policy", "economic", "economic or ladder", "economic: within First fold at and Fold step, fold only when the cheaper requests after a fold repay the prompt-cache re-write it causes; ladder: fixed thresholds — fold once usage passes First fold at (a fraction of the context window), then whenever at least Fold step of the window can be folded", schedule.Profiles, "", choice(schedule.Profiles...)},
	{"foldAt", "CONTEXTFOLD_FOLD_AT", "First fold at", "0.45", "a number in (0, 1]", "no fold before usage reaches this fraction of the context window, unless a request would pass the budget", nil, "", fraction},
	{"foldStep", "CONTEXTFOLD_FOLD_STEP", "Fold step", "0.12", "a number in (0, 1]", "no fold of less than this fraction of the context window at once, unless a request would pass the budget", nil, "", fraction},
	{"coldFoldAt", "CONTEXTFOLD_COLD_FOLD_AT", "Cold first fold at", "0.25", "a number in (0, 1]", "ladder policy: First fold at, while the provider has not yet served any of this session from its prompt cache", nil, "ladder", fraction},
	{"budgetFraction", "CONTEXTFOLD_BUDGET_FRACTION", "Budget fraction", "0.75", "a number in (0, 1]", "budget = min(budget cap, this × context window); crossing it folds at once", nil, "", fraction},
	{"budgetCap", "CONTEXTFOLD_BUDGET_CAP", "Budget cap", "200000", "tokens ≥ 0, or off", "absolute budget in tokens; off disables", nil, "", count(true)},
	{"tail", "CONTEXTFOLD_TAIL", "Protected tail", "20000", "tokens ≥ 0", "the newest this many tokens of the conversation never fold (at most half the budget; the newest message always stays)", nil, "", count(false)},
	{"compact", "CONTEXTFOLD_COMPACT", "Hard compaction", "det", "det or native", "det: context-fold compacts without a model call, into a verbatim list of your messages, files, commands and errors; native: Pi's own LLM summary", []string{"det", "native"}, "", choice("det", "native")},
	{"cacheIdleMinutes", "CONTEXTFOLD_CACHE_IDLE_MINUTES", "Cache idle minutes", "30", "minutes ≥ 0, or off", "warn when the provider's prompt cache has probably expired after this long idle; 0/off disables (per provider in the file: providerCacheIdleMinutes)", nil, "", minutes},
	{"confirmColdPrompt", "CONTEXTFOLD_CONFIRM_COLD_PROMPT", "Confirm cold prompt", "off", "on or off", "ask before sending an interactive prompt that would rebill an expired cache", []string{"off", "on"}, "", choice("off", "on")},
	{"foldNotices", "CONTEXTFOLD_FOLD_NOTICES", "Fold notices", "on", "on or off", "a short notification per fold event (how many outputs it folded, tokens kept out of each request)", []string{"on", "off"}, "", choice("on", "off")},
	{"reconTokens", "CONTEXTFOLD_RECON_TOKENS", "Reset cost estimate", "18000", "tokens > 0", "what a fresh session started with /fold-handoff costs, for the status line's \"a fresh session would pay for itself\" estimate", nil, "", positive},
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

// Value is one knob's effective value. Row and Prompt are the settings
// menu's text for it.
type Value struct {
	Knob
	Value  string  `json:"value"`
	Number float64 `json:"-"`
	Source Source  `json:"source"`
	// Saved is the file's valid value, also when the environment overrides it.
	Saved string `json:"saved,omitempty"`
	// Ignored: the active fold policy does not read this setting (see Knob.Only).
	Ignored bool   `json:"ignored,omitempty"`
	Row     string `json:"row"`
	Prompt  string `json:"prompt"`
}

// Resolved is the effective configuration.
type Resolved struct {
	Knobs        policy.Knobs       `json:"knobs"`
	Policy       string             `json:"policy"`
	Compact      string             `json:"compact"`
	IdleMinutes  float64            `json:"cacheIdleMinutes"`
	ProviderIdle map[string]float64 `json:"providerCacheIdleMinutes,omitempty"`
	ConfirmCold  bool               `json:"confirmColdPrompt"`
	FoldNotices  bool               `json:"foldNotices"`
	ReconTokens  int                `json:"reconTokens"`
	Values       []Value            `json:"values"`
	// Warnings are one line per cause, for the user, in a stable order.
	Warnings []string `json:"warnings,omitempty"`
}

// IdleFor returns the idle interval for a provider (the environment
// overrides every provider's saved value).
func (r *Resolved) IdleFor(provider string) float64 {
	if v, ok := r.Value("cacheIdleMinutes"); ok && v.Source == Env {
		return r.IdleMinutes
	}
	if m, ok := r.ProviderIdle[provider]; ok {
		return m
	}
	return r.IdleMinutes
}

// Value returns the effective value of the knob with key.
func (r *Resolved) Value(key string) (Value, bool) {
	for _, v := range r.Values {
		if v.Key == key {
			return v, true
		}
	}
	return Value{}, false
}

// providerIdleKey is the file's per-provider cacheIdleMinutes object.
const providerIdleKey = "providerCacheIdleMinutes"

// Load reads the settings file at path ("" for none) and resolves it with
// env. A missing file is no file; a directory or an unreadable file in its
// place is reported and its settings are ignored.
func Load(env map[string]string, path string) Resolved {
	if path == "" {
		return Resolve(env, nil)
	}
	data, problem := read(path)
	return resolve(env, data, path, problem)
}

// read returns the file at path, or why it cannot be used ("" when it is
// simply absent).
func read(path string) ([]byte, string) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, path + " is a directory, not a settings file"
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ""
	}
	if err != nil {
		return nil, fmt.Sprintf("%s cannot be read (%s)", path, reason(err))
	}
	return data, ""
}

// reason is err without the operation and path a *fs.PathError repeats.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Resolve applies defaults, then the saved file's values (file, nil for
// none), then the environment's, skipping (with a warning) any invalid
// value. An empty variable is unset.
func Resolve(env map[string]string, file []byte) Resolved {
	return resolve(env, file, FileName, "")
}

// resolve is Resolve with the file's path, for messages, and a problem
// reading it (its settings are then ignored).
func resolve(env map[string]string, file []byte, path, problem string) Resolved {
	r := Resolved{ProviderIdle: map[string]float64{}}
	doc, err := decodeObject(file)
	if err != nil {
		problem = path + " " + err.Error()
	}
	var warn []string
	var fromEnv []string
	for _, k := range Knobs {
		text, num, _ := k.parse(k.Default)
		src, saved := Default, ""
		var bad []string
		if raw, ok := doc[k.Key]; ok && !blank(raw) {
			if t, n, err := k.parse(rawText(raw)); err == nil {
				text, num, src, saved = t, n, File, t
			} else {
				bad = append(bad, fmt.Sprintf("%s %q: %s", FileName, k.Key, short(raw)))
			}
		}
		if s := env[k.Env]; strings.TrimSpace(s) != "" {
			if t, n, err := k.parse(s); err == nil {
				text, num, src = t, n, Env
				fromEnv = append(fromEnv, k.Env)
			} else {
				bad = append([]string{fmt.Sprintf("%s=%q", k.Env, s)}, bad...)
			}
		}
		v := Value{Knob: k, Value: text, Number: num, Source: src, Saved: saved}
		if len(bad) > 0 {
			verb := "is"
			if len(bad) > 1 {
				verb = "are"
			}
			warn = append(warn, fmt.Sprintf("%s %s invalid (want %s); using %s", strings.Join(bad, " and "), verb, k.Hint, v.origin()))
		}
		r.apply(k.Key, text, num)
		// policy is the first knob, so it is resolved before any it governs.
		v.Ignored = k.Only != "" && r.Policy != k.Only
		v.Row, v.Prompt = v.row(r.Policy), v.prompt()
		r.Values = append(r.Values, v)
	}
	warn = append(warn, r.providerIdle(doc)...)
	warn = append(warn, unknownKeys(doc)...)
	warn = append(warn, unknownEnv(env)...)
	if problem != "" {
		using := "using the defaults"
		if len(fromEnv) > 0 {
			using += " and " + strings.Join(fromEnv, ", ")
		}
		warn = append([]string{problem + "; its settings are ignored, " + using}, warn...)
	}
	r.Warnings = warn
	return r
}

// origin names a value and where it came from, for "using …".
func (v Value) origin() string {
	switch v.Source {
	case Env:
		return fmt.Sprintf("%s from %s", v.Value, v.Env)
	case File:
		return fmt.Sprintf("%s from %s", v.Value, FileName)
	}
	return "the default " + v.Value
}

// row is the value's line in the settings menu: its label and file key,
// its value and source, and whether the active policy ignores it.
func (v Value) row(policy string) string {
	name := fmt.Sprintf("%s (%s)", v.Label, v.Key)
	var row string
	switch {
	case v.Source == Env && v.Saved != "":
		row = fmt.Sprintf("%s: %s (%s overrides saved %s)", name, v.Value, v.Env, v.Saved)
	case v.Source == Env:
		row = fmt.Sprintf("%s: %s (%s)", name, v.Value, v.Env)
	case v.Source == File:
		row = fmt.Sprintf("%s: %s (saved)", name, v.Value)
	default:
		row = fmt.Sprintf("%s: %s", name, v.Value)
	}
	if v.Ignored {
		row += fmt.Sprintf(" — ignored: %s policy only, the %s policy is active", v.Only, policy)
	}
	return row
}

// prompt is the settings menu's question for a new value.
func (v Value) prompt() string {
	override := ""
	if v.Source == Env {
		override = fmt.Sprintf("%s=%s overrides what is saved, in this session", v.Env, v.Value)
	}
	if v.Choices != nil {
		if override != "" {
			return fmt.Sprintf("%s — %s (%s)", v.Label, v.Meaning, override)
		}
		return fmt.Sprintf("%s — %s", v.Label, v.Meaning)
	}
	if override != "" {
		return fmt.Sprintf("%s — %s (%s; 'default' clears the saved value)", v.Label, v.Hint, override)
	}
	return fmt.Sprintf("%s — %s (now %s; 'default' clears the saved value)", v.Label, v.Hint, v.Value)
}

// providerIdle reads the file's per-provider idle minutes, with a warning
// for each invalid entry.
func (r *Resolved) providerIdle(doc map[string]json.RawMessage) []string {
	raw, ok := doc[providerIdleKey]
	if !ok || blank(raw) {
		return nil
	}
	general, _ := r.Value("cacheIdleMinutes")
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return []string{fmt.Sprintf(`%s %q: %s is invalid (want provider names with minutes, e.g. {"anthropic": 5}); every provider uses %s`, FileName, providerIdleKey, short(raw), general.origin())}
	}
	k, _ := Lookup("cacheIdleMinutes")
	var warn []string
	for _, p := range sortedKeys(m) {
		if blank(m[p]) {
			continue
		}
		bad := fmt.Sprintf("%s %s %q: %s", FileName, providerIdleKey, p, short(m[p]))
		if strings.TrimSpace(p) == "" {
			warn = append(warn, bad+" is invalid (want a provider name, e.g. anthropic); ignoring it")
			continue
		}
		_, n, err := k.parse(rawText(m[p]))
		if err != nil {
			warn = append(warn, fmt.Sprintf("%s is invalid (want %s); %s uses %s", bad, k.Hint, p, general.origin()))
			continue
		}
		r.ProviderIdle[p] = n
	}
	return warn
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// decodeObject parses the settings file; a blank file is an empty one. Its
// error reads "is not …" after the file's name, with no Go type in it.
func decodeObject(data []byte) (map[string]json.RawMessage, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // an editor's UTF-8 BOM
	doc := map[string]json.RawMessage{}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return doc, nil
	}
	var raw json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(data, se.Offset)
			return nil, fmt.Errorf("is not valid JSON (line %d, column %d: %s)", line, col, se.Error())
		}
		return nil, errors.New("is not valid JSON")
	}
	if trimmed[0] != '{' {
		return nil, fmt.Errorf("is not a JSON object of settings (it holds %s)", jsonKind(trimmed[0]))
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, errors.New("is not valid JSON")
	}
	return doc, nil
}

// position is the 1-based line and column (in characters) of the byte a
// json.SyntaxError's offset points past.
func position(data []byte, offset int64) (line, col int) {
	i := int(offset) - 1
	i = max(0, min(i, len(data)))
	before := data[:i]
	nl := bytes.LastIndexByte(before, '\n')
	return bytes.Count(before, []byte("\n")) + 1, utf8.RuneCount(before[nl+1:]) + 1
}

func jsonKind(first byte) string {
	switch first {
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// blank is a value that means "not set": JSON null or an empty string.
func blank(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "null" || s == `""`
}

// short is a file value as the user wrote it, on one line and bounded.
func short(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		b.Write(raw)
	}
	s := b.String()
	if utf8.RuneCountInString(s) > 60 {
		s = string([]rune(s)[:57]) + "…"
	}
	return s
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
	case "foldNotices":
		r.FoldNotices = text == "on"
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
	data, problem := read(path)
	if problem != "" {
		return fmt.Errorf("%s; not saving %s", problem, k.Label)
	}
	doc, err := decodeObject(data)
	if err != nil {
		return fmt.Errorf("%s %s; not overwriting it, so %s is not saved", path, err, k.Label)
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
		if raw, ok := doc[providerIdleKey]; ok {
			json.Unmarshal(raw, &per)
		}
		if remove {
			delete(per, provider)
		} else {
			per[provider] = enc
		}
		if len(per) == 0 {
			delete(doc, providerIdleKey)
		} else {
			doc[providerIdleKey], _ = json.Marshal(per)
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

// Saved is the settings menu's confirmation after Save(path, key, value,
// provider) succeeded and r was resolved again: what was saved, and whether
// the environment overrides it in this session (then true).
func (r *Resolved) Saved(key, value, provider string) (string, bool) {
	k, ok := Lookup(key)
	v, _ := r.Value(key)
	if !ok {
		return "", false
	}
	what := k.Label
	if provider != "" && key == "cacheIdleMinutes" {
		what += " for " + provider
	}
	fallback := "the default " + v.defaultText()
	if provider != "" && key == "cacheIdleMinutes" {
		fallback = fmt.Sprintf("the %s setting (%s)", k.Label, v.Saved)
		if v.Saved == "" {
			fallback = fmt.Sprintf("the %s setting (default %s)", k.Label, v.defaultText())
		}
	}
	remove := value == "" || strings.EqualFold(value, "default")
	if v.Source == Env {
		over := fmt.Sprintf(" — but %s=%s overrides it in this session; ", k.Env, v.Value)
		if remove {
			return what + ": saved value cleared" + over + fallback + " applies once it is unset", true
		}
		text, _, _ := k.parse(value)
		return what + " saved: " + text + over + "the saved value applies once it is unset", true
	}
	if remove {
		if v.Ignored {
			return fmt.Sprintf("%s: saved value cleared; %s applies %s under the %s policy (the %s policy, active, ignores it)", what, fallback, applies(key), k.Only, r.Policy), true
		}
		return fmt.Sprintf("%s: saved value cleared; %s applies %s", what, fallback, applies(key)), false
	}
	text, _, _ := k.parse(value)
	if v.Ignored {
		return fmt.Sprintf("%s saved: %s — but the %s policy is active, which ignores it; it applies %s under the %s policy", what, text, r.Policy, applies(key), k.Only), true
	}
	return fmt.Sprintf("%s saved: %s (applies %s)", what, text, applies(key)), false
}

func (v Value) defaultText() string {
	t, _, _ := v.parse(v.Default)
	return t
}

// applies says when a changed setting takes effect.
func applies(key string) string {
	switch key {
	case "compact":
		return "to the next compaction"
	case "cacheIdleMinutes", "confirmColdPrompt", "reconTokens", "foldNotices":
		return "from now on"
	}
	return "to future folds"
}
