// Package demo is contextfold demo: one real session, bundled in the binary,
// replayed through context-fold and through raw history, with the savings,
// the fold events, and one folded block's digest next to its exact recall
// from a Pi session file. No arguments, no network, no key.
package demo

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	cf := bench.ContextFold{Knobs: policy.DefaultKnobs, Policy: schedule.Default, Reserve: bench.PiReserve}
	fold := cf.Replay(tr, opt.Window, nil)
	ur := bench.Price(raw.Requests, opt.Window, 0)
	uf := bench.Price(fold.Requests, opt.Window, 0)

	fmt.Fprintf(w, "context-fold demo — %s\n", SessionName)
	fmt.Fprintf(w, "%d messages, %d model requests, window %dk, system prompt and tools %d tokens\n\n", len(tr.Msgs), len(tr.Requests), opt.Window/1000, tr.System)

	// Per-turn table.
	fmt.Fprintf(w, "%8s %12s %14s %10s  %s\n", "request", "raw tokens", "folded tokens", "cached", "")
	prevF := 0
	events := eventRequests(raw.Requests, fold.Requests)
	for k := range fold.Requests {
		total := fold.Requests[k].Total()
		note := ""
		if events[k] != "" {
			note = events[k]
		}
		if k%opt.Every == 0 || note != "" || k == len(fold.Requests)-1 {
			over := ""
			if r := raw.Requests[k].Total(); r > opt.Window {
				over = " (over the window)"
			}
			fmt.Fprintf(w, "%8d %12d %14d %9.0f%%  %s%s\n", k+1, raw.Requests[k].Total(), total, 100*cachedShare(fold.Requests, k), note, over)
		}
		prevF = total
	}
	_ = prevF

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
	fmt.Fprintf(w, "\n%d fold events folded %d blocks; %d of %d folded blocks recoverable byte-exact; %d of %d distinct error lines in them still visible (%d whole, the rest clipped or counted in a group of the same shape).\n",
		fold.Events, fold.Folded, fold.Recoverable, fold.Folded, fold.FoldErrVisible, fold.FoldErrTotal, fold.FoldErrWhole)

	if err := showRecall(w, tr, opt.Window); err != nil {
		return err
	}
	if opt.SVG != "" {
		win := &bench.Window{Window: opt.Window, SeriesName: "pi-mono large-session", Series: map[string][]int{"raw": ur.PerRequest, "context-fold": uf.PerRequest}}
		f, err := os.Create(opt.SVG)
		if err != nil {
			return err
		}
		win.SeriesSVG(f, []string{"raw", "context-fold"})
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nwrote %s (request tokens per turn, raw vs context-fold)\n", opt.SVG)
	}
	return nil
}

// eventRequests marks the requests where context-fold's request stopped
// extending its predecessor: a fold event (or a compaction).
func eventRequests(raw, fold []bench.Request) map[int]string {
	out := map[int]string{}
	for k := 1; k < len(fold); k++ {
		prev, cur := fold[k-1].Segs, fold[k].Segs
		for i := range prev {
			if i >= len(cur) || prev[i] != cur[i] {
				saved := 0
				for j := range cur {
					if j < len(raw[k].Segs) {
						saved += raw[k].Segs[j].Tokens - cur[j].Tokens
					}
				}
				out[k] = fmt.Sprintf("◀ fold event: %s tokens masked so far", tk(saved))
				break
			}
		}
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

// showRecall folds the session as Pi would, writes it as a Pi session file,
// and recalls one folded block from that file, sha256-verified.
func showRecall(w io.Writer, tr *bench.Trace, window int) error {
	e := engine.New(engine.Config{Policy: schedule.Default})
	held := 0
	for _, n := range tr.Requests {
		e.Step(engine.Request{Keep: held, Append: tr.Msgs[held:n], Window: window}, engine.NopJournal{})
		held = n
	}
	// The folded tool result with the most error lines makes the point.
	var pick *registry.Record
	best := -1
	for _, rec := range e.Registry().All() {
		b, ok := e.Live(rec.ID)
		if !ok || b.Kind != block.ToolResult || !e.Frozen(rec.ID) {
			continue
		}
		if n := len(tr.Errors[b.Msg]); n > best && rec.Bytes < 6_000 {
			pick, best = rec, n
		}
	}
	if pick == nil {
		fmt.Fprintln(w, "\n(no block folded at this window)")
		return nil
	}
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
	found, err := led.Locate(pick.ID, pick.SHA256)
	if err != nil {
		return fmt.Errorf("demo: recall %s: %w", pick.Code, err)
	}
	text, note := recall.Whole(found.Text)
	fmt.Fprintf(w, "\nOne folded block, as the model sees it (%d bytes of original):\n\n", pick.Bytes)
	fmt.Fprintln(w, indent(pick.Digest))
	fmt.Fprintf(w, "\nrecall_folded %s → read back from a Pi session file, sha256 %s, verified: %v\n\n", digest.Tag(pick.Code), pick.SHA256[:16]+"…", found.Verified)
	lines := strings.Split(text, "\n")
	show := lines
	if len(show) > 14 {
		show = append(append([]string{}, lines[:7]...), fmt.Sprintf("… (%d more lines) …", len(lines)-14))
		show = append(show, lines[len(lines)-7:]...)
	}
	fmt.Fprintln(w, indent(strings.Join(show, "\n")))
	if note != "" {
		fmt.Fprintln(w, "  ("+note+")")
	}
	return nil
}

func indent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if len(l) > 150 {
			l = l[:150] + "…"
		}
		lines[i] = "  │ " + l
	}
	return strings.Join(lines, "\n")
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
