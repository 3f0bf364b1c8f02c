// Package htmlreport renders contextfold report: one self-contained HTML
// page (inline CSS and SVG, no script, no external reference) about one
// session's folding: request sizes raw and sent against the window, Pi's
// compaction threshold and the fold budget, fold events and compactions,
// cache reads and writes, the money spent with folding and an estimate of
// it without, and the folded blocks with their codes.
//
// It renders a neutral Data and imports no host: the command reads a Pi
// session (package pisession beside this one) or a proxy conversation
// into Data, so the same page serves both and neither host reaches into
// the other.
package htmlreport

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/contextfold/contextfold/internal/core/risk"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

// Data is what a page shows. Zero values mean "not recorded": the page
// says so instead of drawing a figure it does not have.
type Data struct {
	Kind  string // "Pi session" or "proxy conversation"
	ID    string // the session or conversation id
	File  string
	Model string // the model most requests went to; "" when unknown
	// Window, Threshold and Budget are drawn as lines when > 0: the
	// model's context window, the size at which the host compacts (Pi:
	// window − reserveTokens), and context-fold's fold budget.
	Window, Threshold, Budget int
	// LimitsNote says where Window, Threshold and Budget come from.
	LimitsNote string
	// Requests are the model requests in order; empty when the record
	// keeps none (RequestsNote says why).
	Requests     []Request
	RequestsNote string
	// Estimated says the sizes drawn are the host's own estimates
	// (Request.EstRaw and EstSent: the proxy's), not the usage reported.
	Estimated   bool
	Events      []Event
	Compactions []Compaction
	Blocks      []Block
	// Prices price tokens the record holds no money for, and the estimate
	// without folding; nil when there is nothing to price.
	Prices *Prices
}

// Request is one model request.
type Request struct {
	// Input, CacheRead and CacheWrite are the prompt as the provider
	// reported it: uncached input, read from and written to the cache.
	Input, CacheRead, CacheWrite, Output int
	// Masked is the estimated tokens the fold events in effect kept out of
	// this request: what it would have carried with every folded block
	// whole.
	Masked int
	// Cost is the money the request cost as the host recorded it; valid
	// when CostKnown.
	Cost      float64
	CostKnown bool
	// EstRaw and EstSent are the request's size without and with folding
	// as the host estimated it (the proxy, which sees the whole request);
	// drawn when Data.Estimated.
	EstRaw, EstSent int
	// NoUsage: the record holds no usage for the request; it is left out
	// of the cache chart and the money.
	NoUsage bool
}

// Sent is the request's prompt tokens as reported.
func (r Request) Sent() int { return r.Input + r.CacheRead + r.CacheWrite }

// Raw is the request's estimated size without folding.
func (r Request) Raw() int { return r.Sent() + r.Masked }

// Event is one fold event.
type Event struct {
	Seq     int
	Trigger string
	// Request is the 1-based request the event first applied to; 0 when
	// the record does not say.
	Request int
	Blocks  int
	Masked  int // estimated tokens it keeps out of each request
}

// Compaction is one compaction of the history.
type Compaction struct {
	Request int    // the 1-based request after it; 0 when unknown
	Kind    string // who summarised, e.g. "Pi's LLM summary"
}

// Block is one folded block.
type Block struct {
	Code, Tool string
	Seq        int // the fold event
	Request    int // the first request sent with its digest; 0 when unknown
	Bytes      int
	// Tokens and DigestTokens are the estimates of the block whole and
	// folded.
	Tokens, DigestTokens int
	// ErrLines are the distinct error lines of the block's text; ErrKept
	// of them appear whole in its digest.
	ErrLines, ErrKept int
	State             string // "folded", "unfolded", "compacted", …
}

// NewBlock fills a Block's estimates from the folded text and its digest.
func NewBlock(code, tool string, seq, request int, text, digest string) Block {
	b := Block{Code: code, Tool: tool, Seq: seq, Request: request, Bytes: len(text), Tokens: tokens.Block(text), DigestTokens: tokens.Block(digest)}
	seen := map[string]bool{}
	for _, l := range risk.Lines(text, risk.Error) {
		s := tokens.Trim(l.Text)
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		b.ErrLines++
		if strings.Contains(digest, s) {
			b.ErrKept++
		}
	}
	return b
}

