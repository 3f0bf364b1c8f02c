// Package engine runs the per-request fold pipeline of docs/DESIGN.md §3
// and owns the committed fold layers; the policy that decides what folds is
// its host's (Config.Policy).
//
//	linearize → frozen ops → view → policy → lower → commit → merged ops
//
// An Engine follows one session's outgoing context. Each Step keeps a prefix
// of the messages it already holds and appends the new ones, so a caller
// ships deltas, not transcripts. A fold event is committed through a Journal
// that must durably record every block's fold record and the event's
// seed-index record before the layer freezes; a journal failure rejects the
// whole event and that request gets only already-frozen folds. Frozen bytes
// never change: only an explicit Unfold releases a block, for good.
//
// The engine has no clock, no randomness and no I/O of its own; replaying
// the recorded entries (Replay) rebuilds the same state.
package engine

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/contextfold/contextfold/internal/core/apply"
	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/digest"
	"github.com/contextfold/contextfold/internal/core/parallel"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/registry"
	"github.com/contextfold/contextfold/internal/core/risk"
	"github.com/contextfold/contextfold/internal/core/seedindex"
	"github.com/contextfold/contextfold/internal/core/tokens"
	"github.com/contextfold/contextfold/internal/core/wire"
)

// DefaultWindow is the context window assumed when the caller knows none.
const DefaultWindow = 200_000

// protectOverflow lets the protected tail exceed its target by 25 % rather
// than stop just short of a large block.
const protectOverflow = 1.25

// Config configures an Engine. Its zero fields take the defaults, except
// Policy, which the host chooses.
type Config struct {
	Knobs policy.Knobs
	// Policy decides what folds and when. The engine has no default: each
	// host hands it its own. With none the engine never folds; an engine
	// that only replays fold records and reads them back needs none.
	Policy policy.Policy
	Limits digest.Limits
	// DefaultWindow is used when a request names no window.
	DefaultWindow int
	// Cost is the token oracle for a block's text (tokens.Block by default).
	Cost func(string) int
	// Scope names the conversation (a Pi session id, a proxy conversation):
	// a block's fold code is digest.ScopedCode(Scope, id), so conversations
	// whose clients reuse tool-call ids still fold under different codes.
	// "" gives unscoped codes (benchmark replays).
	Scope string
}

func (c Config) withDefaults() Config {
	if c.Knobs == (policy.Knobs{}) {
		c.Knobs = policy.DefaultKnobs
	}
	if c.Limits == (digest.Limits{}) {
		c.Limits = digest.DefaultLimits
	}
	if c.DefaultWindow <= 0 {
		c.DefaultWindow = DefaultWindow
	}
	if c.Cost == nil {
		c.Cost = tokens.Block
	}
	return c
}

// Event is one fold event ready to commit: a fold record per masked block
// (the record's Digest is the frozen text) and the seed-index record.
type Event struct {
	Seq     int
	Trigger policy.Trigger
	Folds   []registry.Record
	Index   seedindex.Record
	// Thinking is what the event costs the model's signed thinking on a
	// preserved-thinking model.
	Thinking ThinkingCost
}

// ThinkingCost counts, for one fold event on a model that binds thinking to
// its prefix, the signed thinking blocks after the event's earliest changed
// byte: every one of them fails its prefix check from this request on.
type ThinkingCost struct {
	// Invalidated is every such block.
	Invalidated int `json:"invalidated"`
	// Folded is how many of them the event folded too, so that the model
	// keeps a digest and a recall code instead of losing them.
	Folded int `json:"folded"`
	// Dropped is how many the provider will drop: those that must stay as
	// they are (the current tool-use cycle's, redacted ones, opaque
	// reasoning items). It is the least the rules allow for this event's
	// earliest changed byte.
	Dropped int `json:"dropped"`
	// Lost are the ids of the dropped ones. A block counts once: an earlier
	// event's loss is not this event's, though a later event still folds it
	// when it can, giving the model its digest back.
	Lost []string `json:"lost,omitempty"`
}

// IsZero reports whether the event cost no thinking.
func (c ThinkingCost) IsZero() bool {
	return c.Invalidated == 0 && c.Folded == 0 && c.Dropped == 0 && len(c.Lost) == 0
}

// Journal makes engine decisions durable. The engine calls it before any
// decision takes effect; an error means nothing took effect.
type Journal interface {
	// Commit durably records an event's fold records and seed-index record.
	Commit(ev *Event) error
	// Unfold durably records that the agent released these block ids.
	Unfold(ids []string) error
}

// NopJournal records nothing; for offline replays where durability is moot.
type NopJournal struct{}

// Commit implements Journal.
func (NopJournal) Commit(*Event) error { return nil }

// Unfold implements Journal.
func (NopJournal) Unfold([]string) error { return nil }

// Layer is one committed fold event's substitutions. Layers are immutable.
type Layer struct {
	Seq     int            `json:"seq"`
	Trigger policy.Trigger `json:"trigger"`
	Entries []LayerEntry   `json:"entries"`
}

// LayerEntry is one frozen substitution.
type LayerEntry struct {
	ID   string `json:"id"`
	Code string `json:"code"`
	Text string `json:"text"`
}

// Placement says that the frozen text of layer Seq, entry Index, replaces
// message Msg's part Part (-1: a tool result's whole content) this request.
type Placement struct {
	Msg   int `json:"m"`
	Part  int `json:"p"`
	Seq   int `json:"s"`
	Index int `json:"i"`
}

type frozen struct {
	seq, index int
	text       string
	tokens     int
}

