// Package layering_test holds the test that keeps internal/'s folders true
// to the architecture: a pure core that the hosts (Pi, the proxy) and the
// bench build on, hosts that do not reach into each other, and test support
// that only tests import.
package layering_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/contextfold/contextfold"

// pkg is one package of the module as `go list` reports it, without its
// tests: its direct imports and its transitive dependencies.
type pkg struct {
	imports []string
	deps    []string
}

// role is the top folder under internal/ that path sits in, "cmd" for the
// binary, "e2e" for the end-to-end tests, or "" when it is none of them.
func role(path string) string {
	if path == module {
		return ""
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return "std"
	}
	first, rest, _ := strings.Cut(rel, "/")
	switch first {
	case "cmd", "e2e":
		return first
	case "internal":
		r, _, _ := strings.Cut(rest, "/")
		switch r {
		case "core", "pi", "proxy", "store", "bench", "testsupport":
			return r
		}
	}
	return ""
}

// forbidden is what a role may not depend on, transitively.
var forbidden = map[string][]string{
	"core":  {"pi", "proxy", "store", "bench", "testsupport", "cmd"},
	"store": {"pi", "proxy", "bench", "testsupport", "cmd"},
	"pi":    {"proxy", "bench", "testsupport", "cmd"},
	"proxy": {"pi", "bench", "testsupport", "cmd"},
	// The bench may read a Pi session file (the demo recalls from one) but
	// never goes through the proxy.
	"bench":       {"proxy", "testsupport", "cmd"},
	"cmd":         {"testsupport"},
	"testsupport": {"cmd"},
}

// impure are the standard packages the core may not import: the core has
// no clock, no randomness and no I/O, so the same input always gives the
// same bytes.
func impure(std string) bool {
	for _, p := range []string{"os", "time", "net", "syscall", "log", "math/rand", "crypto/rand", "path/filepath", "io/ioutil", "plugin", "unsafe"} {
		if std == p || strings.HasPrefix(std, p+"/") {
			return true
		}
	}
	return false
}

// violations lists every way the graph breaks the layering, one line each.
func violations(graph map[string]pkg) []string {
	var out []string
	for _, path := range slices.Sorted(func(yield func(string) bool) {
		for p := range graph {
			if !yield(p) {
				return
			}
		}
	}) {
		p := graph[path]
		r := role(path)
		if r == "" {
			out = append(out, path+" is in no role's folder (internal/{core,pi,proxy,store,bench,testsupport})")
			continue
		}
		for _, d := range p.deps {
			switch rd := role(d); {
			case rd == "":
				out = append(out, path+" ("+r+") depends on "+d+", which is in no role's folder")
			case slices.Contains(forbidden[r], rd):
				out = append(out, path+" ("+r+") depends on "+d+" ("+rd+")")
			}
		}
		if r == "core" {
			for _, imp := range p.imports {
				if role(imp) == "std" && impure(imp) {
					out = append(out, path+" (core) imports "+imp)
				}
			}
		}
	}
	return out
}

// moduleGraph is the module's packages as `go list -deps` reports them,
// on every OS the binary is built for (a file for one OS may import what
// another's may not).
func moduleGraph(t *testing.T) map[string]pkg {
	t.Helper()
	graph := map[string]pkg{}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}", module+"/...")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "GOOS="+goos)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GOOS=%s go list: %v", goos, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Split(line, "\t")
			if len(f) != 3 || role(f[0]) == "std" || f[0] == module+"/internal" { // the last: this test's own package
				continue
			}
			p := graph[f[0]]
			p.imports = union(p.imports, strings.Fields(f[1]))
			p.deps = union(p.deps, strings.Fields(f[2]))
			graph[f[0]] = p
		}
	}
	return graph
}

// union is a and b without repeats, sorted.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