// Prices are per million tokens, in US dollars.
type Prices struct {
	Source                               string // where they come from, shown on the page
	Input, CacheWrite, CacheRead, Output float64
}

// TablePrices is the fallback price table when a record holds no money:
// Claude Sonnet 4's list prices.
var TablePrices = Prices{Source: "price table: Claude Sonnet 4 list prices", Input: 3, CacheWrite: 3.75, CacheRead: 0.30, Output: 15}

// price is r's cost under p.
func (p *Prices) price(r Request) float64 {
	return (float64(r.Input)*p.Input + float64(r.CacheWrite)*p.CacheWrite + float64(r.CacheRead)*p.CacheRead + float64(r.Output)*p.Output) / 1e6
}

// Costs returns the cumulative money with folding (as recorded, or priced
// by d.Prices) and the estimate without it. Without folding, each request
// carries its masked tokens too: read from the cache when the request read
// from it, written otherwise; and the request after a fold event reads
// what the event made it write again (its writes beyond what was new since
// the request before). Compactions that larger requests would have forced
// sooner are not modelled.
func (d *Data) Costs() (with, without []float64) {
	if d.Prices == nil || len(d.Requests) == 0 {
		return nil, nil
	}
	p := d.Prices
	after := map[int]bool{}
	for _, e := range d.Events {
		after[e.Request] = true
	}
	var cw, cn float64
	for i, r := range d.Requests {
		if r.NoUsage {
			with, without = append(with, cw), append(without, cn)
			continue
		}
		c := r.Cost
		if !r.CostKnown {
			c = p.price(r)
		}
		extra := float64(r.Masked) * p.CacheWrite
		if r.CacheRead > 0 {
			extra = float64(r.Masked) * p.CacheRead
		}
		if after[i+1] && i > 0 {
			grown := max(0, r.Raw()-d.Requests[i-1].Raw())
			rewritten := max(0, r.CacheWrite-grown)
			extra -= float64(rewritten) * (p.CacheWrite - p.CacheRead)
		}
		cw += c
		cn += c + extra/1e6
		with = append(with, cw)
		without = append(without, cn)
	}
	return with, without
}

