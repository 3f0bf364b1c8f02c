package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// A README shell block and how the README test treats it: the line just
// before its opening fence may say
//
//	<!-- readme-test: skip: <reason> -->   not run (network, credentials, …)
//	<!-- readme-test: serve -->            a server: started, asked, stopped
//
// and every other ```sh block runs as printed.
type readmeBlock struct {
	line   int // of the opening fence, 1-based
	text   string
	skip   string // the reason it is not run
	serves bool
}

var readmeMarker = regexp.MustCompile(`^<!-- readme-test: (skip: (.+)|serve) -->$`)

// readmeFence matches a CommonMark fence line: up to three spaces, three or
// more backticks or tildes, and the info string.
var readmeFence = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})(.*)$")

// readmeBlocks parses the shell blocks of a README.
func readmeBlocks(readme string) ([]readmeBlock, error) {
	var blocks []readmeBlock
	lines := strings.Split(readme, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], "\r")
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if readmeMarker.MatchString(l) {
			if i+1 >= len(lines) || !isShellFence(lines[i+1]) {
				return nil, fmt.Errorf("README line %d: a readme-test marker not followed by a ```sh fence", i+1)
			}
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(l), "<!-- readme-test") {
			return nil, fmt.Errorf("README line %d: unknown marker %q", i+1, l)
		}
		m := readmeFence.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		end := closingFence(lines, i, m[1])
		if end >= len(lines) {
			return nil, fmt.Errorf("README line %d: the fence is never closed", i+1)
		}
		lang, _, _ := strings.Cut(strings.TrimSpace(m[2]), " ")
		switch lang {
		case "sh":
		case "bash", "shell", "console", "zsh":
			return nil, fmt.Errorf("README line %d: shell blocks are ```sh, not ```%s", i+1, lang)
		default:
			i = end
			continue
		}
		if strings.TrimSpace(m[2]) != "sh" || m[1] != "```" {
			return nil, fmt.Errorf("README line %d: a shell block opens with exactly ```sh, not %q", i+1, l)
		}
		b := readmeBlock{line: i + 1}
		if i > 0 {
			if mm := readmeMarker.FindStringSubmatch(lines[i-1]); mm != nil {
				b.skip, b.serves = mm[2], mm[1] == "serve"
			}
		}
		b.text = strings.Join(lines[i+1:end], "\n") + "\n"
		blocks = append(blocks, b)
		i = end
	}
	return blocks, nil
}

// isShellFence reports whether l opens a shell block.
func isShellFence(l string) bool {
	m := readmeFence.FindStringSubmatch(l)
	return m != nil && m[1] == "```" && strings.TrimSpace(m[2]) == "sh"
}

// closingFence returns the index of the line closing the fence opened at i
// with open: the same character, at least as long, nothing after it.
func closingFence(lines []string, i int, open string) int {
	for j := i + 1; j < len(lines); j++ {
		m := readmeFence.FindStringSubmatch(lines[j])
		if m != nil && m[1][0] == open[0] && len(m[1]) >= len(open) && strings.TrimSpace(m[2]) == "" {
			return j
		}
	}
	return len(lines)
}

