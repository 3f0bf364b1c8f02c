package e2e

// What `contextfold proxy` costs a user against an upstream that behaves
// like a provider, and how many requests it serves at once; both with the
// real binary on 127.0.0.1 (proxy_latency_test.go measures the loopback
// microseconds; this file measures what a user would notice):
//
//	make build
//	CONTEXTFOLD_BIN=$PWD/bin/contextfold go test -run '^$' -bench BenchmarkProxyRealisticTTFT -benchtime 20x -timeout 60m ./e2e
//	CONTEXTFOLD_BIN=$PWD/bin/contextfold go test -run '^$' -bench BenchmarkProxyLoad -benchtime 200x -timeout 30m ./e2e
//
// BenchmarkProxyRealisticTTFT: the upstream reads each request body no
// faster than a client's uplink (5 MB/s, 40 Mbit/s), answers with its
// format's first SSE events 300 ms after it has the whole body (the
// provider's prefill), then streams 30 token events, one every 16 ms (about
// 60 tokens/s; a real answer runs ~200, fewer keep the run short at the same
// rate), then its closing events. The client sends the next turn of a
// growing conversation (proxy_latency_test.go's generator: one more tool
// call and its output per turn) along two paths, in an order that rotates
// per iteration, each after a 50 ms pause (the tool's run):
//
//	direct  client -> upstream
//	fold    client -> contextfold proxy -window 200000 -> upstream
//
// in the three wire formats (chat, responses, messages), 500 tool turns in
// (1,000 conversation items; 1,500 in the responses format, whose calls
// carry reasoning items) and on, of about 1 MB (24-line outputs, the bench
// set's real sessions) and 5 MB (120 lines, ~9 KB outputs). A conversation
// is warmed up along the folding path to turn 500 as in BenchmarkProxyTTFB, with the
// upstream answering the warm-up at once (header x-contextfold-bench-warm),
// then measured for up to 50 turns (an iteration a turn); then a new one
// begins. The folding path's
// upstream must receive digests in every measured request, the direct
// path's the client's bytes unchanged.
//
// TTFT is from just before the client sends to the arrival of the
// response's first body byte (the first event); total is to its last byte
// (the last event). Metrics, in milliseconds: <path>-ttft-p50-ms,
// -ttft-p99-ms, -total-p50-ms and -total-p99-ms; and fold-added-p50-% and
// fold-added-p99-%, the p50 and p99 of the per-iteration ratio (fold TTFT -
// direct TTFT) / direct TTFT in percent: negative when the proxy's
// smaller, folded body reaches the upstream sooner than the client's whole
// one. ns/op is one iteration's two requests. Percentiles are nearest-rank
// (at 40 iterations p99 is the slowest). The log splits each path's TTFT as
// the upstream saw it (arrive, upload, respond: the 300 ms, relay: from
// the upstream's flush to the client's first byte), and the folding path's
// by whether the request carried a fold event. <path>-excess-p50-ms and
// -p99-ms are TTFT less the think time and the time the uplink takes to
// carry the bytes the upstream received: what no faster network would
// remove (the proxy's own time, and the machine's).
//
// Environment: CONTEXTFOLD_REAL_UPLINK_MBPS (MB/s, 0: loopback speed),
// CONTEXTFOLD_REAL_THINK_MS, CONTEXTFOLD_REAL_TOKENS (the token events,
// e.g. 200) and CONTEXTFOLD_REAL_TOKEN_MS (the gap between them).
//
// BenchmarkProxyLoad: 50 conversations at once (goroutines), each sending
// turns 1..N of its own growing conversation (N = b.N: -benchtime 200x is
// 200 turns, 10,000 requests; the three formats in turn, ~9 KB outputs, so
// a conversation reaches about 1.8 MB and the folding proxy folds past
// turn ~100) as fast as the answers come, to an upstream that reads each
// body and answers at once with a small SSE stream, along "direct" and
// then through "fold" (-window 200000). Metrics: requests/s (all requests
// over the wall time of the run), lat-p50-ms and lat-p99-ms (per request),
// and for the proxy proxy-cpu-ms/req (its user+system CPU per request),
// proxy-rss-MB (its resident memory after the run) and proxy-peak-rss-MB
// (VmHWM); gen-cpu-ms/req is this process's CPU per request (the load
// generator and the upstream). The load generator, the upstream and the
// proxy share the machine's cores: on 2 cores the proxy gets what the
// other two leave. The last request of each conversation is checked: a
// body past twice the window's bytes must reach the upstream with digests.
// Environment: CONTEXTFOLD_LOAD_CONVS (50), CONTEXTFOLD_LOAD_LINES (120).

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	realUplinkEnv  = "CONTEXTFOLD_REAL_UPLINK_MBPS"
	realThinkEnv   = "CONTEXTFOLD_REAL_THINK_MS"
	realTokensEnv  = "CONTEXTFOLD_REAL_TOKENS"
	realTokenMSEnv = "CONTEXTFOLD_REAL_TOKEN_MS"
	// realWarm marks a warm-up request: the upstream answers it at once.
	realWarm = "x-contextfold-bench-warm"
	// realGap is the pause before each measured request: the tool's run.
	realGap = 50 * time.Millisecond
)

