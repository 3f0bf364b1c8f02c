package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/bench/htmlreport"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/pi/ledger"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// The Pi session the report tests read: the real pi-mono session with the
// fold entries the engine writes (internal/bench/htmlreport/piread).
const reportSession = "../../internal/bench/htmlreport/piread/testdata/folded-session.jsonl"

// foldedConversation writes, through the proxy's own store, the
// conversation a proxy folding the real pi-mono session's messages would
// keep, and returns its file. With notes, each request is noted as the
// proxy notes it (its sizes as the engine measured them, the window,
// budget and reserve it planned for, the event it committed) with the
// usage the session's provider reported for it, but for the last, whose
// answer the client did not wait for; without, the file is as the proxy
// wrote it before it noted requests. The usage is real, but it is Pi's:
// its prompts carried its system prompt and tools and its own folds, at a
// larger window, so the cache bars outgrow the sizes drawn.
func foldedConversation(t *testing.T, notes bool) string {
	t.Helper()
	led, err := ledger.ReadFile("../../internal/pi/ledger/testdata/pi-mono-session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := foldstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, _, err := st.Conversation("anthropic", "report-test", "conversation-1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e := engine.New(engine.Config{Policy: schedule.Default, Scope: "report-test"})
	var msgs [][]byte
	held, events, n := 0, 0, 0
	var last *foldstore.Usage
	for _, ent := range led.Messages() {
		var m struct {
			Role  string
			Usage *struct{ Input, Output, CacheRead, CacheWrite int }
		}
		if json.Unmarshal(ent.Message, &m) == nil && m.Role == "assistant" && len(msgs) > 0 {
			const window, reserve = 100_000, 16_384
			res := e.Step(engine.Request{Keep: held, Append: msgs[held:], Window: window, Reserve: reserve}, engine.NopJournal{})
			held = len(msgs)
			if notes {
				if last != nil {
					if err := foldstore.NoteUsage(c.Path(), n, *last); err != nil {
						t.Fatal(err)
					}
				}
				_, saved, _ := e.Folded()
				n++
				r := foldstore.Request{N: n, Raw: res.Status.LiveTokens + saved, Sent: res.Status.LiveTokens, Window: window, Budget: res.Status.Budget, Reserve: reserve,
					At: time.Date(2026, 12, 7, 10, 0, n, 0, time.UTC)}
				if res.Event != nil {
					r.Seq = res.Event.Seq
				}
				if err := foldstore.NoteRequest(c.Path(), r); err != nil {
					t.Fatal(err)
				}
				last = nil
				if u := m.Usage; u != nil {
					last = &foldstore.Usage{Input: u.Input, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, Output: u.Output}
				}
			}
			if ev := res.Event; ev != nil {
				events++
				if err := c.Commit(ev, func(id string) (string, bool) {
					b, ok := e.Live(id)
					if !ok {
						return "", false
					}
					return b.Text, true
				}); err != nil {
					t.Fatal(err)
				}
			}
		}
		msgs = append(msgs, ent.Message)
	}
	if notes && n < 10 {
		t.Fatalf("%d requests: the conversation should be longer", n)
	}
	if events < 2 {
		t.Fatalf("%d fold events: the conversation should fold more", events)
	}
	return c.Path()
}

// reportGolden compares got with testdata/report/name (-update rewrites it).
func reportGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", "report", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the command writes now (go test -update rewrites it after review)", p)
	}
}

// runReport runs contextfold report with args and returns the page it
// wrote, the path it printed checked against -o.
func runReport(t *testing.T, out string, args ...string) string {
	t.Helper()
	var so, se bytes.Buffer
	if code := run(append([]string{"report", "-o", out}, args...), &so, &se); code != 0 || se.Len() != 0 {
		t.Fatalf("report %v: exit %d, stderr %s", args, code, se.String())
	}
	if got := strings.TrimSpace(so.String()); got != out {
		t.Fatalf("report printed %q, want the page's path %q", got, out)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(page)
}

// selfContained fails when the page refers to anything outside itself.
func selfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"http://", "https://", "<script", "<link", "<img", "src=", "href=", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q: it must need nothing outside itself", bad)
		}
	}
}

var codeRe = regexp.MustCompile(`\{#([0-9a-z]+) FOLDED\}`)

