package e2e

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/core/version"
)

// The install tests use the npm tarballs `make dist` packed, never the
// checkout: CONTEXTFOLD_DIST names their directory (make test sets it).

const mainPackage = "pi-context-fold"

// maxUnpacked bounds an engine package's unpacked size. It was 10 MB until
// the PostgreSQL store's driver (pgx, with golang.org/x/text for SCRAM)
// added about 4.3 MB to every engine (8.8 to 13.1 MB on linux-x64).
const maxUnpacked = 16 << 20

// distDir returns CONTEXTFOLD_DIST, after checking every tarball in it
// against SHA256SUMS. It skips the test when unset, or fails it under
// CONTEXTFOLD_E2E=1.
func distDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CONTEXTFOLD_DIST")
	if dir == "" {
		msg := "e2e: CONTEXTFOLD_DIST is not set; run make dist and set it to dist/ (make test does both)"
		if os.Getenv("CONTEXTFOLD_E2E") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(sums)) {
		want, name, ok := strings.Cut(strings.TrimSpace(line), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS: bad line %q", line)
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != want {
			t.Fatalf("%s does not match SHA256SUMS", name)
		}
		n++
	}
	if n != 6 {
		t.Fatalf("SHA256SUMS lists %d tarballs, want 6 (5 engines and %s)", n, mainPackage)
	}
	return dir
}

func tarball(t *testing.T, dist, name string) string {
	t.Helper()
	p := filepath.Join(dist, name+"-"+version.Number+".tgz")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// packed lists a tarball's regular files with their sizes and modes.
func packed(t *testing.T, path string) map[string]*tar.Header {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tar.Header{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out[h.Name] = h
	}
}

// TestTarballContents: the engine packages hold one binary each, within
// the size bound, and the Pi package only what Pi runs.
func TestTarballContents(t *testing.T) {
	dist := distDir(t)
	for _, plat := range []string{"darwin-arm64", "darwin-x64", "linux-arm64", "linux-x64", "win32-x64"} {
		exe := "contextfold"
		if strings.HasPrefix(plat, "win32") {
			exe += ".exe"
		}
		files := packed(t, tarball(t, dist, "contextfold-"+plat))
		var names []string
		var size int64
		for n, h := range files {
			names = append(names, n)
			size += h.Size
		}
		want := []string{"package/LICENSE", "package/README.md", "package/bin/" + exe, "package/package.json"}
		if !sameSet(names, want) {
			t.Errorf("contextfold-%s holds %v, want %v", plat, names, want)
		}
		if bin := files["package/bin/"+exe]; bin == nil || bin.Mode&0o111 == 0 {
			t.Errorf("contextfold-%s: the binary is missing or not executable", plat)
		}
		if size > maxUnpacked {
			t.Errorf("contextfold-%s unpacks to %d bytes, over %d", plat, size, maxUnpacked)
		}
		t.Logf("contextfold-%s: %d files, %.2f MB unpacked", plat, len(files), float64(size)/(1<<20))
	}
	files := packed(t, tarball(t, dist, mainPackage))
	var size int64
	allowed := regexp.MustCompile(`^package/(LICENSE|README\.md|package\.json|index\.ts|extension/[a-z]+\.ts|extension/(locate|install|cli)\.js)$`)
	for n, h := range files {
		size += h.Size
		if !allowed.MatchString(n) {
			t.Errorf("%s holds %s, which the user does not run", mainPackage, n)
		}
	}
	for _, must := range []string{"package/index.ts", "package/extension/index.ts", "package/extension/locate.js", "package/extension/install.js", "package/extension/cli.js", "package/LICENSE"} {
		if files[must] == nil {
			t.Errorf("%s lacks %s", mainPackage, must)
		}
	}
	t.Logf("%s: %d files, %.1f KB unpacked", mainPackage, len(files), float64(size)/1024)
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]bool{}
	for _, x := range a {
		seen[x] = true
	}
	for _, x := range b {
		if !seen[x] {
			return false
		}
	}
	return true
}

