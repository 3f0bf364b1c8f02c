package codec

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// FindText returns the index of the first message from message from on
// that the client wrote (a user message, or the text that rides with tool
// results) and whose JSON holds marker, or -1. A client's compaction is
// known by the text it sends: its prompt, and the summary the next
// conversation starts from.
func (r *Request) FindText(marker []byte, from int) int {
	for i := max(from, 0); i < len(r.Messages); i++ {
		m := r.Messages[i]
		if (IsUser(m) || bytes.HasPrefix(m, notePrefix)) && bytes.Contains(m, marker) {
			return i
		}
	}
	return -1
}

// item returns the index of the conversation item that made message msg,
// and where it sits in the body.
func (r *Request) item(msg int) (k, start, end int, ok bool) {
	if r.conv < 0 || msg < 0 || msg >= len(r.Messages) {
		return 0, 0, 0, false
	}
	for k = range r.msgs {
		if r.msgs[k] > msg {
			break
		}
	}
	if r.msgs[k] <= msg {
		return 0, 0, 0, false
	}
	start = skip(r.body, r.conv+1)
	if k > 0 {
		start = skip(r.body, r.ends[k-1])
		if start >= len(r.body) || r.body[start] != ',' {
			return 0, 0, 0, false
		}
		start = skip(r.body, start+1)
	}
	return k, start, r.ends[k], true
}

// AppendSpan adds text, as a text part of its own, at the end of the
// content of the conversation item that made user message msg: an
// insertion before the content array's closing bracket or, for a string
// content, before its closing quote (then after a blank line). The rest of
// the body is untouched, so the same text on the same message is the same
// bytes in every request that repeats it.
func (r *Request) AppendSpan(msg int, text string) (Span, error) {
	_, start, end, ok := r.item(msg)
	if !ok || !IsUser(r.Messages[msg]) {
		return Span{}, fmt.Errorf("codec: message %d is no user message", msg)
	}
	ms, err := rawjson.Object(r.body[start:end])
	if err != nil || !unique(ms) {
		return Span{}, fmt.Errorf("codec: message %d: %v", msg, errors.Join(err, errors.New("not an object of unique members")))
	}
	for _, m := range ms {
		if m.Key != "content" {
			continue
		}
		vs, ve := start+m.Start, start+m.End
		v := r.body[vs:ve]
		switch {
		case rawjson.IsString(v):
			q := rawjson.Quote(nil, "\n\n"+text)
			return Span{Start: ve - 1, End: ve - 1, Value: q[1 : len(q)-1]}, nil
		case len(v) > 1 && v[0] == '[':
			typ := "text"
			if r.API == Responses {
				typ = "input_text"
			}
			part := closeObj(rawjson.Quote([]byte(`{"type":"`+typ+`","text":`), text))
			if v[skip(v, 1)] != ']' {
				part = append([]byte{','}, part...)
			}
			return Span{Start: ve - 1, End: ve - 1, Value: part}, nil
		}
		break
	}
	return Span{}, fmt.Errorf("codec: message %d has no content to add to", msg)
}

var notePrefix = []byte(`{"role":"custom","customType":"note",`)
