package service

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/recall"
	"github.com/contextfold/contextfold/internal/core/telemetry"
	"github.com/contextfold/contextfold/internal/pi/ledger"
	"github.com/contextfold/contextfold/internal/pi/protocol"
	"github.com/contextfold/contextfold/internal/testsupport/pisession"
)

// Anthropic-like prices, in dollars a token.
const priceIn, priceRead, priceWrite, priceOut = 3e-6, 0.3e-6, 3.75e-6, 15e-6

// responseUsage is the usage of response k of a growing session: the
// earlier prompt read from the cache, the newest pair written.
func responseUsage(k int) telemetry.Usage {
	u := telemetry.Usage{Input: 50, Output: 40, CacheRead: 1000 * k, CacheWrite: 1500, Provider: "anthropic", Model: "m", At: int64(100 + k), Stop: "toolUse"}
	u.Cost = telemetry.Cost{Input: float64(u.Input) * priceIn, Output: float64(u.Output) * priceOut, CacheRead: float64(u.CacheRead) * priceRead, CacheWrite: float64(u.CacheWrite) * priceWrite}
	u.Cost.Total = u.Cost.Input + u.Cost.Output + u.Cost.CacheRead + u.Cost.CacheWrite
	return u
}

// withUsage is assistant message m carrying u as Pi writes it.
func withUsage(m json.RawMessage, u telemetry.Usage) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"input": u.Input, "output": u.Output, "cacheRead": u.CacheRead, "cacheWrite": u.CacheWrite,
		"totalTokens": u.Input + u.Output + u.CacheRead + u.CacheWrite, "cost": u.Cost})
	head := fmt.Sprintf(`{"role":"assistant","usage":%s,"provider":%q,"model":%q,"stopReason":%q,`, b, u.Provider, u.Model, u.Stop)
	return json.RawMessage(strings.Replace(string(m), `{"role":"assistant",`, head, 1))
}

type turnNotice struct {
	Event  *EventSummary
	Notice string
	Footer string
}

// liveSession runs n requests of a growing session through a service,
// each answered with responseUsage, and writes the session file Pi would
// hold: each fold entry before the response of the request that carried
// it. It returns the client, the file and the notices of the turns.
func liveSession(t *testing.T, dir string, n int, env map[string]string) (*protocol.Conn, string, []string) {
	t.Helper()
	c, ad := start(t)
	conv := messages(n, "")
	if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: dir, Env: env}, nil); err != nil {
		t.Fatal(err)
	}
	f := pisession.New("s1")
	f.Message(conv[0])
	var notices []string
	for k := 0; k < n; k++ {
		before := len(ad.entries)
		var out turnNotice
		if err := call(t, c, "turn", map[string]any{"keep": 0, "append": conv[:2*k+1], "window": 16_000}, &out); err != nil {
			t.Fatal(err)
		}
		if out.Notice != "" {
			notices = append(notices, out.Notice)
		}
		for _, e := range ad.entries[before:] {
			f.Custom(CustomType, e)
		}
		u := responseUsage(k)
		if err := call(t, c, "usage", u, nil); err != nil {
			t.Fatal(err)
		}
		f.Message(withUsage(conv[2*k+1], u))
		f.Message(conv[2*k+2])
	}
	path := filepath.Join(dir, "session.jsonl")
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return c, path, notices
}

