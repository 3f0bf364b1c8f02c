package e2e

// Keyless end-to-end runs of three real coding-agent CLIs against the fake
// model of internal/testsupport/fakellm (fakellm.ClientSession: five shell turns, then a
// final text), each headless, with a minimal environment and every file it
// writes under one run dir, on 127.0.0.1 only:
//
//	Claude Code  @anthropic-ai/claude-code 2.1.332  claude -p       POST /v1/messages?beta=true
//	Codex        @openai/codex 0.169.1              codex exec      POST /v1/responses
//	opencode     opencode-ai 1.18.33                opencode run    POST /v1/chat/completions
//
// .ci/setup-clients.sh installs them and prints CONTEXTFOLD_CLAUDE,
// CONTEXTFOLD_CODEX, CONTEXTFOLD_OPENCODE and CONTEXTFOLD_OPENCODE_SEED;
// without them the tests skip, unless CONTEXTFOLD_E2E=1 (then they fail).
// The recipe (environment, flags, config files, the clients' quirks) is the
// one shared/clients/README.md verified; the comments below say why each
// piece is there.
//
// Each test has two subtests: "direct" (client -> fake) and "proxy" (client
// -> tap -> contextfold proxy -> fake), where the tap is an in-process
// recording pass-through that captures what the client sent, so the bodies
// the fake received can be compared byte for byte with it.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/testsupport/fakellm"
)

// clientTurns is the number of shell turns of every client session.
const clientTurns = 5

// clientPrompt is the user prompt of every client session.
const clientPrompt = "Run the build and summarise the errors."

// clientTimeout bounds one client run; longClientTimeout one of the runs
// of 150 steps and more (runOpts.long), which take 0.1 to 0.6 s a step
// with the machine busy.
const (
	clientTimeout     = 3 * time.Minute
	longClientTimeout = 10 * time.Minute
)

const howToRunClients = `e2e: %s is not set; run: eval "$(.ci/setup-clients.sh)" && go test ./e2e -run Keyless`

// locateClient returns the absolute path in envVar. When it is unset it
// skips the test, or fails it when CONTEXTFOLD_E2E=1 (CI).
func locateClient(t *testing.T, envVar string) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("e2e: the client runs are recorded on Linux only")
	}
	p := os.Getenv(envVar)
	required := os.Getenv("CONTEXTFOLD_E2E") == "1"
	if p == "" {
		if required {
			t.Fatalf(howToRunClients+" (CONTEXTFOLD_E2E=1 requires it)", envVar)
		}
		t.Skipf(howToRunClients, envVar)
	}
	if testing.Short() && !required {
		t.Skip("e2e: skipped in -short mode")
	}
	if !filepath.IsAbs(p) {
		t.Fatalf("e2e: %s=%q must be an absolute path", envVar, p)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("e2e: %s: %v (re-run .ci/setup-clients.sh)", envVar, err)
	}
	return p
}

// clientPath is PATH for the clients, which run with nothing else from
// this process's environment: Node's folder first (Codex's launcher is a
// Node script), then the system folders (the shell tools need sh, seq).
func clientPath() string {
	node := os.Getenv("CONTEXTFOLD_NODE")
	if node == "" {
		node, _ = exec.LookPath("node")
	}
	p := "/usr/local/bin:/usr/bin:/bin"
	if node != "" {
		p = filepath.Dir(node) + ":" + p
	}
	return p
}

// runDir is one client run's folder: home/, work/, tmp/ and the client's
// files. Its path is kept short: Claude Code puts a messaging socket under
// $TMPDIR/cc-socks/ and falls back to /tmp/cc-socks-<uid>/ when the socket
// path would exceed 103 bytes, so t.TempDir() is used only when it is
// short, else a folder straight under /tmp (removed when the test ends).
type runDir struct {
	Root, Home, Work, Tmp string
}

