package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// The engine binary is built once per test process, into engineDir, which
// TestMain removes.
var (
	engineOnce sync.Once
	engineDir  string
	enginePath string
	engineErr  error
	engineOut  []byte
)

// TestMain removes the engine build directory after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if engineDir != "" {
		os.RemoveAll(engineDir)
	}
	os.Exit(code)
}

// RepoRoot returns the module root (the parent of this package's directory).
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("e2e: cannot locate the source directory")
	}
	return filepath.Dir(filepath.Dir(file))
}

// EngineBinary builds ./cmd/contextfold once per test process and returns
// the binary's path. It uses the go command on PATH; go test puts its own
// GOROOT/bin first.
func EngineBinary(t testing.TB) string {
	t.Helper()
	root := RepoRoot(t)
	engineOnce.Do(func() {
		engineDir, engineErr = os.MkdirTemp("", "contextfold-e2e-bin-")
		if engineErr != nil {
			return
		}
		enginePath = filepath.Join(engineDir, "contextfold")
		cmd := exec.Command("go", "build", "-o", enginePath, "./cmd/contextfold")
		cmd.Dir = root
		engineOut, engineErr = cmd.CombinedOutput()
	})
	if engineErr != nil {
		t.Fatalf("e2e: build the engine: %v\n%s", engineErr, engineOut)
	}
	return enginePath
}

// WithContextFold returns cfg with the repository's extension
// (extension/index.ts) loaded through -e and CONTEXTFOLD_BIN pointing at a
// freshly built engine. Other CONTEXTFOLD_* variables in cfg.Env are kept.
func WithContextFold(t testing.TB, cfg Config) Config {
	t.Helper()
	cfg.Extension = filepath.Join(RepoRoot(t), "extension", "index.ts")
	env := map[string]string{"CONTEXTFOLD_BIN": EngineBinary(t)}
	for k, v := range cfg.Env {
		env[k] = v
	}
	cfg.Env = env
	return cfg
}