// TestResumeKeepsCacheAndSavings: reopening a session from its file gives
// the cache figures, what folds saved (tokens and money) and the fold
// events of the live run, instead of "no usage reported yet".
func TestResumeKeepsCacheAndSavings(t *testing.T) {
	dir := t.TempDir()
	c, file, _ := liveSession(t, dir, 30, nil)
	var live Status
	call(t, c, "status", map[string]any{}, &live)
	if len(live.Events) == 0 || live.Saved == 0 || live.SavedMoney == 0 {
		t.Fatalf("the live run folded nothing: %+v", live)
	}

	c2, _ := start(t)
	if err := call(t, c2, "open", OpenParams{SessionID: "s1", SessionDir: dir, SessionFile: file, Entries: foldEntriesOf(t, file)}, nil); err != nil {
		t.Fatal(err)
	}
	var st Status
	call(t, c2, "status", map[string]any{}, &st)
	text := strings.Join(st.Lines, "\n")
	if strings.Contains(text, "no usage reported yet") {
		t.Fatalf("resumed status lost the usage:\n%s", text)
	}
	if cache := lineWith(live.Lines, "cache: "); cache == "" || lineWith(st.Lines, "cache: ") != cache {
		t.Fatalf("cache line after resume %q, live %q", lineWith(st.Lines, "cache: "), cache)
	}
	if st.Spent != live.Spent || st.Reprefilled != live.Reprefilled || st.HitRatio != live.HitRatio {
		t.Fatalf("resumed spent %v, re-prefilled %d, hit %v; live %v, %d, %v", st.Spent, st.Reprefilled, st.HitRatio, live.Spent, live.Reprefilled, live.HitRatio)
	}
	// Replayed folds are priced from their recorded sizes until the next
	// request: the savings agree to within that estimate.
	if d := math.Abs(float64(st.Saved-live.Saved)) / float64(live.Saved); d > 0.05 {
		t.Fatalf("resumed saved %d tok, live %d", st.Saved, live.Saved)
	}
	if d := math.Abs(st.SavedMoney-live.SavedMoney) / live.SavedMoney; d > 0.05 || st.ExtraWrites != live.ExtraWrites {
		t.Fatalf("resumed saved $%.4f (extra writes $%.4f), live $%.4f ($%.4f)", st.SavedMoney, st.ExtraWrites, live.SavedMoney, live.ExtraWrites)
	}
	if cost := lineWith(st.Lines, "cost: "); !strings.Contains(cost, "so far cost "+money(live.Spent)+" at Pi's prices") || !strings.Contains(cost, "folding saved ≈$") || !strings.Contains(cost, "estimate") {
		t.Fatalf("cost line after resume: %q", cost)
	}
	if len(st.Events) != len(live.Events) {
		t.Fatalf("resumed events %+v, live %+v", st.Events, live.Events)
	}
	for i, ev := range st.Events {
		if lv := live.Events[i]; ev.Seq != lv.Seq || ev.Request != lv.Request || ev.Blocks != lv.Blocks {
			t.Fatalf("resumed event %+v, live %+v", ev, lv)
		}
	}
}

// foldEntriesOf returns the data of the contextfold.fold entries of a session file.
func foldEntriesOf(t *testing.T, file string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	led, err := ledger.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range led.Custom(CustomType) {
		out = append(out, e.Data)
	}
	return out
}

