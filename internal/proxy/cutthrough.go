package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/contextfold/contextfold/internal/proxy/codec"
)

// Cut-through: a folded request is sent upstream while its body still
// arrives, so that the fold does not hold the whole body back (store and
// forward) before the upstream sees a byte.
//
// A client sends its whole conversation every request, and the conversation
// only grows: a body repeats the previous request's body up to its last
// messages. What that prefix goes out as is known before it arrives: the
// previous request's edits, applied to the same bytes (folds are frozen).
// So once a body has matched a previous request of its scope through that
// request's first edit, the proxy predicts the body it will send (the new
// body with the previous request's edits, its length declared up front) and
// streams the prediction as far as the body has matched, then the new bytes
// after it. It never hands the transport the prediction's last byte: a
// request is complete only once the fold decided, on the whole body as
// always, what it sends. If that is the prediction, the rest follows; if not
// (a fold event, an unfold, a body that is not what it seemed), the partial
// upload is abandoned, which the upstream never sees as a request (its body
// is short of its declared length), and the decided body is sent in a fresh
// request. The decision, the store's records and what the upstream receives
// are therefore exactly those of store and forward; only the timing differs.

// cutConfirm is how much of a previous request's body a new body must
// repeat before a candidate without edits (nothing folded yet) is trusted
// to predict it.
const cutConfirm = 64 << 10

// cutState is where a cut-through request stands.
type cutState int

const (
	cutArriving  cutState = iota // the body arrives; the prediction streams
	cutSent                      // the decided body is the prediction
	cutAbandoned                 // the decided body differs: sent afresh
	cutFailed                    // the client's body could not be read
)

// hooks are the points tests watch or break (export_test.go sets them);
// nil otherwise. Atomic: a test sets them while another's goroutines may
// still be winding down.
var hooks atomic.Pointer[testHooks]

type testHooks struct {
	// cut runs at the cut-through's "write", "read" and "decide" steps.
	cut func(step string)
	// event hears when a prediction's last byte is handed to the
	// transport ("uploaded"), when a conversation's idle work starts
	// ("idle") and when a body's buffer goes back to its pool ("returned").
	event func(event string)
}

func hookCut(step string) {
	if h := hooks.Load(); h != nil && h.cut != nil {
		h.cut(step)
	}
}

func hookEvent(event string) {
	if h := hooks.Load(); h != nil && h.event != nil {
		h.event(event)
	}
}

// errCutAbandoned ends the upload of a prediction the fold did not confirm.
var errCutAbandoned = errors.New("contextfold proxy: predicted body abandoned for the decided one")

// cutThrough follows one request body from its arrival to the upstream.
type cutThrough struct {
	in *Incoming
	cl int // the body's declared length
	// data is the body's buffer to its capacity: bytes before in.n have
	// arrived (in.buf.b's length is the reading goroutine's own).
	data []byte

	mu   sync.Mutex
	cond sync.Cond
	// ready is closed when the handler can go on: the prediction is
	// confirmed (confirmed), or the body is in and decided or failed.
	ready     chan struct{}
	readyOnce sync.Once
	// decided is closed once the body is decided or failed.
	decided   chan struct{}
	confirmed bool
	given     bool // no candidate can predict this body

	// The prediction, once confirmed: the body with cand's spans, as pieces
	// in order; out[i] is where piece i starts in the predicted body.
	cand   int
	spans  []codec.Span // cand's
	pieces []cutPiece
	out    []int
	total  int // the predicted body's length, declared upstream
	// avail is how many leading bytes of the prediction can be sent: the
	// pieces before pi whole, po bytes of piece pi.
	avail, pi, po int
	// sent is the most any reader has handed the transport.
	sent int

	// broken: the cut-through code failed (a bug); the request goes out
	// once decided, as store and forward sends it.
	broken bool
	log    *slog.Logger

	state cutState
	err   error    // cutFailed: why
	final [][]byte // cutSent, cutAbandoned: the decided body
	// path is the conversation file the request was folded in, once
	// decided ("" otherwise).
	path string
}

// cutPiece is a piece of the predicted body: the new body's bytes
// [start, end), or val in their place.
type cutPiece struct {
	start, end int
	val        []byte
}

