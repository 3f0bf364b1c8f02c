// Package demo is contextfold demo: one real session, bundled in the binary,
// replayed through context-fold and through raw history, with the savings,
// the fold events, one folded block's digest next to a typical fold's and
// next to its exact recall from a Pi session file, and a chart of tokens
// and cost per request. No arguments, no network, no key.
package demo

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/contextfold/contextfold/internal/bench"
	"github.com/contextfold/contextfold/internal/bench/trajectory"
	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/policy/schedule"
	"github.com/contextfold/contextfold/internal/core/recall"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/pi/ledger"
)

// session is the Pi author's own long session (badlogic/pi-mono test
// fixtures, MIT), converted to the benchmark format.
//
//go:embed pi-mono__large-session.jsonl.gz
var session []byte

// SessionName names the bundled session.
const SessionName = "pi-mono large-session (badlogic/pi-mono test fixtures, MIT)"

// Options configure a demo run.
type Options struct {
	Window int
	// SVG is where the chart goes; "" skips it.
	SVG string
	// Every prints every n-th request in the per-turn table (fold events
	// always print).
	Every int
}

// sonnet is Anthropic's Sonnet price table in US dollars per million
// tokens: bench.Anthropic's relative prices times $3, so the chart's money
// and the table's relative costs agree.
var sonnet = bench.Prices{Name: "Anthropic's Sonnet prices", Input: 3, CacheWrite: 3.75, CacheRead: 0.30, Output: 15}

// priceTable names sonnet's prices in one line.
func priceTable(p bench.Prices) string {
	return fmt.Sprintf("%s, USD per million tokens: input %s, cache write %s, cache read %s, output %s",
		p.Name, dollars(p.Input), dollars(p.CacheWrite), dollars(p.CacheRead), dollars(p.Output))
}

func dollars(x float64) string {
	if x == float64(int(x)) {
		return fmt.Sprintf("$%d", int(x))
	}
	return fmt.Sprintf("$%.2f", x)
}