// meta caches what the engine derives from one block. It lives exactly as
// long as the block: a resync that replaces a message drops its meta, so a
// cache entry can never outlive the content it was computed from.
type meta struct {
	done   bool
	digest string
	tokens int
	facts  *seedindex.Facts
	frozen *frozen // the committed layer entry for this block's id, if any
}

// Engine is the fold store of one session. It is not safe for concurrent use.
type Engine struct {
	cfg      Config
	tr       *block.Transcript
	meta     []meta
	view     []policy.ViewBlock // parallel to the transcript's blocks; static fields set once
	frozen   map[string]*frozen
	layers   []*Layer
	reg      *registry.Registry
	unfolded map[string]bool
	rejected map[string]bool // code collisions and changed frozen blocks: held raw for the session
	lost     map[string]bool // signed thinking an event left for the provider to drop
	sup      supersedeIndex  // which results later calls superseded (supersede.go)
	waiting  bool            // the last event was held back for a user turn (see lower)
	// stripsFor caches strips' answer for one model.
	stripsFor struct {
		model         wire.Model
		known, strips bool
	}
	// prepared: every block before this index has its digest or cannot
	// fold (Prepare, prefetch); a digest made stale lowers it.
	prepared int
	lastSeq  int
	version  int // bumped whenever the placement set may have changed
	roles    roleCounts
}

// roleCounts is what buildView needs of the messages' roles, kept as
// messages come and go: a walk over every message reads each one's role
// string, a cache miss apiece at 1,000 messages once a 5 MB body has
// streamed through.
type roleCounts struct {
	assistants int // assistant messages: the requests made so far
	lastUser   int // index of the newest user message, or -1
}

func (r *roleCounts) add(i int, role string) {
	switch role {
	case "assistant":
		r.assistants++
	case "user":
		r.lastUser = i
	}
}

// New returns an empty engine.
func New(cfg Config) *Engine {
	return &Engine{
		cfg:      cfg.withDefaults(),
		tr:       block.NewTranscript(),
		frozen:   make(map[string]*frozen),
		reg:      registry.New(),
		unfolded: make(map[string]bool),
		rejected: make(map[string]bool),
		lost:     make(map[string]bool),
		sup:      newSupersedeIndex(),
		roles:    roleCounts{lastUser: -1},
	}
}

// Config returns the effective configuration.
func (e *Engine) Config() Config { return e.cfg }

// Code returns the fold code of block id in this engine's conversation.
func (e *Engine) Code(id string) string { return digest.ScopedCode(e.cfg.Scope, id) }

// SetKnobs changes the knobs for future folds; frozen bytes never move.
func (e *Engine) SetKnobs(k policy.Knobs) { e.cfg.Knobs = k }

// SetPolicy replaces the fold policy (nil: fold no more). Committed layers
// stay as they are; the policy only decides later events.
func (e *Engine) SetPolicy(p policy.Policy) { e.cfg.Policy = p }

// Transcript returns the messages the engine holds.
func (e *Engine) Transcript() *block.Transcript { return e.tr }

// Registry returns the fold registry.
func (e *Engine) Registry() *registry.Registry { return e.reg }

// Layer returns the committed layer with sequence number seq.
func (e *Engine) Layer(seq int) (*Layer, bool) {
	i := sort.Search(len(e.layers), func(i int) bool { return e.layers[i].Seq >= seq })
	if i < len(e.layers) && e.layers[i].Seq == seq {
		return e.layers[i], true
	}
	return nil, false
}

// Layers returns every committed layer in sequence order.
func (e *Engine) Layers() []*Layer { return e.layers }

// LastSeq returns the newest sequence number in use.
func (e *Engine) LastSeq() int { return e.lastSeq }

// EnsureSeqAtLeast raises the sequence floor, so a later event never reuses a
// number another record (a compaction's) already claimed.
func (e *Engine) EnsureSeqAtLeast(seq int) {
	if seq > e.lastSeq {
		e.lastSeq = seq
	}
}

// Version changes whenever the set of placements may have changed.
func (e *Engine) Version() int { return e.version }

// Frozen reports whether id is committed in a layer and not unfolded.
func (e *Engine) Frozen(id string) bool {
	_, ok := e.frozen[id]
	return ok && !e.unfolded[id]
}

// Unfolded reports whether the agent released id.
func (e *Engine) Unfolded(id string) bool { return e.unfolded[id] }

// Folded reports what the committed layers keep out of every request: the
// blocks frozen and not unfolded, and the tokens that saves. It is derived
// from the layers, not counted as events happen, so a resumed session
// reports its replayed folds too. A replayed block the adapter has not sent
// again yet is priced from its recorded size (estimated reports that some
// were).
func (e *Engine) Folded() (blocks, saved int, estimated bool) {
	for id, f := range e.frozen {
		if e.unfolded[id] {
			continue
		}
		blocks++
		if b, ok := e.tr.Lookup(id); ok {
			saved += max(0, b.Tokens-f.tokens)
			continue
		}
		if rec, ok := e.reg.Get(id); ok {
			saved += max(0, tokens.EstimateUnits(rec.Bytes)+tokens.BlockOverhead-f.tokens)
			estimated = true
		}
	}
	return blocks, saved, estimated
}

