package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextfold/contextfold/internal/proxy/codec"
)

// cutRun sends turns first..last of cl's conversation through a folding
// proxy (cut-through unless store), each body in two writes: all but its
// last hold bytes, then, once the upstream has started on the request (or
// after wait), the rest. It returns the bodies the upstream received whole,
// in order, how many requests the upstream started before the client had
// sent its whole body, how many it started and could not read whole (a
// prediction abandoned), and how many fold events the proxy logged after
// the first request.
//
// With h2 the upstream speaks HTTP/2 over TLS, as the providers do.
//
// panicAt, when not "", makes the cut-through code panic there on every
// request (see panicAtStep).
func cutRun(t *testing.T, cl client, first, last int, store, h2 bool, wait time.Duration, panicAt string) (bodies [][]byte, early, broken, events int) {
	t.Helper()
	if panicAt != "" {
		defer panicAtStep(panicAt)()
	}
	started := make(chan struct{}, 16)
	var brokenN atomic.Int64
	up := newUpstream(t, "up", nil)
	var transport http.RoundTripper
	if h2 {
		tls := httptest.NewUnstartedServer(up.Config.Handler)
		tls.EnableHTTP2 = true
		tls.StartTLS()
		t.Cleanup(tls.Close)
		up.Server = tls
		transport = tls.Client().Transport
	}
	inner := up.Config.Handler
	up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h2 && r.ProtoMajor != 2 {
			t.Errorf("the upstream got %s, want HTTP/2", r.Proto)
		}
		started <- struct{}{}
		spy := &bodySpy{ReadCloser: r.Body}
		r.Body = spy
		inner.ServeHTTP(w, r)
		if spy.failed {
			brokenN.Add(1) // the body ended short of its length: no request
		}
	})
	var flog bytes.Buffer
	var fmu sync.Mutex
	folder := testFolder(t, 40_000, slog.New(slog.NewTextHandler(lockedWriter{&fmu, &flog}, nil)))
	countEvents := func() int {
		fmu.Lock()
		defer fmu.Unlock()
		return strings.Count(flog.String(), "fold event")
	}
	s, logs := front(t, up, up, func(c *Config) {
		c.Folder = folder
		c.StoreAndForward = store
		if transport != nil {
			c.Transport = transport
		}
	})
	eventsBefore := 0
	for k := first; k <= last; k++ {
		body := cl.body(k)
		const hold = 200
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("POST", s.URL+cl.path, pr)
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-claude-code-session-id", "session-1")
		for len(started) > 0 {
			<-started
		}
		type result struct {
			res *http.Response
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := http.DefaultClient.Do(req)
			done <- result{res, err}
		}()
		if _, err := io.WriteString(pw, body[:len(body)-hold]); err != nil {
			t.Fatal(err)
		}
		if k > first { // the first has no previous request to predict it
			select {
			case <-started:
				early++
			case <-time.After(wait):
			}
		}
		io.WriteString(pw, body[len(body)-hold:])
		pw.Close()
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		answer, _ := io.ReadAll(r.res.Body)
		r.res.Body.Close()
		if r.res.StatusCode != 200 || string(answer) != "from up" {
			t.Fatalf("turn %d: status %d, %q", k, r.res.StatusCode, answer)
		}
		folder.Idle()
		if k == first {
			eventsBefore = countEvents()
		}
	}
	for _, r := range up.requests() {
		bodies = append(bodies, r.body)
	}
	s.Close()
	if panicAt != "" && !strings.Contains(logs.String(), "cut-through failed") {
		t.Errorf("a panic at %s was not logged", panicAt)
	}
	return bodies, early, int(brokenN.Load()), countEvents() - eventsBefore
}

// TestCutThrough: a folded request goes upstream while its body still
// arrives, and the upstream receives exactly what store and forward sends,
// request for request, fold events included: a prediction the fold does
// not confirm never completes upstream, and the decided body follows it.
func TestCutThrough(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		for _, cl := range clients {
			name := string(cl.api)
			if h2 {
				name += "/h2"
			}
			t.Run(name, func(t *testing.T) { testCutThrough(t, cl, h2) })
		}
	}
}

