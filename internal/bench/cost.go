// Package bench replays recorded agent sessions through context-management
// policies and prices every request with a prefix cache, so policies can be
// compared on real sessions: cost, tokens sent, cache breaks, and how many
// error lines the agent can still see.
//
// A replay turns a trajectory into the requests an agent would send: before
// each assistant message, every message before it, behind a fixed system
// prompt and tool list. A policy decides what each request looks like. The
// cost model then charges each request: the longest prefix it shares with the
// previous request is read from cache, the rest is written (or sent fresh),
// and the response's tokens are output.
package bench

// Prices are relative per-token prices.
type Prices struct {
	Name       string  `json:"name"`
	Input      float64 `json:"input"`      // uncached input (side calls, OpenAI-style writes)
	CacheWrite float64 `json:"cacheWrite"` // input not served from cache
	CacheRead  float64 `json:"cacheRead"`
	Output     float64 `json:"output"`
}

// The two price models the report uses.
var (
	// Anthropic-style: writing the cache costs a premium.
	Anthropic = Prices{Name: "anthropic", Input: 1, CacheWrite: 1.25, CacheRead: 0.1, Output: 5}
	// OpenAI-style: no write premium, cached input at a tenth.
	OpenAI = Prices{Name: "openai", Input: 1, CacheWrite: 1, CacheRead: 0.1, Output: 5}
)

// Seg is one cacheable unit of a request: the system prompt and tools, or
// one message as the policy renders it. Equal keys mean equal bytes.
type Seg struct {
	Key    uint64
	Tokens int
}

// SideCall is an extra model request a policy makes, such as Pi's
// compaction summary: charged as fresh input plus output, never cached.
type SideCall struct {
	Input, Output int
}

// Request is one model request of a replay.
type Request struct {
	Segs   []Seg
	Output int        // tokens of the response that follows
	Side   []SideCall // calls made before this request
	Time   int64      // unix ms, 0 when the trajectory has no timestamps
}

// Total returns the request's input tokens.
func (r *Request) Total() int {
	n := 0
	for _, s := range r.Segs {
		n += s.Tokens
	}
	return n
}

// Usage is what the cost model derives for one sequence of requests.
type Usage struct {
	Requests   int   `json:"requests"`
	Input      int   `json:"inputTokens"`
	CacheRead  int   `json:"cacheRead"`
	CacheWrite int   `json:"cacheWrite"`
	Output     int   `json:"outputTokens"`
	SideInput  int   `json:"sideInput"`
	SideOutput int   `json:"sideOutput"`
	Peak       int   `json:"peakRequest"`
	Breaks     int   `json:"cacheBreaks"`
	OverWindow int   `json:"overWindow"`
	PerRequest []int `json:"-"`
	costs      map[string]float64
}

// Cost returns the priced total under p.
func (u *Usage) Cost(p Prices) float64 {
	return float64(u.CacheRead)*p.CacheRead + float64(u.CacheWrite)*p.CacheWrite + float64(u.Output)*p.Output +
		float64(u.SideInput)*p.Input + float64(u.SideOutput)*p.Output
}

// Mean returns the mean request size.
func (u *Usage) Mean() float64 {
	if u.Requests == 0 {
		return 0
	}
	return float64(u.Input) / float64(u.Requests)
}

// Add accumulates o into u.
func (u *Usage) Add(o *Usage) {
	u.Requests += o.Requests
	u.Input += o.Input
	u.CacheRead += o.CacheRead
	u.CacheWrite += o.CacheWrite
	u.Output += o.Output
	u.SideInput += o.SideInput
	u.SideOutput += o.SideOutput
	u.Peak = max(u.Peak, o.Peak)
	u.Breaks += o.Breaks
	u.OverWindow += o.OverWindow
}

// Price runs the prefix-cache model over reqs. The cache holds the previous
// request; a request reads from it the tokens of its leading segments equal
// to the previous request's (whole segments: providers cache at message
// boundaries), unless more than ttlMs passed since (when both requests carry
// times; ttlMs 0 disables expiry). A cache break is a request that does not
// extend its predecessor. window counts requests over the window.
func Price(reqs []Request, window int, ttlMs int64) Usage {
	var u Usage
	var prev []Seg
	var prevTime int64
	for i := range reqs {
		r := &reqs[i]
		total := r.Total()
		lcp, whole := 0, true
		for k, s := range r.Segs {
			if k >= len(prev) || prev[k] != s {
				whole = k >= len(prev)
				break
			}
			lcp += s.Tokens
		}
		if len(r.Segs) < len(prev) {
			whole = false
		}
		if ttlMs > 0 && r.Time > 0 && prevTime > 0 && r.Time-prevTime > ttlMs {
			lcp = 0 // the cache expired
		}
		if i > 0 && !whole {
			u.Breaks++
		}
		u.Requests++
		u.Input += total
		u.CacheRead += lcp
		u.CacheWrite += total - lcp
		u.Output += r.Output
		for _, s := range r.Side {
			u.SideInput += s.Input
			u.SideOutput += s.Output
		}
		u.Peak = max(u.Peak, total)
		if window > 0 && total > window {
			u.OverWindow++
		}
		u.PerRequest = append(u.PerRequest, total)
		prev, prevTime = r.Segs, r.Time
	}
	return u
}