// Request is one model request's delta.
type Request struct {
	// Keep is how many messages of the previous request are unchanged; the
	// rest are dropped before Append. Keep ≥ Len() keeps everything.
	Keep int
	// Append are the messages after the kept ones, as raw JSON.
	Append [][]byte
	// Window is the context window in tokens; 0 uses the default.
	Window int
	// Reported is the provider-anchored usage estimate, 0 when unknown.
	Reported int
	// Overhead is what the request carries besides its messages (system
	// prompt, tool declarations), in tokens: it counts against the window
	// as much as they do. Without Reported, the policy then judges the
	// messages as sent plus Overhead.
	Overhead int
	// Reserve is the room the agent keeps free: it compacts once a request
	// reaches Window − Reserve (Pi's compaction.reserveTokens). 0 means the
	// agent does not compact on its own (or its setting is unknown).
	Reserve int
	// Cold is set while the session never had a live cache read.
	Cold bool
	// Paused skips the policy: frozen folds still apply, nothing new folds
	// (a bridged transport that holds its own conversation).
	Paused bool
	// CacheCold tells the policy the provider's cache is cold anyway.
	CacheCold bool
	// Anchored tells the policy that the provider reads its cache only at
	// the breakpoints a request marks (Anthropic), and that the host marks
	// Result.Anchor.
	Anchored bool
	// Model is the model the request goes to; the zero value means unknown,
	// and the newest assistant message's origin stands in for it.
	Model wire.Model
	// KnownVersion, when HaveVersion is set, is the placement version the
	// caller already holds: Step then leaves Result.Placements nil if the
	// version did not change, sparing a steady-state request the list.
	KnownVersion int
	HaveVersion  bool
}

// Result is what one Step decided.
type Result struct {
	// Placements are every substitution to apply to this request, in message
	// order: already-frozen folds plus this request's event, if any. Nil when
	// the caller already holds this version (Request.KnownVersion).
	Placements []Placement
	// Event is the fold event committed by this request, if any.
	Event *Event
	// Rejected is set when the policy asked for an event the journal refused.
	Rejected error
	// Collisions lists ids dropped from the event for a fold-code collision;
	// they stay raw for the session.
	Collisions []string
	// Bounded lists the first-delivery tool results this request's event
	// delivered as bounded views, too large to send whole (oversize.go).
	Bounded []string
	// Status is the policy's display status.
	Status policy.Status
	// Held says the policy's event waits for a user turn: the model
	// rejects signed thinking whose prefix changed, and this request is
	// inside a tool-use cycle whose thinking must stay.
	Held bool
	// Version is the placement version after this request.
	Version int
	// Anchor is the newest tool result folded before this request's event,
	// if any: the end of the frozen region. Its prefix stays byte-identical
	// until the next event, so a host whose provider caches only at marked
	// breakpoints (Anthropic) marks it, and the next event re-writes only
	// what follows it instead of the whole conversation.
	Anchor *block.Block
}

// Len returns how many messages the engine holds.
func (e *Engine) Len() int { return e.tr.Len() }

// Sync replaces the held messages from index keep on with msgs, without
// running the policy.
func (e *Engine) Sync(keep int, msgs [][]byte) {
	if keep < e.tr.Len() {
		e.tr.Truncate(keep)
		n := len(e.tr.Blocks())
		clear(e.meta[n:])
		e.meta = e.meta[:n]
		clear(e.view[n:])
		e.view = e.view[:n]
		e.prepared = min(e.prepared, n)
		e.version++
		e.reindex()
		e.roles = roleCounts{lastUser: -1}
		for i := range e.tr.Len() {
			e.roles.add(i, e.tr.Message(i).Role)
		}
	}
	// Decoding, and hashing the blocks whose id has a fold record, is per
	// message and pure: spread over the cores (a resume appends thousands
	// at once), then linked in order.
	base := e.tr.Len()
	decoded := make([]block.Message, len(msgs))
	parallel.For(len(msgs), 64, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			decoded[k] = block.Decode(msgs[k], base+k)
			e.claim(&decoded[k])
		}
	})
	for k := range msgs {
		e.tr.AppendDecoded(decoded[k])
		e.roles.add(e.tr.Len()-1, decoded[k].Role)
		for _, b := range e.tr.MessageBlocks(e.tr.Len() - 1) {
			m := meta{}
			if f, ok := e.frozen[b.ID]; ok && b.Foldable() {
				m.frozen = f
				e.version++ // a frozen block (re)entered the context
			}
			e.meta = append(e.meta, m)
			e.view = append(e.view, policy.ViewBlock{
				ID: b.ID, Kind: b.Kind, Turn: b.Turn, Order: b.Order, Msg: b.Msg,
				Tokens: b.Tokens, Durable: block.Durable(b.ID), Foldable: mayFold(&b),
				ToolName: b.ToolName, IsError: b.IsError,
			})
			e.index(b.Order)
		}
	}
}

// claim renames, in a decoded message, each foldable block whose durable id
// has a fold record for other content: that id belongs to another block
// (one that took the anchor first and has left the context, a content
// another extension or a context_edit replaced since it folded). Such a
// block gets block.DupID's id, anchored on its own content: the frozen
// digest of other bytes is never applied to it, the record's code still
// recalls the original, and the block may fold under a code of its own.
// A record without a sha256 (legacy) cannot tell; its id is left alone.
func (e *Engine) claim(m *block.Message) {
	for j := range m.Blocks {
		b := &m.Blocks[j]
		if !b.Foldable() || !block.Durable(b.ID) {
			continue
		}
		if rec, ok := e.reg.Get(b.ID); ok && rec.SHA256 != "" && registry.Sum(b.Text) != rec.SHA256 {
			b.ID = block.DupID(b.ID, b.Text)
		}
	}
}

// Linearize decodes msgs into a transcript whose ids are the ones this
// engine gives them (see claim): for a span of the conversation that is
// not the context the engine holds (what a compaction takes out of it).
func (e *Engine) Linearize(msgs [][]byte) *block.Transcript {
	t := block.NewTranscript()
	for i, raw := range msgs {
		m := block.Decode(raw, i)
		e.claim(&m)
		t.AppendDecoded(m)
	}
	return t
}

