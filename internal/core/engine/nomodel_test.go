package engine

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoNetworkInTheCore guards docs/DESIGN.md §8.7 (no model call on any
// path) structurally: the engine and everything it imports must not link a
// network or HTTP client at all.
func TestNoNetworkInTheCore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net" || strings.HasPrefix(dep, "net/") || strings.HasPrefix(dep, "crypto/tls") {
			t.Errorf("the engine depends on %s", dep)
		}
	}
}