// hostPlatform is this machine's npm platform name.
func hostPlatform() string { return version.NPMPlatform(runtime.GOOS, runtime.GOARCH) }

// noGoPath is the PATH of a machine without Go: the harness's own base, after
// checking that neither go nor a contextfold is on it.
func noGoPath(t *testing.T, extra ...string) string {
	t.Helper()
	dirs := append(extra, "/usr/bin", "/bin")
	for _, d := range dirs {
		for _, exe := range []string{"go", "contextfold"} {
			if _, err := os.Stat(filepath.Join(d, exe)); err == nil {
				t.Fatalf("%s is on the test's PATH; this machine cannot show an install without Go", filepath.Join(d, exe))
			}
		}
	}
	return strings.Join(dirs, string(os.PathListSeparator))
}

// npmInstall runs npm install of tarballs into a fresh prefix under root,
// with Pi's Node first on a PATH without Go, offline (a fresh cache, so
// nothing can come from the registry), and peers left to Pi as Pi's own
// installs do. It returns the prefix, npm's output and its error.
func npmInstall(t *testing.T, pi Pi, root string, extra []string, tarballs ...string) (string, string, error) {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm: %v", err)
	}
	cli, err := filepath.EvalSymlinks(npm)
	if err != nil {
		t.Fatal(err)
	}
	nodeDir := filepath.Join(root, "node-bin")
	prefix := filepath.Join(root, "prefix")
	for _, d := range []string{nodeDir, prefix, filepath.Join(root, "npm-home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(pi.Node, filepath.Join(nodeDir, "node")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(prefix, "package.json"), []byte(`{"name":"fresh-prefix","private":true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{cli, "install", "--prefix", prefix, "--offline", "--legacy-peer-deps", "--no-audit", "--no-fund"}, extra...)
	cmd := exec.Command(pi.Node, append(args, tarballs...)...)
	cmd.Env = []string{
		"PATH=" + noGoPath(t, nodeDir),
		"HOME=" + filepath.Join(root, "npm-home"),
		"npm_config_cache=" + filepath.Join(root, "npm-cache"),
		"npm_config_update_notifier=false",
	}
	out, err := cmd.CombinedOutput()
	return prefix, string(out), err
}

// installedEnv is a Pi sandbox whose only context-fold is the one `pi
// install` put in its settings from pkgDir: no -e, no CONTEXTFOLD_BIN, Go
// and contextfold off PATH.
func installedEnv(t *testing.T, cfg Config, pkgDir string) *Env {
	t.Helper()
	cfg.Extension = ""
	env := NewEnv(t, cfg)
	noGoPath(t)
	if out, err := env.command(context.Background(), []string{"install", pkgDir}).CombinedOutput(); err != nil {
		t.Fatalf("pi install %s: %v\n%s", pkgDir, err, out)
	}
	return env
}

// printInstalled runs one print-mode turn with the installed packages loaded.
func printInstalled(t *testing.T, env *Env, prompt string, cont bool) Result {
	t.Helper()
	var args []string
	for _, a := range env.Args("text") {
		if a != "--no-extensions" {
			args = append(args, a)
		}
	}
	if cont {
		args = append(args, "-c")
	}
	before := len(env.Server.Requests())
	cmd := env.command(context.Background(), append(args, prompt))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := Result{Env: env, Stdout: stdout.String(), Stderr: stderr.String(), Requests: env.Server.Requests()[before:]}
	if err != nil {
		t.Fatalf("pi %q: %v\nstderr: %s", prompt, err, tail(res.Stderr, 2000))
	}
	return res
}

// TestInstallFromTarballsWithoutGo: the packed tarballs alone, installed
// into a fresh npm prefix on a machine without Go, then `pi install`ed into
// a fresh agent dir, give a session that folds, recalls and unfolds, with
// the engine from the platform package.
func TestInstallFromTarballsWithoutGo(t *testing.T) {
	dist := distDir(t)
	pi := LocatePi(t)
	plat := hostPlatform()
	root := t.TempDir()
	prefix, out, err := npmInstall(t, pi, root, nil, tarball(t, dist, mainPackage), tarball(t, dist, "contextfold-"+plat))
	if err != nil {
		t.Fatalf("npm install: %v\n%s", err, out)
	}
	pkgDir := filepath.Join(prefix, "node_modules", mainPackage)
	engine, err := filepath.EvalSymlinks(filepath.Join(prefix, "node_modules", "contextfold-"+plat, "bin", "contextfold"))
	if err != nil {
		t.Fatalf("npm did not install the engine package: %v", err)
	}
	// The package's bin puts contextfold in node_modules/.bin (on PATH
	// after npm install -g): the launcher runs the platform package's engine.
	cf := installedCLI(t, filepath.Join(root, "node-bin"), filepath.Join(prefix, "node_modules", ".bin", "contextfold"))
	if out, code := cf("version"); code != 0 || !strings.HasPrefix(out, "contextfold "+version.Number+" (build ") {
		t.Fatalf("node_modules/.bin/contextfold version: exit %d\n%s", code, out)
	}
	if out, code := cf("no-such-command"); code != 2 || !strings.Contains(out, `unknown command "no-such-command"`) {
		t.Fatalf("the launcher does not pass the engine's exit code through: exit %d\n%s", code, out)
	}

	ls := &LongSession{Steps: 40}
	env := installedEnv(t, Config{Script: ls, Compaction: noCompaction}, pkgDir)
	res := printInstalled(t, env, "Run gen.sh for every step, then report.", false)
	if strings.Contains(res.Stderr, "[context-fold]") {
		t.Fatalf("context-fold warned: %s", tail(res.Stderr, 1500))
	}
	reqs := ToolRequests(res.Requests)
	folded := 0
	for k := range reqs {
		folded = max(folded, len(foldedCalls(&reqs[k].Request)))
	}
	if folded == 0 {
		t.Fatal("the installed package folded nothing")
	}
	checkRecallAndUnfold(t, env, ls, reqs)

	// The status names the engine that ran: the platform package's binary.
	st := printInstalled(t, env, "/context-fold status", true)
	want := "engine: contextfold " + version.Number + " (build "
	if line := grepLine(st.Stdout+st.Stderr, want); line == "" || !strings.HasSuffix(line, " at "+engine) {
		t.Fatalf("status does not name %s as the engine:\n%s%s", engine, st.Stdout, st.Stderr)
	}
	// An offline tool through the launcher, on the session Pi just wrote.
	sessions := env.Sessions()
	if len(sessions) == 0 {
		t.Fatal("no session file")
	}
	out, code := cf("inspect", sessions[0].Path)
	if m := regexp.MustCompile(`(?m)^(\d+) fold events`).FindStringSubmatch(out); code != 0 || m == nil || m[1] == "0" {
		t.Fatalf("node_modules/.bin/contextfold inspect: exit %d\n%s", code, out)
	}
	t.Logf("%d requests, up to %d blocks folded in one; engine %s", len(reqs), folded, engine)
}

// installedCLI returns a runner of bin, the contextfold npm put in a
// node_modules/.bin, with nodeDir's Node on a PATH without Go (as npm ran),
// giving its combined output and exit code.
func installedCLI(t *testing.T, nodeDir, bin string) func(args ...string) (string, int) {
	t.Helper()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("npm put no contextfold in node_modules/.bin (the package's bin): %v", err)
	}
	home := t.TempDir()
	return func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"PATH=" + noGoPath(t, nodeDir), "HOME=" + home}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s %v: %v", bin, args, err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
}