// Step runs the pipeline for one request.
func (e *Engine) Step(req Request, j Journal) (res Result) {
	if j == nil {
		j = NopJournal{}
	}
	e.Sync(req.Keep, req.Append)
	blocks := e.tr.Blocks()
	view := e.buildView(req)
	if view.Anchor >= 0 {
		b := blocks[view.Anchor]
		res.Anchor = &b
	}
	var dec policy.Decision
	var over []oversized // first-delivery results too large to send whole (oversize.go)
	if !req.Paused && e.cfg.Policy != nil {
		e.prefetch()
		over = e.oversize(&view)
		dec = e.cfg.Policy.Conduct(&view)
	}
	res.Status = dec.Status
	if len(over) > 0 && res.Status.Note == "" {
		res.Status.Note = "a tool result too large to send whole went out as a bounded view; recall_folded reads the rest"
	}
	if len(dec.Fold) > 0 || len(over) > 0 {
		e.waiting = false
		ev, collisions := e.lower(dec, over, &view, req)
		if ev == nil && e.waiting && len(over) > 0 {
			// The policy's folds wait for a user turn; an oversized result
			// cannot: alone, its event changes nothing before this cycle.
			var more []string
			ev, more = e.lower(policy.Decision{}, over, &view, req)
			for _, id := range more {
				if !slices.Contains(collisions, id) {
					collisions = append(collisions, id)
				}
			}
		}
		if e.waiting {
			res.Held = true
			res.Status.Note = "fold held until the next user message: this model rejects reasoning whose prefix changed"
		}
		res.Collisions = collisions
		if ev != nil {
			err := j.Commit(ev)
			if err == nil {
				for _, id := range ev.Thinking.Lost {
					e.lost[id] = true
				}
			}
			if err != nil {
				// The seq is burnt: records the journal may have half-written
				// under it (then voided) must never be confused with a later event.
				e.EnsureSeqAtLeast(ev.Seq)
				res.Rejected = fmt.Errorf("fold event %d rejected: %w", ev.Seq, err)
			} else {
				e.freeze(ev)
				res.Event = ev
				for _, o := range over {
					if id := blocks[o.k].ID; e.Frozen(id) {
						res.Bounded = append(res.Bounded, id)
					}
				}
			}
		}
	}
	if !req.HaveVersion || req.KnownVersion != e.version {
		res.Placements = e.placements(blocks)
	}
	res.Version = e.version
	return res
}

// Placements returns the substitutions for the messages currently held.
func (e *Engine) Placements() []Placement { return e.placements(e.tr.Blocks()) }

func (e *Engine) placements(blocks []block.Block) []Placement {
	if len(e.frozen) == 0 {
		return nil
	}
	out := make([]Placement, 0, min(len(e.frozen), len(blocks)))
	for k := range blocks {
		f := e.meta[k].frozen
		if f == nil || len(e.unfolded) > 0 && e.unfolded[blocks[k].ID] {
			continue
		}
		out = append(out, Placement{Msg: blocks[k].Msg, Part: blocks[k].Part, Seq: f.seq, Index: f.index})
	}
	return out
}

// Substs resolves placements to positional substitutions with their text.
func (e *Engine) Substs(ps []Placement) []apply.Subst {
	out := make([]apply.Subst, 0, len(ps))
	for _, p := range ps {
		l, ok := e.Layer(p.Seq)
		if !ok || p.Index >= len(l.Entries) {
			continue
		}
		out = append(out, apply.Subst{Msg: p.Msg, Part: p.Part, Text: l.Entries[p.Index].Text})
	}
	return out
}

// Render returns the held messages with every placement applied.
func (e *Engine) Render() [][]byte {
	raws := make([][]byte, e.tr.Len())
	for i := range raws {
		raws[i] = e.tr.Message(i).Raw
	}
	out, _ := apply.Messages(raws, e.Substs(e.Placements()))
	return out
}

// frame returns the request budget and the protected tail. The budget is
// the knobs' (BudgetFraction × window, capped), and, when the agent compacts
// at window − reserve, also ReplyMargin under that threshold: the agent
// checks the request plus its reply against it, so folding must get there
// first or the agent's own lossy compaction runs while foldable mass remains.
func (e *Engine) frame(window, reserve int) (budget, tail int) {
	budget = Budget(e.cfg.Knobs, window, reserve)
	return budget, min(e.cfg.Knobs.Tail, budget/2)
}

// Budget is the request budget knobs k give at window when the agent
// compacts at window − reserve (reserve 0: it does not compact on its
// own); see frame.
func Budget(k policy.Knobs, window, reserve int) int {
	budget := int(float64(window) * k.BudgetFraction)
	if k.BudgetCap > 0 && k.BudgetCap < budget {
		budget = k.BudgetCap
	}
	if t, ok := thresholdBudget(window, reserve); ok && t < budget {
		budget = t
	}
	return budget
}

// thresholdBudget is the budget that keeps requests ReplyMargin under the
// agent's compaction threshold, window − reserve; ok is false when there is
// none to keep to (no reserve) or it leaves almost nothing (a reserve near
// the window), and the knobs' budget stands.
func thresholdBudget(window, reserve int) (int, bool) {
	if reserve <= 0 || window <= 0 {
		return 0, false
	}
	t := window - reserve - ReplyMargin
	return t, t >= window/8
}