// Write renders d as one HTML page.
func Write(w io.Writer, d *Data) error {
	var b strings.Builder
	title := "context-fold report: " + d.Kind + " " + d.ID
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n", esc(title), css)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(title))
	b.WriteString("<dl class=\"facts\">\n")
	fact(&b, "file", d.File)
	if d.Model != "" {
		fact(&b, "model", d.Model)
	}
	fact(&b, "model requests", count(len(d.Requests), d.RequestsNote))
	fact(&b, "fold events", fmt.Sprint(len(d.Events)))
	fact(&b, "folded blocks", fmt.Sprint(len(d.Blocks)))
	fact(&b, "compactions", fmt.Sprint(len(d.Compactions)))
	fact(&b, "window", limit(d.Window))
	fact(&b, "compaction threshold", limit(d.Threshold))
	fact(&b, "fold budget", limit(d.Budget))
	if d.LimitsNote != "" {
		fact(&b, "limits from", d.LimitsNote)
	}
	b.WriteString("</dl>\n")

	if len(d.Requests) > 0 {
		sizes(&b, d)
		cache(&b, d)
		money(&b, d)
	} else {
		fmt.Fprintf(&b, "<section id=\"requests\"><h2>Requests and cost</h2>\n<p class=\"missing\">Not recorded: %s.</p>\n</section>\n", esc(d.RequestsNote))
		eventBars(&b, d)
	}
	events(&b, d)
	blocks(&b, d)
	b.WriteString("<footer>Token figures marked ~ are estimates (context-fold's estimate, 4 characters a token); the others are as the provider reported them. Written by contextfold report.</footer>\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

const css = `
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1040px;color:#1d2330;padding:0 16px}
h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #d7dbe3;padding-bottom:4px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0}dl.facts dt{color:#5b6475}dl.facts dd{margin:0;word-break:break-all}
svg{display:block;background:#fbfcfe;border:1px solid #e3e6ec;margin:6px 0}
svg text{font:11px system-ui,sans-serif;fill:#3b4252}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;font-size:12px;color:#3b4252;margin:4px 0}.legend i{display:inline-block;width:18px;height:3px;vertical-align:middle;margin-right:5px}
table{border-collapse:collapse;width:100%;font-size:12.5px}th,td{text-align:right;padding:3px 8px;border-bottom:1px solid #eceef2}th{background:#f2f4f8}
td.l,th.l{text-align:left}code{font:12px ui-monospace,monospace}
.missing{color:#7a4b00;background:#fff6e0;padding:6px 10px;border-radius:4px}
.note{color:#5b6475;font-size:12.5px}
.money{font-size:15px}.money b{font-size:17px}
footer{margin-top:28px;color:#5b6475;font-size:12px}
`

// Colours of the series and markers.
const (
	cRaw       = "#9aa3b2"
	cSent      = "#2563eb"
	cWindow    = "#dc2626"
	cThreshold = "#ea580c"
	cBudget    = "#16a34a"
	cFold      = "#7c3aed"
	cCompact   = "#b91c1c"
	cRead      = "#0d9488"
	cWrite     = "#f59e0b"
	cInput     = "#64748b"
)

// A plot maps request indexes and values to an SVG area.
type plot struct {
	w, h, left, right, top, bottom float64
	n                              int     // requests
	ymax                           float64 // top of the value axis
}

func newPlot(n int, ymax float64) plot {
	return plot{w: 1000, h: 320, left: 64, right: 16, top: 14, bottom: 34, n: n, ymax: niceCeil(ymax)}
}

// x is request i's (1-based) position.
func (p plot) x(i int) float64 {
	if p.n <= 1 {
		return p.left
	}
	return p.left + float64(i-1)*(p.w-p.left-p.right)/float64(p.n-1)
}

func (p plot) y(v float64) float64 {
	return p.h - p.bottom - v/p.ymax*(p.h-p.top-p.bottom)
}

// open starts the SVG with its axes and gridlines; unit formats a value.
func (p plot) open(b *strings.Builder, id, label string, unit func(float64) string) {
	fmt.Fprintf(b, "<svg id=\"%s\" viewBox=\"0 0 %.0f %.0f\" width=\"100%%\" role=\"img\" aria-label=\"%s\">\n", id, p.w, p.h, esc(label))
	for k := 0; k <= 4; k++ {
		v := p.ymax * float64(k) / 4
		y := p.y(v)
		fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e6ec\"/>", p.left, y, p.w-p.right, y)
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", p.left-6, y+4, unit(v))
	}
	for _, i := range ticks(p.n) {
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>", p.x(i), p.h-p.bottom+15, i)
	}
	fmt.Fprintf(b, "\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">model request</text>\n", (p.left+p.w-p.right)/2, p.h-4)
}

// line draws a series as a polyline.
func (p plot) line(b *strings.Builder, class, colour string, dash bool, vals []float64) {
	var pts []string
	for i, v := range vals {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", p.x(i+1), p.y(v)))
	}
	d := ""
	if dash {
		d = ` stroke-dasharray="6 4"`
	}
	fmt.Fprintf(b, "<polyline class=\"series %s\" data-points=\"%d\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"%s\"/>\n", class, len(vals), colour, d, strings.Join(pts, " "))
}

// limit draws a horizontal line at v, labelled.
func (p plot) limit(b *strings.Builder, class, colour, label string, v int, at float64) {
	if v <= 0 {
		return
	}
	y := p.y(float64(v))
	fmt.Fprintf(b, "<g class=\"limit %s\" data-tokens=\"%d\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"8 5\"/>", class, v, p.left, y, p.w-p.right, y, colour)
	// Each line's label sits at its own share of the width: the lines may
	// lie close together.
	fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" style=\"fill:%s\">%s %s</text></g>\n", p.left+at*(p.w-p.right-p.left)-4, y-4, colour, esc(label), tk(v))
}

// marker draws a vertical line before request i, labelled unless the
// last label drawn (*last, an x) is too close to read.
func (p plot) marker(b *strings.Builder, class, colour, label, data string, i int, last *float64) {
	if i <= 0 || i > p.n {
		return
	}
	x := p.x(i)
	fmt.Fprintf(b, "<g class=\"marker %s\" %s><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1\" opacity=\"0.8\"/>", class, data, x, p.top, x, p.h-p.bottom, colour)
	if x-*last >= 9*float64(len(label)) {
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" style=\"fill:%s\">%s</text>", x, p.top+9, colour, esc(label))
		*last = x
	}
	b.WriteString("</g>\n")
}