// envNumber is the number in the environment variable name, or def.
func envNumber(b testing.TB, name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || x < 0 {
		b.Fatalf("%s=%q: want a number ≥ 0", name, v)
	}
	return x
}

// realEvents splits a format's answer around its streamed tokens: the
// first events (sent together, after the think time), one token event,
// and the closing events.
func realEvents(f *ttfbFormat) (head []string, token string, tail []string) {
	switch f.name {
	case "chat":
		return f.events[:1], `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}` + "\n\n", f.events[1:]
	case "responses":
		return f.events[:1], "event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" tok"}` + "\n\n", f.events[1:]
	default: // messages: message_start and content_block_start come first
		return f.events[:2], "event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" tok"}}` + "\n\n", f.events[2:]
	}
}

// formatOf is the format whose path r has, or nil.
func formatOf(r *http.Request) *ttfbFormat {
	for _, f := range ttfbFormats {
		if r.URL.Path == strings.Split(f.path, "?")[0] {
			return f
		}
	}
	return nil
}

// ---- BenchmarkProxyRealisticTTFT ----------------------------------------------

// realUpstream answers like a provider (see the top of this file). It keeps
// each route's last body and times, for one request at a time per route.
type realUpstream struct {
	uplink      float64 // bytes per second; 0: as fast as they come
	think, gap  time.Duration
	tokens      int
	head, tail  map[string][]string
	tokenEvents map[string]string
	ttfbRoutes
}

func startRealUpstream(b testing.TB) (*realUpstream, string) {
	u := &realUpstream{
		uplink: envNumber(b, realUplinkEnv, 5) * 1e6,
		think:  time.Duration(envNumber(b, realThinkEnv, 300) * float64(time.Millisecond)),
		tokens: int(envNumber(b, realTokensEnv, 30)),
		gap:    time.Duration(envNumber(b, realTokenMSEnv, 16) * float64(time.Millisecond)),
		head:   map[string][]string{}, tail: map[string][]string{}, tokenEvents: map[string]string{},
	}
	for _, f := range ttfbFormats {
		u.head[f.name], u.tokenEvents[f.name], u.tail[f.name] = realEvents(f)
	}
	srv := httptest.NewServer(u)
	b.Cleanup(srv.Close)
	return u, srv.URL
}

