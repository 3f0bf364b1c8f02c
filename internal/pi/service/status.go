package service

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/recall"
	"github.com/contextfold/contextfold/internal/core/telemetry"
	"github.com/contextfold/contextfold/internal/core/version"
	"github.com/contextfold/contextfold/internal/pi/config"
)

// Notices are messages for the user, each shown once.
type Notices struct {
	Notices []telemetry.Notice `json:"notices,omitempty"`
	Footer  string             `json:"footer"`
}

func (s *Service) usage(u telemetry.Usage) (*Notices, error) {
	ss := s.s
	if ss == nil {
		return &Notices{}, nil
	}
	return &Notices{Notices: ss.tm.Observe(u), Footer: s.footer(ss)}, nil
}

// settled runs the advisor at the end of an agent run.
func (s *Service) settled() (*Notices, error) {
	ss := s.s
	if ss == nil {
		return &Notices{}, nil
	}
	return &Notices{Notices: ss.tm.Settled(), Footer: s.footer(ss)}, nil
}

// ForecastParams ask whether an idle session's cache has probably expired.
type ForecastParams struct {
	Now      int64  `json:"now"` // Unix ms
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Tokens   int    `json:"tokens"` // Pi's current context estimate, 0 if unknown
	// Check asks only whether a prompt sent now is risky (for the opt-in
	// confirmation), without consuming the once-per-interval notice.
	Check bool `json:"check,omitempty"`
}

// ForecastResult answers a forecast.
type ForecastResult struct {
	RemainingMs int64             `json:"remainingMs"`
	Notice      *telemetry.Notice `json:"notice,omitempty"`
	Risky       bool              `json:"risky,omitempty"`
	Text        string            `json:"text,omitempty"`
	Confirm     bool              `json:"confirm"` // the opt-in confirmation is on
}

func (s *Service) forecast(p ForecastParams) (*ForecastResult, error) {
	ss := s.s
	if ss == nil {
		return &ForecastResult{}, nil
	}
	idle := ss.conf.IdleFor(p.Provider)
	res := &ForecastResult{Confirm: ss.conf.ConfirmCold && idle > 0}
	if p.Check {
		res.Risky, res.Text = ss.tm.Risky(p.Now, p.Provider, p.Model, idle, p.Tokens)
		return res, nil
	}
	res.RemainingMs, res.Notice = ss.tm.Forecast(p.Now, p.Provider, p.Model, idle, p.Tokens)
	return res, nil
}

// activity is what seedHistory reads from a message.
type activity struct {
	Role, Provider, Model, StopReason string
	Timestamp                         float64
	Usage                             *telemetry.Usage
}

// readActivity decodes a message as json.Unmarshal into activity does. It
// reads the few members it needs in place (a resumed session has thousands
// of messages, most of their bytes tool output) and leaves the message to
// encoding/json whenever that reading might not agree: keys in another case
// or repeated, values of another type, strings with escapes or non-ASCII.
// raw must be valid JSON (the ledger validated every line it holds).
func readActivity(raw []byte) (activity, error) {
	if a, ok := fastActivity(raw); ok {
		return a, nil
	}
	var a activity
	err := json.Unmarshal(raw, &a)
	return a, err
}

func fastActivity(raw []byte) (a activity, ok bool) {
	ms, err := rawjson.ObjectOfValid(raw)
	if err != nil {
		return a, false
	}
	seen := 0
	for _, m := range ms {
		var bit int
		var dst *string
		switch m.Key {
		case "role":
			bit, dst = 1, &a.Role
		case "provider":
			bit, dst = 2, &a.Provider
		case "model":
			bit, dst = 4, &a.Model
		case "stopReason":
			bit, dst = 8, &a.StopReason
		case "timestamp":
			bit = 16
		case "usage":
			bit = 32
		default:
			if rawjson.FoldsTo(m.Key, "role", "provider", "model", "stopreason", "timestamp", "usage") {
				return a, false
			}
			continue
		}
		if seen&bit != 0 {
			return a, false
		}
		seen |= bit
		switch {
		case rawjson.IsNull(m.Value):
		case dst != nil:
			if *dst, ok = rawjson.PlainString(m.Value); !ok {
				return a, false
			}
		case bit == 16:
			if !isNumber(m.Value) {
				return a, false
			}
			if a.Timestamp, err = strconv.ParseFloat(string(m.Value), 64); err != nil {
				return a, false
			}
		default:
			if a.Usage, ok = fastUsage(m.Value); !ok {
				return a, false
			}
		}
	}
	return a, true
}

