package bench

import (
	"math"
	"sort"
	"strconv"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/engine"
	"github.com/contextfold/contextfold/internal/core/policy"
	"github.com/contextfold/contextfold/internal/core/policy/schedule"
)

// Optimum is the offline optimum of the schedule's event timing: for each
// trace, knowing every request to come, the request indexes at which an
// event folds what the schedule has on offer (schedule.Offer) that make the
// session cheapest, found by dynamic programming and then replayed through
// the engine like any policy, so it is priced and its hidden references
// counted exactly as the default's are.
//
// The family is the default's: the same tail, the same candidates, events
// that fold everything on offer; only when events fire differs. The
// dynamic program's simplifications:
//   - the state after an event is the set of every block offered at or
//     before it (a block once outside the tail stays out);
//   - a request costs Anthropic's prices under its cache's rules, with
//     context-fold's breakpoint on the newest folded tool result (write
//     1.25, read 0.1): a request without an event reads its predecessor
//     and writes what it adds; an event re-writes from the earlier of the
//     first message it changes and the message after that breakpoint (from
//     the system prompt on before the first event);
//   - requests must fit the budget without reaching into the tail; a trace
//     where no timing does (or where Pi would compact) replays the shipped
//     schedule instead, and says so (Replay.Substituted);
//   - output and side calls, equal for every timing, are left out.
type Optimum struct {
	Knobs   policy.Knobs
	Reserve int
	// Lambda prices each hidden reference the timing would cause, in
	// token-units, so the optimum can be held to a fidelity bound
	// (Lagrangian relaxation): 0 is the unconstrained optimum. The dynamic
	// program's own count takes a reference as hidden once every tool
	// result holding it is folded and no other message holds it (a digest
	// that shows it is not credited); the replay counts it exactly.
	Lambda float64
}

// Name implements Policy.
func (p Optimum) Name() string {
	if p.Lambda > 0 {
		return "context-fold, offline optimum of event timing, " + strconv.FormatFloat(p.Lambda, 'f', -1, 64) + " per hidden reference"
	}
	return "context-fold, offline optimum of event timing"
}

// Replay implements Policy.
func (p Optimum) Replay(t *Trace, window int, obs Observer) Replay {
	events, ok := p.Plan(t, window)
	pol := policy.Policy(oracle{events: events})
	if !ok {
		pol = schedule.Default
	}
	r := ContextFold{Knobs: p.Knobs, Policy: pol, Reserve: p.Reserve}.Replay(t, window, obs)
	r.Substituted = !ok
	return r
}

// oracle folds what the schedule has on offer at the given requests.
type oracle struct{ events map[int]bool }

func (o oracle) Conduct(v *policy.View) policy.Decision {
	if !o.events[v.Requests] {
		return policy.Decision{}
	}
	ks, _ := schedule.Offer(v)
	ids := make([]string, len(ks))
	for i, k := range ks {
		ids[i] = v.Blocks[k].ID
	}
	return policy.Decision{Fold: ids, Trigger: policy.Economic}
}

// offered records, per request, the blocks on offer: their message and
// what folding them saves.
type offered struct {
	at [][]offer // by request
}

type offer struct {
	id        string
	msg, save int
	result    bool // a tool result (else thinking)
}

func (r *offered) Conduct(v *policy.View) policy.Decision {
	for len(r.at) <= v.Requests {
		r.at = append(r.at, nil)
	}
	ks, saves := schedule.Offer(v)
	for i, k := range ks {
		b := &v.Blocks[k]
		r.at[v.Requests] = append(r.at[v.Requests], offer{b.ID, b.Msg, saves[i], b.Kind == block.ToolResult})
	}
	return policy.Decision{}
}

// Plan returns the cheapest event timing for t at window (request indexes,
// as View.Requests counts them), and false when no timing of the family
// keeps every request within the budget.
func (p Optimum) Plan(t *Trace, window int) (map[int]bool, bool) {
	m, ok := p.model(t, window)
	if !ok {
		return nil, false
	}
	return m.best()
}