func newRunDir(t *testing.T) runDir {
	t.Helper()
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	if len(root) > 48 {
		d, err := os.MkdirTemp("/tmp", "cfc")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		root = d
	}
	d := runDir{Root: root, Home: filepath.Join(root, "home"), Work: filepath.Join(root, "work"), Tmp: filepath.Join(root, "tmp")}
	for _, p := range []string{d.Home, d.Work, d.Tmp} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// client describes how one CLI is run against a base URL.
type client struct {
	// name is used in logs and file names.
	name string
	// binEnv names the variable with the CLI's path.
	binEnv string
	// prepare writes the client's config into d and returns its
	// environment (besides PATH, HOME, TMPDIR, TERM, LANG) and arguments;
	// origin is "http://127.0.0.1:PORT" of the server the client talks to,
	// mcp the argv of context-fold's MCP server to configure (nil: none).
	prepare func(t *testing.T, d runDir, origin string, mcp []string) (env map[string]string, args []string)
}

// claudeCode: `claude -p` with stream-json output. The key only has to be
// non-empty (it is sent as x-api-key). CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC
// stops the HEAD /api/hello on the base URL and the lookups of
// api.anthropic.com (bootstrap, fast-mode status, MCP registry); the
// DISABLE_* flags stop the updater, telemetry and error reports. A per-run
// CLAUDE_CODE_TMPDIR: Claude Code refuses a /tmp/claude-<uid> made by
// another user. --dangerously-skip-permissions is refused as root, so Bash
// is pre-approved with --allowedTools (works for any user).
var claudeCode = client{
	name:   "claude",
	binEnv: "CONTEXTFOLD_CLAUDE",
	prepare: func(t *testing.T, d runDir, origin string, mcp []string) (map[string]string, []string) {
		env := map[string]string{
			"CLAUDE_CODE_TMPDIR":                       d.Tmp,
			"CLAUDE_CONFIG_DIR":                        filepath.Join(d.Home, ".claude"),
			"ANTHROPIC_BASE_URL":                       origin,
			"ANTHROPIC_API_KEY":                        "sk-ant-fake-key-for-local-tests",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			"DISABLE_AUTOUPDATER":                      "1",
			"DISABLE_TELEMETRY":                        "1",
			"DISABLE_ERROR_REPORTING":                  "1",
			"DISABLE_BUG_COMMAND":                      "1",
		}
		allowed := "Bash"
		var mcpArgs []string
		if mcp != nil {
			cfg := filepath.Join(d.Root, "mcp.json")
			writeJSONFile(t, cfg, map[string]any{"mcpServers": map[string]any{"contextfold": map[string]any{"type": "stdio", "command": mcp[0], "args": mcp[1:]}}})
			mcpArgs = []string{"--mcp-config", cfg, "--strict-mcp-config"}
			allowed += " mcp__contextfold__recall_folded mcp__contextfold__unfold"
			// MCP tools are otherwise deferred behind ToolSearch.
			env["ENABLE_TOOL_SEARCH"] = "false"
		}
		args := append([]string{"-p", clientPrompt, "--allowedTools", allowed,
			"--output-format", "stream-json", "--verbose", "--debug-file", filepath.Join(d.Root, "claude-debug.log")}, mcpArgs...)
		return env, args
	},
}

// codex: `codex exec --json` with a config.toml declaring the fake as a
// Responses provider (wire_api "chat" is refused by this version). gpt-5.5
// is a slug of the bundled model catalog (no "unknown model" warnings).
// plugins = false and analytics off stop the curated-plugin sync (github.com,
// chatgpt.com: a 5 s detour) and ab.chatgpt.com. The key comes from env_key
// and is sent as a bearer token.
var codex = client{
	name:   "codex",
	binEnv: "CONTEXTFOLD_CODEX",
	prepare: func(t *testing.T, d runDir, origin string, mcp []string) (map[string]string, []string) {
		codexHome := filepath.Join(d.Home, ".codex")
		model, servers := "gpt-5.5", ""
		if mcp != nil {
			// A model outside the bundled catalog gets its MCP tools
			// declared up front instead of behind tool_search.
			model = "fake-model"
			q, _ := json.Marshal(mcp[0])
			a, _ := json.Marshal(mcp[1:])
			servers = "\n[mcp_servers.contextfold]\ncommand = " + string(q) + "\nargs = " + string(a) + "\n"
		}
		writeFile(t, filepath.Join(codexHome, "config.toml"), `model = "`+model+`"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false

[model_providers.fake]
name = "Fake"
base_url = "`+origin+`/v1"
env_key = "FAKE_OPENAI_API_KEY"
wire_api = "responses"
`+servers)
		env := map[string]string{
			"CODEX_HOME":          codexHome,
			"FAKE_OPENAI_API_KEY": "sk-fake-key-for-local-tests",
			"RUST_LOG":            "warn",
		}
		return env, []string{"exec", "--skip-git-repo-check", "--json", clientPrompt}
	},
}

// opencode: `opencode run --auto` (auto-approves permissions) with an
// opencode.json whose provider is the bundled @ai-sdk/openai-compatible.
// The OPENCODE_DISABLE_* flags stop the model catalog fetch
// (models.opencode.ai), updates, default plugins, LSP downloads and
// sharing; the config dir is a copy of the pre-installed seed, else opencode
// installs @opencode-ai/plugin from the npm registry at every start. The
// prompt goes as separate words: opencode re-quotes a single argument with
// spaces, and the model would see it in literal double quotes. The log level
// is given once (--log-level twice crashes its option parser).
var opencode = client{
	name:   "opencode",
	binEnv: "CONTEXTFOLD_OPENCODE",
	prepare: func(t *testing.T, d runDir, origin string, mcp []string) (map[string]string, []string) {
		seed := locateClient(t, "CONTEXTFOLD_OPENCODE_SEED")
		cfg := filepath.Join(d.Root, "opencode.json")
		conf := map[string]any{
			"$schema":     "https://opencode.ai/config.json",
			"model":       "fake/fake-model",
			"small_model": "fake/fake-model",
			"autoupdate":  false,
			"share":       "disabled",
			"provider": map[string]any{"fake": map[string]any{
				"npm":     "@ai-sdk/openai-compatible",
				"name":    "Fake",
				"options": map[string]any{"baseURL": origin + "/v1", "apiKey": "sk-fake-key-for-local-tests"},
				"models": map[string]any{"fake-model": map[string]any{
					"name": "Fake Model", "tool_call": true, "limit": map[string]any{"context": 200000, "output": 32000}}},
			}},
		}
		if mcp != nil {
			conf["mcp"] = map[string]any{"contextfold": map[string]any{"type": "local", "enabled": true, "command": mcp}}
		}
		writeJSONFile(t, cfg, conf)
		confHome := filepath.Join(d.Home, ".config")
		if err := os.MkdirAll(confHome, 0o755); err != nil {
			t.Fatal(err)
		}
		// cp keeps node_modules/.bin's symlinks (os.CopyFS refuses them).
		if out, err := exec.Command("cp", "-R", seed, filepath.Join(confHome, "opencode")).CombinedOutput(); err != nil {
			t.Fatalf("copy the opencode config seed: %v\n%s", err, out)
		}
		env := map[string]string{
			"XDG_CONFIG_HOME":                  confHome,
			"XDG_DATA_HOME":                    filepath.Join(d.Home, ".local", "share"),
			"XDG_CACHE_HOME":                   filepath.Join(d.Home, ".cache"),
			"XDG_STATE_HOME":                   filepath.Join(d.Home, ".local", "state"),
			"OPENCODE_CONFIG":                  cfg,
			"OPENCODE_DISABLE_AUTOUPDATE":      "1",
			"OPENCODE_DISABLE_MODELS_FETCH":    "1",
			"OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD":    "1",
			"OPENCODE_DISABLE_SHARE":           "1",
		}
		args := append([]string{"run", "--auto", "--format", "json", "--print-logs", "--log-level", "INFO"},
			strings.Fields(clientPrompt)...)
		return env, args
	},
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(b)+"\n")
}

