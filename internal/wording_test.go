package layering_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoPluralHedges: text people and the model read counts plainly ("1
// block", "2 blocks"), never "block(s)". It scans every string the engine
// and the Pi extension can print.
func TestNoPluralHedges(t *testing.T) {
	hedge := regexp.MustCompile(`[A-Za-z]\(s\)`)
	literal := regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|`[^`]*`")
	for _, root := range []string{".", "../cmd", "../extension"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() && (name == "testdata" || name == "test" || name == "testsupport" || name == "node_modules") {
				return filepath.SkipDir
			}
			if d.IsDir() || strings.HasSuffix(name, "_test.go") || !(strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".ts") || strings.HasSuffix(name, ".js")) {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(data), "\n") {
				code := strings.TrimSpace(line)
				if strings.HasPrefix(code, "//") || strings.HasPrefix(code, "*") || !strings.ContainsAny(code, "\"`") {
					continue
				}
				for _, lit := range literal.FindAllString(code, -1) {
					if hedge.MatchString(lit) {
						t.Errorf("%s:%d: %s", path, i+1, lit)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
