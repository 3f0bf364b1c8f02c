// Package telemetry is the cache arithmetic behind context-fold's
// advisories: what the provider reported (input, cache reads, cache writes),
// what folding saved against what it cost in re-prefilled prefix, whether a
// fold reached the wire, whether the session is cold, and when an idle
// session's cache has probably expired.
//
// It is pure: times come in as Unix milliseconds from the caller, so every
// decision here is reproducible from a recorded usage sequence.
package telemetry

import (
	"fmt"
	"math"
	"strings"
)

// Usage is one assistant response's usage as Pi reports it.
type Usage struct {
	Input      int    `json:"input"` // prompt tokens neither read from nor written to cache
	Output     int    `json:"output"`
	CacheRead  int    `json:"cacheRead"`
	CacheWrite int    `json:"cacheWrite"`
	Provider   string `json:"provider,omitempty"`
	Model      string `json:"model,omitempty"`
	At         int64  `json:"at,omitempty"` // completion time, Unix ms
	Stop       string `json:"stopReason,omitempty"`
	// Cost is what Pi priced the response at, in the session's currency
	// (Pi's usage.cost: each part at the model's catalog price).
	Cost Cost `json:"cost"`
}

// Cost is Pi's usage.cost: the price of each part of a response's usage
// and their total.
type Cost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
	Total      float64 `json:"total"`
}

// prefixRate is what one more prompt token in the cached prefix would have
// cost in this response, from its own prices: the cache-read price if it
// read from the cache, else the cache-write price if it wrote, else the
// input price; ok is false when the usage carries no such price.
func (u Usage) prefixRate() (rate float64, ok bool) {
	switch {
	case u.CacheRead > 0:
		return u.Cost.CacheRead / float64(u.CacheRead), u.Cost.CacheRead > 0
	case u.CacheWrite > 0:
		return u.Cost.CacheWrite / float64(u.CacheWrite), u.Cost.CacheWrite > 0
	case u.Input > 0:
		return u.Cost.Input / float64(u.Input), u.Cost.Input > 0
	}
	return 0, false
}

// Prompt returns the whole prompt the provider billed.
func (u Usage) Prompt() int { return u.Input + u.CacheRead + u.CacheWrite }

func (u Usage) empty() bool {
	return u.Input == 0 && u.CacheRead == 0 && u.CacheWrite == 0 && u.Output == 0
}

// Notice is something to tell the user, once.
type Notice struct {
	Kind  string `json:"kind"`
	Level string `json:"level"` // "info" or "warning"
	Text  string `json:"text"`
}

// Thresholds of the advisories.
const (
	ColdInputTokens  = 20_000 // a cold response rebilling at least this is worth a notice
	MinCarryTokens   = 20_000 // a session carrying less is not worth an expiry notice
	DefaultIdleMin   = 30
	DefaultReconTkns = 18_000
)

// Telemetry accumulates one session's usage.
type Telemetry struct {
	Responses int   `json:"responses"`
	Input     int64 `json:"input"`
	CacheRead int64 `json:"cacheRead"`
	Write     int64 `json:"cacheWrite"`
	Output    int64 `json:"output"`
	// Spent is the sum of the responses' Cost.Total: Pi's own figure.
	Spent float64 `json:"spent"`
	// Latest is the newest response's share of its prompt read from the
	// cache, as Pi's footer computes its CH figure; ok false before any.
	latestHit   float64
	latestKnown bool

	last    Usage
	hasLast bool

	// Fold accounting.
	FoldEvents  int   `json:"foldEvents"`
	MaskedNow   int   `json:"maskedNow"` // tokens the active folds keep out of every request
	SavedTotal  int64 `json:"savedTotal"`
	Reprefilled int64 `json:"reprefilled"`
	// SavedMoney estimates what the masked tokens would have cost, each
	// response's at its own prefix rate (see prefixRate); ExtraWrites is
	// what the responses carrying a fold paid for their cache writes above
	// reading those tokens back. PricedResponses counts the responses with
	// masked tokens whose usage carried prices.
	SavedMoney      float64 `json:"savedMoney"`
	ExtraWrites     float64 `json:"extraWrites"`
	PricedResponses int     `json:"pricedResponses"`
	UnpricedSaves   int     `json:"unpricedResponses"`
	pendingFold     bool
	baseline        int // watchdog: the pre-fold prompt a deferred fold would read back
	afterFold       bool
	WireDeferred    int `json:"wireDeferred"`
	warnedWire      bool
	bridgedStreak   int
	Bridged         bool `json:"bridged"`

	// Advisor.
	wasCold bool

	// The cache state the fold schedule prices against: the provider and
	// model of the newest response, and whether the model changed since.
	lastKey      string
	modelChanged bool

	// Cache warning: the newest completion per provider/model, and the
	// last warning per key (one notice per idle interval).
	activity map[string]int64
	warned   map[string]int64
	carried  int
}

// New returns empty telemetry.
func New() *Telemetry {
	return &Telemetry{activity: map[string]int64{}, warned: map[string]int64{}}
}

