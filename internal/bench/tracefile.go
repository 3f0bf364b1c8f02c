package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// A trace file holds every request one policy sent on one trajectory at
// one window, one JSON line per request, gzip-compressed:
//
//	{"request": k, "before": <index of the assistant message it precedes>,
//	 "messages": [{"i": <message index, or null for a synthetic message>,
//	               "text": <what the model reads of it>}]}
//
// "text" is messageText: a message's blocks one after another, a tool call
// as its name and its arguments' values. A message absent from a request is
// hidden from the model. The files live at
// DIR/<policy>-<window>/<family>/<name>.jsonl.gz, where <policy> is the
// policy's name as the report prints it, lowercased, with every run of
// other characters than a-z 0-9 . = replaced by one "-", and <window> is
// like "200k".

// TracePath returns where the trace of policy on t at window goes.
func TracePath(dir, policy string, window int, t *Trace) string {
	return filepath.Join(dir, Slug(policy)+"-"+WindowLabel(window), t.Family, t.Name+".jsonl.gz")
}

// Slug is a policy name as a directory name.
func Slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '=' {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// WindowLabel writes a window as the report does: 200000 → "200k".
func WindowLabel(w int) string {
	if w%1000 == 0 {
		return strconv.Itoa(w/1000) + "k"
	}
	return strconv.Itoa(w)
}

// TraceWriter writes one trace file as the replay goes: memory stays
// bounded by one request.
type TraceWriter struct {
	f   *os.File
	zw  *gzip.Writer
	bw  *bufio.Writer
	t   *Trace
	buf bytes.Buffer
	err error
}

// CreateTrace creates the trace file of policy on t at window under dir.
func CreateTrace(dir, policy string, window int, t *Trace) (*TraceWriter, error) {
	path := TracePath(dir, policy, window, t)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	return &TraceWriter{f: f, zw: zw, bw: bufio.NewWriterSize(zw, 1<<16), t: t}, nil
}

// Write appends request k.
func (w *TraceWriter) Write(k int, msgs []Seen) {
	if w.err != nil {
		return
	}
	b := w.bw
	b.WriteString(`{"request":`)
	b.WriteString(strconv.Itoa(k))
	b.WriteString(`,"before":`)
	b.WriteString(strconv.Itoa(w.t.Requests[k]))
	b.WriteString(`,"messages":[`)
	for j, m := range msgs {
		if j > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"i":`)
		if m.I < 0 {
			b.WriteString("null")
		} else {
			b.WriteString(strconv.Itoa(m.I))
		}
		b.WriteString(`,"text":`)
		// rawjson keeps a lone surrogate (WTF-8 in block text) as \uD8xx,
		// where encoding/json would write U+FFFD and the text read back
		// would no longer equal the original.
		w.buf.Reset()
		w.buf.Write(rawjson.Quote(w.buf.AvailableBuffer(), m.Text))
		b.Write(w.buf.Bytes())
		b.WriteByte('}')
	}
	if _, err := b.WriteString("]}\n"); err != nil {
		w.err = err
	}
}

// Close flushes and closes the file, reporting the first write error.
func (w *TraceWriter) Close() error {
	err := w.err
	for _, e := range []error{w.bw.Flush(), w.zw.Close(), w.f.Close()} {
		if err == nil {
			err = e
		}
	}
	if err != nil {
		return fmt.Errorf("trace %s: %w", w.f.Name(), err)
	}
	return nil
}

// TraceLine is one request read back from a trace file.
type TraceLine struct {
	Request  int          `json:"request"`
	Before   int          `json:"before"`
	Messages []TraceEntry `json:"messages"`
}

// TraceEntry is one message of a request read back: Text is decoded as
// block text is (a lone surrogate stays WTF-8), so it compares equal to
// the original.
type TraceEntry struct {
	I    *int
	Text string
}

// UnmarshalJSON implements json.Unmarshaler.
func (e *TraceEntry) UnmarshalJSON(b []byte) error {
	var raw struct {
		I    *int            `json:"i"`
		Text json.RawMessage `json:"text"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	text, err := rawjson.Unquote(raw.Text)
	if err != nil {
		return fmt.Errorf("text: %w", err)
	}
	e.I, e.Text = raw.I, text
	return nil
}

// ReadTrace calls fn with every request of a trace file, in order.
func ReadTrace(path string, fn func(TraceLine) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	dec := json.NewDecoder(bufio.NewReaderSize(zr, 1<<16))
	for n := 1; ; n++ {
		var l TraceLine
		if err := dec.Decode(&l); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: request line %d: %w", path, n, err)
		}
		if err := fn(l); err != nil {
			return fmt.Errorf("%s: request line %d: %w", path, n, err)
		}
	}
}

// RefsFromTrace recomputes the hidden-reference figures of one trace file
// from what it says each request showed, against the trajectory t: a
// message counts as unchanged when its text equals the original's. It is
// the check that the bench's own figures follow from what each policy
// actually sent.
func RefsFromTrace(path string, t *Trace) (*HiddenRefs, error) {
	m := newRefMeter(t, 0)
	err := ReadTrace(path, func(l TraceLine) error {
		if l.Request < 0 || l.Request >= len(t.Requests) || t.Requests[l.Request] != l.Before {
			return fmt.Errorf("request %d before %d does not match %s", l.Request, l.Before, t)
		}
		seen := make([]Seen, len(l.Messages))
		for j, msg := range l.Messages {
			seen[j] = Seen{I: -1, Text: msg.Text}
			if msg.I != nil {
				i := *msg.I
				if i < 0 || i >= l.Before {
					return fmt.Errorf("message %d is not before %d", i, l.Before)
				}
				seen[j] = Seen{I: i, Text: msg.Text, Raw: msg.Text == t.Text[i]}
			}
		}
		m.observe(l.Request, seen)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &m.out, nil
}