func newCutThrough(in *Incoming, cl int64, log *slog.Logger) *cutThrough {
	ct := &cutThrough{in: in, cl: int(cl), data: in.buf.b[:cap(in.buf.b)], ready: make(chan struct{}), decided: make(chan struct{}), cand: -1, log: log}
	ct.cond.L = &ct.mu
	return ct
}

func (ct *cutThrough) signal() { ct.readyOnce.Do(func() { close(ct.ready) }) }

// recover, deferred under ct.mu, turns a panic of the cut-through code
// into a broken cut-through: no more prediction, and no more comparison
// (the Incoming's count falls short of the body, so the fold compares it
// afresh). The request then goes out as store and forward sends it (fail
// open).
func (ct *cutThrough) recover() {
	v := recover()
	if v == nil {
		return
	}
	if !ct.broken {
		ct.log.Warn("cut-through failed; this request goes out once its body is in", "err", fmt.Sprint(v))
	}
	ct.broken = true
	ct.given = true
	ct.cond.Broadcast()
	ct.signal()
}

// Write takes the body's next bytes as they arrive: the Incoming compares
// them, then the prediction advances.
func (ct *cutThrough) Write(p []byte) (int, error) {
	ct.mu.Lock()
	confirmed := false
	func() {
		defer ct.recover()
		if ct.broken {
			return
		}
		hookCut("write")
		ct.in.Write(p)
		if !ct.confirmed && !ct.given {
			ct.choose()
		}
		if confirmed = ct.confirmed; confirmed {
			ct.advance()
			ct.cond.Broadcast()
		}
	}()
	ct.mu.Unlock()
	if confirmed {
		// The goroutines sending upstream were just woken on this P, and a
		// body already in the socket would be read whole before they run:
		// let them send what is there first.
		runtime.Gosched()
	}
	return len(p), nil
}

// choose confirms the first candidate the body has matched through its
// first edit (through cutConfirm bytes, or all of it, for one without), and
// gives up when none still can. ct.mu is held.
func (ct *cutThrough) choose() {
	in := ct.in
	open := false
	for i, prev := range in.cands {
		spans := in.spans[i]
		need := min(cutConfirm, len(prev.Body()))
		if len(spans) > 0 {
			need = spans[0].End
		}
		if len(spans) > 0 && spans[len(spans)-1].End > ct.cl {
			continue // the body is too short to repeat its edits
		}
		if in.common[i] >= need {
			ct.confirm(i)
			return
		}
		if in.equal[i] {
			open = true
		}
	}
	if !open {
		ct.given = true
		ct.signal()
	}
}

// confirm makes candidate i's prediction the one sent. ct.mu is held.
func (ct *cutThrough) confirm(i int) {
	ct.cand, ct.spans, ct.confirmed = i, ct.in.spans[i], true
	// Sized at once: a body at 1,000 messages has hundreds of edits, and
	// growing the slices piece by piece took more time than the rest of
	// a chunk's handling while the body arrives.
	ct.pieces = make([]cutPiece, 0, 2*len(ct.spans)+1)
	ct.out = make([]int, 0, 2*len(ct.spans)+1)
	at, o := 0, 0
	for _, s := range ct.in.spans[i] {
		ct.pieces = append(ct.pieces, cutPiece{start: at, end: s.Start}, cutPiece{start: s.Start, end: s.End, val: s.Value})
		ct.out = append(ct.out, o, o+s.Start-at)
		o += s.Start - at + len(s.Value)
		at = s.End
	}
	ct.pieces = append(ct.pieces, cutPiece{start: at, end: ct.cl})
	ct.out = append(ct.out, o)
	ct.total = o + ct.cl - at
	ct.advance()
	ct.signal()
}

// safe is how many leading bytes of the body the prediction covers: all
// that arrived while the body repeats the candidate; once it departs from
// it, the bytes after that point too if every edit lies before it (new
// bytes go out as they are), else only those before it. ct.mu is held.
func (ct *cutThrough) safe() int {
	in := ct.in
	if in.equal[ct.cand] {
		return in.n
	}
	d := in.common[ct.cand]
	if spans := in.spans[ct.cand]; len(spans) == 0 || spans[len(spans)-1].End <= d {
		return in.n
	}
	return d
}

