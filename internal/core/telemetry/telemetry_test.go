package telemetry

import (
	"math"
	"strings"
	"testing"
)

func TestWarmSessionAndFoldCost(t *testing.T) {
	tm := New()
	seq := []Usage{
		{Input: 3000, CacheWrite: 0, CacheRead: 0},
		{Input: 200, CacheWrite: 1000, CacheRead: 3000},
		{Input: 200, CacheWrite: 800, CacheRead: 4000},
	}
	for _, u := range seq {
		tm.Observe(u)
	}
	if tm.Cold() || !tm.EverWarm() || !tm.WritesReported() {
		t.Fatal("a warm session misread")
	}
	r, ok := tm.HitRatio()
	if !ok || r != 7000.0/(3400+7000+1800) {
		t.Fatalf("hit ratio %v", r)
	}
	// A fold masking 2,000 tokens: the next response pays a re-prefill of
	// its cache writes, every later one saves 2,000.
	tm.NoteFold(2000)
	tm.Observe(Usage{Input: 100, CacheWrite: 2500, CacheRead: 1200})
	tm.Observe(Usage{Input: 100, CacheWrite: 300, CacheRead: 3800})
	if tm.Reprefilled != 2500 || tm.SavedTotal != 4000 || tm.WireDeferred != 0 {
		t.Fatalf("reprefilled %d saved %d deferred %d", tm.Reprefilled, tm.SavedTotal, tm.WireDeferred)
	}
}

func TestColdSession(t *testing.T) {
	tm := New()
	for i := 0; i < 3; i++ {
		tm.Observe(Usage{Input: 25_000 + i})
	}
	if !tm.Cold() {
		t.Fatal("three responses without a cache read is cold")
	}
	n := tm.Settled()
	if len(n) != 1 || !strings.Contains(n[0].Text, "session cold: rebilled ~25k tok as fresh input. Consider /fold-handoff") {
		t.Fatalf("notices %+v", n)
	}
	tm.Observe(Usage{Input: 26_000})
	if n := tm.Settled(); len(n) != 0 {
		t.Fatal("one notice per cold streak")
	}
	tm.Observe(Usage{Input: 100, CacheRead: 26_000})
	tm.Settled()
	tm.Observe(Usage{Input: 30_000})
	if n := tm.Settled(); len(n) != 1 {
		t.Fatal("a new cold streak warns again")
	}
	// The expected miss right after a fold does not warn.
	tm2 := New()
	tm2.Observe(Usage{Input: 100, CacheRead: 30_000})
	tm2.Observe(Usage{Input: 100, CacheRead: 30_000})
	tm2.NoteFold(5_000)
	tm2.Observe(Usage{Input: 25_000})
	if n := tm2.Settled(); len(n) != 0 {
		t.Fatalf("warned for the fold's own miss: %+v", n)
	}
}

func TestWireWatchdog(t *testing.T) {
	tm := New()
	tm.Observe(Usage{Input: 100, CacheRead: 50_000, CacheWrite: 200})
	tm.NoteFold(20_000)
	// The next response reads the whole pre-fold prompt back: the fold never
	// reached the wire.
	n := tm.Observe(Usage{Input: 300, CacheRead: 50_300})
	if tm.WireDeferred != 1 || len(n) != 1 || n[0].Kind != "wire" {
		t.Fatalf("deferred %d notices %+v", tm.WireDeferred, n)
	}
	tm.NoteFold(5_000)
	if n := tm.Observe(Usage{Input: 300, CacheRead: 60_000}); tm.WireDeferred != 2 || len(n) != 0 {
		t.Fatal("warn once, count every time")
	}
	// A response without usage is skipped, not judged.
	tm.NoteFold(5_000)
	tm.Observe(Usage{})
	if tm.WireDeferred != 2 {
		t.Fatal("an empty usage was judged")
	}
}

func TestBridgedTransport(t *testing.T) {
	tm := New()
	tm.Observe(Usage{CacheRead: 40_000})
	if tm.Bridged {
		t.Fatal("one response is not enough")
	}
	n := tm.Observe(Usage{CacheRead: 41_000})
	if !tm.Bridged || len(n) != 1 || n[0].Kind != "bridged" {
		t.Fatalf("bridged %v %+v", tm.Bridged, n)
	}
}

func TestWritesUnreported(t *testing.T) {
	tm := New()
	tm.Observe(Usage{Input: 5000})
	tm.Observe(Usage{Input: 300, CacheRead: 5000})
	if tm.WritesReported() {
		t.Fatal("an OpenAI-style provider reports no writes")
	}
}