// Run writes the demo to w.
func Run(w io.Writer, opt Options) error {
	if opt.Window <= 0 {
		opt.Window = 128_000
	}
	if opt.Every <= 0 {
		opt.Every = 40
	}
	zr, err := gzip.NewReader(bytes.NewReader(session))
	if err != nil {
		return fmt.Errorf("demo: bundled session: %w", err)
	}
	ms, err := trajectory.Read(zr)
	if err != nil {
		return fmt.Errorf("demo: bundled session: %w", err)
	}
	tr := bench.Prepare("pi-mono__large-session", "pi", ms, bench.DefaultSystemTokens)
	raw := bench.Raw{}.Replay(tr, opt.Window, nil)
	// The folds shown below are this replay's: the engine it ran.
	var eng *engine.Engine
	cf := bench.ContextFold{Knobs: policy.DefaultKnobs, Policy: schedule.Default, Reserve: bench.PiReserve, Inspect: func(e *engine.Engine) { eng = e }}
	fold := cf.Replay(tr, opt.Window, nil)
	ur := bench.Price(raw.Requests, opt.Window, 0)
	uf := bench.Price(fold.Requests, opt.Window, 0)

	fmt.Fprintf(w, "context-fold demo — %s\n", SessionName)
	fmt.Fprintf(w, "%d messages, %d model requests, window %dk, system prompt and tools %d tokens\n\n", len(tr.Msgs), len(tr.Requests), opt.Window/1000, tr.System)

	// Per-request table.
	fmt.Fprintf(w, "%8s %12s %14s %10s  %s\n", "request", "raw tokens", "folded tokens", "cached", "")
	events := eventNotes(raw.Requests, fold.Requests, fold.EventAt)
	for k := range fold.Requests {
		note := events[k]
		if k%opt.Every == 0 || note != "" || k == len(fold.Requests)-1 {
			over := ""
			if r := raw.Requests[k].Total(); r > opt.Window {
				over = " (over the window)"
			}
			fmt.Fprintf(w, "%8d %12d %14d %9.0f%%  %s%s\n", k+1, raw.Requests[k].Total(), fold.Requests[k].Total(), 100*cachedShare(fold.Requests, k), note, over)
		}
	}

	// Savings.
	fmt.Fprintf(w, "\n%-34s %14s %14s\n", "", "raw", "context-fold")
	fmt.Fprintf(w, "%-34s %14s %14s\n", "input tokens sent", tk(ur.Input), tk(uf.Input))
	fmt.Fprintf(w, "%-34s %14s %14s\n", "largest request", tk(ur.Peak), tk(uf.Peak))
	fmt.Fprintf(w, "%-34s %14d %14d\n", "requests over the window", ur.OverWindow, uf.OverWindow)
	fmt.Fprintf(w, "%-34s %14d %14d\n", "prompt-cache breaks", ur.Breaks, uf.Breaks)
	for _, p := range []bench.Prices{bench.Anthropic, bench.OpenAI} {
		a, b := ur.Cost(p), uf.Cost(p)
		fmt.Fprintf(w, "%-34s %14s %14s  (%+.1f %%)\n", "cost, "+p.Name+" prices (rel.)", "1.000", fmt.Sprintf("%.3f", b/a), 100*(b/a-1))
	}
	costRaw := perMillion(bench.Running(raw.Requests, opt.Window, 0, sonnet))
	costFold := perMillion(bench.Running(fold.Requests, opt.Window, 0, sonnet))
	a, b := last(costRaw), last(costFold)
	fmt.Fprintf(w, "%-34s %14s %14s  (%+.1f %%)\n", "cost in USD at Sonnet prices", fmt.Sprintf("$%.2f", a), fmt.Sprintf("$%.2f", b), 100*(b/a-1))
	fmt.Fprintf(w, "  (%s)\n", priceTable(sonnet))
	fmt.Fprintf(w, "\n%d fold events folded %d blocks; %d of %d folded blocks recoverable byte-exact; %d of %d distinct error lines in them still visible (%d whole, the rest clipped or counted in a group of the same shape).\n",
		fold.Events, fold.Folded, fold.Recoverable, fold.Folded, fold.FoldErrVisible, fold.FoldErrTotal, fold.FoldErrWhole)

	if err := showFolds(w, tr, eng); err != nil {
		return err
	}
	if opt.SVG != "" {
		ch := chart(opt.Window, fold, ur, uf, costRaw, costFold)
		f, err := os.Create(opt.SVG)
		if err != nil {
			return err
		}
		ch.SVG(f)
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nwrote %s (input tokens per request and cumulative cost in USD, raw vs context-fold, with the %d fold events and the %s budget marked)\n", opt.SVG, len(fold.EventAt), tk(fold.Budget))
	}
	return nil
}

// perMillion turns costs at prices per million tokens into dollars.
func perMillion(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x / 1e6
	}
	return out
}

func last(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[len(xs)-1]
}

// chart is the demo's chart: tokens and running cost per request, the
// fold events, and the sizes the requests are held to — the window, Pi's
// compaction threshold, context-fold's budget and where its folds may
// start. costRaw and costFold are in dollars.
func chart(window int, fold bench.Replay, ur, uf bench.Usage, costRaw, costFold []float64) *bench.DemoChart {
	levels := []bench.Level{{Tokens: window, Label: "window " + tk(window), Class: "window"}}
	if window > bench.PiReserve { // else Pi compacts only on overflow
		levels = append(levels, bench.Level{Tokens: window - bench.PiReserve, Label: fmt.Sprintf("Pi compacts above %s (window − %s reserve)", tk(window-bench.PiReserve), tk(bench.PiReserve)), Class: "threshold"})
	}
	if fold.Budget > 0 {
		levels = append(levels, bench.Level{Tokens: fold.Budget, Label: "context-fold budget " + tk(fold.Budget), Class: "budget"})
	}
	// The schedule's envelope: no economic event below FoldAt of the window.
	foldAt := int(policy.DefaultKnobs.FoldAt * float64(window))
	levels = append(levels, bench.Level{Tokens: foldAt, Label: fmt.Sprintf("no fold below %s (%.0f %% of window)", tk(foldAt), 100*policy.DefaultKnobs.FoldAt), Class: "fold-at"})
	return &bench.DemoChart{
		Title:  fmt.Sprintf("Input tokens per request and cumulative cost — pi-mono large-session, %dk window", window/1000),
		Order:  []string{"raw", "context-fold"},
		Tokens: map[string][]int{"raw": ur.PerRequest, "context-fold": uf.PerRequest},
		Cost:   map[string][]float64{"raw": costRaw, "context-fold": costFold},
		Events: fold.EventAt,
		Levels: levels,
		Prices: "Cost at " + priceTable(sonnet) + "; cached prefix read, the rest written.",
	}
}

