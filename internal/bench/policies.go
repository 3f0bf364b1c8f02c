package bench

import (
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/compact"
	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/core/tokens"
)

// Replay is what one policy did on one trace.
type Replay struct {
	Requests []Request
	// ErrVisible of ErrTotal distinct error lines, in blocks the policy hid
	// at the end of the session, are still visible to the model, whole.
	ErrVisible, ErrTotal int
	// FoldErrVisible of FoldErrTotal distinct error lines of folded blocks
	// are visible in their digests (FoldErrWhole of them complete).
	FoldErrVisible, FoldErrWhole, FoldErrTotal int
	// Hidden counts blocks masked, cleared, folded or summarized at the end.
	Hidden int
	// Folded and Recoverable count context-fold's folded blocks and those
	// whose exact bytes the session still holds (sha256-verified).
	Folded, Recoverable int
	// Events counts fold events or clearings; Compactions counts Pi's
	// compactions.
	Events, Compactions int
	// EventAt are the indexes in Requests of the requests that carried a
	// fold event (context-fold only), one entry per event.
	EventAt []int
	// Budget is the request budget context-fold's policy kept to, as the
	// engine reported it (context-fold only; 0 without a policy).
	Budget int
	// Bounded counts tool results context-fold delivered as a bounded view
	// on first delivery, too large to send whole.
	Bounded int
	// StepTimes are the engine's per-request times (context-fold only).
	StepTimes []time.Duration
	// Substituted is set when the policy could not run on this trace as
	// itself and replayed the shipped schedule instead (Optimum).
	Substituted bool
}

// Policy is one context-management strategy under test. Replay calls obs,
// when set, with every request as the model would see it.
type Policy interface {
	Name() string
	Replay(t *Trace, window int, obs Observer) Replay
}

// rawSeen lists messages [from, n) unchanged after head.
func rawSeen(t *Trace, head []Seen, from, n int) []Seen {
	out := append(make([]Seen, 0, len(head)+n-from), head...)
	for i := from; i < n; i++ {
		out = append(out, Seen{I: i, Text: t.Text[i], Raw: true})
	}
	return out
}

func sysSeg(t *Trace) Seg { return Seg{Key: systemKey, Tokens: t.System} }

// Raw sends every message unchanged: no management.
type Raw struct{}

// Name implements Policy.
func (Raw) Name() string { return "raw" }

// Replay implements Policy.
func (Raw) Replay(t *Trace, window int, obs Observer) Replay {
	var r Replay
	for k, n := range t.Requests {
		segs := []Seg{sysSeg(t)}
		for i := 0; i < n; i++ {
			segs = append(segs, Seg{key(i, 0), t.Tokens[i]})
		}
		r.Requests = append(r.Requests, Request{Segs: segs, Output: t.Output[k]})
		if obs != nil {
			obs(k, rawSeen(t, nil, 0, n))
		}
	}
	return r
}

// piCompaction models Pi's own LLM compaction (docs/compaction.md, Pi 1.6):
// when a request would exceed window − reserveTokens (16,384), Pi cuts the
// history keeping about keepRecentTokens (20,000) of the newest messages,
// never starting the kept part at a tool result, and replaces the rest with
// an LLM summary. The summary request sends the summarized messages with
// tool results cut to 2,000 characters (serializeConversation), plus the
// previous summary and its prompt, uncached; its answer (SummaryTokens) is
// output. A later request carries the summary as its first message.
type piCompaction struct {
	Reserve, KeepRecent, SummaryTokens int
	// det, when set, renders the summary of messages [0, cut) instead of
	// an LLM writing one: context-fold's deterministic compaction, which
	// answers Pi's session_before_compact in the adapter by default. It
	// makes no model request; its text is what the model then reads.
	det func(cut int) string

	kept     int // first kept message
	summary  Seg
	text     string          // the summary's text when det renders it
	errs     map[string]bool // the lines it shows whole, by their text
	count    int
	promptTk int
}

// PiReserve is Pi's default compaction.reserveTokens.
const PiReserve = 16_384

func newPiCompaction(reserve int) *piCompaction {
	return &piCompaction{Reserve: reserve, KeepRecent: 20_000, SummaryTokens: 1_500, promptTk: 600}
}

// seenHead is what the model sees before the kept messages: the summary.
// An LLM summary's text is not modelled, so it shows no reference.
func (c *piCompaction) seenHead() []Seen {
	if c.count == 0 {
		return nil
	}
	if c.det != nil {
		return []Seen{{I: -1, Text: c.text}}
	}
	return []Seen{{I: -1, Text: "(compaction summary " + strconv.Itoa(c.count) + ")"}}
}