// Reset restarts the cache segment, as after a real model change (docs/EDGES.md #11):
// the provider's cache is genuinely cold.
// What folds saved and what the session spent are the session's, and
// survive it.
func (t *Telemetry) Reset() {
	keep := *t
	*t = *New()
	t.modelChanged = true
	t.Spent, t.FoldEvents, t.SavedTotal, t.Reprefilled = keep.Spent, keep.FoldEvents, keep.SavedTotal, keep.Reprefilled
	t.SavedMoney, t.ExtraWrites, t.PricedResponses, t.UnpricedSaves = keep.SavedMoney, keep.ExtraWrites, keep.PricedResponses, keep.UnpricedSaves
}

// CacheCold reports whether the provider's cache is known to be cold for the
// next request, so a fold then costs no extra re-write: the model changed
// since the last response, or the last response completed more than
// idleMinutes before now (Unix ms). With no response seen it reports false:
// nothing is known.
func (t *Telemetry) CacheCold(now int64, idleMinutes float64) bool {
	if t.modelChanged {
		return true
	}
	if idleMinutes <= 0 || t.lastKey == "" {
		return false
	}
	at, ok := t.activity[t.lastKey]
	return ok && now-at > int64(idleMinutes*60_000)
}

// Provider returns the provider of the newest response with one.
func (t *Telemetry) Provider() string {
	p, _, _ := strings.Cut(t.lastKey, "\x00")
	return p
}

// EverWarm reports whether any response read from the cache.
func (t *Telemetry) EverWarm() bool { return t.CacheRead > 0 }

// Cold reports the state that lowers the first-fold threshold: a few
// responses in, and never a cache read.
func (t *Telemetry) Cold() bool { return t.Responses >= 3 && t.CacheRead == 0 }

// WritesReported reports whether the provider ever reported cache writes;
// some never do, and their re-prefill cost is unknown, not zero.
func (t *Telemetry) WritesReported() bool { return t.Write > 0 }

// HitRatio is the share of billed prompt tokens read from the cache; ok is
// false before any usage.
func (t *Telemetry) HitRatio() (float64, bool) {
	d := t.Input + t.CacheRead + t.Write
	if d == 0 {
		return 0, false
	}
	return float64(t.CacheRead) / float64(d), true
}

// LatestHit is the newest response's share of its prompt read from the
// cache: Pi's footer's CH figure. ok is false before any usage.
func (t *Telemetry) LatestHit() (float64, bool) { return t.latestHit, t.latestKnown }

// NoteFold records a fold event that keeps masked tokens out of each later
// request.
func (t *Telemetry) NoteFold(masked int) {
	t.FoldEvents++
	t.MaskedNow += masked
	t.pendingFold = masked > 0
	if masked > 0 && t.hasLast {
		// The first response after the fold must not read the whole pre-fold
		// prompt back from cache.
		t.baseline = t.last.CacheRead + t.last.Input + t.last.CacheWrite
	}
}

// Observe records one response. Responses without usage are skipped, not
// judged (docs/EDGES.md #10). It returns notices to show at once.
func (t *Telemetry) Observe(u Usage) []Notice {
	if u.empty() || u.Stop == "error" || u.Stop == "aborted" {
		return nil
	}
	var out []Notice
	t.Responses++
	t.Input += int64(u.Input)
	t.CacheRead += int64(u.CacheRead)
	t.Write += int64(u.CacheWrite)
	t.Output += int64(u.Output)
	t.Spent += u.Cost.Total
	if p := u.Prompt(); p > 0 {
		t.latestHit, t.latestKnown = float64(u.CacheRead)/float64(p), true
	}
	t.afterFold = t.pendingFold
	if t.pendingFold {
		// The response that carried a fold's new bytes pays the re-prefill.
		t.Reprefilled += int64(u.CacheWrite)
		if u.CacheWrite > 0 && u.Cost.CacheWrite > 0 {
			// Each re-written token would otherwise have been read back.
			read := 0.0
			if u.CacheRead > 0 {
				read = u.Cost.CacheRead / float64(u.CacheRead)
			}
			t.ExtraWrites += float64(u.CacheWrite) * max(0, u.Cost.CacheWrite/float64(u.CacheWrite)-read)
		}
		t.pendingFold = false
	}
	t.SavedTotal += int64(t.MaskedNow)
	if t.MaskedNow > 0 {
		if r, ok := u.prefixRate(); ok {
			t.SavedMoney += float64(t.MaskedNow) * r
			t.PricedResponses++
		} else {
			t.UnpricedSaves++
		}
	}
	if t.baseline > 0 {
		if u.CacheRead >= t.baseline {
			t.WireDeferred++
			if !t.warnedWire {
				t.warnedWire = true
				out = append(out, Notice{Kind: "wire", Level: "warning", Text: "a fold was committed but not observed on the wire: the provider read the whole pre-fold prompt back from cache. Another extension or the transport may be bypassing context-fold's rewrite."})
			}
		}
		t.baseline = 0
	}
	// A bridged transport holds its own conversation: every response books
	// the whole prompt as a cache read with nothing sent or written.
	if u.Input == 0 && u.CacheWrite == 0 && u.CacheRead > 0 {
		t.bridgedStreak++
		if t.bridgedStreak >= 2 && !t.Bridged {
			t.Bridged = true
			out = append(out, Notice{Kind: "bridged", Level: "warning", Text: "this provider keeps its own conversation (every response reads the whole prompt from its cache): folding is paused for this session; recall and the index keep working."})
		}
	} else {
		t.bridgedStreak = 0
	}
	if u.At > 0 && u.Provider != "" {
		k := key(u.Provider, u.Model)
		t.activity[k] = u.At
		delete(t.warned, k)
		t.lastKey = k
	}
	t.modelChanged = false
	t.carried = u.Prompt()
	t.last, t.hasLast = u, true
	return out
}