// clientResult is the outcome of one client run.
type clientResult struct {
	Stdout, Stderr string
	ExitCode       int
	TimedOut       bool
	Duration       time.Duration
	// Requests are the model requests the fake recorded, in arrival order.
	Requests []fakellm.Recorded
	// Unhandled are the requests that matched none of the fake's routes.
	Unhandled []string
	// Sent are the model requests the tap saw (proxy runs only).
	Sent []tapped
}

// runClient runs one scripted session of c, against the fake directly or,
// with viaProxy, through the tap and the contextfold proxy.
func runClient(t *testing.T, c client, viaProxy bool) clientResult {
	return runSession(t, c, runOpts{session: fakellm.ClientSession{Turns: clientTurns}, proxy: viaProxy})
}

// runOpts are how runSession runs a client.
type runOpts struct {
	session fakellm.ClientSession
	// proxy puts the tap and contextfold proxy in between, with proxyArgs
	// and its fold record in store ("" : a temporary directory).
	proxy     bool
	proxyArgs []string
	// long: a run of 150 steps or more (longClientTimeout).
	long bool
	// proxyEnv is more environment for the proxy (a client setting it
	// reads, as a shell exporting it to both would give it).
	proxyEnv map[string]string
	store    string
	// mcp configures the client with `contextfold mcp -store <store>`.
	mcp bool
	// wrap, when set, wraps the session's script (e.g. to change replies).
	wrap func(fakellm.Script) fakellm.Script
	// converse, when set, feeds the client's standard input (else
	// /dev/null) as its output comes: it is called once with "" before the
	// client starts, then with every line the client prints on stdout, and
	// returns what to write to stdin then and whether to close stdin after.
	converse func(line string) (input string, close bool)
}