// head returns the segments before the kept messages.
func (c *piCompaction) head(t *Trace) []Seg {
	segs := []Seg{sysSeg(t)}
	if c.count > 0 {
		segs = append(segs, c.summary)
	}
	return segs
}

// maybe compacts before the request that sends msgs[:n] when size passes
// the threshold. Pi checks after each response, with the context tokens that
// response reported (its prompt plus its output), so callers pass the
// previous request's total plus its output; and, on overflow (a request over
// the window, which the provider rejects), Pi compacts and retries, so
// callers pass the request's own size too. It returns the side call, if any.
func (c *piCompaction) maybe(t *Trace, n, size, window int) *SideCall {
	if window <= c.Reserve || size <= window-c.Reserve && size <= window {
		return nil
	}
	cut, sum := n, 0
	for cut > c.kept && sum < c.KeepRecent {
		cut--
		sum += t.Tokens[cut]
	}
	for cut > c.kept && t.ToolResult[cut] {
		cut--
	}
	if cut <= c.kept {
		return nil // Pi: "Nothing to compact"
	}
	if c.det != nil {
		c.count++
		c.kept = cut
		c.text = c.det(cut)
		c.summary = Seg{Key: 1<<61 | uint64(c.count), Tokens: tokens.Block(c.text)}
		// Its error lines: items "- [turn N · {#code FOLDED}] <line>".
		c.errs = map[string]bool{}
		for _, l := range strings.Split(c.text, "\n") {
			if rest, ok := strings.CutPrefix(l, "- ["); ok {
				if i := strings.Index(rest, "] "); i >= 0 {
					c.errs[rest[i+2:]] = true
				}
			}
		}
		return &SideCall{} // no model request
	}
	in := c.promptTk
	if c.count > 0 {
		in += c.summary.Tokens
	}
	for i := c.kept; i < cut; i++ {
		tk := t.Tokens[i]
		if t.ToolResult[i] {
			tk = min(tk, 2_000/tokens.CharsPerToken+tokens.BlockOverhead)
		}
		in += tk
	}
	c.count++
	c.kept = cut
	c.summary = Seg{Key: 1<<61 | uint64(c.count), Tokens: c.SummaryTokens + 30}
	return &SideCall{Input: in, Output: c.SummaryTokens}
}

// hidden accounts for messages the summary replaced: their error lines are
// paraphrased at best, never verbatim.
func (c *piCompaction) hidden(t *Trace, r *Replay) {
	for i := 0; i < c.kept; i++ {
		if t.ToolResult[i] {
			r.Hidden++
			r.ErrTotal += len(t.Errors[i])
			if c.det == nil {
				continue
			}
			for _, e := range t.Errors[i] {
				if c.errs[e] {
					r.ErrVisible++ // the deterministic summary shows it whole
				}
			}
		}
	}
}

// RawCompaction is raw history with Pi's LLM compaction where the request
// would not fit.
type RawCompaction struct{}

// Name implements Policy.
func (RawCompaction) Name() string { return "raw+pi-compaction" }

// Replay implements Policy.
func (RawCompaction) Replay(t *Trace, window int, obs Observer) Replay {
	var r Replay
	c := newPiCompaction(PiReserve)
	build := func(n int) []Seg {
		segs := c.head(t)
		for i := c.kept; i < n; i++ {
			segs = append(segs, Seg{key(i, 0), t.Tokens[i]})
		}
		return segs
	}
	last := 0 // what the previous response reported: its prompt plus its output
	for k, n := range t.Requests {
		req := Request{Output: t.Output[k]}
		if side := c.maybe(t, n, last, window); side != nil {
			req.Side = append(req.Side, *side)
			r.Compactions++
		}
		segs := build(n)
		if sum(segs) > window {
			if side := c.maybe(t, n, sum(segs), window); side != nil {
				req.Side = append(req.Side, *side) // overflow: compact and retry
				r.Compactions++
				segs = build(n)
			}
		}
		req.Segs = segs
		r.Requests = append(r.Requests, req)
		last = req.Total() + t.Output[k]
		if obs != nil {
			obs(k, rawSeen(t, c.seenHead(), c.kept, n))
		}
	}
	c.hidden(t, &r)
	return r
}