// FoldInstead reports whether a compaction Pi starts because its context
// estimate crossed window − reserve should give way to folding: the
// blocks that can still fold would bring the context ReplyMargin under
// the threshold, and the next request folds them (an urgent event). Pi
// estimates the last response's usage plus the new tool results before
// the request is built, so it can cross the threshold that every request
// sent stayed under. Overflow recovery and a manual /compact are never
// cancelled.
func FoldInstead(reason string, tokensBefore, foldable, window, reserve int) bool {
	// Only where the budget keeps to the threshold: otherwise the next
	// request would not fold down to it, and Pi would be put off forever.
	t, ok := thresholdBudget(window, reserve)
	if reason != "threshold" || !ok || tokensBefore <= 0 || foldable <= 0 {
		return false
	}
	return tokensBefore-foldable <= t
}

// ReplyMargin is how far under the agent's compaction threshold requests
// are kept, in tokens: Pi compares the request plus the model's reply with
// it. 2,048 covers 99.8 % of assistant messages in the bench set (p99 is
// about 1,400 tokens of text and tool-call arguments).
const ReplyMargin = 2048

// Prepare computes the digests (and seed-index facts) of up to max foldable
// blocks that do not have them yet, oldest first, and reports whether any
// remain. Calling it between requests moves that work out of the request
// that first needs it (the first fold, or the first request after a resume).
func (e *Engine) Prepare(max int) bool {
	blocks := e.tr.Blocks()
	// One core: idle work must not take the one the agent runs on.
	for ; e.prepared < len(blocks) && max > 0; e.prepared++ {
		if e.unprepared(e.prepared) {
			e.ensureMeta(e.prepared)
			max--
		}
	}
	return e.prepared < len(blocks)
}

// unprepared reports whether block k may fold and has no digest yet.
func (e *Engine) unprepared(k int) bool {
	b := &e.tr.Blocks()[k]
	return mayFold(b) && block.Durable(b.ID) && !e.meta[k].done && e.meta[k].frozen == nil
}

// mayFold reports whether a new fold may take block b: a foldable block
// that is not context-fold's own answer. A recall_folded or unfold answer
// is a bounded copy of blocks that already have codes; folding it would
// mint a code for a copy of a code's text (a fold record still replays
// as recorded: only new folds ask this).
func mayFold(b *block.Block) bool {
	return b.Foldable() && !(b.Kind == block.ToolResult && block.OwnTool(b.ToolName))
}

// metaOf computes the digests of blocks ks concurrently: each is a pure
// function of its block and its source, written to its own meta.
func (e *Engine) metaOf(ks []int) {
	parallel.For(len(ks), 4, func(lo, hi int) {
		for _, k := range ks[lo:hi] {
			e.ensureMeta(k)
		}
	})
}

// prefetchMin is how many blocks without a digest make Step compute them
// all at once, over the cores, before the policy asks for them one by one:
// the first request of a resumed session that never folded, or one that
// arrives before Prepare has caught up.
const prefetchMin = 32

func (e *Engine) prefetch() {
	var ks []int
	for k := e.prepared; k < len(e.tr.Blocks()); k++ {
		if e.unprepared(k) {
			ks = append(ks, k)
		}
	}
	if len(ks) >= prefetchMin {
		e.metaOf(ks)
	}
}

// Foldable returns how many tokens the next request could shed by folding
// every tool result that can still fold: durable, foldable, not folded yet,
// not released by unfold or rejected, and not the newest block; 0 while the
// next fold event waits for a user turn. Urgent events reach that far (into
// the protected tail, oldest first), unless the policy keeps the tail
// (policy.TailKeeper): then only what lies before the tail, as window and
// reserve frame it, and superseded results count. So an agent about to
// compact for lack of room can ask whether folding makes the room instead.
// Thinking is left out: which of it may fold depends on the model and the
// turn, and the answer must not promise more than folds.
func (e *Engine) Foldable(window, reserve int) int {
	if e.waiting {
		return 0 // the next event waits for a user turn (see Step)
	}
	blocks := e.tr.Blocks()
	from := len(blocks) // the first block urgent events leave alone
	if tk, ok := e.cfg.Policy.(policy.TailKeeper); ok && tk.KeepsTail() {
		_, tail := e.frame(window, reserve)
		from = protectFromFunc(len(blocks), func(k int) int {
			if f := e.meta[k].frozen; f != nil && !e.unfolded[blocks[k].ID] {
				return f.tokens
			}
			return blocks[k].Tokens
		}, tail)
	}
	saved := 0
	for k := 0; k < len(blocks)-1; k++ {
		b := &blocks[k]
		if b.Kind != block.ToolResult || !mayFold(b) || !block.Durable(b.ID) || e.meta[k].frozen != nil || e.unfolded[b.ID] || e.rejected[b.ID] {
			continue
		}
		if k >= from && !e.view[k].Superseded {
			continue
		}
		if f := e.ensureMeta(k).tokens; policy.Worth(b.Tokens, f) {
			saved += b.Tokens - f
		}
	}
	return saved
}

// ensureMeta computes a block's digest on first need.
func (e *Engine) ensureMeta(k int) *meta {
	m := &e.meta[k]
	if m.done {
		return m
	}
	b := &e.tr.Blocks()[k]
	lines := risk.Lines(b.Text, risk.Warning)
	switch b.Kind {
	case block.ToolResult:
		m.digest = digest.ToolResultSource(e.Code(b.ID), b.ToolName, b.Text, b.IsError, b.Tokens, e.cfg.Limits, lines, e.source(k))
	case block.Thinking:
		m.digest = digest.Thinking(e.Code(b.ID), b.Text)
	}
	m.tokens = e.cfg.Cost(m.digest)
	f := seedindex.ExtractLines(b.Text, lines)
	m.facts = &f
	m.done = true
	return m
}