// bodySpy notes whether reading a body failed.
type bodySpy struct {
	io.ReadCloser
	failed bool
}

func (b *bodySpy) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.failed = true
	}
	return n, err
}

func testCutThrough(t *testing.T, cl client, h2 bool) {
	const first, last = 8, 40
	want, early, _, _ := cutRun(t, cl, first, last, true, h2, 0, "")
	if early != 0 {
		t.Fatalf("store and forward: the upstream started %d requests before their bodies were whole", early)
	}
	got, early, broken, events := cutRun(t, cl, first, last, false, h2, 5*time.Second, "")
	if len(got) != len(want) {
		t.Fatalf("the upstream had %d requests, want %d", len(got), len(want))
	}
	for i := range want {
		if string(got[i]) != string(want[i]) {
			t.Fatalf("turn %d: the upstream's body differs from store and forward's", first+i)
		}
	}
	// Every request but the first has a previous one to predict it.
	if early != last-first {
		t.Errorf("%d of %d requests reached the upstream before their bodies were whole", early, last-first)
	}
	// Only a fold event abandons a prediction; the upstream has seen it
	// start, since the client held its last bytes until then. On
	// Anthropic the request after an event may too: the breakpoint at the
	// end of the frozen region moves to the event's newest fold then.
	if cl.api == codec.Messages {
		if events == 0 || broken < events || broken > 2*events {
			t.Errorf("%d predictions abandoned upstream, want one or two per fold event (%d)", broken, events)
		}
	} else if events == 0 || broken != events {
		t.Errorf("%d predictions abandoned upstream, want one per fold event (%d)", broken, events)
	}
	t.Logf("%d requests, %d fold events", len(got), events)
}

// pendingReader reads a reader from goroutines, so that a read that
// blocks can be left pending and its result still taken later.
type pendingReader struct {
	r       io.Reader
	pending chan pendingRead // the pending read's result (nil: none)
}

type pendingRead struct {
	b   []byte
	err error
}

func (pr *pendingReader) next(timeout time.Duration) (pendingRead, bool) {
	if pr.pending == nil {
		pr.pending = make(chan pendingRead, 1)
		go func(ch chan pendingRead) {
			p := make([]byte, 1000)
			n, err := pr.r.Read(p)
			ch <- pendingRead{p[:n], err}
		}(pr.pending)
	}
	select {
	case c := <-pr.pending:
		pr.pending = nil
		return c, true
	case <-time.After(timeout):
		return pendingRead{}, false
	}
}

// untilStuck reads until a read blocks for 100 ms (err nil) or fails.
func (pr *pendingReader) untilStuck() ([]byte, error) {
	var got []byte
	for {
		c, ok := pr.next(100 * time.Millisecond)
		if !ok {
			return got, nil
		}
		got = append(got, c.b...)
		if c.err != nil {
			return got, c.err
		}
	}
}

// rest reads to the end, the pending read first.
func (pr *pendingReader) rest() ([]byte, error) {
	var got []byte
	for {
		c, ok := pr.next(5 * time.Second)
		if !ok {
			return got, errors.New("stuck")
		}
		got = append(got, c.b...)
		if c.err == io.EOF {
			return got, nil
		}
		if c.err != nil {
			return got, c.err
		}
	}
}