func (u *realUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	warm := r.Header.Get(realWarm) != ""
	if u.uplink > 0 && !warm {
		r.Body = &throttled{ReadCloser: r.Body, rate: u.uplink, start: start}
	}
	s, body := u.begin(r.Header.Get(ttfbRoute))
	f := formatOf(r)
	_, err := body.ReadFrom(r.Body)
	read := time.Now()
	if err != nil || f == nil {
		http.Error(w, fmt.Sprintf("upstream: %s %s: %v", r.Method, r.URL.Path, err), http.StatusBadRequest)
		return
	}
	if !warm {
		time.Sleep(u.think)
	}
	fl := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	for _, e := range u.head[f.name] {
		io.WriteString(w, e)
	}
	flushed := time.Now()
	fl.Flush()
	if !warm {
		for i := 1; i <= u.tokens; i++ {
			time.Sleep(time.Until(flushed.Add(time.Duration(i) * u.gap)))
			io.WriteString(w, u.tokenEvents[f.name])
			fl.Flush()
		}
	}
	for _, e := range u.tail[f.name] {
		io.WriteString(w, e)
	}
	fl.Flush()
	u.end(s, body.Bytes(), start, read, flushed)
}

// realRun is one sub-benchmark's state across the framework's calls: the
// conversation goes on where the last call left it.
type realRun struct {
	f            *ttfbFormat
	up           *realUpstream
	direct, fold *ttfbPath
	conv         *ttfbConversation
	convs        int
	total        map[*ttfbPath][]time.Duration
}

var realWarmHeader = http.Header{http.CanonicalHeaderKey(realWarm): {"1"}}

// next returns the turn to send next, starting (and warming up along the
// folding path) a new conversation when the last has gone ttfbSpan turns
// past ttfbStartTurns.
func (r *realRun) next(b *testing.B) int {
	if r.conv != nil && r.conv.turn < ttfbStartTurns+ttfbSpan {
		return r.conv.turn + 1
	}
	r.convs++
	r.conv = newTTFBConversation(r.f, fmt.Sprintf("real-%s-%d", r.f.name, r.convs))
	warm := func(n int) {
		body := r.conv.body(n)
		r.fold.sendTimed(b, r.conv, body, realWarmHeader)
		r.check(b, r.fold, n, body)
	}
	for n := 1; n < ttfbStartTurns; n += ttfbWarmStep {
		warm(n)
	}
	warm(ttfbStartTurns)
	if r.convs == 1 {
		b.Logf("warm-up to turn %d (%d items): body %.2f MB", r.conv.turn, r.conv.messages, float64(len(r.conv.buf))/1e6)
	}
	return r.conv.turn + 1
}

// check checks what the upstream received of p's last request (turn n,
// body) and returns it.
func (r *realRun) check(b *testing.B, p *ttfbPath, n int, body []byte) ttfbSeen {
	seen := r.up.last(p.name)
	if seen.count != p.count+1 {
		b.Fatalf("%s turn %d: the upstream saw %d requests of the %s path, want %d", r.f.name, n, seen.count, p.name, p.count+1)
	}
	p.count = seen.count
	if p == r.fold {
		digests := len(ttfbDigest.FindAllIndex(seen.body, -1))
		if n >= ttfbStartTurns && digests == 0 {
			b.Fatalf("%s turn %d: no digest reached the upstream through the folding proxy (%d bytes sent, %d received)", r.f.name, n, len(body), len(seen.body))
		}
		p.events = append(p.events, digests > p.digests)
		p.digests = digests
	} else if !bytes.Equal(seen.body, body) {
		b.Fatalf("%s turn %d: the %s path's upstream received %d bytes, not the client's %d", r.f.name, n, p.name, len(seen.body), len(body))
	}
	return seen
}