func lineWith(lines []string, prefix string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestFoldNotices: each fold event carries one short notice naming its
// blocks and the tokens it keeps out of each request, the status lists the
// recent events, and CONTEXTFOLD_FOLD_NOTICES=off silences the notice.
func TestFoldNotices(t *testing.T) {
	c, _, notices := liveSession(t, t.TempDir(), 30, nil)
	var st Status
	call(t, c, "status", map[string]any{}, &st)
	if len(notices) == 0 || len(notices) != len(st.Events) {
		t.Fatalf("%d notices for %d fold events", len(notices), len(st.Events))
	}
	for i, ev := range st.Events {
		if want := fmt.Sprintf("context-fold: folded %s, −%s tok a request (fold event %d)", recall.Count(ev.Blocks, "block", "blocks"), telemetry.K(ev.Masked), ev.Seq); notices[i] != want {
			t.Errorf("notice %q, want %q", notices[i], want)
		}
	}
	last := st.Events[len(st.Events)-1]
	if l := fmt.Sprintf("  #%d at request %d: %s, −%s tok a request", last.Seq, last.Request, recall.Count(last.Blocks, "block", "blocks"), telemetry.K(last.Masked)); !strings.Contains(strings.Join(st.Lines, "\n"), l) {
		t.Fatalf("status does not list the newest event %q:\n%s", l, strings.Join(st.Lines, "\n"))
	}
	_, _, quiet := liveSession(t, t.TempDir(), 30, map[string]string{"CONTEXTFOLD_FOLD_NOTICES": "off"})
	if len(quiet) != 0 {
		t.Fatalf("CONTEXTFOLD_FOLD_NOTICES=off: %q", quiet)
	}
}

// TestFoldedListShowAndUnfold: the folded list of a resumed session names
// every block folded now, with its age; show reads one back verified without counting as the model's recall;
// unfold takes it off the list.
func TestFoldedListShowAndUnfold(t *testing.T) {
	dir := t.TempDir()
	_, file, _ := liveSession(t, dir, 30, nil)
	// Resumed from the file, so that reads are verified against it.
	c, _ := start(t)
	if err := call(t, c, "open", OpenParams{SessionID: "s1", SessionDir: dir, SessionFile: file, Entries: foldEntriesOf(t, file)}, nil); err != nil {
		t.Fatal(err)
	}
	turn(t, c, 0, messages(30, "")[:59], 16_000) // the context Pi rebuilds, as the adapter sends it
	var v FoldedView
	if err := call(t, c, "folded", map[string]any{}, &v); err != nil {
		t.Fatal(err)
	}
	var st Status
	call(t, c, "status", map[string]any{}, &st)
	if len(v.Blocks) == 0 || len(v.Blocks) != st.Blocks {
		t.Fatalf("%d listed, %d folded", len(v.Blocks), st.Blocks)
	}
	b := v.Blocks[len(v.Blocks)-1]
	if b.Tool != "bash" || b.ErrorLines != 1 || b.Age < 0 || b.Tokens <= b.Saved || !strings.HasPrefix(b.Row, b.Code+" · bash · folded ") {
		t.Fatalf("folded block %+v", b)
	}
	if !strings.Contains(strings.Join(st.Lines, "\n"), "  "+v.Blocks[0].Row) {
		t.Fatalf("status does not list the folded blocks:\n%s", strings.Join(st.Lines, "\n"))
	}
	var res ToolResult
	if err := call(t, c, "show", ShowParams{Code: b.Code}, &res); err != nil || res.IsError {
		t.Fatalf("show: %v %+v", err, res)
	}
	if !strings.Contains(res.Text, "sha256 verified") || !strings.Contains(res.Text, "ERROR: step 0 failed") {
		t.Fatalf("show:\n%.400s", res.Text)
	}
	call(t, c, "status", map[string]any{}, &st)
	if strings.Contains(strings.Join(st.Lines, "\n"), "recall churn") {
		t.Fatal("the user's reads count as the model's recall churn")
	}
	if err := call(t, c, "unfold", UnfoldParams{Codes: []string{b.Code}}, &res); err != nil || res.IsError {
		t.Fatalf("unfold: %v %s", err, res.Text)
	}
	var after FoldedView
	call(t, c, "folded", map[string]any{}, &after)
	if len(after.Blocks) != len(v.Blocks)-1 {
		t.Fatalf("after unfold %d listed, before %d", len(after.Blocks), len(v.Blocks))
	}
	for _, a := range after.Blocks {
		if a.Code == b.Code {
			t.Fatal("the unfolded block is still listed")
		}
	}
}

// TestFooterHidesWhatIsEmpty: the footer's gauge shows nothing when
// nothing can fold yet (no "next 0/0"), and the footer no longer shows a
// cache share beside Pi's own CH; the status explains each field.
func TestFooterHidesWhatIsEmpty(t *testing.T) {
	for _, tc := range []struct {
		st   policy.Status
		want string
	}{
		{policy.Status{UsageFraction: 0.6, FoldAt: 0.45, MaskableTokens: 0, StepTokens: 0}, ""},
		{policy.Status{UsageFraction: 0.6, FoldAt: 0.45, MaskableTokens: 0, StepTokens: 9600}, ""},
		{policy.Status{UsageFraction: 0.6, FoldAt: 0.45, MaskableTokens: 3100, StepTokens: 9600}, "next 3.1k/9.6k"},
		{policy.Status{UsageFraction: 0.2, FoldAt: 0.45}, "fold at 45%"},
	} {
		ss := &session{tm: telemetry.New(), status: tc.st}
		if got := gauge(ss, true); got != tc.want {
			t.Errorf("gauge(%+v) = %q, want %q", tc.st, got, tc.want)
		}
	}
	c, _, _ := liveSession(t, t.TempDir(), 30, nil)
	var st Status
	call(t, c, "status", map[string]any{}, &st)
	if strings.Contains(st.Footer, "cache") || strings.Contains(st.Footer, "next 0/") || !strings.Contains(st.Footer, " saved") {
		t.Fatalf("footer %q", st.Footer)
	}
	if !strings.Contains(strings.Join(st.Lines, "\n"), footerLegend) {
		t.Fatal("the status does not explain the footer")
	}
	if cache := lineWith(st.Lines, "cache: "); !strings.Contains(cache, "(Pi's CH)") {
		t.Fatalf("cache line %q does not say which figure is Pi's", cache)
	}
}