// Settled evaluates the cold-input advisor at the end of an agent run
// (docs/EDGES.md #20): a final response with no cache read rebilling at least
// ColdInputTokens, after two observed responses, not the one a fold itself
// made cold; one notice per cold streak.
func (t *Telemetry) Settled() []Notice {
	if !t.hasLast || t.Responses < 2 {
		return nil
	}
	cold := t.last.CacheRead == 0 && t.last.Prompt() >= ColdInputTokens
	if t.afterFold {
		return nil // the expected miss after a fold neither warns nor ends a streak
	}
	var out []Notice
	if cold && !t.wasCold {
		out = append(out, Notice{Kind: "cold", Level: "warning", Text: fmt.Sprintf("session cold: rebilled ~%s tok as fresh input. Consider /fold-handoff", kTok(t.last.Prompt()))})
	}
	t.wasCold = cold
	return out
}

// ColdNow reports whether the last response was cold.
func (t *Telemetry) ColdNow() bool { return t.hasLast && t.last.CacheRead == 0 && t.Responses >= 2 }

// Carried returns the last billed prompt size.
func (t *Telemetry) Carried() int { return t.carried }

// Activity seeds the cache warning from completions already in the session
// (resume): provider, model and completion time of assistant responses on
// the active branch, oldest first.
func (t *Telemetry) Activity(provider, model string, at int64, carried int) {
	if provider == "" || at <= 0 {
		return
	}
	t.activity[key(provider, model)] = at
	if carried > 0 {
		t.carried = carried
	}
}

// Forecast says whether the cache of provider/model has probably expired
// at now (Unix ms) for a session carrying tokens, given the idle interval.
// remaining > 0 means "ask again then". A notice is returned once per idle
// interval and key.
func (t *Telemetry) Forecast(now int64, provider, model string, idleMinutes float64, tokens int) (remaining int64, n *Notice) {
	if idleMinutes <= 0 || provider == "" {
		return 0, nil
	}
	if tokens <= 0 {
		tokens = t.carried
	}
	if tokens < MinCarryTokens {
		return 0, nil
	}
	k := key(provider, model)
	at, ok := t.activity[k]
	state := "cache may have expired"
	if ok {
		remaining = at + int64(idleMinutes*60_000) - now
		if remaining > 0 {
			return remaining, nil
		}
	} else {
		state = "cache unverified"
	}
	if t.warned[k] == at && at != 0 {
		return 0, nil
	}
	t.warned[k] = at
	return 0, &Notice{Kind: "expiry", Level: "warning", Text: fmt.Sprintf("%s: ~%s tok may rebill. Consider /fold-handoff", state, kTok(tokens))}
}

// Risky reports whether a prompt sent now would probably rebill a cold
// cache (for the opt-in confirmation), without consuming the notice.
func (t *Telemetry) Risky(now int64, provider, model string, idleMinutes float64, tokens int) (bool, string) {
	if idleMinutes <= 0 || provider == "" {
		return false, ""
	}
	if tokens <= 0 {
		tokens = t.carried
	}
	if tokens < MinCarryTokens {
		return false, ""
	}
	at, ok := t.activity[key(provider, model)]
	if ok && at+int64(idleMinutes*60_000) > now {
		return false, ""
	}
	return true, fmt.Sprintf("cache may have expired: ~%s tok may rebill", kTok(tokens))
}

// Payback estimates how many warm requests a reset (a fresh session costing
// about recon tokens) takes to pay for itself against carrying tokens; ok is
// false when it never does.
func Payback(carried, recon int) (float64, bool) {
	if carried <= recon+15_000 {
		return 0, false
	}
	p := float64(recon) / (0.1 * float64(carried-recon))
	return math.Round(p*10) / 10, true
}

func key(provider, model string) string { return provider + "\x00" + model }

// kTok formats a token count like "41k" or "850".
func kTok(n int) string {
	switch {
	case n >= 9_995_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 999_500: // "1000k" would round up to here
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	}
	if n >= 10_000 {
		return fmt.Sprintf("%.0fk", float64(n)/1000)
	}
	if n >= 1000 {
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprint(n)
}

// K is kTok for callers rendering status text.
func K(n int) string { return kTok(n) }
