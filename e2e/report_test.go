package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/policy"
)

// chromium is Debian's chromium (.ci/run installs it): missing, the
// report test skips, or fails when CONTEXTFOLD_E2E=1 (CI).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CONTEXTFOLD_E2E") == "1" {
		t.Fatal("chromium is required for the report test (apt-get install -y chromium)")
	}
	t.Skip("chromium not installed")
	return ""
}

// headless runs chromium headless on the page with args and returns its
// stdout.
func headless(t *testing.T, browser, page string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	profile := t.TempDir()
	full := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars", "--user-data-dir=" + profile}, args...)
	cmd := exec.CommandContext(ctx, browser, append(full, "file://"+page)...)
	cmd.Env = append(os.Environ(), "HOME="+profile)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.Bytes()
}

// colourPixels counts the screenshot's pixels of exactly colour c.
func colourPixels(img image.Image, hex string) int {
	var want color.RGBA
	for i, p := range []*uint8{&want.R, &want.G, &want.B} {
		v := hex[1+2*i : 3+2*i]
		n := 0
		for _, ch := range v {
			n = n*16 + strings.IndexRune("0123456789abcdef", ch)
		}
		*p = uint8(n)
	}
	count := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == want.R && uint8(g>>8) == want.G && uint8(bl>>8) == want.B {
				count++
			}
		}
	}
	return count
}

// TestReportRendersInChromium writes `contextfold report` pages for a Pi
// session and a proxy conversation and renders each in headless Chromium:
// the DOM it builds holds the charts' series and markers, the block table
// and the cost, and the screenshot shows the series in their colours.
func TestReportRendersInChromium(t *testing.T) {
	browser := chromium(t)
	bin := proxyBinary(t)
	root := RepoRoot(t)
	for _, tc := range []struct {
		name string
		args []string
		// dom must appear in the rendered DOM; colours on the screenshot.
		dom     []string
		colours map[string]string
		events  int
	}{
		{
			name: "pi-session",
			args: []string{"-window", "200000", filepath.Join(root, "internal", "bench", "htmlreport", "piread", "testdata", "folded-session.jsonl")},
			dom: []string{`<svg id="chart-sizes"`, `class="series raw" data-points="214"`, `class="series sent" data-points="214"`,
				`class="limit window" data-tokens="200000"`, `class="limit threshold" data-tokens="183616"`, `class="limit budget" data-tokens="150000"`,
				`<svg id="chart-cache"`, `class="bar read"`, `<svg id="chart-cost"`, `class="series with"`, `class="series without"`},
			colours: map[string]string{"sent": "#2563eb", "raw": "#9aa3b2", "window": "#dc2626", "budget": "#16a34a", "fold marker": "#7c3aed", "cache read": "#0d9488"},
			events:  31,
		},
		{
			name: "proxy-conversation",
			args: []string{filepath.Join(root, "cmd", "contextfold", "testdata", "report", "proxy-conversation.jsonl")},
			// The requests the proxy noted: sizes against its window,
			// budget and the client's threshold, cache and cost from the
			// usage, the one request without usage said.
			dom: []string{`<svg id="chart-sizes"`, `class="series raw" data-points="220"`, `class="series sent" data-points="220"`,
				`class="limit window" data-tokens="100000"`, `class="limit threshold" data-tokens="83616"`, `class="limit budget" data-tokens="75000"`,
				`<svg id="chart-cache"`, `class="bar read"`, `<svg id="chart-cost"`, `class="series with" data-points="220"`, `class="series without"`,
				`id="no-usage"`, "price table: Claude Sonnet 4 list prices"},
			colours: map[string]string{"sent": "#2563eb", "raw": "#9aa3b2", "window": "#dc2626", "threshold": "#ea580c", "budget": "#16a34a", "fold marker": "#7c3aed", "cache read": "#0d9488"},
			events:  4,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			page := filepath.Join(dir, tc.name+".html")
			out, err := exec.Command(bin, append([]string{"report", "-o", page}, tc.args...)...).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != page {
				t.Fatalf("contextfold report: %v\n%s", err, out)
			}
			src, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range []string{"http://", "https://", "<script", "src=", "url("} {
				if bytes.Contains(src, []byte(bad)) {
					t.Errorf("the page holds %q", bad)
				}
			}
			dom := string(headless(t, browser, page, "--dump-dom"))
			for _, want := range tc.dom {
				if !strings.Contains(dom, want) {
					t.Errorf("the rendered DOM lacks %s", want)
				}
			}
			// One marker (or bar) per fold event in each chart that marks them.
			markers := strings.Count(dom, `<g class="marker fold"`) + strings.Count(dom, `<rect class="bar event"`)
			if markers != 2*tc.events { // the size and cost charts
				t.Errorf("%d fold markers rendered, want %d", markers, 2*tc.events)
			}
			// The block table holds every code the source page lists, and
			// some.
			codes := regexp.MustCompile(`<code>\{#[0-9a-z]+ FOLDED\}</code>`)
			if got, want := len(codes.FindAllString(dom, -1)), len(codes.FindAllString(string(src), -1)); got != want || got < tc.events {
				t.Errorf("%d codes in the rendered table, %d in the page", got, want)
			}
			money := regexp.MustCompile(`<b class="with">\$[0-9.]+</b> · without folding ~ <b class="without">\$[0-9.]+</b>`)
			if !money.MatchString(dom) {
				t.Error("the cost panel shows no money")
			}
			shot := filepath.Join(dir, tc.name+".png")
			headless(t, browser, page, "--screenshot="+shot, "--window-size=1200,2400")
			f, err := os.Open(shot)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil {
				t.Fatal(err)
			}
			if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 2400 {
				t.Fatalf("screenshot %v", b)
			}
			for what, c := range tc.colours {
				if n := colourPixels(img, c); n < 50 {
					t.Errorf("the screenshot shows %d pixels of the %s's colour %s: not drawn", n, what, c)
				}
			}
			keepShot(shot, tc.name+".png")
		})
	}
}