// buildView refreshes the dynamic fields of the engine's persistent view:
// frozen, held, protected and folded cost. Static fields were set once when
// each block arrived, so a steady-state request writes no strings.
func (e *Engine) buildView(req Request) policy.View {
	window := req.Window
	if window <= 0 {
		window = e.cfg.DefaultWindow
	}
	budget, tail := e.frame(window, req.Reserve)
	v := policy.View{
		Blocks:    e.view,
		Window:    window,
		Budget:    budget,
		Reported:  req.Reported,
		Cold:      req.Cold,
		CacheCold: req.CacheCold,
		Anchored:  req.Anchored,
		Anchor:    -1,
		Knobs:     e.cfg.Knobs,
	}
	// First delivery: tool results after the latest assistant message have
	// not reached the model yet and are held, parallel results together.
	lastAssistant := -1
	for i := e.tr.Len() - 1; i >= 0; i-- {
		if e.tr.Message(i).Role == "assistant" {
			lastAssistant = i
			break
		}
	}
	v.Requests = e.roles.assistants
	lastUser := e.roles.lastUser
	// The current tool-use cycle: the newest assistant message Pi sends,
	// while the request answers its tool calls (no user message after it).
	// Providers require its thinking back exactly as produced, so it never
	// folds (nor does that of any unsent message after it).
	cycle := e.cycle()
	if lastUser > cycle {
		cycle = -1 // a new user turn: no tool-use cycle is open
	}
	// A Claude that keeps only the last turn's thinking strips the thinking
	// of earlier turns itself: free, unseen, so folding it would only add
	// the digest's tokens.
	stripped := -1
	if e.strips(e.model(req)) {
		stripped = lastUser
	}
	special := len(e.unfolded) > 0 || len(e.rejected) > 0
	for k := range e.view {
		vb := &e.view[k]
		f := e.meta[k].frozen
		unfolded := special && f != nil && e.unfolded[vb.ID]
		vb.Frozen = f != nil && !unfolded
		vb.FoldedTokens = vb.Tokens
		if vb.Frozen {
			vb.FoldedTokens = f.tokens
			v.LiveTokens += f.tokens
			if vb.Kind == block.ToolResult {
				v.Anchor = k
			}
		} else {
			v.LiveTokens += vb.Tokens
		}
		vb.Held = vb.Kind == block.ToolResult && vb.Msg > lastAssistant ||
			vb.Kind == block.Thinking && (cycle >= 0 && vb.Msg >= cycle || vb.Msg < stripped)
		if special && !vb.Held && vb.Foldable {
			vb.Held = e.unfolded[vb.ID] || e.rejected[vb.ID]
		}
	}
	if v.Reported == 0 && req.Overhead > 0 {
		v.Reported = v.LiveTokens + req.Overhead
	}
	v.TailTarget = tail
	v.ProtectFrom = protectFrom(e.view, tail)
	for k := range e.view {
		vb := &e.view[k]
		vb.Protected = k >= v.ProtectFrom
		// Protected blocks resolve too: an urgent event may reach into the tail.
		if vb.Durable && vb.Foldable && !vb.Held && !vb.Frozen {
			vb.FoldedTokens = 0 // resolved on demand
			if m := &e.meta[k]; m.done {
				vb.FoldedTokens = m.tokens
			}
		}
	}
	v.Resolve = func(k int) int { return e.ensureMeta(k).tokens }
	return v
}

// strips is wire.StripsEarlierThinking, remembered for the last model seen:
// the model rarely changes, and a request should not run a regexp for it.
func (e *Engine) strips(m wire.Model) bool {
	if m != e.stripsFor.model || !e.stripsFor.known {
		e.stripsFor.model, e.stripsFor.known = m, true
		e.stripsFor.strips = wire.StripsEarlierThinking(m)
	}
	return e.stripsFor.strips
}

// cycle returns the index of the newest assistant message that Pi sends
// (not errored or aborted), or -1.
func (e *Engine) cycle() int {
	for i := e.tr.Len() - 1; i >= 0; i-- {
		if m := e.tr.Message(i); m.Role == "assistant" && m.Sent() {
			return i
		}
	}
	return -1
}

// Model returns m, or the newest sent assistant message's origin when m is
// unknown (before the first request after a resume, offline).
func (e *Engine) Model(m wire.Model) wire.Model { return e.model(Request{Model: m}) }

// model returns the request's model, or the newest sent assistant
// message's origin when the caller does not know it.
func (e *Engine) model(req Request) wire.Model {
	if req.Model.Known() {
		return req.Model
	}
	if c := e.cycle(); c >= 0 {
		m := e.tr.Message(c)
		return wire.Model{API: m.API, Provider: m.Provider, ID: m.Model}
	}
	return wire.Model{}
}

// protectFrom walks back from the newest block and returns the index of the
// first protected block: the newest block always, then older blocks while the
// rendered total stays under target (allowing a 25 % overflow).
func protectFrom(bs []policy.ViewBlock, target int) int {
	return protectFromFunc(len(bs), func(i int) int {
		if bs[i].Frozen {
			return bs[i].FoldedTokens
		}
		return bs[i].Tokens
	}, target)
}

// protectFromFunc is protectFrom over n blocks whose rendered sizes
// rendered gives.
func protectFromFunc(n int, rendered func(int) int, target int) int {
	if n == 0 {
		return 0
	}
	if target <= 0 {
		return n
	}
	limit := int(float64(target) * protectOverflow)
	sum := rendered(n - 1)
	if sum >= target {
		return n - 1
	}
	for i := n - 2; i >= 0; i-- {
		next := sum + rendered(i)
		if next > limit {
			return i + 1
		}
		sum = next
		if sum >= target {
			return i
		}
	}
	return 0
}

