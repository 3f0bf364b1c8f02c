// Package policy is the contract between a fold policy, which decides what
// folds and when, and the engine, which performs folds and owns their bytes.
//
// The whole contract is one pure function, Conduct(view) → Decision. The
// engine re-checks every id a policy names against its own rules, so a policy
// defect can waste a fold but never corrupt what is sent.
package policy

import "github.com/contextfold/contextfold/internal/core/block"

// Knobs are the tunable thresholds, with the names the TypeScript design and
// its CONTEXTFOLD_* environment variables use.
type Knobs struct {
	FoldAt         float64 // first fold when usage ≥ FoldAt × window
	FoldStep       float64 // an event must mask ≥ FoldStep × window
	ColdFoldAt     float64 // FoldAt when the session never had a live cache read
	BudgetFraction float64 // budget = min(BudgetCap, BudgetFraction × window)
	BudgetCap      int     // absolute budget ceiling in tokens; 0 disables
	Tail           int     // protected working tail in tokens (clamped to budget/2)
}

// DefaultKnobs are the shipped defaults, the seed design's: the cheapest
// setting that hides no more than the seed ladder on the tune halves kept
// them (contextfold bench -sweep-fidelity; BENCHMARKS.md). The cost-first
// schedule's 10k tail without the envelope was 6 % cheaper on the bench
// set and hid four times as much.
var DefaultKnobs = Knobs{
	FoldAt:         0.45,
	FoldStep:       0.12,
	ColdFoldAt:     0.25,
	BudgetFraction: 0.75,
	BudgetCap:      200_000,
	Tail:           20_000,
}

// A fold must save at least MinSaveTokens and MinSaveShare of the block:
// below that, the digest hides the block's detail (and mints a code the
// model may have to recall) for almost nothing.
const (
	MinSaveTokens = 48
	MinSaveShare  = 0.25
)

// Worth reports whether folding a block of tokens to a digest of folded
// tokens saves enough to be worth doing.
func Worth(tokens, folded int) bool {
	save := tokens - folded
	return save >= MinSaveTokens && float64(save) >= MinSaveShare*float64(tokens)
}

// ViewBlock is one block as a policy sees it.
type ViewBlock struct {
	ID          string
	Kind        block.Kind
	Turn, Order int
	Msg         int
	Tokens      int // cost at full fidelity
	// FoldedTokens is the cost as a digest: the frozen text's when frozen,
	// Tokens when the block cannot fold, and 0 for a foldable block (a
	// candidate, or one in the tail) whose digest has not been computed yet
	// (read it through View.Folded).
	FoldedTokens int
	Durable      bool // id is content-anchored
	Foldable     bool // passes the kind gate
	Held         bool // unfolded by the agent, first delivery, or collision-rejected
	Frozen       bool // committed in a layer
	Protected    bool // inside the protected tail
	ToolName     string
	IsError      bool
	// Superseded marks a tool result a later call made stale: a file read
	// followed by a covering read or a successful change of that file, a
	// command's output followed by a successful run of the same command.
	// Such a block may fold inside the protected tail, which protects what
	// the agent works with.
	Superseded bool
	// SupersededBy is the id of the result that superseded it.
	SupersededBy string
}

// Candidate reports whether a policy may ask for this block: durable,
// foldable, unheld, unfrozen, and unprotected or superseded. Whether
// folding makes it smaller is View.Folded's to say.
func (b *ViewBlock) Candidate() bool {
	return b.Durable && b.Foldable && (!b.Protected || b.Superseded) && !b.Held && !b.Frozen
}

// View is the read-only picture of one request.
type View struct {
	Blocks []ViewBlock
	// Window is the model's context window in tokens.
	Window int
	// Budget is min(BudgetCap, BudgetFraction × Window).
	Budget int
	// LiveTokens is the estimated cost of the messages as they would be sent
	// with only frozen folds applied.
	LiveTokens int
	// Reported is the provider-anchored usage when the caller knows it, else 0.
	Reported int
	// Cold is set while the session has never had a live cache read.
	Cold bool
	// ProtectFrom is the index in Blocks of the first protected block.
	ProtectFrom int
	// TailTarget is the protected-tail target after clamping.
	TailTarget int
	// Knobs are the effective knobs.
	Knobs Knobs
	// Requests is the number of assistant responses already in the context.
	Requests int
	// CacheCold is set when the provider's cache is known to be cold for
	// this request (an idle gap past its lifetime, a model change): a fold
	// now costs no extra re-write.
	CacheCold bool
	// Anchored is set when the provider serves its cache only at
	// breakpoints the request marks (Anthropic), not from any shared prefix
	// (OpenAI-style automatic caching). An event then re-writes everything
	// after the last marked prefix it leaves intact: the host marks the end
	// of the frozen region, Anchor, the last block folded before this
	// request (-1: none; the system prompt is always marked). A change more
	// than a few blocks before the newest message is otherwise re-written
	// from the system prompt on.
	Anchored bool
	Anchor   int
	// Resolve computes the digest cost of block k on first need. Digests are
	// built lazily so a request far from any threshold never pays for them.
	Resolve func(k int) int
}

// Folded returns block k's cost as a digest, computing it if needed.
func (v *View) Folded(k int) int {
	b := &v.Blocks[k]
	if b.FoldedTokens == 0 && v.Resolve != nil {
		b.FoldedTokens = v.Resolve(k)
	}
	if b.FoldedTokens == 0 {
		return b.Tokens
	}
	return b.FoldedTokens
}

// Used returns the usage the thresholds are judged on: provider-reported
// when known, the estimate otherwise.
func (v *View) Used() int {
	if v.Reported > 0 {
		return v.Reported
	}
	return v.LiveTokens
}

// Trigger says why an event fired.
type Trigger string

// Triggers.
const (
	Threshold Trigger = "threshold"
	Cap       Trigger = "cap"
	Economic  Trigger = "economic"
	Free      Trigger = "free" // the cache is cold anyway: folding costs no re-write
	Compact   Trigger = "compact"
	// Oversize marks an event that bounds a first-delivery tool result too
	// large to send whole, with nothing the policy asked to fold.
	Oversize Trigger = "oversize"
)

// Decision is a policy's answer for one request.
type Decision struct {
	// Fold lists the ids to fold in this event; empty means no event.
	Fold []string
	// Digests optionally supplies body text per id; the engine strips any tag
	// from it and prepends its own. Absent ids get the engine's digest.
	Digests map[string]string
	Trigger Trigger
	Status  Status
	// IntoTail lets an urgent event fold protected-tail blocks too (never
	// the newest block, a held block, or first-delivery results): the tail
	// is a target, and an event that cannot otherwise make headroom would
	// recur on every request.
	IntoTail bool
}

// Status is display-only telemetry a policy publishes each request.
type Status struct {
	UsageFraction    float64 `json:"usageFraction"`
	FoldAt           float64 `json:"foldAt"`
	MaskableTokens   int     `json:"maskableTokens"`
	StepTokens       int     `json:"stepTokens"`
	LiveTokens       int     `json:"liveTokens"`
	Budget           int     `json:"budget"`
	OverBudget       bool    `json:"overBudget"`
	IrreducibleFloor int     `json:"irreducibleFloor"`
	Note             string  `json:"note,omitempty"`
}

// Policy decides which blocks fold. Conduct must be deterministic and must
// not modify the view.
type Policy interface {
	Conduct(v *View) Decision
}

// TailKeeper is implemented by a policy whose urgent events never fold
// inside the protected tail (superseded results aside), so that the engine
// tells an agent about to compact only what folding outside the tail can
// shed.
type TailKeeper interface {
	KeepsTail() bool
}