func sizes(b *strings.Builder, d *Data) {
	rawOf, sentOf := Request.Raw, Request.Sent
	sentLabel := "sent (as reported)"
	if d.Estimated {
		rawOf, sentOf = func(r Request) int { return r.EstRaw }, func(r Request) int { return r.EstSent }
		sentLabel = "sent ~ (as folded, estimated)"
	}
	raw, sent := make([]float64, len(d.Requests)), make([]float64, len(d.Requests))
	top := float64(max(d.Window, d.Threshold, d.Budget))
	for i, r := range d.Requests {
		raw[i], sent[i] = float64(rawOf(r)), float64(sentOf(r))
		top = max(top, raw[i])
	}
	p := newPlot(len(d.Requests), top)
	b.WriteString("<section id=\"sizes\"><h2>Request size: raw ~ vs sent</h2>\n")
	legend(b, [][2]string{{cRaw, "raw ~ (every folded block whole, estimated)"}, {cSent, sentLabel}, {cWindow, "window"}, {cThreshold, "compaction threshold"}, {cBudget, "fold budget"}, {cFold, "fold event F"}, {cCompact, "compaction C"}})
	p.open(b, "chart-sizes", "request size per model request", axisTokens)
	p.limit(b, "window", cWindow, "window", d.Window, 1)
	p.limit(b, "threshold", cThreshold, "compaction threshold", d.Threshold, 0.7)
	p.limit(b, "budget", cBudget, "fold budget", d.Budget, 0.4)
	last := math.Inf(-1)
	for _, e := range d.Events {
		p.marker(b, "fold", cFold, fmt.Sprintf("F%d", e.Seq), fmt.Sprintf("data-seq=\"%d\" data-request=\"%d\"", e.Seq, e.Request), e.Request, &last)
	}
	last = math.Inf(-1)
	for _, c := range d.Compactions {
		p.marker(b, "compaction", cCompact, "C", fmt.Sprintf("data-request=\"%d\"", c.Request), c.Request, &last)
	}
	p.line(b, "raw", cRaw, true, raw)
	p.line(b, "sent", cSent, false, sent)
	b.WriteString("</svg>\n")
	peakRaw, peakSent := 0, 0
	for _, r := range d.Requests {
		peakRaw, peakSent = max(peakRaw, rawOf(r)), max(peakSent, sentOf(r))
	}
	if d.Estimated {
		fmt.Fprintf(b, "<p class=\"note\">Largest request sent: ~%s tokens; raw, without folding: ~%s tokens. Both are the proxy's estimates of the whole request (system, tools and messages), raw as the client sent it and sent as it went upstream; without folding the client would have compacted differently, which is not modelled.</p>\n</section>\n", num(peakSent), num(peakRaw))
		return
	}
	fmt.Fprintf(b, "<p class=\"note\">Largest request sent: %s tokens; raw, without folding: ~%s tokens. Raw is the request as sent plus the estimated tokens the folds in effect kept out of it; without folding the host would have compacted differently, which is not modelled.</p>\n</section>\n", num(peakSent), num(peakRaw))
}

