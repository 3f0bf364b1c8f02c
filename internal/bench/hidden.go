package bench

// Seen is one message of a request as the model sees it.
type Seen struct {
	// I is the message's index in the trace; -1 for a message the policy
	// made up (a compaction summary).
	I int
	// Text is what the model reads (see messageText).
	Text string
	// Raw says Text is the message's original text, unchanged.
	Raw bool
}

// Observer receives every request a policy sends, as the replay goes:
// request k, which precedes the assistant message t.Requests[k].
type Observer func(k int, msgs []Seen)

// refIndex is a trace's references, computed once for every policy.
type refIndex struct {
	// msg[i] are the references of message i's original text.
	msg [][]string
	// at[r] are the messages whose original text holds r, ascending.
	at map[string][]int
	// action[k] are the references of the action request k precedes that
	// came from the context: held by some message before it.
	action [][]string
}

func (t *Trace) refs() *refIndex {
	if t.refIdx != nil {
		return t.refIdx
	}
	x := &refIndex{msg: make([][]string, len(t.Text)), at: map[string][]int{}}
	for i, text := range t.Text {
		x.msg[i] = Refs(text)
		for _, r := range x.msg[i] {
			x.at[r] = append(x.at[r], i)
		}
	}
	x.action = make([][]string, len(t.Requests))
	for k, a := range t.Requests {
		for _, r := range x.msg[a] {
			if at := x.at[r]; len(at) > 0 && at[0] < a {
				x.action[k] = append(x.action[k], r)
			}
		}
	}
	t.refIdx = x
	return x
}

// HiddenRefs is the metric on one replay.
type HiddenRefs struct {
	// Context counts, over every request, the references of its action
	// that came from the context; Hidden those of them the request did not
	// show.
	Context, Hidden int
	// Requests counts requests; WithHidden those with a hidden reference.
	Requests, WithHidden int
	// Recall[k] is, for a request with a hidden reference, the tokens a
	// recall round trip re-reads: the newest message holding the action's
	// first hidden reference (0 for the others).
	Recall []int
	// Samples are the first hidden references found, for review.
	Samples []HiddenSample
	// Breakdown counts the references from the context, and the hidden
	// ones, by the reference's kind ("kind/path", …, RefClass), where its
	// newest occurrence before the action sat ("in/tool result", "in/other
	// message") and how many messages back that was ("age/…", AgeBucket).
	Breakdown map[string]Tally
}

// Tally is a count of references from the context and of the hidden ones.
type Tally struct {
	Context int `json:"context"`
	Hidden  int `json:"hidden"`
}

// AgeBuckets are the ranges AgeBucket sorts a reference's age into.
var AgeBuckets = []string{"age/1–9 messages", "age/10–49", "age/50–199", "age/200+"}

// AgeBucket names the range of an age in messages.
func AgeBucket(age int) string {
	switch {
	case age < 10:
		return AgeBuckets[0]
	case age < 50:
		return AgeBuckets[1]
	case age < 200:
		return AgeBuckets[2]
	}
	return AgeBuckets[3]
}

// tally counts one reference from the context into b.
func (h *HiddenRefs) tally(keys []string, hidden bool) {
	if h.Breakdown == nil {
		h.Breakdown = map[string]Tally{}
	}
	for _, k := range keys {
		t := h.Breakdown[k]
		t.Context++
		if hidden {
			t.Hidden++
		}
		h.Breakdown[k] = t
	}
}

// HiddenSample is one hidden reference, for sampling by hand.
type HiddenSample struct {
	Request, Before, From int
	Ref                   string
}

// refMeter computes HiddenRefs for one trace as requests arrive.
type refMeter struct {
	t        *Trace
	x        *refIndex
	out      HiddenRefs
	modified map[string]map[string]bool // refs of texts a policy rewrote, by text
	keep     int                        // samples to keep
}

func newRefMeter(t *Trace, samples int) *refMeter {
	return &refMeter{t: t, x: t.refs(), modified: map[string]map[string]bool{}, keep: samples,
		out: HiddenRefs{Recall: make([]int, len(t.Requests))}}
}

// observe implements Observer.
func (m *refMeter) observe(k int, msgs []Seen) {
	m.out.Requests++
	refs := m.x.action[k]
	if len(refs) == 0 {
		return
	}
	a := m.t.Requests[k]
	raw := make(map[int]bool, len(msgs))
	var rewritten []map[string]bool
	for _, s := range msgs {
		if s.Raw && s.I >= 0 {
			raw[s.I] = true
			continue
		}
		set := m.modified[s.Text]
		if set == nil {
			set = map[string]bool{}
			for _, r := range Refs(s.Text) {
				set[r] = true
			}
			m.modified[s.Text] = set
		}
		rewritten = append(rewritten, set)
	}
	first := true
	for _, r := range refs {
		m.out.Context++
		visible := false
		newest := -1
		for _, i := range m.x.at[r] {
			if i >= a {
				break
			}
			newest = i
			if raw[i] {
				visible = true
				break
			}
		}
		for _, set := range rewritten {
			if visible {
				break
			}
			visible = set[r]
		}
		last := -1 // the newest occurrence before the action, whatever the policy shows
		for _, i := range m.x.at[r] {
			if i >= a {
				break
			}
			last = i
		}
		in := "in/other message"
		if last >= 0 && last < len(m.t.ToolResult) && m.t.ToolResult[last] {
			in = "in/tool result"
		}
		m.out.tally([]string{"kind/" + RefClass(r), in, AgeBucket(a - last)}, !visible)
		if visible {
			continue
		}
		m.out.Hidden++
		if first {
			first = false
			m.out.WithHidden++
			m.out.Recall[k] = m.t.Tokens[newest]
		}
		if len(m.out.Samples) < m.keep {
			m.out.Samples = append(m.out.Samples, HiddenSample{Request: k, Before: a, From: newest, Ref: r})
		}
	}
}

// RecallCost prices one recall round trip for every request with a hidden
// reference: the request again (its prompt read from cache), the recalled
// tokens written, and a short call (RecallCallTokens of output).
func RecallCost(h *HiddenRefs, reqs []Request, p Prices) float64 {
	c := 0.0
	for k, n := range h.Recall {
		if n == 0 || k >= len(reqs) {
			continue
		}
		c += p.CacheRead*float64(reqs[k].Total()) + p.CacheWrite*float64(n) + p.Output*RecallCallTokens
	}
	return c
}

// RecallCallTokens is the output of one recall call: the tool call itself.
const RecallCallTokens = 40
