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
	// Breakpoints prices requests by Anthropic's cache rules (see
	// PriceBreakpoints) instead of the prefix model (Price).
	Breakpoints bool `json:"breakpoints,omitempty"`
}

// The two price models the report uses.
var (
	// Anthropic-style: writing the cache costs a premium.
	Anthropic = Prices{Name: "anthropic", Input: 1, CacheWrite: 1.25, CacheRead: 0.1, Output: 5}
	// OpenAI-style: no write premium, cached input at a tenth.
	OpenAI = Prices{Name: "openai", Input: 1, CacheWrite: 1, CacheRead: 0.1, Output: 5}
	// AnthropicBreakpoints is Anthropic's prices under its cache's own
	// rules, with the breakpoints where Pi puts them (PiBreakpoints).
	AnthropicBreakpoints = Prices{Name: "anthropic-breakpoints", Input: 1, CacheWrite: 1.25, CacheRead: 0.1, Output: 5, Breakpoints: true}
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
	// Marks are cache breakpoints the policy adds to the host's own
	// (segment indexes; PriceBreakpoints): context-fold marks the end of
	// its frozen region.
	Marks []int
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
	Requests   int `json:"requests"`
	Input      int `json:"inputTokens"`
	CacheRead  int `json:"cacheRead"`
	CacheWrite int `json:"cacheWrite"`
	// Fresh is input neither read from nor written to the cache: what
	// follows a request's last breakpoint (PriceBreakpoints only).
	Fresh      int   `json:"freshInput,omitempty"`
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
	return float64(u.CacheRead)*p.CacheRead + float64(u.CacheWrite)*p.CacheWrite + float64(u.Fresh)*p.Input + float64(u.Output)*p.Output +
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
	u.Fresh += o.Fresh
	u.Output += o.Output
	u.SideInput += o.SideInput
	u.SideOutput += o.SideOutput
	u.Peak = max(u.Peak, o.Peak)
	u.Breaks += o.Breaks
	u.OverWindow += o.OverWindow
}

// count adds what a request costs whatever the cache: its size, output,
// side calls and whether it fits the window (window 0: no limit).
func (u *Usage) count(r *Request, total, window int) {
	u.Requests++
	u.Input += total
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
}

// Price runs the prefix-cache model over reqs. The cache holds the previous
// request; a request reads from it the tokens of its leading segments equal
// to the previous request's (whole segments: providers cache at message
// boundaries), unless more than ttlMs passed since (when both requests carry
// times; ttlMs 0 disables expiry). A cache break is a request that does not
// extend its predecessor. window counts requests over the window.
func Price(reqs []Request, window int, ttlMs int64) Usage {
	return price(reqs, window, ttlMs, nil)
}

// Running returns the cost under p, by Price's model, of reqs[:k+1] for
// each k: the running total a chart of cost over a session draws.
func Running(reqs []Request, window int, ttlMs int64, p Prices) []float64 {
	out := make([]float64, 0, len(reqs))
	price(reqs, window, ttlMs, func(u *Usage) { out = append(out, u.Cost(p)) })
	return out
}

// price is Price, calling after (when set) once each request is counted.
func price(reqs []Request, window int, ttlMs int64, after func(*Usage)) Usage {
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
		u.count(r, total, window)
		u.CacheRead += lcp
		u.CacheWrite += total - lcp
		prev, prevTime = r.Segs, r.Time
		if after != nil {
			after(&u)
		}
	}
	return u
}

// Breakpoints is Anthropic's prompt cache as a host drives it. A request
// marks breakpoints (at most four); the provider writes the prefix ending
// at each one that is at least MinTokens long, and serves the request from
// the longest prefix an earlier request wrote that ends at one of its
// breakpoints or at most Lookback segments before one. Input up to the
// last breakpoint whose prefix is cached (MinTokens long) that is not read
// is written (at the cache-write price); input after it is neither (fresh,
// at the input price). A written prefix
// lives TTL past its last use. A segment stands for one content block:
// the bench's segments are whole messages, which Anthropic counts as one
// block or more, so the lookback reaches back at least as far here as it
// does for real (the model errs toward cheaper folds).
type Breakpoints struct {
	// At returns the breakpoints of a request of n segments: segment
	// indexes, each the last segment of a prefix the provider caches.
	At        func(n int) []int
	Lookback  int
	MinTokens int
}

// PiBreakpoints is where Pi 1.6's Anthropic provider puts its breakpoints:
// the tool list and the system prompt (the bench's first segment) and the
// last message; lookback and minimum as Anthropic documents them.
var PiBreakpoints = Breakpoints{
	At:        func(n int) []int { return []int{0, n - 1} },
	Lookback:  20,
	MinTokens: 1024,
}

// PriceBreakpoints runs bp's cache over reqs, like Price (ttlMs 0: entries
// never expire; requests without times never expire them). A cache break
// is a request that reads less than the whole of its predecessor while
// extending it, or that does not extend it.
func PriceBreakpoints(reqs []Request, window int, ttlMs int64, bp Breakpoints) Usage {
	var u Usage
	cache := map[uint64]int64{} // written prefix → when last used
	var prev []Seg
	prevTotal := 0
	for i := range reqs {
		r := &reqs[i]
		n := len(r.Segs)
		hash := make([]uint64, n) // of the prefix ending at each segment
		upto := make([]int, n)    // tokens of that prefix
		h, t := uint64(14695981039346656037), 0
		for k, s := range r.Segs {
			h = (h ^ s.Key) * 1099511628211
			h = (h ^ uint64(s.Tokens)) * 1099511628211
			t += s.Tokens
			hash[k], upto[k] = h, t
		}
		live := func(k int) bool {
			at, ok := cache[hash[k]]
			return ok && (ttlMs <= 0 || r.Time <= 0 || at <= 0 || r.Time-at <= ttlMs)
		}
		marks := append(bp.At(n), r.Marks...)
		read, readAt, last := 0, -1, -1
		for _, b := range marks {
			if b < 0 || b >= n {
				continue
			}
			if upto[b] >= bp.MinTokens {
				last = max(last, b) // a shorter prefix is not cached: its input is fresh
			}
			for k := b; k >= 0 && k >= b-bp.Lookback; k-- {
				if live(k) {
					if upto[k] > read {
						read, readAt = upto[k], k
					}
					break
				}
			}
		}
		total := r.Total()
		cached := 0 // input up to the last breakpoint
		if last >= 0 {
			cached = upto[last]
		}
		if readAt >= 0 {
			cache[hash[readAt]] = r.Time
		}
		for _, b := range marks {
			if b >= 0 && b < n && upto[b] >= bp.MinTokens {
				cache[hash[b]] = r.Time
			}
		}
		extends := len(r.Segs) >= len(prev)
		for k := 0; extends && k < len(prev); k++ {
			extends = prev[k] == r.Segs[k]
		}
		if i > 0 && (!extends || read < prevTotal) {
			u.Breaks++
		}
		u.count(r, total, window)
		u.CacheRead += read
		u.CacheWrite += max(0, cached-read)
		u.Fresh += total - max(cached, read)
		prev, prevTotal = r.Segs, total
	}
	return u
}