func fastUsage(raw []byte) (*telemetry.Usage, bool) {
	ms, err := rawjson.ObjectOfValid(raw)
	if err != nil {
		return nil, false
	}
	u := &telemetry.Usage{}
	seen := 0
	for _, m := range ms {
		var bit int
		var n *int
		var str *string
		switch m.Key {
		case "input":
			bit, n = 1, &u.Input
		case "output":
			bit, n = 2, &u.Output
		case "cacheRead":
			bit, n = 4, &u.CacheRead
		case "cacheWrite":
			bit, n = 8, &u.CacheWrite
		case "provider":
			bit, str = 16, &u.Provider
		case "model":
			bit, str = 32, &u.Model
		case "stopReason":
			bit, str = 64, &u.Stop
		case "at":
			bit = 128
		case "cost":
			bit = 256
		default:
			if rawjson.FoldsTo(m.Key, "input", "output", "cacheread", "cachewrite", "provider", "model", "stopreason", "at", "cost") {
				return nil, false
			}
			continue
		}
		if seen&bit != 0 {
			return nil, false
		}
		seen |= bit
		if rawjson.IsNull(m.Value) {
			continue
		}
		var ok bool
		switch {
		case n != nil:
			*n, ok = rawjson.PlainInt(m.Value)
		case str != nil:
			*str, ok = rawjson.PlainString(m.Value)
		case bit == 256:
			u.Cost, ok = fastCost(m.Value)
		default:
			var at int
			at, ok = rawjson.PlainInt(m.Value)
			u.At = int64(at)
		}
		if !ok {
			return nil, false
		}
	}
	return u, true
}

// fastCost reads Pi's usage.cost object as json.Unmarshal would, or
// reports that it might not agree.
func fastCost(raw []byte) (telemetry.Cost, bool) {
	var c telemetry.Cost
	ms, err := rawjson.ObjectOfValid(raw)
	if err != nil {
		return c, false
	}
	seen := 0
	for _, m := range ms {
		var bit int
		var f *float64
		switch m.Key {
		case "input":
			bit, f = 1, &c.Input
		case "output":
			bit, f = 2, &c.Output
		case "cacheRead":
			bit, f = 4, &c.CacheRead
		case "cacheWrite":
			bit, f = 8, &c.CacheWrite
		case "total":
			bit, f = 16, &c.Total
		default:
			if rawjson.FoldsTo(m.Key, "input", "output", "cacheread", "cachewrite", "total") {
				return c, false
			}
			continue
		}
		if seen&bit != 0 {
			return c, false
		}
		seen |= bit
		if rawjson.IsNull(m.Value) {
			continue
		}
		if !isNumber(m.Value) {
			return c, false
		}
		if *f, err = strconv.ParseFloat(string(m.Value), 64); err != nil {
			return c, false
		}
	}
	return c, true
}

func isNumber(raw []byte) bool {
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}

// Status is the state shown by /context-fold status and the footer.
type Status struct {
	Lines  []string       `json:"lines"`
	Flags  []string       `json:"flags"`
	Footer string         `json:"footer"`
	Level  string         `json:"level"`
	Config []config.Value `json:"config"`
	// Telemetry figures, for tests and machines.
	HitRatio     float64       `json:"hitRatio"`
	Events       []foldEvent   `json:"events"`
	Folded       []FoldedBlock `json:"folded"`
	Spent        float64       `json:"spent"`
	SavedMoney   float64       `json:"savedMoney"`
	ExtraWrites  float64       `json:"extraWrites"`
	EventCount   int           `json:"foldEvents"`
	Blocks       int           `json:"foldedBlocks"`
	Masked       int           `json:"maskedPerRequest"`
	Reprefilled  int64         `json:"reprefilled"`
	Saved        int64         `json:"saved"`
	WritesKnown  bool          `json:"writesReported"`
	WireDeferred int           `json:"wireDeferred"`
	Bridged      bool          `json:"bridged"`
	Compactions  int           `json:"compactions"`
	// Thinking on preserved-thinking models: what fold events invalidated,
	// folded and left to the provider, and what the newest response says
	// the provider dropped.
	ThinkingInvalidated     int `json:"thinkingInvalidated"`
	ThinkingFolded          int `json:"thinkingFolded"`
	ThinkingExpectedDropped int `json:"thinkingExpectedDropped"`
	ThinkingDroppedNow      int `json:"thinkingDroppedNow"`
	// Engine is the running binary: version, build, platform and path.
	Engine string `json:"engine"`
}

