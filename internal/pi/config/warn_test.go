package config

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/policy"
)

// oneWarning fails unless r has exactly one warning holding every want.
func oneWarning(t *testing.T, r Resolved, want ...string) string {
	t.Helper()
	if len(r.Warnings) != 1 {
		t.Fatalf("want one warning, got %q", r.Warnings)
	}
	w := r.Warnings[0]
	for _, s := range want {
		if !strings.Contains(w, s) {
			t.Fatalf("warning %q lacks %q", w, s)
		}
	}
	for _, s := range []string{"map[", "json.", "Go value", "RawMessage"} {
		if strings.Contains(w, s) {
			t.Fatalf("warning %q shows Go internals (%q)", w, s)
		}
	}
	return w
}

// TestInvalidValueNamesReplacement: a warning names the variable or key,
// the bad value, why, and the value used instead with where it came from.
func TestInvalidValueNamesReplacement(t *testing.T) {
	oneWarning(t, Resolve(map[string]string{"CONTEXTFOLD_TAIL": "abc"}, nil),
		`CONTEXTFOLD_TAIL="abc"`, "want tokens ≥ 0", "using the default 20000")
	oneWarning(t, Resolve(map[string]string{"CONTEXTFOLD_TAIL": "-5"}, []byte(`{"tail":12000}`)),
		`CONTEXTFOLD_TAIL="-5"`, "want tokens ≥ 0", "using 12000 from context-fold.json")
	oneWarning(t, Resolve(map[string]string{"CONTEXTFOLD_TAIL": "8000"}, []byte(`{"tail":"lots"}`)),
		`context-fold.json "tail": "lots"`, "want tokens ≥ 0", "using 8000 from CONTEXTFOLD_TAIL")
	oneWarning(t, Resolve(nil, []byte(`{"foldAt":1.5}`)),
		`"foldAt": 1.5`, "want a number in (0, 1]", "using the default 0.45")
	// Bad in both places: one line for the one setting, not two.
	r := Resolve(map[string]string{"CONTEXTFOLD_POLICY": "greedy"}, []byte(`{"policy":"fast"}`))
	oneWarning(t, r, `CONTEXTFOLD_POLICY="greedy" and context-fold.json "policy": "fast" are invalid`, "want economic or ladder", "using the default economic")
	if r.Policy != "economic" {
		t.Fatalf("policy %q", r.Policy)
	}
}

// TestEmptyEnvIsUnset: an empty variable is no variable.
func TestEmptyEnvIsUnset(t *testing.T) {
	r := Resolve(map[string]string{"CONTEXTFOLD_TAIL": "", "CONTEXTFOLD_POLICY": "  "}, []byte(`{"tail":12000,"foldAt":null}`))
	if len(r.Warnings) != 0 || r.Knobs.Tail != 12000 || r.Policy != "economic" || r.Knobs.FoldAt != policy.DefaultKnobs.FoldAt {
		t.Fatalf("%+v", r)
	}
	if v, _ := r.Value("tail"); v.Source != File {
		t.Fatalf("tail from %s", v.Source)
	}
}

// TestCorruptFile: a plain message with the path and where the JSON
// breaks; the file's settings are ignored and the message says what is
// used instead.
func TestCorruptFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	os.WriteFile(path, []byte("{\n  \"tail\": 12000,\n  \"foldAt\" 0.3\n}\n"), 0o644)
	r := Load(map[string]string{"CONTEXTFOLD_POLICY": "ladder"}, path)
	oneWarning(t, r, path+" is not valid JSON (line 3, column 12:", "its settings are ignored, using the defaults and CONTEXTFOLD_POLICY")
	if r.Knobs != policy.DefaultKnobs || r.Policy != "ladder" {
		t.Fatalf("%+v", r)
	}
	os.WriteFile(path, []byte(`[{"tail":5}]`), 0o644)
	oneWarning(t, Load(nil, path), path+" is not a JSON object of settings (it holds a list); its settings are ignored, using the defaults")
	os.WriteFile(path, []byte(`{"tail":`), 0o644)
	oneWarning(t, Load(nil, path), "is not valid JSON (line 1, column 8: unexpected end of JSON input)")
	os.WriteFile(path, []byte("\xef\xbb\xbf{\"tail\":5}"), 0o644)
	if r := Load(nil, path); len(r.Warnings) != 0 || r.Knobs.Tail != 5 {
		t.Fatalf("a BOM: %+v", r)
	}
	os.WriteFile(path, []byte(" \n"), 0o644)
	if r := Load(nil, path); len(r.Warnings) != 0 {
		t.Fatalf("a blank file: %q", r.Warnings)
	}
	if r := Load(nil, filepath.Join(dir, "none", FileName)); len(r.Warnings) != 0 {
		t.Fatalf("a missing file: %q", r.Warnings)
	}
	// Save refuses to overwrite it, in the same words.
	os.WriteFile(path, []byte(`[1]`), 0o644)
	err := Save(path, "tail", "5", "")
	if err == nil || !strings.Contains(err.Error(), "is not a JSON object of settings (it holds a list); not overwriting it") || strings.Contains(err.Error(), "map[") {
		t.Fatalf("save over a list: %v", err)
	}
}

