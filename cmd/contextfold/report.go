package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/contextfold/contextfold/internal/bench/htmlreport"
	"github.com/contextfold/contextfold/internal/bench/htmlreport/piread"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/pi/config"
	"github.com/contextfold/contextfold/internal/proxy/foldstore"
)

// reportCommand is report's entry in the command list (a function: the
// command list and the command refer to each other).
func reportCommand() command {
	return command{"report", []form{{"[-o file.html] [-window N] [session]", "write a session's folding as one self-contained HTML page"}},
		"Report writes one self-contained HTML page (inline SVG and CSS, no script, nothing fetched) about " +
			"a Pi session or a conversation contextfold proxy folded, and prints its path. For a Pi session: " +
			"each model request's size as sent and, estimated, without folding, against the window, Pi's " +
			"compaction threshold (window less -reserve) and the fold budget (-budget, else from context-fold's settings); " +
			"fold events and compactions marked; cache reads and writes; the money spent, as Pi recorded it, " +
			"next to an estimate without folding, at the session's own prices (a price table when it " +
			"recorded none). For a proxy conversation, from the line the proxy notes for each request: its size " +
			"as the client sent it and as it went upstream (the proxy's estimates) against the window, the fold budget " +
			"and the client's own compaction threshold where the proxy knew it; fold events and the client's " +
			"compactions marked; cache reads and writes and the money from the usage the provider reported, " +
			"at a price table, next to an estimate without folding (a file written before the proxy noted " +
			"requests shows what each fold event masks instead). Both list the folded blocks with their codes. The session is named as " +
			"for inspect (the latest when none is named). The session file does not record the model's " +
			"window: give it with -window to draw the lines.",
		reportCmd}
}

func reportCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("report")
	out := fs.String("o", "", "write the page to `file` (default: contextfold-report-<id>.html in the current directory)")
	window := fs.Int("window", 0, "the model's context window in `tokens`, for the size chart's lines (0: not drawn)")
	reserve := fs.Int("reserve", piread.DefaultReserve, "Pi's compaction reserve (reserveTokens) in `tokens`: the threshold is the window less this; -1: Pi's compaction is off, no threshold")
	budget := fs.Int("budget", 0, "context-fold's fold budget in `tokens` (0: from context-fold's settings, as the engine computes it)")
	store := fs.String("store", "", "`directory` of the proxy's fold record, for a conversation id (default: the user's state directory, contextfold/proxy)")
	if exit, ok := parse(fs, reorder(args, map[string]bool{"o": true, "window": true, "reserve": true, "budget": true, "store": true}), stdout, stderr); !ok {
		return exit
	}
	switch {
	case fs.NArg() > 1:
		return wantArgs(stderr, "report", "at most one session", fs.Args())
	case *window < 0:
		return usageError(stderr, "report", "-window %d: want a number of tokens ≥ 0", *window)
	case *reserve < -1:
		return usageError(stderr, "report", "-reserve %d: want a number of tokens ≥ 0, or -1 for no compaction", *reserve)
	case *budget < 0:
		return usageError(stderr, "report", "-budget %d: want a number of tokens ≥ 0", *budget)
	}
	t, err := findTarget(fs.Arg(0), *store)
	if err != nil {
		fmt.Fprintln(stderr, "contextfold report:", err)
		return 1
	}
	var d *htmlreport.Data
	if t.proxy {
		d, err = conversationReport(t.path)
	} else {
		d, err = piread.Read(t.path, piread.Limits{Window: *window, Reserve: *reserve, Budget: *budget, Knobs: piSettings().Knobs})
	}
	if err != nil {
		fmt.Fprintln(stderr, "contextfold report:", err)
		return 1
	}
	path := *out
	if path == "" {
		path = "contextfold-report-" + d.ID + ".html"
	}
	if err := writePage(path, d); err != nil {
		fmt.Fprintln(stderr, "contextfold report:", err)
		return 1
	}
	fmt.Fprintln(stdout, path)
	return 0
}