// flags are the yellow flags of the status.
func (s *Service) flags(ss *session) []string {
	var out []string
	tm := ss.tm
	if tm.WireDeferred > 0 {
		out = append(out, recall.Count(tm.WireDeferred, "fold", "folds")+" committed but not seen on the wire: another extension or the transport is bypassing them")
	}
	if tm.Bridged {
		out = append(out, "this provider keeps its own conversation: folding is paused for the session")
	}
	if ss.compactions >= 2 {
		out = append(out, fmt.Sprintf("second forced compaction this session: consider /fold-handoff (a fresh session costs about %s tok)", telemetry.K(ss.conf.ReconTokens)))
	}
	if w := ss.window; w > 0 && ss.status.IrreducibleFloor > w/2 {
		out = append(out, fmt.Sprintf("irreducible context (%s tok: your messages and the protected tail) is past half the window; folding cannot help further", telemetry.K(ss.status.IrreducibleFloor)))
	}
	if tm.ColdNow() && tm.Carried() >= 30_000 {
		out = append(out, fmt.Sprintf("session is cold with ~%s tok carried: the next request rebills it anyway, so a reset is free now", telemetry.K(tm.Carried())))
	}
	maxPer := 0
	for _, n := range ss.recalls {
		maxPer = max(maxPer, n)
	}
	if ss.recallCalls >= 10 || maxPer >= 3 {
		out = append(out, fmt.Sprintf("recall churn (%d calls, one code ×%d): unfold the blocks you keep needing, or hand off", ss.recallCalls, maxPer))
	}
	return out
}

// folds is what the committed layers keep out of each request, replayed
// ones included.
type folds struct {
	events, blocks, masked int
	estimated              bool
}

func foldsOf(ss *session) folds {
	var f folds
	for _, l := range ss.eng.Layers() {
		if len(l.Entries) > 0 {
			f.events++
		}
	}
	f.blocks, f.masked, f.estimated = ss.eng.Folded()
	return f
}

// note qualifies the masked figure while some folded blocks are priced from
// their recorded size (a resumed session before its first request).
func (f folds) note() string {
	if f.estimated {
		return " (from recorded sizes until the next request)"
	}
	return ""
}

// gauge says where the ladder stands; short is the footer's form.
func gauge(ss *session, short bool) string {
	st := ss.status
	switch {
	case ss.tm.Bridged:
		return "paused"
	case st.OverBudget && st.MaskableTokens == 0:
		return "⚠ nothing left to fold"
	case st.UsageFraction < st.FoldAt:
		if short {
			return fmt.Sprintf("fold at %.0f%%", 100*st.FoldAt)
		}
		return fmt.Sprintf("next fold at %.0f%%", 100*st.FoldAt)
	}
	if short {
		if st.MaskableTokens == 0 {
			return "" // nothing foldable yet: nothing to show
		}
		return fmt.Sprintf("next %s/%s", telemetry.K(st.MaskableTokens), telemetry.K(st.StepTokens))
	}
	return fmt.Sprintf("next fold when %s of %s maskable", telemetry.K(st.MaskableTokens), telemetry.K(st.StepTokens))
}

// footer is the one-line status for Pi's footer.
func (s *Service) footer(ss *session) string {
	parts := []string{"⧉ context-fold"}
	if f := foldsOf(ss); f.events > 0 {
		parts[0] += fmt.Sprintf(" ×%d", f.events)
		parts = append(parts, "~"+telemetry.K(f.masked)+" masked")
	}
	if ss.turns > 0 {
		if g := gauge(ss, true); g != "" {
			parts = append(parts, g)
		}
	}
	// Pi's footer shows the newest response's cache share (CH); this shows
	// what folding saved instead, once it is priced and ahead (the status
	// says when it is behind).
	if tm := ss.tm; tm.PricedResponses > 0 && tm.SavedMoney > tm.ExtraWrites {
		parts = append(parts, "≈"+money(tm.SavedMoney-tm.ExtraWrites)+" saved")
	}
	if ss.tm.WireDeferred > 0 {
		parts = append(parts, "⚠ folds not on wire")
	}
	return strings.Join(parts, " · ")
}