func TestForecast(t *testing.T) {
	tm := New()
	tm.Observe(Usage{Input: 100, CacheRead: 84_000, Provider: "p", Model: "m", At: 1_000_000})
	rem, n := tm.Forecast(1_000_000+10*60_000, "p", "m", 30, 0)
	if n != nil || rem != 20*60_000 {
		t.Fatalf("remaining %d notice %+v", rem, n)
	}
	rem, n = tm.Forecast(1_000_000+31*60_000, "p", "m", 30, 0)
	if n == nil || rem != 0 || n.Text != "cache may have expired: ~84k tok may rebill. Consider /fold-handoff" {
		t.Fatalf("expiry %d %+v", rem, n)
	}
	if _, n := tm.Forecast(1_000_000+40*60_000, "p", "m", 30, 0); n != nil {
		t.Fatal("one notice per interval")
	}
	if _, n := tm.Forecast(1_000_000+40*60_000, "p", "m", 0, 0); n != nil {
		t.Fatal("0 disables")
	}
	if _, n := tm.Forecast(1_000_000+40*60_000, "p", "m", 30, 5_000); n != nil {
		t.Fatal("a small session is not worth a notice")
	}
	if risky, _ := tm.Risky(1_000_000+40*60_000, "p", "m", 30, 0); !risky {
		t.Fatal("risky after the interval")
	}
	if _, n := tm.Forecast(2_000_000, "other", "m", 30, 50_000); n == nil || !strings.HasPrefix(n.Text, "cache unverified") {
		t.Fatalf("no activity for that model: %+v", n)
	}
}

func TestPayback(t *testing.T) {
	if _, ok := Payback(20_000, DefaultReconTkns); ok {
		t.Fatal("a small carry never pays back")
	}
	if p, ok := Payback(118_000, 18_000); !ok || p != 1.8 {
		t.Fatalf("payback %v", p)
	}
}

func TestCacheCold(t *testing.T) {
	tm := New()
	const idle = 30.0
	if tm.CacheCold(1_000_000, idle) {
		t.Fatal("nothing seen: not known cold")
	}
	at := int64(10_000_000)
	tm.Observe(Usage{Input: 10, CacheRead: 5000, Provider: "anthropic", Model: "m", At: at})
	if tm.Provider() != "anthropic" {
		t.Fatalf("provider %q", tm.Provider())
	}
	if tm.CacheCold(at+29*60_000, idle) || !tm.CacheCold(at+31*60_000, idle) {
		t.Fatal("idle expiry")
	}
	if tm.CacheCold(at+31*60_000, 0) {
		t.Fatal("idle 0 disables the expiry")
	}
	tm.Reset() // a real model change
	if !tm.CacheCold(at, idle) {
		t.Fatal("a model change makes the cache cold")
	}
	tm.Observe(Usage{Input: 10, CacheWrite: 5000, Provider: "openai", Model: "x", At: at + 1})
	if tm.CacheCold(at+2, idle) {
		t.Fatal("the first response on the new model warms it")
	}
}

func TestK(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{
		{0, "0"}, {999, "999"}, {1000, "1.0k"}, {9_949, "9.9k"}, {12_345, "12k"}, {999_499, "999k"},
		{999_500, "1.00M"}, {1_550_000, "1.55M"}, {9_994_999, "9.99M"}, {12_300_000, "12.3M"},
	} {
		if got := K(c.n); got != c.want {
			t.Errorf("K(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// TestSavedMoney: what the masked tokens would have cost is priced at each
// response's own prefix rate (cache read when it read, write when it only
// wrote, input otherwise); the response carrying a fold pays its writes
// above the read price; a model change keeps the session's totals.
func TestSavedMoney(t *testing.T) {
	const read, write, input = 0.3e-6, 3.75e-6, 3e-6 // $ per token
	usage := func(in, rd, wr int) Usage {
		return Usage{Input: in, CacheRead: rd, CacheWrite: wr, Output: 10, Cost: Cost{Input: float64(in) * input, CacheRead: float64(rd) * read, CacheWrite: float64(wr) * write, Total: float64(in)*input + float64(rd)*read + float64(wr)*write}}
	}
	tm := New()
	tm.Observe(usage(100, 0, 50_000))
	tm.NoteFold(20_000)
	tm.Observe(usage(100, 20_000, 10_000)) // carries the fold: re-writes 10k
	tm.Observe(usage(100, 30_000, 500))    // warm
	tm.Observe(usage(40_000, 0, 0))        // cold, no cache at all
	want := 20_000*read + 20_000*read + 20_000*input
	if math.Abs(tm.SavedMoney-want) > 1e-9 || tm.PricedResponses != 3 {
		t.Fatalf("saved $%.6f over %d responses, want $%.6f over 3", tm.SavedMoney, tm.PricedResponses, want)
	}
	if wantX := 10_000 * (write - read); math.Abs(tm.ExtraWrites-wantX) > 1e-9 {
		t.Fatalf("extra writes $%.6f, want $%.6f", tm.ExtraWrites, wantX)
	}
	spent := tm.Spent
	if r, ok := tm.LatestHit(); !ok || r != 0 {
		t.Fatalf("latest hit %v %v, want 0 (the cold response)", r, ok)
	}
	tm.Reset()
	if tm.Spent != spent || math.Abs(tm.SavedMoney-want) > 1e-9 || tm.FoldEvents != 1 {
		t.Fatalf("a model change lost the session's totals: %+v", tm)
	}
	// A usage without prices is counted, not priced as free.
	tm.MaskedNow = 1000
	tm.Observe(Usage{Input: 10, CacheRead: 100})
	if tm.UnpricedSaves != 1 || math.Abs(tm.SavedMoney-want) > 1e-9 {
		t.Fatalf("unpriced response: %d, $%.6f", tm.UnpricedSaves, tm.SavedMoney)
	}
}
