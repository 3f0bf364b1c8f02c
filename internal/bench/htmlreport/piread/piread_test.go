package piread

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/bench/htmlreport"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/pi/ledger"
	"github.com/contextfold/contextfold/internal/testsupport/pisession"
)

var update = flag.Bool("update", false, "rewrite testdata/folded-session.jsonl and the page goldens")

// sourceSession is a real Pi session (badlogic/pi-mono's fixture, with
// the usage and money Pi recorded for each request).
const sourceSession = "../../../pi/ledger/testdata/pi-mono-session.jsonl"

// foldWindow is the session's model's window (Claude Opus 4.5).
const foldWindow = 200_000

// foldedSession is the real session as context-fold in Pi would leave it:
// its messages, and before each request the fold entry the engine
// committed for it, replayed with the usage the session recorded.
func foldedSession(t *testing.T) []byte { return foldedSessionWith(t, nil) }

// foldedSessionWith is foldedSession with before(f, k, events) called
// before request k's assistant message (1-based), after its fold entry:
// events are the fold events committed so far.
func foldedSessionWith(t *testing.T, before func(f *pisession.File, k int, events []*engine.Event)) []byte {
	t.Helper()
	led, err := ledger.ReadFile(sourceSession)
	if err != nil {
		t.Fatal(err)
	}
	const id = "5fd1e58c-9635-410e-a644-133a96057c90"
	e := engine.New(engine.Config{Policy: schedule.Default, Scope: id})
	f := pisession.New(id)
	var msgs [][]byte
	var events []*engine.Event
	held, reported, k := 0, 0, 0
	for _, ent := range led.Messages() {
		var m message
		if json.Unmarshal(ent.Message, &m) == nil && m.Role == "assistant" && len(msgs) > 0 {
			res := e.Step(engine.Request{Keep: held, Append: msgs[held:], Window: foldWindow, Reported: reported}, engine.NopJournal{})
			held = len(msgs)
			if res.Event != nil {
				en, err := json.Marshal(res.Event.Entry())
				if err != nil {
					t.Fatal(err)
				}
				f.Custom(CustomType, en)
				events = append(events, res.Event)
			}
			if m.Usage != nil && m.Usage.Input+m.Usage.CacheRead+m.Usage.CacheWrite+m.Usage.Output > 0 {
				k++
				if before != nil {
					before(f, k, events)
				}
			}
			if m.Usage != nil {
				reported = m.Usage.Input + m.Usage.CacheRead + m.Usage.CacheWrite
			}
		}
		msgs = append(msgs, ent.Message)
		f.Message(ent.Message)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "s.jsonl")
	if err := f.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the code writes now (go test -update rewrites it after review)", p)
	}
}

// TestFoldedSessionFixture keeps the checked-in session (which the
// end-to-end test renders in Chromium) what the engine writes today.
func TestFoldedSessionFixture(t *testing.T) {
	golden(t, "folded-session.jsonl", foldedSession(t))
}