// runSession runs one scripted session of c as o says.
func runSession(t *testing.T, c client, o runOpts) clientResult {
	t.Helper()
	viaProxy := o.proxy
	bin := locateClient(t, c.binEnv)
	sess := o.session
	var script fakellm.Script = &sess
	if o.wrap != nil {
		script = o.wrap(script)
	}
	fake, err := fakellm.Start(script, fakellm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	origin := fake.AnthropicURL() // http://127.0.0.1:PORT: the clients add /v1/...
	var tp *tap
	if viaProxy {
		args := o.proxyArgs
		if o.store != "" {
			args = append(append([]string(nil), args...), "-store", o.store) // the last -store counts
		}
		tp = newTap(t, startProxyEnv(t, origin, o.proxyEnv, args...))
		origin = tp.URL()
	}
	var mcp []string
	if o.mcp {
		mcp = []string{proxyBinary(t), "mcp", "-store", o.store}
	}
	d := newRunDir(t)
	extra, args := c.prepare(t, d, origin, mcp)
	env := map[string]string{
		"PATH":   clientPath(),
		"HOME":   d.Home,
		"TMPDIR": d.Tmp,
		"TERM":   "dumb",
		"LANG":   "C.UTF-8",
	}
	maps.Copy(env, extra)
	environ := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		environ = append(environ, k+"="+env[k])
	}

	timeout := clientTimeout
	if o.long {
		timeout = longClientTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = d.Work
	cmd.Env = environ
	cmd.Stdin = nil // /dev/null: Codex reads a prompt from a stdin that is not a terminal
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if o.converse != nil {
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		cv := &conversation{out: &stdout, in: in, f: o.converse}
		cv.say("")
		cmd.Stdout = cv
	}
	ownProcessGroup(cmd)
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = 5 * time.Second
	began := time.Now()
	err = cmd.Run()
	dur := time.Since(began)
	if cmd.ProcessState == nil {
		t.Fatalf("start %s: %v", c.name, err)
	}
	killGroup(cmd) // whatever the client left running
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && ctx.Err() == nil {
		t.Fatalf("run %s: %v", c.name, err)
	}
	res := clientResult{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: cmd.ProcessState.ExitCode(),
		TimedOut: ctx.Err() != nil, Duration: dur, Requests: fake.Requests(), Unhandled: fake.Unhandled()}
	if tp != nil {
		res.Sent = tp.Requests()
	}
	via := "direct"
	if viaProxy {
		via = "via proxy"
	}
	t.Logf("%s %s: %.1fs, exit %d, %d model requests", c.name, via, dur.Seconds(), res.ExitCode, len(res.Requests))
	return res
}

// conversation is a client's stdout that feeds its stdin (runOpts.converse).
// Write runs on exec's copying goroutine, one call at a time.
type conversation struct {
	out     *bytes.Buffer
	in      io.WriteCloser
	f       func(string) (string, bool)
	partial []byte
	closed  bool
}

func (c *conversation) Write(p []byte) (int, error) {
	c.out.Write(p)
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(c.partial[:i])
		c.partial = c.partial[i+1:]
		c.say(line)
	}
}