// lower turns a decision into an event: it re-checks every id (single
// disposition, durable, foldable, not protected, held, frozen or rejected,
// digest smaller than the block), authors the digest text, and drops ids
// whose fold code collides. The oversized first-delivery results join the
// event with their bounded views, past the held and tail checks. It returns
// nil when nothing is left to fold.
func (e *Engine) lower(dec policy.Decision, over []oversized, v *policy.View, req Request) (*Event, []string) {
	blocks := e.tr.Blocks()
	index := make(map[string]int, len(dec.Fold))
	for _, id := range dec.Fold {
		index[id] = -1
	}
	for k := range blocks {
		if _, ok := index[blocks[k].ID]; ok && index[blocks[k].ID] < 0 {
			index[blocks[k].ID] = k
		}
	}
	seq := e.lastSeq + 1
	ev := &Event{Seq: seq, Trigger: dec.Trigger}
	if ev.Trigger == "" {
		ev.Trigger = policy.Threshold
		if len(dec.Fold) == 0 && len(over) > 0 {
			ev.Trigger = policy.Oversize
		}
	}
	var collisions []string
	taken := map[string]bool{}
	codes := map[string]string{}
	var masked []seedindex.Masked
	// fold adds block k to the event; invalidated says the block loses its
	// signed form to this event anyway, so it folds even inside the tail and
	// even where the digest is not smaller.
	var add func(id string, k int, text string) bool
	fold := func(id string, k int, invalidated bool) bool {
		if k < 0 || taken[id] {
			return false
		}
		vb := &v.Blocks[k]
		if !vb.Durable || !vb.Foldable || vb.Held || vb.Frozen || e.rejected[id] {
			return false
		}
		if k == len(blocks)-1 && !invalidated {
			return false // the newest block is always protected
		}
		if !invalidated && vb.Protected && !dec.IntoTail && !vb.Superseded {
			return false // the tail protects what the agent works with; a superseded result is not that
		}
		if _, done := e.frozen[id]; done {
			return false // frozen bytes outrank any later op for the same id
		}
		b := &blocks[k]
		m := e.ensureMeta(k)
		text := m.digest
		if body, ok := dec.Digests[id]; ok {
			text = digest.Authored(e.Code(id), body)
		}
		if !invalidated && !policy.Worth(b.Tokens, e.cfg.Cost(text)) {
			return false // folding would save almost nothing
		}
		return add(id, k, text)
	}
	// add records block k folding to text in this event, unless its code
	// collides.
	add = func(id string, k int, text string) bool {
		if taken[id] {
			return false
		}
		b := &blocks[k]
		m := e.ensureMeta(k)
		taken[id] = true
		code := e.Code(id)
		if e.reg.Collides(id, code) || (codes[code] != "" && codes[code] != id) {
			e.rejected[id] = true // held raw for the session from now on
			delete(taken, id)     // not part of this event
			collisions = append(collisions, id)
			return false
		}
		codes[code] = id
		bytes, lines := registry.Extent(b.Text)
		rec := registry.Record{
			ID: id, Code: code, Seq: seq, Bytes: bytes, Lines: lines, SHA256: registry.Sum(b.Text),
			Tool: b.ToolName, Kind: b.Kind.String(), IsError: b.IsError, Turn: b.Turn,
			FullOutputPath: b.FullOutputPath, Digest: text,
		}
		ev.Folds = append(ev.Folds, rec)
		masked = append(masked, seedindex.Masked{Block: b, Facts: *m.facts, Span: spanOf(&rec)})
		return true
	}
	for _, id := range dec.Fold {
		fold(id, index[id], false)
	}
	// Oversized first-delivery results bypass the held and tail checks:
	// they cannot go out whole (oversize.go).
	for _, o := range over {
		add(blocks[o.k].ID, o.k, o.text)
	}
	if len(ev.Folds) == 0 {
		return nil, collisions
	}
	if model := e.model(req); wire.Preserved(model) {
		ev.Thinking = e.invalidate(model, v, taken, fold)
		if ev.Thinking.Dropped > 0 && !wire.DropsInvalidThinking(model) {
			// This provider would reject the request instead of dropping the
			// signed thinking that must stay: wait for a user turn, where no
			// tool-use cycle holds its thinking.
			e.waiting = true
			return nil, collisions
		}
	}
	used := v.Used()
	frac := 0.0
	if v.Window > 0 {
		frac = float64(used) / float64(v.Window)
	}
	ev.Index = seedindex.Build(seedindex.Input{
		Seq: seq, Trigger: string(ev.Trigger),
		Usage:  seedindex.Usage{Tokens: used, Window: v.Window, Fraction: float64(int64(frac*1000+0.5)) / 1000},
		Masked: masked, Calls: e.calls(), Users: e.users(),
	})
	return ev, collisions
}

// invalidate handles a fold event on a model that binds thinking to its
// prefix: every signed thinking block of that model after the event's
// earliest changed block fails its prefix check from now on. Each one that
// may fold is folded in this event, so the model keeps its digest and code;
// the rest (the current cycle's, redacted ones) the provider drops.
func (e *Engine) invalidate(model wire.Model, v *policy.View, taken map[string]bool, fold func(string, int, bool) bool) ThinkingCost {
	blocks := e.tr.Blocks()
	first := len(blocks)
	for k := range blocks {
		if taken[blocks[k].ID] {
			first = k
			break
		}
	}
	var c ThinkingCost
	for k := first + 1; k < len(blocks); k++ {
		b := &blocks[k]
		if b.Kind != block.Thinking || !b.Signed || v.Blocks[k].Frozen {
			continue
		}
		m := e.tr.Message(b.Msg)
		if !m.Sent() || (model.Known() && !wire.SameModel(model, m.API, m.Provider, m.Model)) {
			continue // Pi does not send it to this model at all
		}
		if e.lost[b.ID] {
			fold(b.ID, k, true) // lost to an earlier event; a digest is better than nothing
			continue
		}
		c.Invalidated++
		if taken[b.ID] || fold(b.ID, k, true) {
			c.Folded++
		} else {
			c.Dropped++
			c.Lost = append(c.Lost, b.ID)
		}
	}
	return c
}