func TestReadPiSession(t *testing.T) {
	path := filepath.Join("testdata", "folded-session.jsonl")
	d, err := Read(path, Limits{Window: foldWindow, Reserve: DefaultReserve, Knobs: policy.DefaultKnobs})
	if err != nil {
		t.Fatal(err)
	}
	led, err := ledger.ReadFile(sourceSession)
	if err != nil {
		t.Fatal(err)
	}
	// Every assistant message with usage is a request, its figures Pi's.
	var want []htmlreport.Request
	for _, ent := range led.Messages() {
		var m message
		if json.Unmarshal(ent.Message, &m) == nil && m.Role == "assistant" && m.Usage != nil && m.Usage.Input+m.Usage.CacheRead+m.Usage.CacheWrite+m.Usage.Output > 0 {
			want = append(want, htmlreport.Request{Input: m.Usage.Input, CacheRead: m.Usage.CacheRead, CacheWrite: m.Usage.CacheWrite, Output: m.Usage.Output, Cost: m.Usage.Cost.Total})
		}
	}
	if len(d.Requests) != len(want) || len(want) < 50 {
		t.Fatalf("%d requests, want %d", len(d.Requests), len(want))
	}
	for i, r := range d.Requests {
		w := want[i]
		if r.Sent() != w.Sent() || r.CacheRead != w.CacheRead || r.CacheWrite != w.CacheWrite || r.Cost != w.Cost || !r.CostKnown {
			t.Fatalf("request %d: %+v, want Pi's usage %+v", i+1, r, w)
		}
	}
	if len(d.Events) < 2 || len(d.Blocks) < len(d.Events) {
		t.Fatalf("%d fold events, %d blocks: the fixture folds more", len(d.Events), len(d.Blocks))
	}
	// Masked grows with each event and never before the first.
	first := d.Events[0].Request
	for i, r := range d.Requests {
		if (i+1 < first) != (r.Masked == 0) {
			t.Fatalf("request %d masks %d; the first event applies to request %d", i+1, r.Masked, first)
		}
	}
	sum := 0
	for _, e := range d.Events {
		sum += e.Masked
	}
	if last := d.Requests[len(d.Requests)-1].Masked; last != sum {
		t.Fatalf("the last request masks %d, the events %d in all", last, sum)
	}
	for _, b := range d.Blocks {
		if b.State != "folded" || b.Tokens <= b.DigestTokens || b.Code == "" || b.Request < first {
			t.Fatalf("block %+v", b)
		}
	}
	if d.Threshold != foldWindow-DefaultReserve || d.Budget != min(int(0.75*foldWindow), foldWindow-DefaultReserve-engine.ReplyMargin) || d.Model != "claude-opus-4-5" {
		t.Fatalf("limits %d/%d/%d, model %q", d.Window, d.Threshold, d.Budget, d.Model)
	}
	// Prices come from the money Pi recorded: Opus 4.5's list prices.
	if p := d.Prices; !near(p.Input, 5) || !near(p.CacheWrite, 6.25) || !near(p.CacheRead, 0.5) || !near(p.Output, 25) || !strings.Contains(p.Source, "recorded") {
		t.Fatalf("prices %+v", p)
	}
	with, without := d.Costs()
	total := 0.0
	for _, w := range want {
		total += w.Cost
	}
	if !near(with[len(with)-1], total) || without[len(without)-1] <= with[len(with)-1] {
		t.Fatalf("cost with folding %.4f (Pi recorded %.4f), without %.4f", with[len(with)-1], total, without[len(without)-1])
	}
	var page bytes.Buffer
	if err := htmlreport.Write(&page, d); err != nil {
		t.Fatal(err)
	}
	// The page names the file by its path as given, so the golden does not
	// depend on where the checkout is.
	golden(t, "pi-session.html", bytes.ReplaceAll(page.Bytes(), []byte(d.File), []byte(path)))
	checkPage(t, page.String(), d)
}

// checkPage checks what every page must hold, whatever the session.
func checkPage(t *testing.T, page string, d *htmlreport.Data) {
	t.Helper()
	for _, bad := range []string{"http://", "https://", "<script", "<link", "src=", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q: it must need nothing outside itself", bad)
		}
	}
	for _, b := range d.Blocks {
		if !strings.Contains(page, "{#"+b.Code+" FOLDED}") {
			t.Errorf("the block table lacks %s", b.Code)
		}
	}
	if n := strings.Count(page, `<g class="marker fold"`); n != 2*len(d.Events) {
		t.Errorf("%d fold markers, want %d (one in the size chart, one in the cost chart per event)", n, 2*len(d.Events))
	}
}