func runReal(b *testing.B, r *realRun) {
	for _, p := range []*ttfbPath{r.direct, r.fold} {
		p.reset()
	}
	r.total = map[*ttfbPath][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		n := r.next(b)
		r.fold.events = r.fold.events[:len(r.fold.ttfb)] // the warm-up's are not samples
		body := r.conv.body(n)
		paths := []*ttfbPath{r.direct, r.fold}
		for j := range paths {
			p := paths[(n+j)%len(paths)]
			time.Sleep(realGap)
			b.StartTimer()
			ttfb, total, t0 := p.sendTimed(b, r.conv, body, nil)
			b.StopTimer()
			seen := r.check(b, p, n, body)
			p.ttfb = append(p.ttfb, ttfb)
			r.total[p] = append(r.total[p], total)
			p.arrive = append(p.arrive, seen.start.Sub(t0))
			p.upload = append(p.upload, seen.read.Sub(seen.start))
			p.respond = append(p.respond, seen.flushed.Sub(seen.read))
			p.relay = append(p.relay, t0.Add(ttfb).Sub(seen.flushed))
			p.sentBytes = append(p.sentBytes, len(body))
			p.upBytes = append(p.upBytes, len(seen.body))
		}
	}
	b.StopTimer()
	r.report(b)
}

// realPercentile is the nearest-rank p-th percentile of xs.
func realPercentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (r *realRun) report(b *testing.B) {
	d, f := r.direct, r.fold
	for _, p := range []*ttfbPath{d, f} {
		b.ReportMetric(msOf(ttfbPercentile(p.ttfb, 50)), p.name+"-ttft-p50-ms")
		b.ReportMetric(msOf(ttfbPercentile(p.ttfb, 99)), p.name+"-ttft-p99-ms")
		b.ReportMetric(msOf(ttfbPercentile(r.total[p], 50)), p.name+"-total-p50-ms")
		b.ReportMetric(msOf(ttfbPercentile(r.total[p], 99)), p.name+"-total-p99-ms")
	}
	// excess: TTFT less what the uplink and the think time take of the
	// bytes the upstream received: the time no network would remove.
	excess := func(p *ttfbPath) []time.Duration {
		xs := make([]time.Duration, len(p.ttfb))
		for i := range xs {
			xs[i] = p.ttfb[i] - r.up.think
			if r.up.uplink > 0 {
				xs[i] -= time.Duration(float64(p.upBytes[i]) / r.up.uplink * float64(time.Second))
			}
		}
		return xs
	}
	for _, p := range []*ttfbPath{d, f} {
		b.ReportMetric(msOf(ttfbPercentile(excess(p), 50)), p.name+"-excess-p50-ms")
		b.ReportMetric(msOf(ttfbPercentile(excess(p), 99)), p.name+"-excess-p99-ms")
	}
	added := make([]float64, len(f.ttfb))
	for i := range added {
		added[i] = 100 * float64(f.ttfb[i]-d.ttfb[i]) / float64(d.ttfb[i])
	}
	b.ReportMetric(realPercentile(added, 50), "fold-added-p50-%")
	b.ReportMetric(realPercentile(added, 99), "fold-added-p99-%")
	if b.N < 2 {
		return
	}
	pct := func(xs []time.Duration) string {
		if len(xs) == 0 {
			return "-"
		}
		return fmt.Sprintf("%7.1f %7.1f", msOf(ttfbPercentile(xs, 50)), msOf(ttfbPercentile(xs, 99)))
	}
	var t strings.Builder
	fmt.Fprintf(&t, "p50 and p99 in ms %15s %15s %15s %15s %15s %15s %15s   upstream body MB\n", "ttft", "arrive", "upload", "respond", "relay", "total", "excess")
	for _, p := range []*ttfbPath{d, f} {
		fmt.Fprintf(&t, "%-17s %15s %15s %15s %15s %15s %15s %15s   %.2f..%.2f\n", p.name, pct(p.ttfb), pct(p.arrive), pct(p.upload), pct(p.respond), pct(p.relay), pct(r.total[p]), pct(excess(p)),
			float64(slices.Min(p.upBytes))/1e6, float64(slices.Max(p.upBytes))/1e6)
	}
	var with, without []time.Duration
	for i, ev := range f.events {
		if ev {
			with = append(with, f.ttfb[i])
		} else {
			without = append(without, f.ttfb[i])
		}
	}
	fmt.Fprintf(&t, "fold: %d of %d requests carried a fold event: ttft p50 p99 %s ms; without one: %s ms\n", len(with), len(f.events), pct(with), pct(without))
	fmt.Fprintf(&t, "fold added to TTFT, per iteration: p50 %.2f%%, p99 %.2f%%, max %.2f%%\n", realPercentile(added, 50), realPercentile(added, 99), slices.Max(added))
	fmt.Fprintf(&t, "upstream: uplink %.1f MB/s, first event %v after the body, %d token events %v apart", r.up.uplink/1e6, r.up.think, r.up.tokens, r.up.gap)
	b.Logf("%s, %d conversations, %d iterations, client body %.2f..%.2f MB:\n%s", r.f.name, r.convs, b.N,
		float64(slices.Min(d.sentBytes))/1e6, float64(slices.Max(d.sentBytes))/1e6, t.String())
}