func TestReadmeBlocksParse(t *testing.T) {
	for _, tc := range []struct {
		name, readme string
		want         []readmeBlock
		err          string
	}{
		{"run, skip and serve", "# x\n```sh\nmake build\n```\n<!-- readme-test: skip: needs a key -->\n```sh\nclaude\n```\n\n```json\n{\"a\": 1}\n```\n<!-- readme-test: serve -->\n```sh\nbin/contextfold proxy\n```\n",
			[]readmeBlock{{line: 2, text: "make build\n"}, {line: 6, text: "claude\n", skip: "needs a key"}, {line: 14, text: "bin/contextfold proxy\n", serves: true}}, ""},
		{"a marker before prose", "<!-- readme-test: skip: x -->\ntext\n", nil, "not followed by"},
		{"a misspelt marker", "<!-- readme-test: skipp -->\n```sh\nx\n```\n", nil, "unknown marker"},
		{"a bash fence", "```bash\nx\n```\n", nil, "shell blocks are ```sh"},
		{"an open block", "```sh\nx\n", nil, "never closed"},
		{"an open block of another language", "```json\n{}\n", nil, "never closed"},
		{"sh inside another fence is not a block", "````text\n```sh\nx\n```\n````\n```sh\ny\n```\n", []readmeBlock{{line: 6, text: "y\n"}}, ""},
		{"a longer closing fence closes", "```sh\nx\n````\n```sh\ny\n```\n", []readmeBlock{{line: 1, text: "x\n"}, {line: 4, text: "y\n"}}, ""},
		{"sh with more info", "```sh title=x\nx\n```\n", nil, "opens with exactly ```sh"},
		{"a tilde fence of sh", "~~~sh\nx\n~~~\n", nil, "opens with exactly ```sh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readmeBlocks(tc.readme)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("blocks = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestReadme runs every shell block of README.md that needs no network and
// no credentials, exactly as printed, each in a fresh copy of the checkout
// (its tracked and untracked files, no build output) with a fresh HOME:
// Go, Node, npm and Pi on PATH, as a user has them. The tools `make` would
// install into .cache/ on first use come from this checkout's cache
// (CONTEXTFOLD_CACHE), and Go's build and module caches are shared, so a
// block costs its own work, not a download. A block marked serve must
// print its listen address and answer there until stopped.
func TestReadme(t *testing.T) {
	pi := LocatePi(t)
	root := RepoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readmeBlocks(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```sh block")
	}
	bin := t.TempDir()
	wrapper := fmt.Sprintf("#!/bin/sh\nexec %q %q \"$@\"\n", pi.Node, pi.CLI)
	if err := os.WriteFile(filepath.Join(bin, "pi"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(pi.Node, filepath.Join(bin, "node")); err != nil {
		t.Fatal(err)
	}
	goEnv := map[string]string{}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		goEnv[k] = strings.TrimSpace(string(out))
	}
	path := bin + string(os.PathListSeparator) + filepath.Join(goEnv["GOROOT"], "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	runs := 0
	for _, b := range blocks {
		if b.skip == "" {
			runs++
		}
	}
	if runs == 0 {
		t.Fatal("every README block is marked skip; the test runs none")
	}
	for _, b := range blocks {
		t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
			if b.skip != "" {
				t.Logf("not run (%s):\n%s", b.skip, b.text)
				return
			}
			dir := filepath.Join(t.TempDir(), "context-fold")
			copyCheckout(t, root, dir)
			home := t.TempDir()
			env := []string{
				"PATH=" + path,
				"HOME=" + home,
				"CONTEXTFOLD_CACHE=" + filepath.Join(root, ".cache"),
				"npm_config_cache=" + filepath.Join(home, ".npm"),
				"npm_config_update_notifier=false",
				"TERM=dumb",
			}
			for k, v := range goEnv {
				env = append(env, k+"="+v)
			}
			if v := os.Getenv("GOFLAGS"); v != "" {
				env = append(env, "GOFLAGS="+v)
			}
			if b.serves {
				runServeBlock(t, b, dir, env)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-eo", "pipefail", "-c", b.text)
			cmd.Dir, cmd.Env = dir, env
			// On the timeout the whole group goes (make, go, npm), and the
			// output is not waited for past a few seconds more.
			ownProcessGroup(cmd)
			cmd.Cancel = func() error { return killGroup(cmd) }
			cmd.WaitDelay = 10 * time.Second
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("README line %d:\n%s\nfailed: %v\n%s", b.line, b.text, err, tail(string(out), 4000))
			}
			t.Logf("README line %d ran:\n%s%s", b.line, b.text, tail(string(out), 600))
		})
	}
}

// runServeBlock starts a serve block, waits for the address it prints it
// listens on, checks that an HTTP request there is answered, and stops it
// as a user would (Ctrl-C); it must exit then. A serve block holds one
// command: the README's is `contextfold proxy`.
func runServeBlock(t *testing.T, b readmeBlock, dir string, env []string) {
	if strings.Count(strings.TrimSpace(b.text), "\n") != 0 {
		t.Fatalf("README line %d: a serve block holds exactly one command:\n%s", b.line, b.text)
	}
	cmd := exec.Command("bash", "-c", "exec "+strings.TrimSpace(b.text))
	cmd.Dir, cmd.Env = dir, env
	ownProcessGroup(cmd)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	defer killGroup(cmd)
	var mu sync.Mutex
	var out bytes.Buffer
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		re := regexp.MustCompile(`listening on (http://\S+)`)
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	output := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	var url string
	select {
	case url = <-addr:
	case err := <-exited:
		t.Fatalf("README line %d: %s exited before it listened: %v\n%s", b.line, strings.TrimSpace(b.text), err, output())
	case <-time.After(3 * time.Minute):
		t.Fatalf("README line %d: %s printed no listen address in 3 minutes\n%s", b.line, strings.TrimSpace(b.text), output())
	}
	// Asked for another host, the proxy answers itself (403), so the
	// check needs no upstream and no network.
	req, err := http.NewRequest("GET", url+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "readme-test.invalid"
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("README line %d: %s listens on %s but does not answer: %v", b.line, strings.TrimSpace(b.text), url, err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("README line %d: asked for another host, %s answered %d, want 403", b.line, url, res.StatusCode)
	}
	if err := interruptGroup(cmd); err != nil {
		t.Fatalf("README line %d: Ctrl-C: %v", b.line, err)
	}
	select {
	case err := <-exited:
		// Not asserted: `go run` exits 1 when interrupted, whatever the
		// program it runs returns.
		t.Logf("README line %d: exit on Ctrl-C: %v", b.line, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("README line %d: %s did not stop on Ctrl-C within 30 s\n%s", b.line, strings.TrimSpace(b.text), output())
	}
	t.Logf("README line %d served %s (GET / for another host → %d) and stopped on Ctrl-C:\n%s", b.line, url, res.StatusCode, tail(output(), 600))
}

// copyCheckout copies the checkout at root (its tracked and untracked,
// not ignored, files: what a fresh clone holds, with this tree's edits)
// to dir.
func copyCheckout(t *testing.T, root, dir string) {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, rel)
		info, err := os.Lstat(src)
		if err != nil {
			if os.IsNotExist(err) { // deleted in the working tree
				continue
			}
			t.Fatal(err)
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, dst); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzReadmeBlocks: whatever the README holds, the parser returns blocks
// that open on a ```sh line and end before their closing fence, or an
// error; it never panics.
func FuzzReadmeBlocks(f *testing.F) {
	f.Add("```sh\nmake build\n```\n")
	f.Add("<!-- readme-test: skip: x -->\n```sh\nx\n```\n````text\n```sh\n````\n")
	f.Add("<!-- readme-test: serve -->\n```sh\nbin/contextfold proxy\n```\n~~~\n```sh\n~~~\n")
	f.Fuzz(func(t *testing.T, readme string) {
		blocks, err := readmeBlocks(readme)
		if err != nil {
			return
		}
		lines := strings.Split(readme, "\n")
		for _, b := range blocks {
			if b.line < 1 || b.line > len(lines) || !isShellFence(strings.TrimRight(lines[b.line-1], "\r")) {
				t.Fatalf("block at line %d does not open on a ```sh fence", b.line)
			}
			body := strings.Split(strings.TrimSuffix(b.text, "\n"), "\n")
			if b.line+len(body) >= len(lines)+1 {
				t.Fatalf("block at line %d runs past the end", b.line)
			}
			if b.serves && b.skip != "" {
				t.Fatalf("block at line %d both serves and is skipped", b.line)
			}
		}
	})
}