// TestUnusableFile: a directory or an unreadable file at the path is
// reported, not silently taken for no file.
func TestUnusableFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	os.Mkdir(path, 0o755)
	oneWarning(t, Load(nil, path), path+" is a directory, not a settings file; its settings are ignored, using the defaults")
	if err := Save(path, "tail", "5", ""); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("save onto a directory: %v", err)
	}
	// A path through a file: not absent, but unreadable.
	notDir := filepath.Join(dir, "plain")
	os.WriteFile(notDir, nil, 0o644)
	under := filepath.Join(notDir, FileName)
	oneWarning(t, Load(nil, under), under+" cannot be read (not a directory); its settings are ignored")
	if runtime.GOOS == "windows" || os.Geteuid() == 0 {
		return // permissions do not bind
	}
	locked := filepath.Join(dir, "locked.json")
	os.WriteFile(locked, []byte(`{}`), 0o000)
	oneWarning(t, Load(nil, locked), locked+" cannot be read (permission denied)")
}

// TestUnknownNames: a misspelled key or variable is reported once, with
// the nearest known name when one is close.
func TestUnknownNames(t *testing.T) {
	tial := "CONTEXTFOLD_" + "TIAL" // split, so the source scan does not take it for a name the code reads
	oneWarning(t, Resolve(map[string]string{tial: "8000"}, nil), tial+" is not a context-fold variable; ignoring it — did you mean CONTEXTFOLD_TAIL?")
	lower := "CONTEXTFOLD_" + "fold_at"
	oneWarning(t, Resolve(map[string]string{lower: "0.3"}, nil), "did you mean CONTEXTFOLD_FOLD_AT?")
	far := "CONTEXTFOLD_" + "WHATEVER"
	if w := oneWarning(t, Resolve(map[string]string{far: "1"}, nil), far+" is not a context-fold variable"); strings.Contains(w, "did you mean") {
		t.Fatalf("a far name gets a guess: %q", w)
	}
	known := map[string]string{"CONTEXTFOLD_BIN": "/x", "CONTEXTFOLD_E2E": "1", "CONTEXTFOLD_DUMP": "/d", "HOME": "/h"}
	if r := Resolve(known, nil); len(r.Warnings) != 0 {
		t.Fatalf("known variables flagged: %q", r.Warnings)
	}
	oneWarning(t, Resolve(nil, []byte(`{"tial":8000,"_comment":"mine","$schema":"x"}`)), `context-fold.json "tial" is not a context-fold setting; ignoring it — did you mean "tail"?`)
	oneWarning(t, Resolve(nil, []byte(`{"FoldAt":0.3}`)), `did you mean "foldAt"?`)
	oneWarning(t, Resolve(nil, []byte(`{"providerCacheIdleMinute":{"a":5}}`)), `did you mean "providerCacheIdleMinutes"?`)
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"TIAL", "TAIL", 1}, {"TAIL", "TAIL", 0}, {"", "ABC", 3}, {"FOLDAT", "FOLD_AT", 1}, {"KITTEN", "SITTING", 3}} {
		if got := distance(c.a, c.b); got != c.d {
			t.Errorf("distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

// TestMenuText: the settings rows and prompts say when the environment
// overrides the saved value, and the confirmation says so too.
func TestMenuText(t *testing.T) {
	r := Resolve(map[string]string{"CONTEXTFOLD_TAIL": "8000", "CONTEXTFOLD_POLICY": "ladder"}, []byte(`{"tail":12000,"foldAt":0.3}`))
	rows := map[string]Value{}
	for _, v := range r.Values {
		rows[v.Key] = v
	}
	for key, want := range map[string]string{
		"tail":       "Protected tail (tail): 8000 (CONTEXTFOLD_TAIL overrides saved 12000)",
		"policy":     "Fold policy (policy): ladder (CONTEXTFOLD_POLICY)",
		"foldAt":     "First fold at (foldAt): 0.3 (saved)",
		"foldStep":   "Fold step (foldStep): 0.12",
		"coldFoldAt": "Cold first fold at (coldFoldAt): 0.25",
	} {
		if rows[key].Row != want {
			t.Errorf("%s row %q, want %q", key, rows[key].Row, want)
		}
	}
	if p := rows["tail"].Prompt; !strings.Contains(p, "CONTEXTFOLD_TAIL=8000 overrides what is saved") || !strings.Contains(p, "'default' clears") {
		t.Errorf("tail prompt %q", p)
	}
	if p := rows["foldAt"].Prompt; p != "First fold at — a number in (0, 1] (now 0.3; 'default' clears the saved value)" {
		t.Errorf("foldAt prompt %q", p)
	}
	for _, c := range []struct {
		key, value string
		want       string
		override   bool
	}{
		{"tail", "12000", "Protected tail saved: 12000 — but CONTEXTFOLD_TAIL=8000 overrides it in this session; the saved value applies once it is unset", true},
		{"tail", "default", "Protected tail: saved value cleared — but CONTEXTFOLD_TAIL=8000 overrides it in this session; the default 20000 applies once it is unset", true},
		{"foldAt", "0.30", "First fold at saved: 0.3 (applies to future folds)", false},
		{"foldAt", "default", "First fold at: saved value cleared; the default 0.45 applies to future folds", false},
		{"compact", "NATIVE", "Hard compaction saved: native (applies to the next compaction)", false},
		{"cacheIdleMinutes", "5", "Cache idle minutes saved: 5 (applies from now on)", false},
	} {
		got, override := r.Saved(c.key, c.value, "")
		if got != c.want || override != c.override {
			t.Errorf("Saved(%s, %s) = %q, %v; want %q, %v", c.key, c.value, got, override, c.want, c.override)
		}
	}
	// Under the default (economic) policy a ladder-only setting is marked
	// as ignored, and saving it says so instead of "applies to future folds".
	econ := Resolve(nil, nil)
	v, _ := econ.Value("coldFoldAt")
	if want := "Cold first fold at (coldFoldAt): 0.25 — ignored: ladder policy only, the economic policy is active"; !v.Ignored || v.Row != want {
		t.Errorf("coldFoldAt row under economic %q (ignored %v), want %q", v.Row, v.Ignored, want)
	}
	if got, warn := econ.Saved("coldFoldAt", "0.2", ""); got != "Cold first fold at saved: 0.2 — but the economic policy is active, which ignores it; it applies to future folds under the ladder policy" || !warn {
		t.Errorf("Saved(coldFoldAt) under economic = %q, %v", got, warn)
	}
	for _, v := range econ.Values {
		if v.Key != "coldFoldAt" && v.Ignored {
			t.Errorf("%s is marked ignored under the economic policy", v.Key)
		}
	}
}

// TestLines: the effective settings list every setting by its file key
// with its value and source: default, file, or the environment (naming
// the variable and the saved value it overrides), and marks what the
// active policy ignores.
func TestLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	os.WriteFile(path, []byte(`{"tail":12000,"foldAt":0.3}`), 0o644)
	r := Load(map[string]string{"CONTEXTFOLD_TAIL": "8000"}, path)
	text := strings.Join(r.Lines(path), "\n")
	for _, want := range []string{
		"file: " + path + " · precedence",
		"tail = 8000",
		"environment CONTEXTFOLD_TAIL (the file's 12000 is overridden) · Protected tail",
		"foldAt = 0.3",
		"  file · First fold at",
		"policy = economic",
		"  default · Fold policy",
		"default; ignored: ladder policy only · Cold first fold at",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "\n  "); n != len(Knobs) {
		t.Errorf("%d setting lines, want %d:\n%s", n, len(Knobs), text)
	}
}