func grepLine(text, sub string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			return strings.TrimSpace(sc.Text())
		}
	}
	return ""
}

// engineMessages returns context-fold's lines on stderr.
func engineMessages(stderr string) []string {
	var out []string
	for line := range strings.Lines(stderr) {
		if strings.HasPrefix(line, "[context-fold]") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// unfoldedScript is the session checkUnfolded expects: 12 steps, ending
// in "FINAL: done after 12 steps".
func unfoldedScript() *LongSession {
	return &LongSession{Steps: 12, SkipRecall: true, SkipUnfold: true}
}

// checkUnfolded: a session with no usable engine runs as plain Pi — it
// completes, nothing in any request is folded, the one message is the
// given one, and the commands and tools say folding is off without errors.
func checkUnfolded(t *testing.T, env *Env, wantMsg string) {
	t.Helper()
	res := printInstalled(t, env, "Run gen.sh for every step, then report.", false)
	msgs := engineMessages(res.Stderr)
	if len(msgs) != 1 || !strings.Contains(msgs[0], wantMsg) || !strings.HasSuffix(msgs[0], "— no folding this session") {
		t.Fatalf("want one message containing %q, got %q\nstderr: %s", wantMsg, msgs, tail(res.Stderr, 1500))
	}
	reqs := ToolRequests(res.Requests)
	if len(reqs) < 12 {
		t.Fatalf("the session stopped early: %d requests", len(reqs))
	}
	for k := range reqs {
		if n := len(foldedCalls(&reqs[k].Request)); n > 0 {
			t.Fatalf("request %d carries %d folded blocks without an engine", k, n)
		}
	}
	if !strings.Contains(res.Stdout, "FINAL: done after 12 steps") {
		t.Fatalf("no final answer: %s", tail(res.Stdout, 500))
	}
	for _, cmd := range []string{"/context-fold status", "/fold-handoff finish"} {
		r := printInstalled(t, env, cmd, true)
		all := r.Stdout + r.Stderr
		if !strings.Contains(all, "off this session") {
			t.Fatalf("%s does not say context-fold is off:\n%s", cmd, all)
		}
		if n := len(engineMessages(r.Stderr)); n != 1 {
			t.Fatalf("%s: %d context-fold messages, want the one cause: %q", cmd, n, engineMessages(r.Stderr))
		}
		if strings.Contains(strings.ToLower(all), "error") || strings.Contains(all, "failed") {
			t.Fatalf("%s shows an error:\n%s", cmd, all)
		}
	}
}

// TestInstallWithoutEngine: with npm told to skip install scripts (as npm
// 12 does for dependencies) and no engine package, the package installs,
// Pi loads it, and it says once what it tried and how to fix it. With
// scripts on, npm's install of the same tarball fails with that message.
func TestInstallWithoutEngine(t *testing.T) {
	dist := distDir(t)
	pi := LocatePi(t)
	main := tarball(t, dist, mainPackage)
	plat := hostPlatform()

	_, out, err := npmInstall(t, pi, t.TempDir(), nil, main)
	if err == nil {
		t.Fatalf("npm install without an engine package succeeded:\n%s", out)
	}
	wantMsg := "no contextfold engine for " + plat + "; tried CONTEXTFOLD_BIN (not set); contextfold-" + plat + " (not installed); "
	if !strings.Contains(out, mainPackage+": "+wantMsg) || !strings.Contains(out, "Fix: install contextfold-"+plat+"@"+version.Number) {
		t.Fatalf("npm's failure does not carry the message %q:\n%s", wantMsg, out)
	}

	prefix, out, err := npmInstall(t, pi, t.TempDir(), []string{"--ignore-scripts"}, main)
	if err != nil {
		t.Fatalf("npm install --ignore-scripts: %v\n%s", err, out)
	}
	env := installedEnv(t, Config{Script: unfoldedScript(), Compaction: noCompaction}, filepath.Join(prefix, "node_modules", mainPackage))
	checkUnfolded(t, env, wantMsg)
}

// TestInstallMismatchedEngine: an engine of another version, named by
// CONTEXTFOLD_BIN, is refused with one message naming both versions and
// the fix, and the session runs unfolded.
func TestInstallMismatchedEngine(t *testing.T) {
	dist := distDir(t)
	pi := LocatePi(t)
	plat := hostPlatform()
	prefix, out, err := npmInstall(t, pi, t.TempDir(), nil, tarball(t, dist, mainPackage), tarball(t, dist, "contextfold-"+plat))
	if err != nil {
		t.Fatalf("npm install: %v\n%s", err, out)
	}
	old := oldEngine(t, pi.Node, "0.1.0", "0123456789ab")
	env := installedEnv(t, Config{Script: unfoldedScript(), Compaction: noCompaction, Env: map[string]string{"CONTEXTFOLD_BIN": old}}, filepath.Join(prefix, "node_modules", mainPackage))
	checkUnfolded(t, env, fmt.Sprintf("%s (from CONTEXTFOLD_BIN) is contextfold 0.1.0 (build 0123456789ab, protocol 2); this adapter is %s (protocol 2). Fix: point CONTEXTFOLD_BIN at a contextfold %s binary", old, version.Number, version.Number))
}

// oldEngine writes an executable that speaks the protocol's hello as an
// engine of another release would, and then waits for stdin to close.
func oldEngine(t *testing.T, node, ver, build string) string {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "engine.mjs")
	src := fmt.Sprintf(`const b = Buffer.from(JSON.stringify({ method: "hello", params: { protocol: 2, version: %q, build: %q } }));
const h = Buffer.alloc(4); h.writeUInt32LE(b.length); process.stdout.write(Buffer.concat([h, b]));
process.stdin.resume(); process.stdin.on("end", () => process.exit(0));
`, ver, build)
	if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "contextfold")
	if err := os.WriteFile(bin, []byte(fmt.Sprintf("#!/bin/sh\nexec %q %q \"$@\"\n", node, script)), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// npmMajor is the major version of the npm on PATH, the one Pi runs.
func npmMajor(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("npm", "--version").Output()
	if err != nil {
		t.Fatalf("npm --version: %v", err)
	}
	var major int
	fmt.Sscanf(string(out), "%d.", &major)
	return major
}

// registryEnv is a Pi sandbox whose npm talks only to reg, with a fresh cache.
// mergeSettings returns the settings file at path with keys set over it.
func mergeSettings(t *testing.T, path string, keys map[string]any) map[string]any {
	t.Helper()
	var s map[string]any
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &s) != nil {
		t.Fatalf("settings %s: %v", path, err)
	}
	maps.Copy(s, keys)
	return s
}

func registryEnv(t *testing.T, cfg Config, reg *registry) *Env {
	t.Helper()
	cfg.Extension = ""
	cfg.Env = map[string]string{
		"npm_config_registry":        reg.URL,
		"npm_config_cache":           filepath.Join(t.TempDir(), "npm-cache"),
		"npm_config_update_notifier": "false",
	}
	env := NewEnv(t, cfg)
	noGoPath(t)
	return env
}

// TestPiInstallFromRegistry: `pi install npm:pi-context-fold@<version>`, as
// a user runs it, against a loopback registry serving the packed tarballs:
// Pi's npm installs the one engine package whose os/cpu match, and the
// session folds, recalls and unfolds with it. Served without the engine
// packages, the install fails with the one message (npm ≤ 11 runs the
// install check), or the session says it at startup (npm 12 skips it).
func TestPiInstallFromRegistry(t *testing.T) {
	dist := distDir(t)
	plat := hostPlatform()
	spec := "npm:" + mainPackage + "@" + version.Number
	var all []string
	for _, p := range []string{"darwin-arm64", "darwin-x64", "linux-arm64", "linux-x64", "win32-x64"} {
		all = append(all, tarball(t, dist, "contextfold-"+p))
	}
	reg := startRegistry(t, append(all, tarball(t, dist, mainPackage))...)
	ls := &LongSession{Steps: 40}
	env := registryEnv(t, Config{Script: ls, Compaction: noCompaction}, reg)
	if out, err := env.command(context.Background(), []string{"install", spec}).CombinedOutput(); err != nil {
		t.Fatalf("pi install %s: %v\n%s", spec, err, out)
	}
	mods := filepath.Join(env.AgentDir, "npm", "node_modules")
	ents, _ := os.ReadDir(mods)
	var installed []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "contextfold-") {
			installed = append(installed, e.Name())
		}
	}
	if len(installed) != 1 || installed[0] != "contextfold-"+plat {
		t.Fatalf("engine packages installed: %v, want only contextfold-%s", installed, plat)
	}
	// Where the README says a Pi user finds contextfold.
	nodeDir := t.TempDir()
	if err := os.Symlink(LocatePi(t).Node, filepath.Join(nodeDir, "node")); err != nil {
		t.Fatal(err)
	}
	cf := installedCLI(t, nodeDir, filepath.Join(mods, ".bin", "contextfold"))
	if out, code := cf("version"); code != 0 || !strings.HasPrefix(out, "contextfold "+version.Number+" (build ") {
		t.Fatalf("~/.pi/agent/npm/node_modules/.bin/contextfold version: exit %d\n%s", code, out)
	}
	res := printInstalled(t, env, "Run gen.sh for every step, then report.", false)
	if msgs := engineMessages(res.Stderr); len(msgs) != 0 {
		t.Fatalf("context-fold warned: %q", msgs)
	}
	checkRecallAndUnfold(t, env, ls, ToolRequests(res.Requests))
	engine, _ := filepath.EvalSymlinks(filepath.Join(mods, "contextfold-"+plat, "bin", "contextfold"))
	st := printInstalled(t, env, "/context-fold status", true)
	if line := grepLine(st.Stdout+st.Stderr, "engine: contextfold "+version.Number); engine == "" || !strings.HasSuffix(line, " at "+engine) {
		t.Fatalf("status does not name %s:\n%s%s", engine, st.Stdout, st.Stderr)
	}
	t.Logf("npm asked the registry for %v", reg.Asked())

	// Pi's startup listing names the package by its own name.
	env.writeJSON(filepath.Join(env.AgentDir, "settings.json"), mergeSettings(t, filepath.Join(env.AgentDir, "settings.json"), map[string]any{"quietStartup": false}))
	var targs []string
	for _, a := range env.Args("text")[3:] {
		if a != "--no-extensions" {
			targs = append(targs, a)
		}
	}
	u := startTUIArgs(t, env, 120, 40, targs)
	u.wait("[Extensions]", false, 30*time.Second)
	screen := u.pane()
	listed := strings.Fields(screen[strings.Index(screen, "[Extensions]")+len("[Extensions]"):])
	if want := mainPackage + "@" + version.Number; len(listed) == 0 || listed[0] != want {
		t.Fatalf("Pi lists the extension as %q, want %q:\n%s", listed[:min(1, len(listed))], want, screen)
	}
	u.keys("C-d")

	// No engine packages on the registry.
	bare := startRegistry(t, tarball(t, dist, mainPackage))
	env = registryEnv(t, Config{Script: unfoldedScript(), Compaction: noCompaction}, bare)
	out, err := env.command(context.Background(), []string{"install", spec}).CombinedOutput()
	want := "no contextfold engine for " + plat + "; tried CONTEXTFOLD_BIN (not set); contextfold-" + plat + " (not installed); "
	if npmMajor(t) <= 11 {
		if err == nil || !strings.Contains(string(out), mainPackage+": "+want) {
			t.Fatalf("pi install without an engine: err %v, want a failure carrying %q:\n%s", err, want, out)
		}
		return
	}
	if err != nil {
		t.Fatalf("pi install: %v\n%s", err, out)
	}
	checkUnfolded(t, env, want)
}
