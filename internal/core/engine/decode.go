package engine

import (
	"encoding/json"

	"github.com/contextfold/contextfold/internal/core/rawjson"
	"github.com/contextfold/contextfold/internal/core/registry"
)

// DecodeEntry decodes a persisted Entry (valid JSON) as json.Unmarshal
// does, except that strings keep lone surrogates as WTF-8 (see
// rawjson.Unquote) where encoding/json turns them into U+FFFD: a digest or
// an id holding one must replay to the bytes that were sent. A resumed
// session replays hundreds of entries, so those the engine writes are read
// in place; encoding/json decides the odd ones (keys in another case or
// repeated, values of another type), lone surrogates there then reading as
// U+FFFD.
func DecodeEntry(raw []byte) (Entry, error) {
	if en, ok := fastEntry(raw); ok {
		return en, nil
	}
	var en Entry
	err := json.Unmarshal(raw, &en)
	return en, err
}

var entryNames = []string{"v", "kind", "seq", "trigger", "folds", "thinking", "ids"}

func fastEntry(raw []byte) (en Entry, ok bool) {
	ok = rawjson.Members(raw, entryNames, func(k int, v []byte) (ok bool) {
		switch k {
		case 0:
			en.V, ok = rawjson.PlainInt(v)
		case 1:
			var s string
			s, ok = rawjson.String(v)
			en.Kind = EntryKind(s)
		case 2:
			en.Seq, ok = rawjson.PlainInt(v)
		case 3:
			en.Trigger, ok = rawjson.String(v)
		case 4:
			en.Folds, ok = rawjson.ArrayOf(v, fastRecord)
		case 5:
			var th ThinkingCost
			if ok = fastThinking(v, &th); ok {
				en.Thinking = &th
			}
		case 6:
			en.IDs, ok = rawjson.Strings(v)
		}
		return ok
	})
	return en, ok
}

var recordNames = []string{"id", "code", "seq", "bytes", "lines", "sha256", "tool", "kind", "isError", "turn", "fullOutputPath", "digest", "compacted"}

func fastRecord(raw []byte) (r registry.Record, ok bool) {
	ok = rawjson.Members(raw, recordNames, func(k int, v []byte) (ok bool) {
		switch k {
		case 0:
			r.ID, ok = rawjson.String(v)
		case 1:
			r.Code, ok = rawjson.String(v)
		case 2:
			r.Seq, ok = rawjson.PlainInt(v)
		case 3:
			r.Bytes, ok = rawjson.PlainInt(v)
		case 4:
			r.Lines, ok = rawjson.PlainInt(v)
		case 5:
			r.SHA256, ok = rawjson.String(v)
		case 6:
			r.Tool, ok = rawjson.String(v)
		case 7:
			r.Kind, ok = rawjson.String(v)
		case 8:
			r.IsError, ok = rawjson.BoolOf(v)
		case 9:
			r.Turn, ok = rawjson.PlainInt(v)
		case 10:
			r.FullOutputPath, ok = rawjson.String(v)
		case 11:
			r.Digest, ok = rawjson.String(v)
		case 12:
			r.Compacted, ok = rawjson.BoolOf(v)
		}
		return ok
	})
	return r, ok
}

var thinkingNames = []string{"invalidated", "folded", "dropped", "lost"}

func fastThinking(raw []byte, th *ThinkingCost) bool {
	return rawjson.Members(raw, thinkingNames, func(k int, v []byte) (ok bool) {
		switch k {
		case 0:
			th.Invalidated, ok = rawjson.PlainInt(v)
		case 1:
			th.Folded, ok = rawjson.PlainInt(v)
		case 2:
			th.Dropped, ok = rawjson.PlainInt(v)
		case 3:
			th.Lost, ok = rawjson.Strings(v)
		}
		return ok
	})
}