func TestReportProxyConversation(t *testing.T) {
	conv := foldedConversation(t, true)
	page := runReport(t, filepath.Join(t.TempDir(), "p.html"), conv)
	selfContained(t, page)
	// The golden names neither the temporary file nor its id (a hash).
	got := strings.ReplaceAll(strings.ReplaceAll(page, conv, "CONVERSATION"), strings.TrimSuffix(filepath.Base(conv), ".jsonl"), "ID")
	reportGolden(t, "proxy-conversation.html", []byte(got))
	// Every code of the conversation is in the table, and every event has
	// its bar; no request chart or cost is claimed.
	c, err := foldstore.ReadFile(conv)
	if err != nil {
		t.Fatal(err)
	}
	recs := c.Records()
	if found := codeRe.FindAllStringSubmatch(page, -1); len(found) != len(recs) {
		t.Fatalf("%d codes on the page, %d in the conversation", len(found), len(recs))
	}
	for code := range recs {
		if !strings.Contains(page, "{#"+code+" FOLDED}") {
			t.Errorf("the page lacks %s", code)
		}
	}
	events := 0
	for _, en := range c.Entries {
		if en.Kind == engine.KindFold {
			events++
		}
	}
	// Every request noted is drawn, raw and sent, each fold event marked
	// at the request that committed it, the window, budget and the
	// client's threshold lined, the cost priced at the named table; the
	// request without usage is counted and said.
	for _, want := range []string{
		fmt.Sprintf(`<polyline class="series raw" data-points="%d"`, len(c.Requests)),
		fmt.Sprintf(`<polyline class="series sent" data-points="%d"`, len(c.Requests)),
		fmt.Sprintf(`<polyline class="series with" data-points="%d"`, len(c.Requests)),
		`<g class="limit window" data-tokens="100000"`, `<g class="limit threshold" data-tokens="83616"`, `<g class="limit budget"`,
		`id="chart-cache"`, `id="money"`, htmlreport.TablePrices.Source,
		fmt.Sprintf("1 of the %d requests has no usage recorded", len(c.Requests)),
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	for _, r := range c.Requests {
		if r.Seq > 0 && !strings.Contains(page, fmt.Sprintf(`data-seq="%d" data-request="%d"`, r.Seq, r.N)) {
			t.Errorf("fold event %d is not marked at request %d", r.Seq, r.N)
		}
	}
	if n := strings.Count(page, `<g class="marker fold"`); n != 2*events { // the size and cost charts
		t.Errorf("%d fold markers, %d fold events", n, events)
	}
	// A file written before the proxy noted requests: what each event
	// masks, and why no request is drawn.
	old := runReport(t, filepath.Join(t.TempDir(), "o.html"), foldedConversation(t, false))
	if n := strings.Count(old, `<rect class="bar event"`); n != events {
		t.Errorf("%d event bars, %d fold events", n, events)
	}
	for _, absent := range []string{`id="chart-sizes"`, `id="chart-cost"`, `id="money"`} {
		if strings.Contains(old, absent) {
			t.Errorf("the page claims %s for a record without requests", absent)
		}
	}
	if !strings.Contains(old, "Not recorded: the proxy") {
		t.Error("the page does not say why it has no requests")
	}
	// The checked-in conversation (which the end-to-end test renders in
	// Chromium) reads as the one written now.
	fixture := filepath.Join("testdata", "report", "proxy-conversation.jsonl")
	if *update {
		b, err := os.ReadFile(conv)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fixture, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fixed := runReport(t, filepath.Join(t.TempDir(), "f.html"), fixture)
	abs, _ := filepath.Abs(fixture)
	if strings.ReplaceAll(strings.ReplaceAll(fixed, abs, "CONVERSATION"), "proxy-conversation", "ID") != got {
		t.Error("the checked-in conversation's page differs from the one written now (go test -update)")
	}
}

func TestReportPiSession(t *testing.T) {
	page := runReport(t, filepath.Join(t.TempDir(), "s.html"), "-window", "200000", reportSession)
	selfContained(t, page)
	abs, _ := filepath.Abs(reportSession)
	reportGolden(t, "pi-session.html", []byte(strings.ReplaceAll(page, abs, "SESSION")))
	for _, want := range []string{`<g class="limit window" data-tokens="200000"`, `<g class="limit threshold" data-tokens="183616"`, `<polyline class="series raw"`, `<polyline class="series sent"`, `<g class="marker fold"`, `id="money"`, "claude-opus-4-5"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	// The extension's figures: Pi's compaction off, the engine's budget.
	page = runReport(t, filepath.Join(t.TempDir(), "s.html"), "-window", "200000", "-reserve", "-1", "-budget", "120000", reportSession)
	if strings.Contains(page, `class="limit threshold"`) || !strings.Contains(page, `<g class="limit budget" data-tokens="120000"`) || !strings.Contains(page, "Pi&#39;s compaction is off") {
		t.Error("-reserve -1 -budget 120000: a threshold drawn, or not the budget given")
	}
	// Without -window no limit is drawn, and the page says why.
	page = runReport(t, filepath.Join(t.TempDir(), "s.html"), reportSession)
	if strings.Contains(page, `class="limit`) || !strings.Contains(page, "the window was not given") {
		t.Error("without -window the page draws limits or does not say why it draws none")
	}
}

func TestReportUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"a.jsonl", "b.jsonl"}, 2, "want at most one session"},
		{[]string{"-window", "-1", reportSession}, 2, "-window -1"},
		{[]string{"-reserve", "x", reportSession}, 2, "invalid value"},
		{[]string{"-reserve", "-2", reportSession}, 2, "-reserve -2"},
		{[]string{"-budget", "-5", reportSession}, 2, "-budget -5"},
		{[]string{"-o", filepath.Join(t.TempDir(), "no", "such", "dir", "p.html"), reportSession}, 1, "no such file or directory"},
		{[]string{"does/not/exist.jsonl"}, 1, "no such file"},
	} {
		var so, se bytes.Buffer
		code := run(append([]string{"report"}, tc.args...), &so, &se)
		if code != tc.code || !strings.Contains(se.String(), tc.err) || strings.Count(se.String(), "\n") != 1 || so.Len() != 0 {
			t.Errorf("report %v: exit %d, stdout %q, stderr %q; want exit %d and one line with %q", tc.args, code, so.String(), se.String(), tc.code, tc.err)
		}
	}
	var so, se bytes.Buffer
	run([]string{"report", "-h"}, &so, &se)
	for _, f := range []string{"-o", "-window", "-reserve", "-budget", "-store"} {
		if !strings.Contains(so.String(), "\n  "+f+" ") {
			t.Errorf("report -h lacks %s", f)
		}
	}
}
