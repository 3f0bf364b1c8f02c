package htmlreport

import (
	"math"
	"strings"
	"testing"
)

// TestCosts works the estimate without folding through by hand: prices
// $10 input, $20 cache write, $1 cache read, $50 output per million.
func TestCosts(t *testing.T) {
	d := &Data{
		Prices: &Prices{Input: 10, CacheWrite: 20, CacheRead: 1, Output: 50},
		Events: []Event{{Seq: 1, Request: 3, Masked: 500}},
		Requests: []Request{
			// Recorded money is taken as it is; nothing masked yet.
			{CacheWrite: 1000, Output: 100, Cost: 0.5, CostKnown: true},
			// Priced: 1000×1 + 500×20 + 100×50 = 16,000 µ$.
			{CacheRead: 1000, CacheWrite: 500, Output: 100},
			// After the fold event: 100×1 + 1900×20 = 38,100 µ$. Without
			// folding it carries 500 masked tokens, read (500 µ$), and of
			// its 1900 written only the 1000 it grew by (raw 2500 against
			// 1500) are new: 900 re-written tokens are read instead,
			// 900×(20−1) = 17,100 µ$ less.
			{CacheRead: 100, CacheWrite: 1900, Masked: 500},
			// Cold: nothing read, so the masked tokens are written too:
			// 2100×20 = 42,000 µ$, and 500×20 = 10,000 µ$ more without.
			{CacheWrite: 2100, Masked: 500},
		},
	}
	with, without := d.Costs()
	wantWith := []float64{0.5, 0.516, 0.5541, 0.5961}
	wantWithout := []float64{0.5, 0.516, 0.516 + 0.0381 + 0.0005 - 0.0171, 0.516 + 0.0381 + 0.0005 - 0.0171 + 0.042 + 0.01}
	for i := range wantWith {
		if math.Abs(with[i]-wantWith[i]) > 1e-9 || math.Abs(without[i]-wantWithout[i]) > 1e-9 {
			t.Fatalf("request %d: with %.6f without %.6f; want %.6f and %.6f", i+1, with[i], without[i], wantWith[i], wantWithout[i])
		}
	}
	if w, n := (&Data{Requests: d.Requests}).Costs(); w != nil || n != nil {
		t.Fatal("costs without prices")
	}
}

// TestWriteSaysWhatIsMissing: a record without requests, or without
// prices, gets no chart or money it does not have, and the page says why.
func TestWriteSaysWhatIsMissing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		d         Data
		want, not []string
	}{
		{"no requests", Data{Kind: "proxy conversation", RequestsNote: "no sizes kept", Events: []Event{{Seq: 1, Blocks: 1, Masked: 900}}, Blocks: []Block{{Code: "abc123", Seq: 1, Tokens: 1000, DigestTokens: 100, State: "folded"}}},
			[]string{"Not recorded: no sizes kept.", `<svg id="chart-events"`, `<rect class="bar event" data-seq="1"`, "{#abc123 FOLDED}", "unknown (not drawn)"},
			[]string{`id="chart-sizes"`, `id="money"`}},
		{"no prices", Data{Kind: "Pi session", Requests: []Request{{Input: 10, Output: 1}}, Window: 1000},
			[]string{`<svg id="chart-sizes"`, `class="limit window" data-tokens="1000"`, "No prices", "<p>None.</p>"},
			[]string{`id="money"`, `class="limit threshold"`, "Not recorded"}},
	} {
		var b strings.Builder
		if err := Write(&b, &tc.d); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: the page lacks %s", tc.name, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(b.String(), n) {
				t.Errorf("%s: the page holds %s", tc.name, n)
			}
		}
	}
}

// TestText: what the page writes in its own words is escaped.
func TestText(t *testing.T) {
	var b strings.Builder
	Write(&b, &Data{Kind: "Pi session", ID: `<x&"y">`, File: "/a<b>", Blocks: []Block{{Code: "q", Tool: "<script>", State: "folded"}}})
	if strings.Contains(b.String(), "<script>") || strings.Contains(b.String(), "<x&") || !strings.Contains(b.String(), "&lt;script&gt;") {
		t.Fatal("unescaped text on the page")
	}
	for _, tc := range []struct {
		v    float64
		want float64
	}{{0, 1}, {1, 1}, {1.2, 1.5}, {279_338, 300_000}, {200_000, 200_000}, {201_000, 250_000}, {0.07, 0.08}} {
		if got := niceCeil(tc.v); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("niceCeil(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
	for v, want := range map[float64]string{37_500: "37.5k", 12_500: "12.5k", 300_000: "300k", 1_250_000: "1.25M", 0: "0", 500: "500"} {
		if got := axisTokens(v); got != want {
			t.Errorf("axisTokens(%v) = %s, want %s", v, got, want)
		}
	}
	if got := short(0.1 * 3); got != "0.3" {
		t.Errorf("short(0.1×3) = %s", got)
	}
	if num(1234567) != "1,234,567" || num(-1000) != "-1,000" || num(12) != "12" {
		t.Error("num")
	}
}

// TestEstimatedSizes: a record whose sizes are the host's estimates (the
// proxy's) draws those, says so, and leaves a request without usage out
// of the money, counted: the cumulative cost stays flat across it.
func TestEstimatedSizes(t *testing.T) {
	d := &Data{Kind: "proxy conversation", ID: "x", Estimated: true, Prices: &Prices{Source: "test prices", Input: 10, CacheWrite: 20, CacheRead: 1, Output: 50},
		Requests: []Request{
			{EstRaw: 3000, EstSent: 3000, CacheWrite: 2900},
			{EstRaw: 9000, EstSent: 4000, NoUsage: true},
			{EstRaw: 9500, EstSent: 4500, Masked: 5000, CacheRead: 2900, CacheWrite: 1500},
		}}
	with, without := d.Costs()
	if with[1] != with[0] || without[1] != without[0] {
		t.Fatalf("a request without usage was priced: with %v without %v", with, without)
	}
	// 2900×1 + 1500×20 = 32,900 µ$; without, 5000 masked tokens read more.
	if math.Abs(with[2]-with[1]-0.0329) > 1e-9 || math.Abs(without[2]-without[1]-0.0329-0.005) > 1e-9 {
		t.Fatalf("request 3: with %v without %v", with, without)
	}
	var b strings.Builder
	if err := Write(&b, d); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"sent ~ (as folded, estimated)", "Largest request sent: ~4,500 tokens; raw, without folding: ~9,500 tokens",
		"1 of the 3 requests has no usage recorded", "test prices", "raw less sent, as the proxy estimated them"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