// advance extends avail over what safe now covers. ct.mu is held.
func (ct *cutThrough) advance() {
	safe := ct.safe()
	for ct.pi < len(ct.pieces) {
		pc := ct.pieces[ct.pi]
		if pc.val != nil {
			if pc.end > safe {
				return
			}
			ct.avail += len(pc.val)
			ct.pi++
			continue
		}
		if e := min(pc.end, safe); e > pc.start+ct.po {
			ct.avail += e - pc.start - ct.po
			ct.po = e - pc.start
		}
		if pc.end > safe {
			return
		}
		ct.pi, ct.po = ct.pi+1, 0
	}
}

// limit is how far readers may go in the prediction: never to its last
// byte, which waits for the decision. ct.mu is held.
func (ct *cutThrough) limit() int { return min(ct.avail, ct.total-1) }

// read copies the prediction's bytes from off to at most lim. ct.mu is
// held.
func (ct *cutThrough) read(p []byte, off, lim int) int {
	n := 0
	i := sort.Search(len(ct.out), func(i int) bool { return ct.out[i] > off }) - 1
	body := ct.data
	for n < len(p) && off < lim {
		pc := ct.pieces[i]
		var src []byte
		if pc.val != nil {
			src = pc.val
		} else {
			src = body[pc.start:pc.end]
		}
		at := off - ct.out[i]
		k := copy(p[n:], src[at:min(len(src), at+lim-off)])
		n, off = n+k, off+k
		if at+k == len(src) {
			i++
		}
	}
	return n
}

// decide settles the request with the body the fold decided (out), folded
// in the file at path: the prediction goes on if it is that body, else it
// is abandoned.
func (ct *cutThrough) decide(out [][]byte, path string) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.final, ct.path = out, path
	applied := ct.in.applied
	ct.state = cutAbandoned
	func() {
		defer ct.recover()
		hookCut("decide")
		if ct.confirmed && !ct.broken && ct.matches(out, applied) {
			ct.state = cutSent
		}
	}()
	ct.cond.Broadcast()
	ct.signal()
	close(ct.decided)
}

// same reports whether a and b are one non-empty list of spans: the same
// spans applied to the same body give the same bytes, so a decision that
// applied the prediction's own spans is the prediction, without comparing
// its bytes.
func same(a, b []codec.Span) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

// matches reports whether out, which applied the spans applied, is the
// prediction as far as it was sent, and as long as declared. ct.mu is held.
func (ct *cutThrough) matches(out [][]byte, applied []codec.Span) bool {
	n := 0
	for _, s := range out {
		n += len(s)
	}
	if n != ct.total {
		return false
	}
	if same(applied, ct.spans) {
		return true
	}
	// The prediction's segments up to what was sent.
	var pred [][]byte
	body := ct.data
	for i, pc := range ct.pieces {
		if ct.out[i] >= ct.sent {
			break
		}
		src := pc.val
		if src == nil {
			src = body[pc.start:pc.end]
		}
		pred = append(pred, src[:min(len(src), ct.sent-ct.out[i])])
	}
	return equalPrefix(pred, out, ct.sent)
}

// equalPrefix reports whether the concatenations of a and b agree on their
// first n bytes (both have that many).
func equalPrefix(a, b [][]byte, n int) bool {
	var x, y []byte
	for n > 0 {
		for len(x) == 0 {
			x, a = a[0], a[1:]
		}
		for len(y) == 0 {
			y, b = b[0], b[1:]
		}
		k := min(len(x), len(y), n)
		if !bytes.Equal(x[:k], y[:k]) {
			return false
		}
		x, y, n = x[k:], y[k:], n-k
	}
	return true
}

// open returns the transport's reader of the prediction, if the request
// goes out as one; if not, ready said the body is decided or failed, or
// that nothing predicts it.
func (ct *cutThrough) open() (io.ReadCloser, bool) {
	ct.mu.Lock()
	ok := ct.confirmed && (ct.state == cutArriving || ct.state == cutSent)
	ct.mu.Unlock()
	if !ok {
		return nil, false
	}
	r, err := ct.body()
	return r, err == nil
}

// fail settles the request whose body could not be read.
func (ct *cutThrough) fail(err error) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.state, ct.err = cutFailed, err
	ct.cond.Broadcast()
	ct.signal()
	close(ct.decided)
}

// predicted are the spans of the prediction being sent (nil: none).
func (ct *cutThrough) predicted() []codec.Span {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if !ct.confirmed {
		return nil
	}
	return ct.spans
}

