// Package apply is the fold mechanism: it substitutes digest text into
// messages in place and has no opinion about which blocks fold or when.
//
// Substitution is the only operation. The message count and order never
// change, a tool call is never touched, and a folded tool result keeps its
// toolCallId, toolName, isError and every other field, so a call/result pair
// cannot orphan. Every byte outside the substituted value is copied from the
// input unchanged, but for the signature a folded thinking part loses.
package apply

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/contextfold/contextfold/internal/core/block"
	"github.com/contextfold/contextfold/internal/core/rawjson"
)

// Subst is one substitution addressed by position: message Msg, content part
// Part (-1 replaces a tool result's whole content with one text part).
type Subst struct {
	Msg  int    `json:"m"`
	Part int    `json:"p"`
	Text string `json:"t"`
}

// Plan resolves id → text operations against a transcript into positional
// substitutions, in message order. An op is dropped unless its id is durable,
// owned by a block in the transcript, and that block passes the kind gate
// (Foldable); empty texts are dropped too. On any doubt the block stays raw.
func Plan(t *block.Transcript, ops map[string]string) []Subst {
	if len(ops) == 0 {
		return nil
	}
	out := make([]Subst, 0, len(ops))
	for _, b := range t.Blocks() {
		text, ok := ops[b.ID]
		if !ok || text == "" || !block.Durable(b.ID) || !b.Foldable() {
			continue
		}
		out = append(out, Subst{Msg: b.Msg, Part: b.Part, Text: text})
	}
	return out
}

// ErrShape reports a message whose JSON does not have the shape a
// substitution needs; the caller leaves that message raw.
var ErrShape = errors.New("apply: message shape does not allow substitution")

// Rewrite returns raw with one substitution applied: for part -1 the
// "content" member becomes [{"type":"text","text":…}]; otherwise the
// "text" or "thinking" member of content[part] becomes text. A thinking part
// also loses its "thinkingSignature": a signature binds the exact text it was
// minted for. (Only parts whose unsigned text Pi sends readably ever fold;
// see block.Foldable.)
func Rewrite(raw []byte, part int, text string) ([]byte, error) {
	ms, err := rawjson.Object(raw)
	if err != nil {
		return nil, err
	}
	if part < 0 {
		val := rawjson.Quote([]byte(`[{"type":"text","text":`), text)
		val = append(val, '}', ']')
		return splice(raw, ms, "content", val), nil
	}
	c, ok := last(ms, "content")
	if !ok {
		return nil, ErrShape
	}
	els, starts, err := rawjson.ArraySpans(c.Value)
	if err != nil || part >= len(els) {
		return nil, ErrShape
	}
	pm, err := rawjson.Object(els[part])
	if err != nil {
		return nil, ErrShape
	}
	var field string
	switch typ, _ := rawjson.Get(pm, "type"); string(typ) {
	case `"text"`:
		field = "text"
	case `"thinking"`:
		field = "thinking"
	default:
		return nil, fmt.Errorf("%w: part %d is %s", ErrShape, part, typ)
	}
	newPart := splice(els[part], pm, field, rawjson.Quote(nil, text))
	if field == "thinking" {
		if newPart, err = unsign(newPart); err != nil {
			return nil, ErrShape
		}
	}
	// Splice the new part into the content array, then the array into the message.
	ps, pe := starts[part], starts[part]+len(els[part])
	arr := make([]byte, 0, len(c.Value)-len(els[part])+len(newPart))
	arr = append(arr, c.Value[:ps]...)
	arr = append(arr, newPart...)
	arr = append(arr, c.Value[pe:]...)
	return splice(raw, ms, "content", arr), nil
}

// signatureKey is the member of a Pi thinking part that holds its signature.
const signatureKey = "thinkingSignature"

// unsign removes every thinkingSignature member from a part object, keeping
// every other byte.
func unsign(part []byte) ([]byte, error) {
	for {
		ms, err := rawjson.Object(part)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(ms, func(m rawjson.Member) bool { return m.Key == signatureKey })
		if i < 0 {
			return part, nil
		}
		var from, to int
		if i > 0 {
			from, to = ms[i-1].End, ms[i].End // `,"thinkingSignature":…`
		} else {
			from = bytes.IndexByte(part, '{') + 1
			to = ms[0].End
			if len(ms) > 1 {
				// `"thinkingSignature":…,` up to the next key
				for to < len(part) && part[to] != ',' {
					to++
				}
				to++
			}
		}
		part = append(append(make([]byte, 0, len(part)-(to-from)), part[:from]...), part[to:]...)
	}
}

func last(ms []rawjson.Member, key string) (rawjson.Member, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Key == key {
			return ms[i], true
		}
	}
	return rawjson.Member{}, false
}

// splice replaces the value of the last member named key, or appends the
// member before the closing brace when it is absent (as a JavaScript object
// spread does).
func splice(obj []byte, ms []rawjson.Member, key string, val []byte) []byte {
	if m, ok := last(ms, key); ok {
		out := make([]byte, 0, len(obj)-len(m.Value)+len(val))
		out = append(out, obj[:m.Start]...)
		out = append(out, val...)
		return append(out, obj[m.End:]...)
	}
	t := rawjson.Trim(obj)
	out := make([]byte, 0, len(t)+len(key)+len(val)+4)
	out = append(out, t[:len(t)-1]...)
	if len(ms) > 0 {
		out = append(out, ',')
	}
	out = rawjson.Quote(out, key)
	out = append(out, ':')
	out = append(out, val...)
	return append(out, '}')
}

// Messages applies substitutions to raw messages and returns the new list.
// Untouched messages are returned as the same slices; the result always has
// len(raws) elements. A substitution that cannot apply leaves its message
// raw and is reported in the error list.
func Messages(raws [][]byte, subs []Subst) ([][]byte, []error) {
	out := make([][]byte, len(raws))
	copy(out, raws)
	var errs []error
	for _, s := range subs {
		if s.Msg < 0 || s.Msg >= len(out) {
			errs = append(errs, fmt.Errorf("apply: message %d out of range", s.Msg))
			continue
		}
		r, err := Rewrite(out[s.Msg], s.Part, s.Text)
		if err != nil {
			errs = append(errs, fmt.Errorf("apply: message %d part %d: %w", s.Msg, s.Part, err))
			continue
		}
		out[s.Msg] = r
	}
	return out, errs
}

// Transcript applies id → text ops to every message of t.
func Transcript(t *block.Transcript, ops map[string]string) ([][]byte, []error) {
	raws := make([][]byte, t.Len())
	for i := range raws {
		raws[i] = t.Message(i).Raw
	}
	return Messages(raws, Plan(t, ops))
}