func TestLayering(t *testing.T) {
	graph := moduleGraph(t)
	if len(graph) < 30 {
		t.Fatalf("go list found %d packages of the module; want them all", len(graph))
	}
	for _, r := range []string{"core", "pi", "proxy", "store", "bench", "testsupport", "cmd"} {
		n := 0
		for p := range graph {
			if role(p) == r {
				n++
			}
		}
		if n == 0 {
			t.Errorf("no package in role %s: the test would pass vacuously", r)
		}
	}
	for _, v := range violations(graph) {
		t.Error(v)
	}
}

// TestLayeringCatches checks that the rule fails on the graphs it must
// refuse, so TestLayering passing means something.
func TestLayeringCatches(t *testing.T) {
	const in = module + "/internal/"
	ok := map[string]pkg{
		in + "core/engine":          {imports: []string{"fmt", in + "core/block"}, deps: []string{"fmt", "os", in + "core/block"}},
		in + "core/block":           {imports: []string{"strings"}},
		in + "store/jsonl":          {imports: []string{"os", in + "core/rawjson"}, deps: []string{in + "core/rawjson"}},
		in + "pi/service":           {imports: []string{"os", in + "core/engine", in + "store/jsonl"}, deps: []string{in + "core/engine", in + "store/jsonl"}},
		in + "proxy":                {imports: []string{"net/http", in + "core/engine"}, deps: []string{in + "core/engine"}},
		in + "bench/demo":           {deps: []string{in + "pi/ledger", in + "core/engine"}},
		in + "testsupport/fakellm":  {imports: []string{"net/http"}},
		module + "/cmd/contextfold": {deps: []string{in + "pi/service", in + "proxy"}},
	}
	if v := violations(ok); len(v) != 0 {
		t.Fatalf("a sound graph is refused: %q", v)
	}
	for _, tc := range []struct {
		name string
		path string
		pkg  pkg
		want string
	}{
		{"core imports a Pi package", in + "core/recall", pkg{deps: []string{in + "pi/ledger"}}, "core/recall (core) depends on " + in + "pi/ledger (pi)"},
		{"core reaches the proxy through another", in + "core/engine", pkg{deps: []string{in + "core/block", in + "proxy/foldstore"}}, "(core) depends on " + in + "proxy/foldstore (proxy)"},
		{"core imports a store", in + "core/recall", pkg{deps: []string{in + "store/jsonl"}}, "(core) depends on " + in + "store/jsonl"},
		{"core reads the clock", in + "core/digest", pkg{imports: []string{"time"}}, "(core) imports time"},
		{"core opens a file", in + "core/digest", pkg{imports: []string{"os"}}, "(core) imports os"},
		{"core listens", in + "core/digest", pkg{imports: []string{"net/http"}}, "(core) imports net/http"},
		{"Pi imports the proxy", in + "pi/service", pkg{deps: []string{in + "proxy/mcp"}}, "(pi) depends on " + in + "proxy/mcp (proxy)"},
		{"the proxy imports Pi", in + "proxy", pkg{deps: []string{in + "pi/ledger"}}, "(proxy) depends on " + in + "pi/ledger (pi)"},
		{"a host imports the bench", in + "proxy/mcp", pkg{deps: []string{in + "bench"}}, "(proxy) depends on " + in + "bench (bench)"},
		{"the binary imports test support", module + "/cmd/contextfold", pkg{deps: []string{in + "testsupport/fakellm"}}, "(cmd) depends on " + in + "testsupport/fakellm"},
		{"a package outside the roles", in + "util", pkg{}, "is in no role's folder"},
		{"a package at the module's root", module, pkg{imports: []string{"os"}}, "is in no role's folder"},
		{"core reaches the module's root", in + "core/risk", pkg{deps: []string{module}}, "(core) depends on " + module + ", which is in no role's folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := map[string]pkg{tc.path: tc.pkg}
			for p, v := range ok {
				if p != tc.path {
					bad[p] = v
				}
			}
			v := violations(bad)
			if len(v) != 1 || !strings.Contains(v[0], tc.want) {
				t.Fatalf("violations = %q, want one containing %q", v, tc.want)
			}
		})
	}
}