// timing is the dynamic program's cost model of one trace (see Optimum).
type timing struct {
	k         int     // requests
	raw       []int   // request k's tokens with nothing folded
	msgBefore []int   // tokens of messages [0, i) behind the system prompt
	newAt     []int   // earliest message first offered at request k; MaxInt if none
	msgs      [][]int // per state j: the messages of the blocks offered by j, sorted
	saved     [][]int // per state j: running savings over msgs[j]
	hiddenAt  [][]int // per request: sorted states from which a reference of its action is hidden
	anchor    []int   // per state j: the message of the newest tool result folded, -1 if none
	budget    int
	lambda    float64
}

const optWrite, optRead = 1.25, 0.1

func (p Optimum) model(t *Trace, window int) (*timing, bool) {
	// What is on offer when: one pass with nothing folded and no
	// compaction (the tail does not depend on the window while the budget
	// is at least twice the tail).
	rec := &offered{}
	e := engine.New(engine.Config{Knobs: p.Knobs, Policy: rec})
	held := 0
	for _, n := range t.Requests {
		e.Step(engine.Request{Keep: e.Len(), Append: t.Msgs[held:n], Window: 1 << 30}, engine.NopJournal{})
		held = n
	}
	if p.Reserve > 0 && window-p.Reserve-engine.ReplyMargin < window/8 {
		return nil, false
	}
	K := len(t.Requests)
	m := &timing{k: K, lambda: p.Lambda, budget: min(int(float64(window)*p.Knobs.BudgetFraction), window-p.Reserve-engine.ReplyMargin)}
	if p.Knobs.BudgetCap > 0 {
		m.budget = min(m.budget, p.Knobs.BudgetCap)
	}
	m.msgBefore = make([]int, len(t.Msgs)+1)
	m.msgBefore[0] = t.System
	for i, tk := range t.Tokens {
		m.msgBefore[i+1] = m.msgBefore[i] + tk
	}
	m.raw = make([]int, K)
	for k, n := range t.Requests {
		m.raw[k] = m.msgBefore[n]
	}
	seen := map[string]bool{}
	firstOffered := map[int]int{}
	var cum []offer
	m.newAt = make([]int, K)
	m.msgs, m.saved, m.anchor = make([][]int, K), make([][]int, K), make([]int, K)
	anchor := -1
	for k := 0; k < K; k++ {
		m.newAt[k] = math.MaxInt
		if k < len(rec.at) {
			for _, o := range rec.at[k] {
				if !seen[o.id] {
					seen[o.id] = true
					cum = append(cum, o)
					m.newAt[k] = min(m.newAt[k], o.msg)
					if o.result {
						anchor = max(anchor, o.msg)
					}
				}
				if _, ok := firstOffered[o.msg]; !ok {
					firstOffered[o.msg] = k
				}
			}
		}
		m.anchor[k] = anchor
		sorted := append([]offer(nil), cum...)
		sort.Slice(sorted, func(a, b int) bool { return sorted[a].msg < sorted[b].msg })
		m.msgs[k], m.saved[k] = make([]int, len(sorted)), make([]int, len(sorted)+1)
		for i, o := range sorted {
			m.msgs[k][i] = o.msg
			m.saved[k][i+1] = m.saved[k][i] + o.save
		}
	}
	if p.Lambda > 0 {
		x := t.refs()
		m.hiddenAt = make([][]int, K)
		for k, a := range t.Requests {
		refs:
			for _, r := range x.action[k] {
				th := -1
				for _, i := range x.at[r] {
					if i >= a {
						break
					}
					f, ok := firstOffered[i]
					if !ok || !t.ToolResult[i] || f > k {
						continue refs // shown by a message that has not folded by then
					}
					th = max(th, f)
				}
				if th >= 0 {
					m.hiddenAt[k] = append(m.hiddenAt[k], th)
				}
			}
			sort.Ints(m.hiddenAt[k])
		}
	}
	return m, true
}

