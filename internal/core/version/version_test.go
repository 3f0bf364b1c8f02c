package version

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The platforms the issue promises prebuilt engines for.
var wantPlatforms = []string{"darwin-arm64", "darwin-x64", "linux-arm64", "linux-x64", "win32-x64"}

// TestPackageJSON: the npm package carries this version and pins exactly
// this version of one engine package per platform.
func TestPackageJSON(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Version  string            `json:"version"`
		Optional map[string]string `json:"optionalDependencies"`
		Deps     map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(data, &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.Version != Number {
		t.Errorf("package.json version %q, engine %q: bump both together", pkg.Version, Number)
	}
	var plats []string
	for name, v := range pkg.Optional {
		p, ok := strings.CutPrefix(name, "contextfold-")
		if !ok {
			t.Errorf("optional dependency %q is not an engine package", name)
			continue
		}
		plats = append(plats, p)
		if v != Number {
			t.Errorf("%s is pinned to %q, not exactly %q", name, v, Number)
		}
	}
	slices.Sort(plats)
	if !slices.Equal(plats, wantPlatforms) {
		t.Errorf("engine packages for %v, want %v", plats, wantPlatforms)
	}
	if len(pkg.Deps) != 0 {
		t.Errorf("runtime dependencies %v: the adapter must need none", pkg.Deps)
	}
}

func TestNPMPlatform(t *testing.T) {
	for _, c := range []struct{ goos, goarch, want string }{
		{"linux", "amd64", "linux-x64"},
		{"linux", "arm64", "linux-arm64"},
		{"darwin", "amd64", "darwin-x64"},
		{"darwin", "arm64", "darwin-arm64"},
		{"windows", "amd64", "win32-x64"},
		{"freebsd", "386", "freebsd-ia32"},
	} {
		if got := NPMPlatform(c.goos, c.goarch); got != c.want {
			t.Errorf("NPMPlatform(%s, %s) = %q, want %q", c.goos, c.goarch, got, c.want)
		}
	}
}

func TestBuild(t *testing.T) {
	b := Build()
	if b == "" {
		t.Fatal("empty build id")
	}
	build = "abc123"
	defer func() { build = "" }()
	if Build() != "abc123" || !strings.Contains(String(), "build abc123") || !strings.HasPrefix(String(), "contextfold "+Number+" ") {
		t.Fatalf("String() = %q", String())
	}
}