func sum(segs []Seg) int {
	n := 0
	for _, s := range segs {
		n += s.Tokens
	}
	return n
}

// ObservationMasking keeps the newest M tool outputs and replaces every older
// one with "Old environment output: (N lines omitted)" on every request, as
// SWE-agent's LastNObservations processor does ("The Complexity Trap",
// Lindenbauer et al. 2025, which found M = 10 a strong setting).
type ObservationMasking struct{ M int }

// Name implements Policy.
func (p ObservationMasking) Name() string { return "observation-masking(M=" + strconv.Itoa(p.M) + ")" }

// Replay implements Policy.
func (p ObservationMasking) Replay(t *Trace, window int, obs Observer) Replay {
	var r Replay
	text := func(i int) string { return "Old environment output: (" + strconv.Itoa(t.Lines[i]) + " lines omitted)" }
	placeholder := func(i int) int { return tokens.Block(text(i)) }
	var results []int
	next := 0
	for k, n := range t.Requests {
		for ; next < n; next++ {
			if t.ToolResult[next] {
				results = append(results, next)
			}
		}
		masked := map[int]bool{}
		for j := 0; j < len(results)-p.M; j++ {
			masked[results[j]] = true
		}
		segs := []Seg{sysSeg(t)}
		for i := 0; i < n; i++ {
			if masked[i] {
				segs = append(segs, Seg{key(i, 1), placeholder(i)})
			} else {
				segs = append(segs, Seg{key(i, 0), t.Tokens[i]})
			}
		}
		r.Requests = append(r.Requests, Request{Segs: segs, Output: t.Output[k]})
		if obs != nil {
			seen := rawSeen(t, nil, 0, n)
			for i := range seen {
				if masked[i] {
					seen[i] = Seen{I: i, Text: text(i)}
				}
			}
			obs(k, seen)
		}
		if k == len(t.Requests)-1 {
			for i := range masked {
				r.Hidden++
				r.ErrTotal += len(t.Errors[i])
			}
		}
	}
	return r
}

// ClearToolUses models Anthropic's context editing strategy
// clear_tool_uses_20250919 (docs: "Context editing", 2025): once a request's
// input passes Trigger tokens, tool results older than the newest Keep tool
// uses are replaced by a placeholder. With ClearAtLeast, a clearing happens
// only if it frees at least that many tokens ("helps determine if context
// clearing is worth breaking your prompt cache"). Cleared results stay
// cleared: the strategy re-applies to the same growing history.
type ClearToolUses struct {
	Trigger, Keep, ClearAtLeast int
}

// Name implements Policy.
func (p ClearToolUses) Name() string {
	if p.ClearAtLeast > 0 {
		return "clear-tool-uses(at-least=" + strconv.Itoa(p.ClearAtLeast/1000) + "k)"
	}
	return "clear-tool-uses"
}

// Replay implements Policy.
func (p ClearToolUses) Replay(t *Trace, window int, obs Observer) Replay {
	var r Replay
	ph := tokens.Block("[cleared]")
	cleared := map[int]bool{}
	var results []int
	next := 0
	for k, n := range t.Requests {
		for ; next < n; next++ {
			if t.ToolResult[next] {
				results = append(results, next)
			}
		}
		full := t.System
		for i := 0; i < n; i++ {
			full += t.Tokens[i]
		}
		if full > p.Trigger {
			freed := 0
			var batch []int
			for j := 0; j < len(results)-p.Keep; j++ {
				if i := results[j]; !cleared[i] {
					batch = append(batch, i)
					freed += t.Tokens[i] - ph
				}
			}
			if len(batch) > 0 && freed >= p.ClearAtLeast {
				for _, i := range batch {
					cleared[i] = true
				}
				r.Events++
			}
		}
		segs := []Seg{sysSeg(t)}
		for i := 0; i < n; i++ {
			if cleared[i] {
				segs = append(segs, Seg{key(i, 2), ph})
			} else {
				segs = append(segs, Seg{key(i, 0), t.Tokens[i]})
			}
		}
		r.Requests = append(r.Requests, Request{Segs: segs, Output: t.Output[k]})
		if obs != nil {
			seen := rawSeen(t, nil, 0, n)
			for i := range seen {
				if cleared[i] {
					seen[i] = Seen{I: i, Text: "[cleared]"}
				}
			}
			obs(k, seen)
		}
	}
	for i := range cleared {
		r.Hidden++
		r.ErrTotal += len(t.Errors[i])
	}
	return r
}