// say passes line to the conversation and writes its answer to stdin
// (errors ignored: the client may be gone).
func (c *conversation) say(line string) {
	if c.closed {
		return
	}
	input, done := c.f(line)
	if input != "" {
		io.WriteString(c.in, input)
	}
	if done {
		c.in.Close()
		c.closed = true
	}
}

// check asserts the session completed: exit 0, the final answer in the
// client's output, every model request accepted by the strict fake, and
// every turn's marker line back at the fake in a later request.
func (r clientResult) check(t *testing.T, name string) {
	t.Helper()
	var summary strings.Builder
	for _, q := range r.Requests {
		fmt.Fprintf(&summary, "  #%d %s %s?%s status %d turn %d tools %d", q.Seq, q.Method, q.Path, q.Query, q.Status,
			fakellm.ClientTurn(&q.Request), len(q.Tools))
		if q.Error != nil || q.ParseError != "" {
			fmt.Fprintf(&summary, " error %v %s", q.Error, q.ParseError)
		}
		summary.WriteByte('\n')
	}
	failed := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: "+format+"\nrequests:\n%sunhandled: %q\n--- stdout\n%s\n--- stderr\n%s", append(append([]any{name}, args...),
			summary.String(), r.Unhandled, tail(r.Stdout, 4000), tail(r.Stderr, 4000))...)
	}
	if r.ExitCode != 0 || r.TimedOut {
		failed("exit %d (timed out: %v) after %s", r.ExitCode, r.TimedOut, r.Duration)
		return
	}
	if !strings.Contains(r.Stdout, fakellm.ClientFinal) {
		failed("no %s in the output", fakellm.ClientFinal)
	}
	for _, q := range r.Requests {
		if q.Status != http.StatusOK {
			failed("request %d answered %d", q.Seq, q.Status)
		}
	}
	for turn, seq := range fakellm.ClientMarkers(r.Requests, clientTurns) {
		if seq == 0 {
			failed("turn %d: %q never came back to the fake", turn+1, fakellm.ClientMarker(turn+1))
		}
	}
	if len(r.Unhandled) > 0 {
		t.Logf("%s: requests on no route of the fake: %q", name, r.Unhandled)
	}
}

// testClient runs c's direct and proxy subtests.
func testClient(t *testing.T, c client) {
	var direct *clientResult
	t.Run("direct", func(t *testing.T) {
		r := runClient(t, c, false)
		r.check(t, c.name)
		direct = &r
	})
	t.Run("proxy", func(t *testing.T) {
		r := runClient(t, c, true)
		r.check(t, c.name+" via proxy")
		if direct != nil && len(r.Requests) != len(direct.Requests) {
			t.Errorf("%d model requests through the proxy, %d direct", len(r.Requests), len(direct.Requests))
		}
		checkPassedThrough(t, r.Sent, r.Requests)
	})
}

// checkPassedThrough compares what the client sent (the tap) with what the
// fake received: the same model requests, each with the same method, path,
// query and body bytes. Requests are matched as a multiset, not by order:
// opencode sends its title request concurrently with the first turn.
func checkPassedThrough(t *testing.T, sent []tapped, got []fakellm.Recorded) {
	t.Helper()
	key := func(method, path, query string, body []byte) string {
		h := sha256.Sum256(body)
		return fmt.Sprintf("%s %s?%s %d bytes sha256 %s", method, path, query, len(body), hex.EncodeToString(h[:8]))
	}
	var a, b []string
	for _, s := range sent {
		a = append(a, key(s.Method, s.Path, s.Query, s.Body))
	}
	for _, r := range got {
		b = append(b, key(r.Method, r.Path, r.Query, r.Body))
	}
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Errorf("the proxy changed the model requests:\nclient sent:\n  %s\nfake received:\n  %s",
			strings.Join(a, "\n  "), strings.Join(b, "\n  "))
	}
}