// eventNotes marks the requests that carried a fold event with the tokens
// folding has taken out of the request so far.
func eventNotes(raw, fold []bench.Request, at []int) map[int]string {
	out := map[int]string{}
	for _, k := range at {
		saved := 0
		for j, s := range fold[k].Segs {
			if j < len(raw[k].Segs) {
				saved += raw[k].Segs[j].Tokens - s.Tokens
			}
		}
		out[k] = fmt.Sprintf("◀ fold event: %s tokens masked so far", tk(saved))
	}
	return out
}

func cachedShare(reqs []bench.Request, k int) float64 {
	if k == 0 {
		return 0
	}
	prev, cur := reqs[k-1].Segs, reqs[k].Segs
	read := 0
	for i := range cur {
		if i >= len(prev) || prev[i] != cur[i] {
			break
		}
		read += cur[i].Tokens
	}
	return float64(read) / float64(max(1, reqs[k].Total()))
}

func tk(n int) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// fold is one folded block: its record and the trace's block.
type fold struct {
	rec   *registry.Record
	blk   *block.Block
	ratio float64 // original bytes / digest bytes
}

// folds returns the blocks e holds folded, ordered by byte ratio, ties by
// id: the blocks the replay counted as folded (bench.Replay.Folded).
func folds(tr *bench.Trace, e *engine.Engine) []fold {
	var out []fold
	for _, rec := range e.Registry().All() {
		if !e.Frozen(rec.ID) {
			continue
		}
		b, ok := tr.Tr.Lookup(rec.ID)
		if !ok {
			continue
		}
		out = append(out, fold{rec: rec, blk: b, ratio: float64(rec.Bytes) / float64(max(1, len(rec.Digest)))})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ratio != out[j].ratio {
			return out[i].ratio < out[j].ratio
		}
		return out[i].rec.ID < out[j].rec.ID
	})
	return out
}

// extent says how a fold shrank its block: lines and bytes before and
// after, and the byte ratio.
func extent(f fold) string {
	return fmt.Sprintf("%s, %d bytes → %s, %d bytes; byte ratio %.2f×", lines(digest.LineCount(f.blk.Text)), f.rec.Bytes, lines(digest.LineCount(f.rec.Digest)), len(f.rec.Digest), f.ratio)
}

func lines(n int) string {
	if n == 1 {
		return "1 line"
	}
	return fmt.Sprintf("%d lines", n)
}

// typical returns the index in all (sorted by ratio) of the fold that
// holds the median folded byte: the first at which the running sum of
// original bytes reaches half the total. It returns the total, and the
// original and digest bytes of all the folds.
func typical(all []fold) (mid, total, orig, digs int) {
	for _, f := range all {
		orig += f.rec.Bytes
		digs += len(f.rec.Digest)
	}
	run := 0
	for i, f := range all {
		run += f.rec.Bytes
		if 2*run >= orig {
			return i, orig, orig, digs
		}
	}
	return len(all) - 1, orig, orig, digs
}