func cache(b *strings.Builder, d *Data) {
	top := 0.0
	var reads, writes int
	for _, r := range d.Requests {
		top = max(top, float64(r.Sent()))
		reads += r.CacheRead
		writes += r.CacheWrite
	}
	p := newPlot(len(d.Requests), top)
	b.WriteString("<section id=\"cache\"><h2>Cache reads and writes per request</h2>\n")
	legend(b, [][2]string{{cRead, "cache read"}, {cWrite, "cache write"}, {cInput, "uncached input"}})
	p.open(b, "chart-cache", "cache reads and writes per model request", axisTokens)
	bw := max(0.6, (p.w-p.left-p.right)/float64(max(1, len(d.Requests)))*0.8)
	for i, r := range d.Requests {
		x := p.x(i+1) - bw/2
		base := 0.0
		for _, s := range []struct {
			class, colour string
			v             int
		}{{"read", cRead, r.CacheRead}, {"write", cWrite, r.CacheWrite}, {"input", cInput, r.Input}} {
			if s.v == 0 {
				continue
			}
			y0, y1 := p.y(base), p.y(base+float64(s.v))
			fmt.Fprintf(b, "<rect class=\"bar %s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>", s.class, x, y1, bw, y0-y1, s.colour)
			base += float64(s.v)
		}
		b.WriteByte('\n')
	}
	b.WriteString("</svg>\n")
	hit := 0.0
	if reads+writes > 0 {
		hit = 100 * float64(reads) / float64(reads+writes)
	}
	fmt.Fprintf(b, "<p class=\"note\">Over the session: %s tokens read from the cache, %s written to it (%.0f %% of cacheable tokens read).%s</p>\n</section>\n", num(reads), num(writes), hit, noUsage(d))
}

func money(b *strings.Builder, d *Data) {
	with, without := d.Costs()
	b.WriteString("<section id=\"cost\"><h2>Cumulative cost, with and without folding</h2>\n")
	if with == nil {
		b.WriteString("<p class=\"missing\">No prices: the record holds no money and no price applies.</p>\n</section>\n")
		return
	}
	known := true
	for _, r := range d.Requests {
		known = known && r.CostKnown
	}
	src := "the money the host recorded for each request"
	if !known {
		src = "the tokens priced at the prices below"
	}
	legend(b, [][2]string{{cSent, "with folding: " + src}, {cRaw, "without folding ~ (estimated)"}})
	top := max(with[len(with)-1], without[len(without)-1], slicesMax(without), slicesMax(with))
	p := newPlot(len(d.Requests), top)
	p.open(b, "chart-cost", "cumulative cost with and without folding", func(v float64) string { return "$" + short(v) })
	last := math.Inf(-1)
	for _, e := range d.Events {
		p.marker(b, "fold", cFold, fmt.Sprintf("F%d", e.Seq), fmt.Sprintf("data-seq=\"%d\" data-request=\"%d\"", e.Seq, e.Request), e.Request, &last)
	}
	p.line(b, "without", cRaw, true, without)
	p.line(b, "with", cSent, false, with)
	b.WriteString("</svg>\n")
	w, n := with[len(with)-1], without[len(without)-1]
	saved := n - w
	pct := 0.0
	if n > 0 {
		pct = 100 * saved / n
	}
	verb := "saved"
	if saved < 0 {
		verb, saved, pct = "cost", -saved, -pct
	}
	if n := noUsage(d); n != "" {
		fmt.Fprintf(b, "<p class=\"missing\" id=\"no-usage\">%s</p>\n", strings.TrimSpace(n))
	}
	fmt.Fprintf(b, "<p class=\"money\" id=\"money\">With folding: <b class=\"with\">%s</b> · without folding ~ <b class=\"without\">%s</b> (estimated) · folding %s ~%s (%.1f %%)</p>\n", dollars(w), dollars(n), verb, dollars(saved), pct)
	pr := d.Prices
	masked, withNote := "its masked tokens", ""
	if d.Estimated {
		masked = "the tokens its folds kept out of it (raw less sent, as the proxy estimated them)"
		withNote = " With folding: each request's usage as the provider reported it, at these prices."
	}
	fmt.Fprintf(b, "<p class=\"note\">Prices per million tokens (%s): input %s, cache write %s, cache read %s, output %s.%s Without folding, each request also carries %s, read from the cache when the request read from it and written otherwise, and the request after a fold event reads from the cache what the event made it write again; the compactions larger requests would have forced sooner are not modelled.</p>\n</section>\n",
		esc(pr.Source), dollars(pr.Input), dollars(pr.CacheWrite), dollars(pr.CacheRead), dollars(pr.Output), esc(withNote), esc(masked))
}