// TestCutThroughPrediction: as a body arrives, the transport gets the
// previous request's edits applied to it, as far as the body repeats the
// previous one (and the new bytes after it when every edit lies before the
// point where it departs), never the last byte before the fold decides;
// then the decided body's rest, or an error if the decision differs.
func TestCutThroughPrediction(t *testing.T) {
	cl := clients[0]
	prev, err := codec.Decode(cl.api, []byte(cl.body(6)))
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) int { return strings.Index(cl.body(6), s) }
	a, b := at(callID(2)), at(callID(4))
	spans := []codec.Span{{Start: a, End: a + 200, Value: []byte(`"A"`)}, {Start: b, End: b + 300, Value: []byte(`"BB"`)}}
	next := []byte(cl.body(7))
	predicted, total := codec.Splice(next, spans)
	want := bytes.Join(predicted, nil)
	diverged := append([]byte(nil), next...)
	diverged[b+10] ^= 1 // departs within the second edit
	for _, tc := range []struct {
		name string
		body []byte
		// sent is what the transport has before the decision; decided is
		// the fold's body; ok: it is the prediction.
		sent    []byte
		decided []byte
		ok      bool
		// applied: the spans the fold says the decided body applied.
		applied []codec.Span
	}{
		{"confirmed", next, want[:total-1], want, true, nil},
		{"confirmed, by its own spans", next, want[:total-1], want, true, spans},
		// The same spans on a body of another length (a bug elsewhere):
		// the length decides.
		{"its own spans, another length", next, want[:total-1], append(append([]byte(nil), want...), 'x'), false, spans},
		{"fold event", next, want[:total-1], bytes.Join([][]byte{next[:a], []byte(`"other"`), next[a+200:]}, nil), false, nil},
		// Other spans than the prediction's: the bytes decide.
		{"fold event, other spans", next, want[:total-1], bytes.Join([][]byte{next[:a], []byte(`"other"`), next[a+200:]}, nil), false, []codec.Span{{Start: a, End: a + 200, Value: []byte(`"other"`)}}},
		{"fold event, a prefix of the spans", next, want[:total-1], bytes.Join([][]byte{next[:a], []byte(`"other"`), next[a+200:]}, nil), false, spans[:len(spans)-1]},
		{"same length, other bytes", next, want[:total-1], append(append([]byte(nil), want[:10]...), append([]byte{want[10] ^ 1}, want[11:]...)...), false, nil},
		{"departs inside an edit", diverged, want[:a+3+(b-a-200)], diverged, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := newBuffer(int64(len(tc.body)))
			in := &Incoming{api: cl.api, buf: buf, cands: []*codec.Request{prev}, spans: [][]codec.Span{spans}, common: []int{0}, equal: []bool{true}}
			ct := newCutThrough(in, int64(len(tc.body)), slog.New(slog.DiscardHandler))
			for o := 0; o < len(tc.body); o += 4096 {
				end := min(len(tc.body), o+4096)
				buf.b = append(buf.b, tc.body[o:end]...)
				ct.Write(tc.body[o:end])
			}
			r, ok := ct.open()
			if !ok || ct.total != total {
				t.Fatalf("predicts %v, declared length %d, want %d", ok, ct.total, total)
			}
			defer r.Close()
			pr := &pendingReader{r: r}
			got, err := pr.untilStuck()
			if err != nil || !bytes.Equal(got, tc.sent) {
				t.Fatalf("before the decision the transport had %d bytes (err %v), want %d", len(got), err, len(tc.sent))
			}
			in.applied = tc.applied
			ct.decide([][]byte{tc.decided}, "")
			rest, err := pr.rest()
			final, abandoned := ct.instead(context.Background())
			switch {
			case tc.ok && (err != nil || !bytes.Equal(append(got, rest...), tc.decided)):
				t.Fatalf("after the decision: %d more bytes, err %v; not the decided body", len(rest), err)
			case !tc.ok && (!errors.Is(err, errCutAbandoned) || !abandoned || !bytes.Equal(bytes.Join(final, nil), tc.decided)):
				t.Fatalf("a differing decision: read err %v, abandoned %v", err, abandoned)
			}
			// A retry of an abandoned prediction gets no body at all.
			if again, err := ct.body(); tc.ok != (err == nil) {
				t.Fatalf("a reader after the decision: err %v", err)
			} else if again != nil {
				again.Close()
			}
		})
	}
	t.Run("client gone", func(t *testing.T) {
		buf := newBuffer(int64(len(next)))
		in := &Incoming{api: cl.api, buf: buf, cands: []*codec.Request{prev}, spans: [][]codec.Span{spans}, common: []int{0}, equal: []bool{true}}
		ct := newCutThrough(in, int64(len(next)), slog.New(slog.DiscardHandler))
		buf.b = append(buf.b, next[:b+400]...)
		ct.Write(next[:b+400])
		r, _ := ct.body()
		defer r.Close()
		if got, err := (&pendingReader{r: r}).untilStuck(); err != nil || len(got) == 0 {
			t.Fatalf("read %d bytes, err %v", len(got), err)
		}
		gone := errors.New("client gone")
		ct.fail(gone)
		if _, err := r.Read(make([]byte, 10)); !errors.Is(err, gone) {
			t.Fatalf("after the client went: %v", err)
		}
	})
}

