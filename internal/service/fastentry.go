package service

import (
	"bytes"
	"encoding/json"

	"github.com/contextfold/contextfold/internal/engine"
	"github.com/contextfold/contextfold/internal/rawjson"
	"github.com/contextfold/contextfold/internal/registry"
)

// decodeEntry decodes a contextfold.fold entry as json.Unmarshal into
// engine.Entry does. A resumed session replays hundreds of them (every
// digest of every fold event), so the entries the engine itself writes are
// read in place; encoding/json decides whenever that reading might not
// agree with it: keys in another case or repeated, values of another type,
// strings with surrogate escapes (encoding/json turns a lone one into
// U+FFFD). raw must be valid JSON: encoding/json validated the open params'
// entries, the ledger the session file's lines.
func decodeEntry(raw []byte) (engine.Entry, error) {
	if en, ok := fastEntry(raw); ok {
		return en, nil
	}
	var en engine.Entry
	err := json.Unmarshal(raw, &en)
	return en, err
}

// members reads an object's members for fast decoding: each member whose
// key is one of names (exactly) is passed to set with its index in names;
// null values are skipped, as encoding/json leaves the field zero. It fails
// on a repeated key, a key equal to a name in another case, or when set
// fails.
func members(raw []byte, names []string, set func(k int, v []byte) bool) bool {
	ms, err := rawjson.ObjectOfValid(raw)
	if err != nil {
		return false
	}
	var seen uint64
	for _, m := range ms {
		k := -1
		for i, n := range names {
			if m.Key == n {
				k = i
				break
			}
		}
		if k < 0 {
			if foldsTo(m.Key, names...) {
				return false
			}
			continue
		}
		if seen&(1<<k) != 0 {
			return false
		}
		seen |= 1 << k
		if rawjson.IsNull(m.Value) {
			continue
		}
		if !set(k, m.Value) {
			return false
		}
	}
	return true
}

var entryNames = []string{"v", "kind", "seq", "trigger", "folds", "thinking", "ids"}

func fastEntry(raw []byte) (en engine.Entry, ok bool) {
	ok = members(raw, entryNames, func(k int, v []byte) (ok bool) {
		switch k {
		case 0:
			en.V, ok = rawjson.PlainInt(v)
		case 1:
			var s string
			s, ok = fastString(v)
			en.Kind = engine.EntryKind(s)
		case 2:
			en.Seq, ok = rawjson.PlainInt(v)
		case 3:
			en.Trigger, ok = fastString(v)
		case 4:
			en.Folds, ok = fastArray(v, fastRecord)
		case 5:
			var th engine.ThinkingCost
			if ok = fastThinking(v, &th); ok {
				en.Thinking = &th
			}
		case 6:
			en.IDs, ok = fastArray(v, fastString)
		}
		return ok
	})
	return en, ok
}

var recordNames = []string{"id", "code", "seq", "bytes", "lines", "sha256", "tool", "kind", "isError", "turn", "fullOutputPath", "digest", "compacted"}

func fastRecord(raw []byte) (r registry.Record, ok bool) {
	ok = members(raw, recordNames, func(k int, v []byte) (ok bool) {
		switch k {
		case 0:
			r.ID, ok = fastString(v)
		case 1:
			r.Code, ok = fastString(v)
		case 2:
			r.Seq, ok = rawjson.PlainInt(v)
		case 3:
			r.Bytes, ok = rawjson.PlainInt(v)
		case 4:
			r.Lines, ok = rawjson.PlainInt(v)
		case 5:
			r.SHA256, ok = fastString(v)
		case 6:
			r.Tool, ok = fastString(v)
		case 7:
			r.Kind, ok = fastString(v)
		case 8:
			r.IsError, ok = fastBool(v)
		case 9:
			r.Turn, ok = rawjson.PlainInt(v)
		case 10:
			r.FullOutputPath, ok = fastString(v)
		case 11:
			r.Digest, ok = fastString(v)
		case 12:
			r.Compacted, ok = fastBool(v)
		}
		return ok
	})
	return r, ok
}

var thinkingNames = []string{"invalidated", "folded", "dropped", "lost"}

func fastThinking(raw []byte, th *engine.ThinkingCost) bool {
	return members(raw, thinkingNames, func(k int, v []byte) (ok bool) {
		switch k {
		case 0:
			th.Invalidated, ok = rawjson.PlainInt(v)
		case 1:
			th.Folded, ok = rawjson.PlainInt(v)
		case 2:
			th.Dropped, ok = rawjson.PlainInt(v)
		case 3:
			th.Lost, ok = fastArray(v, fastString)
		}
		return ok
	})
}

// fastArray decodes an array as encoding/json into a slice does: [] is
// empty but not nil, and a null element is the zero value.
func fastArray[T any](raw []byte, el func([]byte) (T, bool)) ([]T, bool) {
	els, err := rawjson.ArrayOfValid(raw)
	if err != nil {
		return nil, false
	}
	out := make([]T, len(els))
	for i, e := range els {
		if rawjson.IsNull(e) {
			continue
		}
		v, ok := el(e)
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// fastString decodes a string literal, unless it holds a \uD… escape,
// where rawjson (WTF-8) and encoding/json (U+FFFD) part ways.
func fastString(raw []byte) (string, bool) {
	if !rawjson.IsString(raw) || bytes.Contains(raw, []byte(`\ud`)) || bytes.Contains(raw, []byte(`\uD`)) {
		return "", false
	}
	s, err := rawjson.Unquote(raw)
	return s, err == nil
}

func fastBool(raw []byte) (bool, bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}