func spanOf(r *registry.Record) seedindex.Span {
	return seedindex.Span{ID: r.ID, Code: r.Code, Tool: r.Tool, Kind: r.Kind, Turn: r.Turn,
		Bytes: r.Bytes, Lines: r.Lines, SHA256: r.SHA256, FullOutputPath: r.FullOutputPath}
}

func (e *Engine) calls() map[string]*block.Block {
	blocks := e.tr.Blocks()
	out := make(map[string]*block.Block)
	for k := range blocks {
		if b := &blocks[k]; b.Kind == block.ToolCall && b.CallID != "" {
			if _, dup := out[b.CallID]; !dup {
				out[b.CallID] = b
			}
		}
	}
	return out
}

func (e *Engine) users() []*block.Block {
	blocks := e.tr.Blocks()
	var out []*block.Block
	for k := range blocks {
		if blocks[k].Kind == block.User {
			out = append(out, &blocks[k])
		}
	}
	return out
}

// freeze makes a committed event's layer part of every later request.
func (e *Engine) freeze(ev *Event) {
	l := &Layer{Seq: ev.Seq, Trigger: ev.Trigger}
	for _, rec := range ev.Folds {
		e.reg.Add(rec)
		if rec.Digest == "" {
			continue // a compaction record: recall only, nothing to substitute
		}
		if _, done := e.frozen[rec.ID]; done {
			continue
		}
		f := &frozen{seq: ev.Seq, index: len(l.Entries), text: rec.Digest, tokens: e.cfg.Cost(rec.Digest)}
		e.frozen[rec.ID] = f
		if b, ok := e.tr.Lookup(rec.ID); ok && b.Foldable() {
			e.meta[b.Order].frozen = f
		}
		l.Entries = append(l.Entries, LayerEntry{ID: rec.ID, Code: rec.Code, Text: rec.Digest})
	}
	e.insertLayer(l)
	if ev.Seq > e.lastSeq {
		e.lastSeq = ev.Seq
	}
	e.version++
}

func (e *Engine) insertLayer(l *Layer) {
	i := sort.Search(len(e.layers), func(i int) bool { return e.layers[i].Seq >= l.Seq })
	if i < len(e.layers) && e.layers[i].Seq == l.Seq {
		e.layers[i] = l
		return
	}
	e.layers = append(e.layers, nil)
	copy(e.layers[i+1:], e.layers[i:])
	e.layers[i] = l
}

// UnfoldStatus is the outcome of unfolding one code.
type UnfoldStatus string

// Unfold outcomes.
const (
	Released  UnfoldStatus = "unfolded"  // raw again from the next request
	Already   UnfoldStatus = "already"   // was unfolded before
	Compacted UnfoldStatus = "compacted" // folded, but its message left live history
	NotFolded UnfoldStatus = "unknown"   // no folded block has this code
)

// UnfoldResult is the outcome for one requested code.
type UnfoldResult struct {
	Code   string       `json:"code"`
	ID     string       `json:"id,omitempty"`
	Status UnfoldStatus `json:"status"`
}

// ErrBadCode reports a code that is neither a bare code nor a tag.
var ErrBadCode = errors.New("not a fold code")

// Unfold releases the blocks behind codes for good, after the journal
// records it. Only folded blocks answer (docs/EDGES.md #12).
func (e *Engine) Unfold(codes []string, j Journal) ([]UnfoldResult, error) {
	if j == nil {
		j = NopJournal{}
	}
	out := make([]UnfoldResult, 0, len(codes))
	var release []string
	pending := map[string]bool{}
	for _, raw := range codes {
		code, ok := digest.ParseCode(raw)
		if !ok {
			out = append(out, UnfoldResult{Code: raw, Status: NotFolded})
			continue
		}
		rec, ok := e.reg.ByCode(code)
		switch {
		case !ok:
			out = append(out, UnfoldResult{Code: code, Status: NotFolded})
		case e.unfolded[rec.ID] || pending[rec.ID]:
			out = append(out, UnfoldResult{Code: code, ID: rec.ID, Status: Already})
		case !e.live(rec.ID):
			out = append(out, UnfoldResult{Code: code, ID: rec.ID, Status: Compacted})
		case e.frozen[rec.ID] == nil:
			out = append(out, UnfoldResult{Code: code, ID: rec.ID, Status: NotFolded})
		default:
			out = append(out, UnfoldResult{Code: code, ID: rec.ID, Status: Released})
			release = append(release, rec.ID)
			pending[rec.ID] = true
		}
	}
	if len(release) == 0 {
		return out, nil
	}
	if err := j.Unfold(release); err != nil {
		return nil, fmt.Errorf("unfold not recorded: %w", err)
	}
	for _, id := range release {
		e.unfolded[id] = true
	}
	e.version++
	return out, nil
}

// live reports whether a block with id is in the held messages.
func (e *Engine) live(id string) bool {
	_, ok := e.tr.Lookup(id)
	return ok
}

// Live returns the held block with id.
func (e *Engine) Live(id string) (*block.Block, bool) { return e.tr.Lookup(id) }