// decidedPath is the file the request was folded in, once decided.
func (ct *cutThrough) decidedPath() string {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.state == cutSent || ct.state == cutAbandoned {
		return ct.path
	}
	return ""
}

// instead reports whether a failed upload was the prediction's, abandoned
// or broken, and if so waits for the decided body to send instead (ok
// false: the client's body failed, or ctx ended).
func (ct *cutThrough) instead(ctx context.Context) (final [][]byte, ok bool) {
	ct.mu.Lock()
	ours := ct.broken || ct.state == cutAbandoned
	ct.mu.Unlock()
	if !ours {
		return nil, false
	}
	select {
	case <-ct.decided:
	case <-ctx.Done():
		return nil, false
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.final, ct.state == cutAbandoned || ct.state == cutSent
}

// body returns a reader of the prediction for the transport, holding buf
// until closed; each one starts from the first byte (a retry reads it
// again). Once the prediction is abandoned there is none: the transport
// gives up on it at once, instead of retrying it on other connections.
func (ct *cutThrough) body() (io.ReadCloser, error) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	switch ct.state {
	case cutAbandoned:
		return nil, errCutAbandoned
	case cutFailed:
		return nil, ct.err
	}
	ct.in.buf.hold()
	return &cutReader{ct: ct}, nil
}

// failure is why the client's body could not be read (nil: it was).
func (ct *cutThrough) failure() error {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.state == cutFailed {
		return ct.err
	}
	return nil
}

// cutReader is a reader of the prediction, and, once the fold confirmed
// it, of the decided body's rest.
type cutReader struct {
	ct       *cutThrough
	off      int
	rest     net.Buffers // the decided body from off, once switched
	switched bool        // reading the decided body (cutSent)
	closed   bool
}

func (r *cutReader) Read(p []byte) (n int, err error) {
	ct := r.ct
	ct.mu.Lock()
	defer ct.mu.Unlock()
	defer func() {
		if ct.broken && err == nil && n == 0 {
			err = errCutAbandoned
		}
	}()
	defer ct.recover()
	if len(p) == 0 {
		return 0, nil
	}
	for {
		switch {
		case r.closed:
			return 0, errReadAfterClose
		case ct.broken && ct.state != cutSent:
			return 0, errCutAbandoned
		case ct.state == cutFailed:
			return 0, ct.err
		case ct.state == cutAbandoned:
			return 0, errCutAbandoned
		case ct.state == cutSent:
			if !r.switched {
				r.rest, r.switched = skip(ct.final, r.off), true
			}
			n, err := r.rest.Read(p)
			r.off += n
			if r.off == ct.total && n > 0 {
				hookEvent("uploaded")
			}
			return n, err
		}
		if lim := ct.limit(); r.off < lim {
			hookCut("read")
			n := ct.read(p, r.off, lim)
			r.off += n
			ct.sent = max(ct.sent, r.off)
			return n, nil
		}
		ct.cond.Wait()
	}
}

func (r *cutReader) Close() error {
	ct := r.ct
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.rest = nil
		ct.in.buf.release()
		ct.cond.Broadcast()
	}
	return nil
}

// skip is segs without their first n bytes.
func skip(segs [][]byte, n int) net.Buffers {
	out := make(net.Buffers, 0, len(segs))
	for _, s := range segs {
		if n >= len(s) {
			n -= len(s)
			continue
		}
		out = append(out, s[n:])
		n = 0
	}
	return out
}

// cutTransport sends a cut-through request's decided body afresh when the
// fold abandoned the prediction it was uploading.
type cutTransport struct {
	next http.RoundTripper
	log  *slog.Logger
}

func (t cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(req)
	if err == nil {
		return res, nil
	}
	info, _ := req.Context().Value(ctxKey{}).(*reqInfo)
	if info == nil || info.ct == nil {
		return nil, err
	}
	final, ok := info.ct.instead(req.Context())
	if !ok {
		return nil, err
	}
	t.log.Debug("prediction abandoned; sending the decided body", "path", req.URL.Path)
	again := req.Clone(req.Context())
	setBody(again, final, info.ct.in.buf)
	if info.api == Anthropic {
		withBinding(again.Header, info.betas, codec.Binds(info.ct.in.applied))
	}
	body, _ := again.GetBody() // never fails
	again.Body = body
	return t.next.RoundTrip(again)
}
