package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestKnownEnvCoversSource: every CONTEXTFOLD_* name the repository's code,
// tests and scripts mention is known (a knob or in OtherEnv), so a variable
// that something reads is never reported as unknown. A test that needs an
// unknown name builds it from parts ("CONTEXTFOLD_" + "TIAL").
func TestKnownEnvCoversSource(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`CONTEXTFOLD_[A-Z0-9_]+`)
	found := map[string]string{}   // name → first file
	elsewhere := map[string]bool{} // named outside this package's list
	for _, dir := range []string{"cmd", "internal", "extension", "e2e", ".ci"} {
		filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() {
				if d.Name() == "node_modules" || d.Name() == ".cache" {
					return filepath.SkipDir
				}
				return nil
			}
			if info, err := d.Info(); err != nil || info.Size() > 4<<20 {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			for _, m := range name.FindAllString(string(data), -1) {
				if _, ok := found[m]; !ok {
					found[m] = rel
				}
				if filepath.ToSlash(rel) != "internal/pi/config/names.go" {
					elsewhere[m] = true
				}
			}
			return nil
		})
	}
	if len(found) < len(Knobs) {
		t.Fatalf("the scan of %s found only %d names", root, len(found))
	}
	known := KnownEnv()
	var missing []string
	for m, file := range found {
		if !contains(known, m) {
			missing = append(missing, m+" (in "+file+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("read by the source but not in config.OtherEnv, so reported as unknown: %s", strings.Join(missing, ", "))
	}
	// And the list holds nothing the source no longer mentions.
	for _, e := range OtherEnv {
		if !elsewhere[e.Name] {
			t.Errorf("config.OtherEnv lists %s, which no source mentions", e.Name)
		}
	}
}

// TestDocumented: docs/CONFIGURATION.md has a row for every knob, with its
// variable, its file key and its default, and one for every other
// variable the adapter or the engine reads (the tests' own are not for users).
func TestDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "CONFIGURATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // variable → its row
	for _, line := range strings.Split(string(data), "\n") {
		if m := regexp.MustCompile("^\\| `(CONTEXTFOLD[A-Z0-9_]*)` \\|").FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	for _, k := range Knobs {
		row, ok := rows[k.Env]
		if !ok {
			t.Errorf("docs/CONFIGURATION.md has no row for %s", k.Env)
			continue
		}
		if want := "| `" + k.Env + "` | `" + k.Key + "` | " + k.Default + " |"; !strings.HasPrefix(row, want) {
			t.Errorf("docs/CONFIGURATION.md: the row of %s does not start %q:\n%s", k.Env, want, row)
		}
	}
	for _, e := range OtherEnv {
		user := strings.HasPrefix(e.What, "adapter:") || strings.HasPrefix(e.What, "engine:")
		if _, ok := rows[e.Name]; user && !ok {
			t.Errorf("docs/CONFIGURATION.md has no row for %s (%s)", e.Name, e.What)
		}
	}
}