// TestCutThroughClientGone: a client that goes away while its body is being
// sent on leaves the upstream no request, and the proxy logs no upstream
// failure for it.
func TestCutThroughClientGone(t *testing.T) {
	cl := clients[0]
	started := make(chan struct{}, 4)
	up := newUpstream(t, "up", nil)
	inner := up.Config.Handler
	up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		inner.ServeHTTP(w, r)
	})
	folder := testFolder(t, 40_000, nil)
	s, logs := front(t, up, up, func(c *Config) { c.Folder = folder })
	for k := 20; k < 22; k++ {
		send(t, s.URL, cl.path, cl.body(k))
		<-started
	}
	body := cl.body(22)
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest("POST", s.URL+cl.path, pr)
	req.ContentLength = int64(len(body))
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	io.WriteString(pw, body[:len(body)-200])
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not go upstream while its body arrived")
	}
	pw.CloseWithError(errors.New("client gone"))
	<-done
	s.Close() // waits for the handler, which logged all it logs
	folder.Idle()
	time.Sleep(100 * time.Millisecond) // the upstream handler finishes
	if n := len(up.requests()); n != 2 {
		t.Fatalf("the upstream has %d requests, want 2", n)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("the proxy warned:\n%s", logs)
	}
}

// TestCutThroughFailsOpen: a panic in the cut-through code, wherever it
// happens, costs the request its early start, nothing more: the upstream
// receives what store and forward sends, and the client its answer.
func TestCutThroughFailsOpen(t *testing.T) {
	cl := clients[0]
	const first, last = 8, 20
	want, _, _, _ := cutRun(t, cl, first, last, true, false, 0, "")
	for _, at := range []string{"write", "read", "decide", "read/h2"} {
		t.Run(at, func(t *testing.T) {
			where, h2 := strings.CutSuffix(at, "/h2")
			got, _, _, _ := cutRun(t, cl, first, last, false, h2, 200*time.Millisecond, where)
			if len(got) != len(want) {
				t.Fatalf("the upstream had %d requests, want %d", len(got), len(want))
			}
			for i := range want {
				if string(got[i]) != string(want[i]) {
					t.Fatalf("turn %d: the upstream's body differs from store and forward's", first+i)
				}
			}
		})
	}
}

// TestUploadBeforeIdleWork: once the fold confirmed a prediction, its last
// byte goes to the transport before the conversation's idle work starts:
// on a P of their own both would be ready at once, and the idle work's
// goroutine, started last, would run first.
func TestUploadBeforeIdleWork(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var mu sync.Mutex
	var events []string
	defer watchEvents(func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	})()
	cl := clients[0]
	up := newUpstream(t, "up", nil)
	folder := testFolder(t, 40_000, nil)
	s, _ := front(t, up, up, func(c *Config) { c.Folder = folder })
	first, ordered := 0, 0
	const turns = 20
	for k := 1; k <= turns; k++ {
		mu.Lock()
		events = events[:0]
		mu.Unlock()
		send(t, s.URL, cl.path, cl.body(k))
		folder.Idle()
		mu.Lock()
		up, idle := slices.Index(events, "uploaded"), slices.Index(events, "idle")
		mu.Unlock()
		if up >= 0 && idle >= 0 {
			first++
			if up < idle {
				ordered++
			}
		}
	}
	t.Logf("%d of %d cut-through requests uploaded before their idle work", ordered, first)
	// The scheduler takes a goroutine from the global queue before the
	// local ones now and then (1 in 61 schedules): allow for it.
	if first < turns/2 || ordered < first-2 {
		t.Errorf("%d of %d cut-through requests uploaded before their idle work started", ordered, first)
	}
}