// ContextFold is the engine Pi runs, with the given knobs (and policy, when
// set). Where even the folded request would pass window − Reserve, Pi's own
// compaction runs as it would in Pi. The engine is told Reserve, as the Pi
// adapter tells it Pi's effective compaction.reserveTokens, and keeps its
// requests under that threshold. PiReserve models Pi's default settings;
// Reserve 0 a Pi that compacts only on overflow.
type ContextFold struct {
	Label string
	Knobs policy.Knobs
	// Policy is the fold policy replayed (nil folds nothing).
	Policy  policy.Policy
	Limits  digest.Limits // zero: the engine's defaults
	Reserve int
	// LLMCompaction models Pi's own LLM summary where Pi compacts
	// (CONTEXTFOLD_COMPACT=native); by default the adapter answers with its
	// deterministic summary, which makes no model request.
	LLMCompaction bool
	// Unanchored replays a host that does not mark the end of the frozen
	// region with a cache breakpoint (and a schedule told so): what Pi's
	// Anthropic requests were before the adapter placed that mark.
	Unanchored bool
	// Inspect, when set, is called with the engine once the replay ends:
	// the demo reads the digests of what folded from its registry.
	Inspect func(*engine.Engine)
}

// Name implements Policy.
func (p ContextFold) Name() string {
	if p.Label != "" {
		return p.Label
	}
	return "context-fold"
}

// Replay implements Policy.
func (p ContextFold) Replay(t *Trace, window int, obs Observer) Replay {
	var r Replay
	e := engine.New(engine.Config{Knobs: p.Knobs, Policy: p.Policy, Limits: p.Limits})
	c := newPiCompaction(p.Reserve)
	if !p.LLMCompaction {
		c.det = func(cut int) string {
			var blocks []block.Block
			for _, b := range t.Tr.Blocks() {
				if b.Msg < cut {
					blocks = append(blocks, b)
				}
			}
			codes := map[string]string{}
			for _, rec := range e.Registry().All() {
				codes[rec.ID] = rec.Code
			}
			return compact.Render(compact.Input{Title: "Compaction summary", Seq: c.count + 1, Blocks: blocks, Codes: codes})
		}
	}
	summaryMsg := func() []byte {
		text := "(summary " + strconv.Itoa(c.count) + ")"
		if c.det != nil {
			text = c.text
		}
		return []byte(`{"role":"compactionSummary","summary":` + rawjson.QuoteString(text) + `,"tokensBefore":0,"timestamp":` + strconv.Itoa(c.count) + `}`)
	}
	held := 0      // messages of the trace the engine holds (after the head)
	lastTotal := 0 // the previous request's size, as the provider reported it
	lastSent := 0  // messages in the previous request
	for k, n := range t.Requests {
		// Pi's usage estimate: the last reported prompt plus the new messages.
		reported := lastTotal
		for i := lastSent; i < n; i++ {
			reported += t.Tokens[i]
		}
		if k == 0 {
			reported = t.System
			for i := 0; i < n; i++ {
				reported += t.Tokens[i]
			}
		}
		req := Request{Output: t.Output[k]}
		compact := func(size int) bool {
			side := c.maybe(t, n, size, window)
			if side == nil {
				return false
			}
			req.Side = append(req.Side, *side)
			r.Compactions++
			// The context now starts with the summary: resync the engine.
			msgs := [][]byte{summaryMsg()}
			msgs = append(msgs, t.Msgs[c.kept:n]...)
			start := time.Now()
			e.Sync(0, msgs)
			r.StepTimes = append(r.StepTimes, time.Since(start))
			held = n
			reported = 0 // Pi has no usage for the compacted context yet
			return true
		}
		step := func() {
			start := time.Now()
			res := e.Step(engine.Request{Keep: e.Len(), Append: t.Msgs[held:n], Window: window, Reported: reported, Reserve: p.Reserve, Anchored: !p.Unanchored}, engine.NopJournal{})
			r.StepTimes = append(r.StepTimes, time.Since(start))
			if res.Event != nil {
				r.Events++
				r.EventAt = append(r.EventAt, k)
			}
			if res.Status.Budget > 0 {
				r.Budget = res.Status.Budget
			}
			r.Bounded += len(res.Bounded)
			held = n
			base := 0
			if c.count > 0 {
				base = 1
			}
			req.Segs = p.segs(t, e, c, base)
			req.Marks = nil
			if res.Anchor != nil && !p.Unanchored {
				req.Marks = []int{len(c.head(t)) + res.Anchor.Msg - base}
			}
		}
		if k > 0 {
			// Pi's check after the previous response: its prompt plus its
			// output; then, before this request, that plus the new raw
			// messages (chars/4), which the adapter cancels when folding
			// makes the room (engine.FoldInstead).
			// Both checks are Pi's "threshold" compactions, which the adapter
			// cancels when folding makes the room.
			after := lastTotal + t.Output[k-1]
			est := lastTotal
			for i := lastSent; i < n; i++ {
				est += t.Tokens[i]
			}
			for _, size := range []int{after, est} {
				if size > window-c.Reserve && !engine.FoldInstead("threshold", size, e.Foldable(window, p.Reserve), window, p.Reserve) && compact(size) {
					break
				}
			}
		}
		step()
		if size := req.Total(); size > window && compact(size) {
			step() // overflow: Pi compacts and retries
		}
		r.Requests = append(r.Requests, req)
		lastTotal, lastSent = req.Total(), n
		if obs != nil {
			base := 0
			if c.count > 0 {
				base = 1
			}
			obs(k, p.seen(t, e, c, base))
		}
	}
	// Error visibility and recoverability of what is folded at the end.
	for _, rec := range e.Registry().All() {
		if !e.Frozen(rec.ID) {
			continue
		}
		b, ok := t.Tr.Lookup(rec.ID)
		if !ok {
			continue
		}
		r.Folded++
		if registry.Sum(b.Text) == rec.SHA256 {
			r.Recoverable++
		}
		if b.Kind != block.ToolResult {
			continue
		}
		if b.Msg < c.kept {
			continue // compacted away: c.hidden counts it
		}
		r.Hidden++
		vis, whole := visibleLines(rec.Digest, t.Errors[b.Msg])
		n := len(t.Errors[b.Msg])
		r.ErrTotal += n
		r.ErrVisible += whole // the weakest form: whole lines only
		r.FoldErrTotal += n
		r.FoldErrVisible += vis
		r.FoldErrWhole += whole
	}
	c.hidden(t, &r)
	if p.Inspect != nil {
		p.Inspect(e)
	}
	return r
}