// TestReportCommandInPi: /context-fold report in real Pi writes the page
// for the session Pi just wrote (folded by the extension, usage from the
// fake) and says where; Chromium renders its requests and fold markers,
// with the lines the engine used: the window, Pi's threshold from its
// settings (none when its compaction is off) and the fold budget.
func TestReportCommandInPi(t *testing.T) {
	browser := chromium(t)
	for _, tc := range []struct {
		name       string
		compaction *Compaction
		reserve    int // -1: no threshold
	}{
		{"compaction-off", noCompaction, -1},
		{"reserve-4000", &Compaction{Enabled: true, ReserveTokens: 4000}, 4000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := NewEnv(t, WithContextFold(t, Config{Script: &LongSession{Steps: 40, SkipRecall: true, SkipUnfold: true}, Compaction: tc.compaction}))
			rpc := env.StartRPC(RPCOptions{})
			rpc.Prompt("Run gen.sh for every step.")
			rpc.Prompt("/context-fold report")
			rpc.Close()
			const said = "context-fold report written: "
			page := ""
			for _, n := range rpc.Notifications() {
				if p, ok := strings.CutPrefix(n.Message, said); ok {
					page = p
				}
			}
			if page == "" {
				t.Fatalf("no %q notice: %+v", said, rpc.Notifications())
			}
			sessions := env.Sessions()
			if len(sessions) != 1 || filepath.Dir(filepath.Dir(filepath.Dir(page))) != filepath.Dir(sessions[0].Path) {
				t.Fatalf("the page %s is not in the session's folder (%+v)", page, sessions)
			}
			// Every response Pi recorded usage for is a request on the page.
			requests := 0
			for _, e := range sessions[0].Entries {
				if e.Type != "message" || e.Message == nil || e.Message.Role != "assistant" {
					continue
				}
				var u struct{ Input, CacheRead, CacheWrite, Output int }
				if json.Unmarshal(e.Message.Usage, &u) == nil && u.Input+u.CacheRead+u.CacheWrite+u.Output > 0 {
					requests++
				}
			}
			dom := string(headless(t, browser, page, "--dump-dom"))
			m := regexp.MustCompile(`<g class="limit window" data-tokens="(\d+)"`).FindStringSubmatch(dom)
			if m == nil || requests == 0 {
				t.Fatalf("no window line, or no request (%d)", requests)
			}
			window, _ := strconv.Atoi(m[1])
			want := []string{fmt.Sprintf(`class="series sent" data-points="%d"`, requests), `<g class="marker fold"`, `id="money"`,
				fmt.Sprintf(`<g class="limit budget" data-tokens="%d"`, engine.Budget(policy.DefaultKnobs, window, max(0, tc.reserve)))}
			if tc.reserve >= 0 {
				want = append(want, fmt.Sprintf(`<g class="limit threshold" data-tokens="%d"`, window-tc.reserve))
			} else if strings.Contains(dom, `class="limit threshold"`) {
				t.Error("a threshold is drawn though Pi's compaction is off")
			}
			for _, w := range want {
				if !strings.Contains(dom, w) {
					t.Errorf("the page of Pi's session lacks %s", w)
				}
			}
			shot := filepath.Join(t.TempDir(), "pi.png")
			headless(t, browser, page, "--screenshot="+shot, "--window-size=1200,2400")
			keepShot(shot, "pi-live-"+tc.name+".png")
		})
	}
}

// keepShot copies a screenshot to $CONTEXTFOLD_REPORT_SHOTS, when set, for
// a person to look at.
func keepShot(shot, name string) {
	if dir := os.Getenv("CONTEXTFOLD_REPORT_SHOTS"); dir != "" {
		b, _ := os.ReadFile(shot)
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
}