// BenchmarkProxyRealisticTTFT: what the real `contextfold proxy` adds to
// the time to first token against a provider-like upstream (see the top
// of this file).
func BenchmarkProxyRealisticTTFT(b *testing.B) {
	for _, size := range []struct {
		name  string
		lines int
	}{{"1MB", 24}, {"5MB", 120}} {
		for _, f := range ttfbFormats {
			ttfbLines = size.lines
			up, origin := startRealUpstream(b)
			fold := newTTFBPath("fold", startProxy(b, origin, "-window", fmt.Sprint(ttfbWindow)))
			fold.pid = newestChild("-window")
			r := &realRun{f: f, up: up, direct: newTTFBPath("direct", origin), fold: fold}
			b.Run(f.name+"-"+size.name, func(b *testing.B) { runReal(b, r) })
		}
	}
	ttfbLines = 120
}

// ---- BenchmarkProxyLoad ------------------------------------------------------

const (
	loadConvsEnv = "CONTEXTFOLD_LOAD_CONVS"
	loadLinesEnv = "CONTEXTFOLD_LOAD_LINES"
	// loadCheck marks a request whose body the upstream checks for digests.
	loadCheck = "x-contextfold-bench-check"
)

// loadUpstream reads each body and answers at once with its format's
// events; it counts the requests and the bytes, and the digests of the
// bodies marked loadCheck.
type loadUpstream struct {
	requests, bytes, abandoned atomic.Int64
	mu                         sync.Mutex
	checked, digested          int
}

func (u *loadUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := formatOf(r)
	var n int64
	var err error
	check := r.Header.Get(loadCheck) != ""
	if check {
		var body []byte
		body, err = io.ReadAll(r.Body)
		n = int64(len(body))
		if err == nil {
			u.mu.Lock()
			u.checked++
			if ttfbDigest.Match(body) {
				u.digested++
			}
			u.mu.Unlock()
		}
	} else {
		n, err = io.Copy(io.Discard, r.Body)
	}
	if err != nil || f == nil {
		u.abandoned.Add(1) // an upload the proxy dropped (a failed prediction)
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	u.requests.Add(1)
	u.bytes.Add(n)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, e := range f.events {
		io.WriteString(w, e)
	}
}

// procStatus is a field of /proc/PID/status in kB, or 0.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	return 0
}

// BenchmarkProxyLoad: requests per second through the real `contextfold
// proxy` with 50 growing conversations at once (see the top of this file).
func BenchmarkProxyLoad(b *testing.B) {
	convs := int(envNumber(b, loadConvsEnv, 50))
	ttfbLines = int(envNumber(b, loadLinesEnv, 120))
	defer func() { ttfbLines = 120 }()
	up := &loadUpstream{}
	srv := httptest.NewServer(up)
	b.Cleanup(srv.Close)
	fold := startProxy(b, srv.URL, "-window", fmt.Sprint(ttfbWindow))
	pid := newestChild("-window")
	calls := 0
	for _, path := range []struct {
		name, base string
		pid        int
	}{{"direct", srv.URL, 0}, {"fold", fold, pid}} {
		b.Run(path.name, func(b *testing.B) {
			calls++
			runLoad(b, path.base, path.pid, up, convs, fmt.Sprintf("load-%s-%d", path.name, calls))
		})
	}
}