// seen renders the engine's current request as the model reads it.
func (p ContextFold) seen(t *Trace, e *engine.Engine, c *piCompaction, base int) []Seen {
	out := c.seenHead()
	tr := e.Transcript()
	subst := func(b *block.Block) (string, bool) {
		if rec, ok := e.Registry().Get(b.ID); ok && e.Frozen(b.ID) {
			return rec.Digest, true
		}
		return "", false
	}
	for m := base; m < tr.Len(); m++ {
		i := c.kept + m - base
		blocks := tr.MessageBlocks(m)
		folded := false
		for k := range blocks {
			if _, ok := subst(&blocks[k]); ok {
				folded = true
				break
			}
		}
		if !folded {
			out = append(out, Seen{I: i, Text: t.Text[i], Raw: true})
			continue
		}
		out = append(out, Seen{I: i, Text: messageText(blocks, subst)})
	}
	return out
}

// segs renders the engine's current request as segments: a folded message's
// key names the layers that changed it, so its bytes are equal exactly when
// its key is.
func (p ContextFold) segs(t *Trace, e *engine.Engine, c *piCompaction, base int) []Seg {
	segs := c.head(t)
	tr := e.Transcript()
	for m := base; m < tr.Len(); m++ {
		i := c.kept + m - base // the trace index of engine message m
		tk, h, folded := 0, fnv.New64a(), false
		for _, b := range tr.MessageBlocks(m) {
			if rec, ok := e.Registry().Get(b.ID); ok && e.Frozen(b.ID) {
				tk += tokens.Block(rec.Digest)
				h.Write([]byte(strconv.Itoa(rec.Seq) + ":" + b.ID + ";"))
				folded = true
				continue
			}
			tk += b.Tokens
		}
		if !folded {
			segs = append(segs, Seg{key(i, 0), tk})
			continue
		}
		segs = append(segs, Seg{key(i, 8+h.Sum64()%0xFFFF0), tk})
	}
	return segs
}

// visibleLines counts the distinct error lines errs of a folded block that
// its digest shows (digest.ShowLines), and how many of them whole.
func visibleLines(dig string, errs []string) (visible, whole int) {
	for _, sh := range digest.ShowLines(dig, errs) {
		if sh != digest.Hidden {
			visible++
		}
		if sh == digest.Whole {
			whole++
		}
	}
	return visible, whole
}