// showFolds prints a typical fold and the example, the folded tool result
// with the most error lines, next to each other, then recalls the example
// from a Pi session file, sha256-verified.
func showFolds(w io.Writer, tr *bench.Trace, e *engine.Engine) error {
	all := folds(tr, e)
	// The folded tool result with the most error lines makes the point
	// that errors survive folding.
	var pick *fold
	best := -1
	for i := range all {
		f := &all[i]
		if f.blk.Kind != block.ToolResult {
			continue
		}
		if n := len(tr.Errors[f.blk.Msg]); n > best && f.rec.Bytes < 6_000 {
			pick, best = f, n
		}
	}
	if pick == nil {
		fmt.Fprintln(w, "\n(no block folded at this window)")
		return nil
	}
	// The typical fold holds the median folded byte: most folded blocks
	// are short edit confirmations that barely shrink, and the savings
	// come from the large ones, so the median block would not show what
	// folding does to the bytes sent.
	mid, total, orig, digs := typical(all)
	typ := all[mid]
	fmt.Fprintf(w, "\nThe %d folded blocks: %d bytes → %d bytes of digests, %.2f× (byte ratio, original / digest); per block from %.2f× to %.2f×, median %.2f×.\n",
		len(all), orig, digs, float64(orig)/float64(max(1, digs)), all[0].ratio, all[len(all)-1].ratio, all[(len(all)-1)/2].ratio)
	fmt.Fprintf(w, "\nA typical fold — the one holding the median folded byte (folds sorted by byte ratio, ties by id; the first at which the running sum of original bytes reaches half of all %d): block %d of %d, %s %s:\n  %s\n\n",
		total, mid+1, len(all), typ.rec.Tool, digest.Tag(typ.rec.Code), extent(typ))
	excerpt(w, typ.rec.Digest, 40, 10, 300)
	fmt.Fprintf(w, "\nThe example — the folded tool result under 6,000 bytes with the most error lines (%d), %s, as the model sees it:\n  %s\n\n",
		best, digest.Tag(pick.rec.Code), extent(*pick))
	excerpt(w, pick.rec.Digest, 40, 10, 300)

	dir, err := os.MkdirTemp("", "contextfold-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "session.jsonl")
	if err := writeSession(path, tr.Msgs); err != nil {
		return err
	}
	led, err := ledger.ReadFile(path)
	if err != nil {
		return err
	}
	found, err := led.Locate(pick.rec.ID, pick.rec.SHA256)
	if err != nil {
		return fmt.Errorf("demo: recall %s: %w", pick.rec.Code, err)
	}
	text, note := recall.Whole(found.Text)
	n, nl := len(found.Text), digest.LineCount(found.Text)
	fmt.Fprintf(w, "\nrecall_folded %s → read back from a Pi session file: %d bytes, %s; their sha256 %s… equals the registry's: %v\n\n",
		digest.Tag(pick.rec.Code), n, lines(nl), registry.Sum(found.Text)[:16], found.Verified && registry.Sum(found.Text) == pick.rec.SHA256)
	excerpt(w, text, 7, 7, 300)
	if note != "" {
		fmt.Fprintln(w, "  ("+note+")")
	}
	return nil
}

// excerpt prints text indented: whole when it has at most head+tail lines
// and none longer than width characters; otherwise its first head and last
// tail lines, each cut at width characters, and a line saying what is not
// shown.
func excerpt(w io.Writer, text string, head, tail, width int) {
	rows := digest.SplitLines(text)
	hidden, skipped := 0, 0 // bytes and lines not shown
	show := rows
	if len(rows) > head+tail {
		skipped = len(rows) - head - tail
		for _, l := range rows[head : len(rows)-tail] {
			hidden += len(l) + 1
		}
		show = append(append(append([]string{}, rows[:head]...), ""), rows[len(rows)-tail:]...)
	}
	cut := 0
	for i, l := range show {
		if skipped > 0 && i == head {
			fmt.Fprintf(w, "  ┆ … %d lines not shown …\n", skipped)
			continue
		}
		if r := []rune(l); len(r) > width {
			hidden += len(l) - len(string(r[:width]))
			l = string(r[:width]) + "…"
			cut++
		}
		fmt.Fprintln(w, "  │ "+l)
	}
	if hidden == 0 {
		fmt.Fprintf(w, "  (shown whole: %s, %d bytes)\n", lines(len(rows)), len(text))
		return
	}
	var what []string
	if skipped > 0 {
		what = append(what, fmt.Sprintf("%d of %d lines", skipped, len(rows)))
	}
	if cut > 0 {
		what = append(what, fmt.Sprintf("the ends of %d lines longer than %d characters (marked …)", cut, width))
	}
	fmt.Fprintf(w, "  (cut: %s not shown, %d of %d bytes)\n", strings.Join(what, " and "), hidden, len(text))
}

// writeSession writes messages as a Pi v3 session file.
func writeSession(path string, msgs [][]byte) error {
	var b bytes.Buffer
	b.WriteString(`{"type":"session","version":3,"id":"demo","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/demo"}` + "\n")
	parent := "null"
	for i, m := range msgs {
		id := fmt.Sprintf("%08x", i+1)
		fmt.Fprintf(&b, `{"type":"message","id":"%s","parentId":%s,"timestamp":"2026-01-01T00:00:00.000Z","message":`, id, parent)
		b.Write(m)
		b.WriteString("}\n")
		parent = `"` + id + `"`
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