// TestReadUnfoldAndCompaction: an unfold takes its block's savings out of
// the requests after it, and a compaction drops the folded blocks it
// removed from the history (they mask nothing any more) and is marked
// before the request that follows it.
func TestReadUnfoldAndCompaction(t *testing.T) {
	const unfoldAt, compactAt = 100, 170
	var unfolded string
	raw := foldedSessionWith(t, func(f *pisession.File, k int, events []*engine.Event) {
		switch k {
		case unfoldAt:
			unfolded = events[0].Folds[0].ID
			en, _ := json.Marshal(engine.Entry{V: engine.EntryVersion, Kind: engine.KindUnfold, IDs: []string{unfolded}})
			f.Custom(CustomType, en)
		case compactAt:
			// Kept from the entry after the compaction: the assistant
			// message of this request.
			f.Compaction("summary of the session so far", nextAfter(f))
		}
	})
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Read(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var ub *htmlreport.Block
	for i := range d.Blocks {
		if d.Blocks[i].Seq == 1 && d.Blocks[i].State == "unfolded" {
			ub = &d.Blocks[i]
		}
	}
	if ub == nil {
		t.Fatalf("no unfolded block of event 1: %+v", d.Blocks[:3])
	}
	if got, want := d.Requests[unfoldAt-2].Masked-d.Requests[unfoldAt-1].Masked, ub.Tokens-ub.DigestTokens; got != want || unfoldAt <= d.Events[1].Request {
		t.Fatalf("the unfold took %d tokens off the masked figure; its block masked %d", got, want)
	}
	if len(d.Compactions) != 1 || d.Compactions[0].Request != compactAt || d.Compactions[0].Kind != "Pi's LLM summary" {
		t.Fatalf("compactions %+v, want one before request %d", d.Compactions, compactAt)
	}
	after := 0
	for _, b := range d.Blocks {
		switch {
		// The fold entry of request compactAt precedes the compaction.
		case b.Request <= compactAt && b.State != "compacted away" && b.State != "unfolded":
			t.Fatalf("block %s folded before the compaction is %q", b.Code, b.State)
		case b.Request > compactAt:
			after += b.Tokens - b.DigestTokens
		}
	}
	if m := d.Requests[len(d.Requests)-1].Masked; m != after {
		t.Fatalf("the last request masks %d; the blocks folded since the compaction %d", m, after)
	}
	if d.Window != 0 || d.Threshold != 0 || d.Budget != 0 || !strings.Contains(d.LimitsNote, "not given") {
		t.Fatalf("without a window: %d/%d/%d, %q", d.Window, d.Threshold, d.Budget, d.LimitsNote)
	}
}

// TestLimits: the threshold is the window less Pi's reserve (none when
// Pi's compaction is off); the budget is the knobs', kept ReplyMargin
// under the threshold when that is lower, unless one is given.
func TestLimits(t *testing.T) {
	path := filepath.Join("testdata", "folded-session.jsonl")
	for _, tc := range []struct {
		lim               Limits
		threshold, budget int
	}{
		{Limits{Window: 200_000, Reserve: DefaultReserve, Knobs: policy.DefaultKnobs}, 183_616, 150_000},
		{Limits{Window: 40_000, Reserve: DefaultReserve, Knobs: policy.DefaultKnobs}, 23_616, 40_000 - DefaultReserve - engine.ReplyMargin},
		{Limits{Window: 40_000, Reserve: -1, Knobs: policy.DefaultKnobs}, 0, 30_000},
		{Limits{Window: 40_000, Reserve: 0, Budget: 12_345, Knobs: policy.DefaultKnobs}, 40_000, 12_345},
		{Limits{Window: 0, Reserve: DefaultReserve, Knobs: policy.DefaultKnobs}, 0, 0},
	} {
		d, err := Read(path, tc.lim)
		if err != nil {
			t.Fatal(err)
		}
		if d.Threshold != tc.threshold || d.Budget != tc.budget {
			t.Errorf("%+v: threshold %d, budget %d; want %d and %d", tc.lim, d.Threshold, d.Budget, tc.threshold, tc.budget)
		}
	}
}

// nextAfter is the id of the entry after the one f writes next.
func nextAfter(f *pisession.File) string {
	var n int
	fmt.Sscanf(f.Next(), "e%d", &n)
	return fmt.Sprintf("e%07d", n+1)
}

func near(a, b float64) bool { return a-b < 1e-6*max(1, b) && b-a < 1e-6*max(1, b) }