// savedAll is what state j's folds save; savedBefore the part of it in
// messages before msg.
func (m *timing) savedAll(j int) int {
	if j < 0 {
		return 0
	}
	return m.saved[j][len(m.msgs[j])]
}

func (m *timing) savedBefore(j, msg int) int {
	if j < 0 {
		return 0
	}
	return m.saved[j][sort.SearchInts(m.msgs[j], msg)]
}

// hidden prices the references of request k's action that state j hides.
func (m *timing) hidden(k, j int) float64 {
	if m.lambda == 0 || j < 0 {
		return 0
	}
	return m.lambda * float64(sort.SearchInts(m.hiddenAt[k], j+1))
}

// carry is request k's cost in state j without an event, and whether it fits.
func (m *timing) carry(k, j int) (float64, bool) {
	size := m.raw[k] - m.savedAll(j)
	if size > m.budget {
		return 0, false
	}
	if k == 0 {
		return optWrite * float64(size), true
	}
	return optRead*float64(m.raw[k-1]-m.savedAll(j)) + optWrite*float64(m.raw[k]-m.raw[k-1]) + m.hidden(k, j), true
}

// event is the cost of an event at request k from state j, whose newly
// offered blocks start at message earliest, and whether it fits.
func (m *timing) event(k, j, earliest int) (float64, bool) {
	size := m.raw[k] - m.savedAll(k)
	if size > m.budget {
		return 0, false
	}
	// Anthropic's cache serves the event's request up to the breakpoint on
	// the newest folded tool result at most (only the system prompt before
	// the first event).
	upto := 0
	if j >= 0 && m.anchor[j] >= 0 {
		upto = min(earliest, m.anchor[j]+1)
	}
	r := m.msgBefore[upto] - m.savedBefore(j, upto)
	return optRead*float64(r) + optWrite*float64(size-r) + m.hidden(k, k), true
}

// best runs the dynamic program: dp[j+1] is the least cost so far with the
// last event at request j (-1: none).
func (m *timing) best() (map[int]bool, bool) {
	inf := math.Inf(1)
	dp := make([]float64, m.k+1)
	parent := make([]int, m.k)
	for i := range dp {
		dp[i] = inf
	}
	dp[0] = 0
	for k := 0; k < m.k; k++ {
		best, from := inf, -2
		earliest := math.MaxInt // the earliest message offered since j, as j goes down
		for j := k - 1; j >= -1 && k > 0; j-- {
			earliest = min(earliest, m.newAt[j+1])
			if earliest == math.MaxInt || dp[j+1] == inf {
				continue
			}
			if c, ok := m.event(k, j, earliest); ok && dp[j+1]+c < best {
				best, from = dp[j+1]+c, j
			}
		}
		for j := -1; j < k; j++ {
			if dp[j+1] == inf {
				continue
			}
			if c, ok := m.carry(k, j); ok {
				dp[j+1] += c
			} else {
				dp[j+1] = inf
			}
		}
		if from > -2 {
			dp[k+1], parent[k] = best, from
		}
	}
	end, least := -2, inf
	for j := -1; j < m.k; j++ {
		if dp[j+1] < least {
			end, least = j, dp[j+1]
		}
	}
	if end == -2 {
		return nil, false
	}
	events := map[int]bool{}
	for j := end; j >= 0; j = parent[j] {
		events[j] = true
	}
	return events, true
}

// cost is the model's cost of a given timing, and whether it fits: what
// best minimises, computed request by request.
func (m *timing) cost(events map[int]bool) (float64, bool) {
	total, j := 0.0, -1
	for k := 0; k < m.k; k++ {
		if events[k] && k > 0 {
			earliest := math.MaxInt
			for i := j + 1; i <= k; i++ {
				earliest = min(earliest, m.newAt[i])
			}
			if earliest != math.MaxInt {
				c, ok := m.event(k, j, earliest)
				if !ok {
					return 0, false
				}
				total, j = total+c, k
				continue
			}
		}
		c, ok := m.carry(k, j)
		if !ok {
			return 0, false
		}
		total += c
	}
	return total, true
}