func (s *Service) statusView() *Status {
	ss := s.s
	if ss == nil {
		return &Status{Lines: []string{"context-fold: no session"}, Level: "info"}
	}
	tm := ss.tm
	f := foldsOf(ss)
	st := &Status{Footer: s.footer(ss), Flags: s.flags(ss), Config: ss.conf.Values, EventCount: f.events, Blocks: f.blocks, Masked: f.masked,
		Reprefilled: tm.Reprefilled, Saved: tm.SavedTotal, WritesKnown: tm.WritesReported(), WireDeferred: tm.WireDeferred, Bridged: tm.Bridged, Compactions: ss.compactions}
	usage := ""
	if ss.window > 0 {
		usage = fmt.Sprintf(" · usage %.0f%% of %s (%s)", 100*ss.status.UsageFraction, telemetry.K(ss.window), gauge(ss, false))
	}
	st.Lines = append(st.Lines, fmt.Sprintf("context-fold: %s, %s folded, ~%s tok masked per request%s%s", recall.Count(f.events, "fold event", "fold events"), recall.Count(f.blocks, "block", "blocks"), telemetry.K(f.masked), f.note(), usage))
	if r, ok := tm.HitRatio(); ok {
		st.HitRatio = r
		writes := "writes unreported"
		if tm.WritesReported() {
			writes = "written " + telemetry.K(int(tm.Write))
		}
		cold := ""
		if tm.ColdNow() {
			cold = " · COLD"
		}
		latest, _ := tm.LatestHit()
		st.Lines = append(st.Lines, fmt.Sprintf("cache: the newest response read %.0f%% of its prompt from the cache (Pi's CH); over the session %.0f%%: read %s, %s, over %d responses%s", 100*latest, 100*r, telemetry.K(int(tm.CacheRead)), writes, tm.Responses, cold))
	} else {
		st.Lines = append(st.Lines, "cache: no usage reported yet")
	}
	if tm.FoldEvents > 0 {
		if tm.WritesReported() {
			net := tm.SavedTotal - tm.Reprefilled
			verdict := fmt.Sprintf("net +%s ahead", telemetry.K(int(net)))
			if net < 0 {
				verdict = fmt.Sprintf("net %s behind", telemetry.K(int(-net)))
			}
			st.Lines = append(st.Lines, fmt.Sprintf("folds: saved %s tok so far, re-prefilled %s · %s", telemetry.K(int(tm.SavedTotal)), telemetry.K(int(tm.Reprefilled)), verdict))
		} else {
			st.Lines = append(st.Lines, fmt.Sprintf("folds: saved %s tok so far; re-prefill cost unknown (this provider reports no cache writes)", telemetry.K(int(tm.SavedTotal))))
		}
	}
	if l := moneyLine(tm); l != "" {
		st.Lines = append(st.Lines, l)
	}
	st.Spent, st.SavedMoney, st.ExtraWrites = tm.Spent, tm.SavedMoney, tm.ExtraWrites
	st.Lines = append(st.Lines, eventLines(ss)...)
	st.Events = ss.events
	st.Folded = foldedBlocks(ss)
	st.Lines = append(st.Lines, foldedLines(st.Folded)...)
	st.Lines = append(st.Lines, ss.thinking.lines()...)
	st.ThinkingInvalidated, st.ThinkingFolded, st.ThinkingExpectedDropped = ss.thinking.sum.Invalidated, ss.thinking.sum.Folded, ss.thinking.sum.Dropped
	st.ThinkingDroppedNow = max(ss.thinking.now, 0)
	if p, ok := telemetry.Payback(tm.Carried(), ss.conf.ReconTokens); ok && len(st.Flags) == 0 && ss.window > 0 && tm.Carried() > ss.window*6/10 {
		st.Lines = append(st.Lines, fmt.Sprintf("carrying ~%s tok: a fresh session would pay for itself in ~%.1f warm requests; /fold-handoff <goal> starts one seeded with this session's index", telemetry.K(tm.Carried()), p))
	}
	for _, f := range st.Flags {
		st.Lines = append(st.Lines, "⚑ "+f)
	}
	st.Lines = append(st.Lines, footerLegend)
	st.Engine = engineLine()
	st.Lines = append(st.Lines, st.Engine, "tune with /context-fold config")
	st.Level = "info"
	if len(st.Flags) > 0 {
		st.Level = "warning"
	}
	return st
}

// writeDump appends this request's outgoing view (CONTEXTFOLD_DUMP).
func (s *Service) writeDump(ss *session) {
	msgs := ss.eng.Render()
	var b []byte
	b = append(b, `{"turn":`...)
	b = fmt.Appendf(b, "%d", ss.turns)
	b = append(b, `,"messages":[`...)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m...)
	}
	b = append(b, "]}\n"...)
	if !rawjson.Valid(b) {
		s.log.Warn("dump: the rendered view is not valid JSON; not written")
		return
	}
	f, err := os.OpenFile(ss.dump, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		s.log.Warn("dump", "err", err)
		return
	}
	f.Write(b)
	f.Close()
}

// engineLine names the running engine, so a user can tell which binary the
// adapter found (a stale one on PATH, a platform package).
func engineLine() string {
	path, err := os.Executable()
	if err != nil {
		path = "(path unknown: " + err.Error() + ")"
	}
	return "engine: " + version.String() + " at " + path
}