// eventBars charts what each fold event masks, for a record without
// requests.
func eventBars(b *strings.Builder, d *Data) {
	if len(d.Events) == 0 {
		return
	}
	top, cum := 0.0, 0
	for _, e := range d.Events {
		cum += e.Masked
		top = max(top, float64(cum))
	}
	p := newPlot(len(d.Events), top)
	p.left += 30
	p.right += 30
	b.WriteString("<section id=\"events-chart\"><h2>Tokens masked by the fold events ~</h2>\n")
	legend(b, [][2]string{{cFold, "masked by the event ~"}, {cRaw, "masked in all, so far ~"}})
	fmt.Fprintf(b, "<svg id=\"chart-events\" viewBox=\"0 0 %.0f %.0f\" width=\"100%%\" role=\"img\" aria-label=\"tokens masked per fold event\">\n", p.w, p.h)
	for k := 0; k <= 4; k++ {
		v := p.ymax * float64(k) / 4
		fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e6ec\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", p.left, p.y(v), p.w-p.right, p.y(v), p.left-6, p.y(v)+4, axisTokens(v))
	}
	slot := (p.w - p.left - p.right) / float64(len(d.Events))
	cum = 0
	var pts []string
	for i, e := range d.Events {
		x := p.left + slot*float64(i) + slot*0.2
		y := p.y(float64(e.Masked))
		fmt.Fprintf(b, "<rect class=\"bar event\" data-seq=\"%d\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>", e.Seq, x, y, slot*0.6, p.y(0)-y, cFold)
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">F%d</text>\n", x+slot*0.3, p.h-p.bottom+15, e.Seq)
		cum += e.Masked
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x+slot*0.3, p.y(float64(cum))))
	}
	fmt.Fprintf(b, "<polyline class=\"series cumulative\" data-points=\"%d\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"6 4\" points=\"%s\"/>\n", len(pts), cRaw, strings.Join(pts, " "))
	fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">fold event</text>\n</svg>\n</section>\n", (p.left+p.w-p.right)/2, p.h-4)
}

func events(b *strings.Builder, d *Data) {
	b.WriteString("<section id=\"events\"><h2>Fold events and compactions</h2>\n")
	if len(d.Events) == 0 && len(d.Compactions) == 0 {
		b.WriteString("<p>None.</p>\n</section>\n")
		return
	}
	b.WriteString("<table><thead><tr><th class=\"l\">event</th><th class=\"l\">trigger</th><th>first request</th><th>blocks</th><th>tokens masked ~</th></tr></thead><tbody>\n")
	for _, e := range d.Events {
		fmt.Fprintf(b, "<tr class=\"event\"><td class=\"l\">fold F%d</td><td class=\"l\">%s</td><td>%s</td><td>%d</td><td>%s</td></tr>\n", e.Seq, esc(e.Trigger), reqNum(e.Request), e.Blocks, num(e.Masked))
	}
	for _, c := range d.Compactions {
		fmt.Fprintf(b, "<tr class=\"compaction\"><td class=\"l\">compaction C</td><td class=\"l\">%s</td><td>%s</td><td></td><td></td></tr>\n", esc(c.Kind), reqNum(c.Request))
	}
	b.WriteString("</tbody></table>\n</section>\n")
}