func TestClaudeCodeKeyless(t *testing.T) { testClient(t, claudeCode) }

func TestCodexKeyless(t *testing.T) { testClient(t, codex) }

func TestOpencodeKeyless(t *testing.T) { testClient(t, opencode) }

// ---- The proxy ------------------------------------------------------------

// proxyBinary is $CONTEXTFOLD_BIN, else an engine built from this tree.
func proxyBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CONTEXTFOLD_BIN"); p != "" {
		return p
	}
	return EngineBinary(t)
}

// proxyListening is the first line `contextfold proxy` prints.
const proxyListening = "contextfold proxy listening on "

// startProxy runs `contextfold proxy` in front of the fake at fakeURL (its
// origin, or any URL on it) and returns the proxy's base URL,
// "http://127.0.0.1:PORT". The proxy forwards a request's path unchanged
// onto the upstream origin, for the Anthropic and the OpenAI routes alike.
// It is stopped when the test ends. Its fold record is under a temporary
// directory; args are more flags.
func startProxy(t testing.TB, fakeURL string, args ...string) string {
	t.Helper()
	return startProxyEnv(t, fakeURL, nil, args...)
}

// startProxyEnv is startProxy with more environment.
func startProxyEnv(t testing.TB, fakeURL string, env map[string]string, args ...string) string {
	t.Helper()
	bin := proxyBinary(t)
	u, err := url.Parse(fakeURL)
	if err != nil {
		t.Fatal(err)
	}
	origin := u.Scheme + "://" + u.Host
	cmd := exec.Command(bin, append([]string{"proxy", "-listen", "127.0.0.1:0", "-anthropic", origin, "-openai", origin, "-store", t.TempDir()}, args...)...)
	if len(env) > 0 {
		cmd.Env = os.Environ()
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the proxy: %v", err)
	}
	exited := make(chan struct{})
	var rest syncBuffer
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- strings.TrimRight(line, "\r\n")
		io.Copy(&rest, r)
	}()
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		killGroup(cmd)
		<-exited
		if t.Failed() {
			t.Logf("proxy stdout after the first line:\n%s\nproxy stderr:\n%s", tail(rest.String(), 3000), tail(stderr.String(), 3000))
		}
	})
	select {
	case line := <-first:
		base, ok := strings.CutPrefix(line, proxyListening)
		if !ok || !strings.HasPrefix(base, "http://127.0.0.1:") {
			t.Fatalf("proxy's first line %q, want %q<url>; stderr:\n%s", line, proxyListening, tail(stderr.String(), 2000))
		}
		return strings.TrimSuffix(base, "/")
	case <-time.After(20 * time.Second):
		t.Fatalf("proxy printed no first line in 20s; stderr:\n%s", tail(stderr.String(), 2000))
	}
	return ""
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ---- The tap --------------------------------------------------------------

// tapped is one model request as the client sent it.
type tapped struct {
	Method, Path, Query string
	Body                []byte
}

// tap is a recording pass-through on 127.0.0.1: it forwards every request
// unchanged to its target (streaming the answer as it comes) and keeps a
// copy of each model request (a POST to .../messages, .../responses or
// .../chat/completions).
type tap struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []tapped
}

func newTap(t *testing.T, target string) *tap {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = u.Host
		},
		FlushInterval: -1, // SSE: pass every write on at once
	}
	tp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		p := strings.TrimSuffix(r.URL.Path, "/")
		if r.Method == http.MethodPost && (strings.HasSuffix(p, "/messages") || strings.HasSuffix(p, "/responses") ||
			strings.HasSuffix(p, "/chat/completions")) {
			tp.mu.Lock()
			tp.reqs = append(tp.reqs, tapped{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body})
			tp.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(tp.srv.Close)
	return tp
}

// URL is the tap's origin, "http://127.0.0.1:PORT".
func (tp *tap) URL() string { return tp.srv.URL }

// Requests returns the model requests seen so far, in arrival order.
func (tp *tap) Requests() []tapped {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.reqs)
}