func writePage(path string, d *htmlreport.Data) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := htmlreport.Write(f, d); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// piSettings are context-fold's settings as the extension resolves them:
// the agent directory's settings file, then the environment.
func piSettings() config.Resolved {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	file := ""
	if dir, err := piSessionsDir(); err == nil {
		file = filepath.Join(filepath.Dir(dir), config.FileName)
	}
	return config.Load(env, file)
}

// conversationReport reads a proxy conversation's file: its requests, as
// the proxy noted them, its fold events and folded blocks. A file written
// before the proxy noted requests has no request series and no money.
func conversationReport(path string) (*htmlreport.Data, error) {
	c, err := foldstore.ReadFile(path)
	if err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(path)
	d := &htmlreport.Data{Kind: "proxy conversation", ID: strings.TrimSuffix(filepath.Base(path), ".jsonl"), File: abs,
		RequestsNote: "the proxy's conversation file holds no request lines (it was written before the proxy noted each request, or no request was noted), so no request series and no cost are shown"}
	at := conversationRequests(d, c.Requests)
	void := map[int]bool{}
	for _, en := range c.Entries {
		if en.Kind == engine.KindVoid {
			void[en.Seq] = true
		}
	}
	released := c.Unfolded()
	for _, en := range c.Entries {
		if en.Kind != engine.KindFold || void[en.Seq] {
			continue
		}
		ev := htmlreport.Event{Seq: en.Seq, Trigger: en.Trigger, Request: at[en.Seq]}
		for _, rec := range en.Folds {
			if rec.Digest == "" {
				continue // recorded for recall only, never folded
			}
			b := htmlreport.Block{Code: rec.Code, Tool: rec.Tool, Seq: en.Seq, Request: at[en.Seq], Bytes: rec.Bytes, State: "text missing or failing its sha256"}
			if t, ok := c.Texts[rec.ID]; ok && t.Verified(&rec) {
				b = htmlreport.NewBlock(rec.Code, rec.Tool, en.Seq, at[en.Seq], t.Text, rec.Digest)
				b.State = "folded"
				if released[rec.ID] {
					b.State = "unfolded"
				} else {
					ev.Masked += max(0, b.Tokens-b.DigestTokens)
				}
			}
			d.Blocks = append(d.Blocks, b)
			ev.Blocks++
		}
		if ev.Blocks > 0 {
			d.Events = append(d.Events, ev)
		}
	}
	return d, nil
}

// conversationRequests puts the requests the proxy noted into d: their
// sizes as it estimated them, the usage the provider reported priced at
// the price table (the proxy records no money), the limits of the last
// request, and the client's compactions. It returns the request each fold
// event was committed at, by event.
func conversationRequests(d *htmlreport.Data, reqs []foldstore.Request) map[int]int {
	at := map[int]int{}
	if len(reqs) == 0 {
		return at
	}
	d.Estimated, d.RequestsNote = true, ""
	d.Prices = &htmlreport.TablePrices
	prev := reqs[0].Compactions
	for i, r := range reqs {
		n := i + 1 // the page numbers what it shows; a lost line leaves no gap
		q := htmlreport.Request{EstRaw: r.Raw, EstSent: r.Sent, Masked: max(0, r.Raw-r.Sent), NoUsage: r.Usage == nil}
		if u := r.Usage; u != nil {
			q.Input, q.CacheRead, q.CacheWrite, q.Output = u.Input, u.CacheRead, u.CacheWrite, u.Output
		}
		d.Requests = append(d.Requests, q)
		if r.Seq > 0 {
			at[r.Seq] = n
		}
		if r.Compactions > prev {
			d.Compactions = append(d.Compactions, htmlreport.Compaction{Request: n, Kind: "the client's own compaction, recorded at this request"})
		}
		prev = r.Compactions
	}
	last := reqs[len(reqs)-1]
	d.Window, d.Budget = last.Window, last.Budget
	d.LimitsNote = "the window and fold budget the proxy planned the last request against"
	if last.Reserve > 0 && last.Reserve < last.Window {
		d.Threshold = last.Window - last.Reserve
		d.LimitsNote += "; the compaction threshold is the client's own: the window less the room it keeps free before it compacts, as the proxy knew it"
	} else {
		d.LimitsNote += "; the client's compaction threshold was not known to the proxy, so none is drawn"
	}
	return at
}