func blocks(b *strings.Builder, d *Data) {
	b.WriteString("<section id=\"blocks\"><h2>Folded blocks</h2>\n")
	if len(d.Blocks) == 0 {
		b.WriteString("<p>None.</p>\n</section>\n")
		return
	}
	b.WriteString("<table><thead><tr><th class=\"l\">code</th><th class=\"l\">tool</th><th>event</th><th>folded at request</th><th>bytes</th><th>tokens raw → digest ~</th><th>error lines kept</th><th class=\"l\">state</th></tr></thead><tbody>\n")
	for _, k := range d.Blocks {
		errs := "–"
		if k.ErrLines > 0 {
			errs = fmt.Sprintf("%d of %d", k.ErrKept, k.ErrLines)
		}
		fmt.Fprintf(b, "<tr class=\"block\"><td class=\"l\"><code>%s</code></td><td class=\"l\">%s</td><td>F%d</td><td>%s</td><td>%s</td><td>%s → %s</td><td>%s</td><td class=\"l\">%s</td></tr>\n",
			esc("{#"+k.Code+" FOLDED}"), esc(k.Tool), k.Seq, reqNum(k.Request), num(k.Bytes), num(k.Tokens), num(k.DigestTokens), errs, esc(k.State))
	}
	b.WriteString("</tbody></table>\n<p class=\"note\">Error lines: the distinct lines of the block that read as errors, and how many of them the digest keeps whole; recall_folded reads the whole block back by its code.</p>\n</section>\n")
}

// noUsage says how many requests have no usage recorded, "" for none.
func noUsage(d *Data) string {
	n := 0
	for _, r := range d.Requests {
		if r.NoUsage {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	verb, they := "have", "they are"
	if n == 1 {
		verb, they = "has", "it is"
	}
	return fmt.Sprintf(" %d of the %d requests %s no usage recorded (the provider reported none the host could read, or the record of it was lost); %s left out of the cache figures and the cost.", n, len(d.Requests), verb, they)
}

func legend(b *strings.Builder, items [][2]string) {
	b.WriteString("<div class=\"legend\">")
	for _, it := range items {
		fmt.Fprintf(b, "<span><i style=\"background:%s\"></i>%s</span>", it[0], esc(it[1]))
	}
	b.WriteString("</div>\n")
}

func fact(b *strings.Builder, k, v string) {
	fmt.Fprintf(b, "<dt>%s</dt><dd>%s</dd>\n", esc(k), esc(v))
}

func count(n int, note string) string {
	switch {
	case n == 0 && note != "":
		return "not recorded"
	case note != "":
		return fmt.Sprintf("%d (%s)", n, note)
	}
	return fmt.Sprint(n)
}

func limit(n int) string {
	if n <= 0 {
		return "unknown (not drawn)"
	}
	return num(n) + " tokens"
}

func reqNum(n int) string {
	if n <= 0 {
		return "–"
	}
	return fmt.Sprint(n)
}

func esc(s string) string { return html.EscapeString(s) }

// num writes n with thousands separators.
func num(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func tk(n int) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	case n >= 1_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// axisTokens labels a token axis exactly: its steps are quarters of a
// round number (12.5k, not 12k).
func axisTokens(v float64) string {
	switch {
	case v >= 1e6:
		return short(v/1e6) + "M"
	case v >= 1e3:
		return short(v/1e3) + "k"
	}
	return short(v)
}

// short writes v in at most six significant digits, without trailing
// zeros.
func short(v float64) string {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

func dollars(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "$0"
	case a < 0.1:
		return fmt.Sprintf("$%.4f", v)
	case a < 100:
		return fmt.Sprintf("$%.2f", v)
	}
	return fmt.Sprintf("$%.0f", v)
}

func slicesMax(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// niceCeil rounds v up to 1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten, so the
// axis labels are round.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// ticks are the request numbers labelled on the x axis: about ten.
func ticks(n int) []int {
	if n <= 0 {
		return nil
	}
	step := max(1, int(niceCeil(float64(n)/10)))
	out := []int{1}
	for i := step; i <= n; i += step {
		if i > 1 {
			out = append(out, i)
		}
	}
	return out
}