// runLoad sends turns 1..b.N of convs conversations at once to base.
func runLoad(b *testing.B, base string, pid int, up *loadUpstream, convs int, session string) {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 2 * convs,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	cs := make([]*ttfbConversation, convs)
	largest := 0
	for i := range cs {
		cs[i] = newTTFBConversation(ttfbFormats[i%len(ttfbFormats)], fmt.Sprintf("%s-%d", session, i))
		// Every turn's JSON is made before the clock starts.
		largest = max(largest, len(cs[i].body(b.N)))
	}
	up.mu.Lock()
	up.checked, up.digested = 0, 0
	up.mu.Unlock()
	requests0, bytes0, abandoned0 := up.requests.Load(), up.bytes.Load(), up.abandoned.Load()
	proc0, _ := readTTFBProc(pid)
	self0, _ := readTTFBProc(os.Getpid())
	lat := make([][]time.Duration, convs)
	errs := make(chan error, convs)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			for n := 1; n <= b.N; n++ {
				body := c.body(n)
				req, err := http.NewRequest("POST", base+c.f.path, bytes.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "text/event-stream")
				req.Header.Set("Authorization", "Bearer sk-fake-key-for-local-tests")
				c.f.header(req.Header, c.session)
				if n == b.N {
					req.Header.Set(loadCheck, "1")
				}
				t0 := time.Now()
				res, err := client.Do(req)
				if err != nil {
					errs <- fmt.Errorf("conversation %d turn %d: %v", i, n, err)
					return
				}
				_, err = io.CopyBuffer(io.Discard, res.Body, buf)
				res.Body.Close()
				if err != nil || res.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("conversation %d turn %d: status %d: %v", i, n, res.StatusCode, err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	proc1, _ := readTTFBProc(pid)
	self1, _ := readTTFBProc(os.Getpid())
	total := convs * b.N
	if got := up.requests.Load() - requests0; got != int64(total) {
		b.Fatalf("the upstream received %d requests, want %d", got, total)
	}
	up.mu.Lock()
	checked, digested := up.checked, up.digested
	up.mu.Unlock()
	if pid != 0 && largest > 2*4*ttfbWindow && digested != checked {
		b.Fatalf("%d of the %d last requests (up to %.2f MB) reached the upstream with digests, want all", digested, checked, float64(largest)/1e6)
	}
	all := slices.Concat(lat...)
	b.ReportMetric(float64(total)/took.Seconds(), "requests/s")
	b.ReportMetric(msOf(ttfbPercentile(all, 50)), "lat-p50-ms")
	b.ReportMetric(msOf(ttfbPercentile(all, 99)), "lat-p99-ms")
	tickMS := 1000.0 / ttfbClockTicks
	b.ReportMetric(float64(self1.ticks-self0.ticks)*tickMS/float64(total), "gen-cpu-ms/req")
	if pid != 0 {
		b.ReportMetric(float64(proc1.ticks-proc0.ticks)*tickMS/float64(total), "proxy-cpu-ms/req")
		b.ReportMetric(float64(procStatus(pid, "VmRSS"))/1024, "proxy-rss-MB")
		b.ReportMetric(float64(procStatus(pid, "VmHWM"))/1024, "proxy-peak-rss-MB")
	}
	b.Logf("%d conversations × %d turns = %d requests in %v (%.0f/s); client bodies up to %.2f MB; upstream received %.1f GB, %d uploads abandoned; %d of %d last requests carried digests",
		convs, b.N, total, took.Round(time.Millisecond), float64(total)/took.Seconds(), float64(largest)/1e6,
		float64(up.bytes.Load()-bytes0)/1e9, up.abandoned.Load()-abandoned0, digested, checked)
}
